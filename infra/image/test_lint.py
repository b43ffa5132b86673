"""infra/image/lint.py against its fixtures: every fixture of tests/fixtures/image-lint
breaks the rule its name begins with (`RULE.yaml` or `RULE--CASE.yaml`), every rule has
at least one fixture, and the image stack breaks none. Run by make lint-infra."""

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lint  # noqa: E402

FIXTURES = lint.ROOT / "tests/fixtures/image-lint"


def rule_of(fixture):
    return fixture.stem.split("--", 1)[0]


class ImageLintTest(unittest.TestCase):
    def test_every_fixture_breaks_its_rule(self):
        fixtures = sorted(FIXTURES.glob("*.yaml"))
        self.assertTrue(fixtures, f"no fixtures in {FIXTURES}")
        for fixture in fixtures:
            with self.subTest(fixture=fixture.name):
                self.assertIn(rule_of(fixture), lint.RULES, "a fixture names its rule")
                broken = {rule for rule, _ in lint.failures(fixture)}
                self.assertIn(rule_of(fixture), broken)

    def test_every_rule_has_a_failing_fixture(self):
        covered = {rule_of(f) for f in FIXTURES.glob("*.yaml")}
        self.assertEqual(set(lint.RULES) - covered, set())

    def test_the_stack_before_its_execution_roles_breaks_the_execution_role_rule(self):
        fixture = FIXTURES / "ssm-output-execution-role--no-execution-role.yaml"
        messages = [m for rule, m in lint.failures(fixture) if rule == "ssm-output-execution-role"]
        self.assertEqual(len(messages), 2, messages)
        for pipeline in ("PipelineX86", "PipelineArm64"):
            self.assertTrue(any(m.startswith(pipeline) for m in messages), messages)

    def test_the_image_stack_keeps_every_rule(self):
        self.assertEqual(lint.failures(lint.ROOT / "infra/image/template.yaml"), [])


if __name__ == "__main__":
    unittest.main()
