"""`make help` lists every target the Makefile declares phony, from its `## name: text` comment;
`make test`'s parts show one line when they pass and their output when they fail."""

import os
import re
import subprocess
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def phony_targets(makefile):
    names = []
    for line in makefile.splitlines():
        if line.startswith(".PHONY:"):
            names += line.split(":", 1)[1].split()
    return [name for name in names if name != "all"]


class Help(unittest.TestCase):
    def test_every_phony_target_has_its_help_line(self):
        makefile = (ROOT / "Makefile").read_text()
        documented = set(re.findall(r"^## ([a-z][a-z-]*): ", makefile, re.M))
        self.assertEqual(sorted(set(phony_targets(makefile)) - documented), [],
                         "each target needs a `## name: text` comment above it for `make help`")

    def test_make_help_prints_each_target_with_its_text(self):
        shown = subprocess.run(["make", "--no-print-directory", "help"], cwd=ROOT, check=True,
                               capture_output=True, text=True).stdout
        listed = {line.split()[0] for line in shown.splitlines() if line.startswith("  ") and not line.startswith("   ")}
        self.assertLessEqual(set(phony_targets((ROOT / "Makefile").read_text())), listed)
        self.assertIn("one job through the whole pipeline", shown)


class Quietly(unittest.TestCase):
    """tests/local/quietly.sh, which runs each part of `make test`."""

    def run_part(self, name, script):
        with tempfile.TemporaryDirectory() as logs:
            env = dict(os.environ, QUIETLY_DIR=logs, VERBOSE="0")
            done = subprocess.run([str(ROOT / "tests/local/quietly.sh"), name, "bash", "-c", script],
                                  capture_output=True, text=True, env=env)
            log = (Path(logs) / f"{name}.log").read_text()
        return done, log

    def test_a_passing_part_is_one_line_with_its_test_count(self):
        done, log = self.run_part("lint", 'echo noise; echo "test result: ok. 3 passed; 0 failed"')
        self.assertEqual(done.returncode, 0)
        self.assertEqual(done.stdout.splitlines(), ["lint: ok in 0 s (3 tests passed)"])
        self.assertEqual(done.stderr, "")
        self.assertIn("noise", log)

    def test_a_failing_part_shows_its_output_and_keeps_its_exit_status(self):
        done, _ = self.run_part("test-rust", "echo the assertion that failed >&2; exit 101")
        self.assertEqual(done.returncode, 101)
        self.assertIn("the assertion that failed", done.stdout)
        self.assertIn("test-rust: FAILED (exit 101)", done.stderr)

    def test_make_test_runs_every_part_through_it(self):
        makefile = (ROOT / "Makefile").read_text()
        parts = re.search(r"^TEST_PARTS := (.*)$", makefile, re.M).group(1).split()
        self.assertEqual(parts, ["lint", "lint-infra", "check-figures", "test-rust", "test-bootstrap",
                                 "iam-coverage", "conformance-recorded", "check-demo"])
        self.assertIn("tests/local/quietly.sh $$part $(MAKE) --no-print-directory $$part || exit $$?", makefile)


if __name__ == "__main__":
    unittest.main()
