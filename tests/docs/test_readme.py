"""The README stays short, its links lead somewhere, and its sample of `make demo` is a run
of today's code (`make check-figures` runs these with the figure checks)."""

import re
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import demo_sample  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MOST_LINES = 200
LINK = re.compile(r"\]\(((?:docs/)?[\w./-]+\.md)(?:#([\w-]+))?\)")


def anchors(page):
    """GitHub's anchors of the headings of `page`: lower case, punctuation dropped, spaces as hyphens."""
    found = set()
    inside_code = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            inside_code = not inside_code
        if inside_code or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def rust_stage_names():
    """The stage names of `jobs show`'s timeline, in order, as functions/core/src/timeline.rs has them."""
    source = (ROOT / "functions/core/src/timeline.rs").read_text()
    body = source.split("pub fn as_str(self)", 1)[1].split("\n    }\n", 1)[0]
    # A stage shown only when it happened (`only_when_present`) is in no run's timeline by
    # default: the demo's runners boot a current image.
    optional = source.split("pub fn only_when_present(self)", 1)[1].split("\n    }\n", 1)[0]
    absent = set(re.findall(r"Stage::(\w+)", optional))
    pairs = re.findall(r'Stage::(\w+) => "(\w+)"', body)
    return [name for variant, name in pairs if variant not in absent]


class Readme(unittest.TestCase):
    def test_the_readme_is_at_most_200_lines(self):
        lines = len(README.read_text().splitlines())
        self.assertLessEqual(
            lines, MOST_LINES, f"README.md has {lines} lines: move detail into the docs/ page its feature links to"
        )

    def test_every_link_to_a_page_names_a_page_and_a_heading_that_exist(self):
        for page in [README, *sorted((ROOT / "docs").glob("*.md"))]:
            base = page.parent
            for target, anchor in LINK.findall(page.read_text()):
                linked = (base / target).resolve()
                with self.subTest(page=page.name, link=f"{target}#{anchor}"):
                    self.assertTrue(linked.exists(), f"{page.name} links to {target}, which does not exist")
                    if anchor:
                        self.assertIn(anchor, anchors(linked), f"{target} has no heading #{anchor}")

    def test_each_feature_is_one_line_linking_its_page(self):
        text = README.read_text()
        features = text.split("## Features", 1)[1].split("\n## ", 1)[0]
        items = [line for line in features.splitlines() if line.startswith("- ")]
        self.assertGreater(len(items), 10)
        for item in items:
            with self.subTest(item=item[:40]):
                self.assertRegex(item, r"\]\(docs/\w+\.md(#[\w-]+)?\)", "a feature links its docs/ page")
        continuation = [line for line in features.splitlines() if line.startswith("  ") and line.strip()]
        self.assertEqual(continuation, [], "a feature takes one line; its detail belongs on its page")


class DemoSample(unittest.TestCase):
    def test_the_samples_timeline_has_the_stages_the_code_prints(self):
        stages = demo_sample.timeline_stages(demo_sample.sample(README.read_text()))
        self.assertEqual(stages, rust_stage_names(), "run `make demo-sample` to show today's timeline")

    def test_the_structure_leaves_out_times_ports_names_and_ids(self):
        one = (
            "  AWS emulator (moto)   http://127.0.0.1:42381  (AWS's limits enforced)\n"
            "02:02:57.809  runner ephemera-linux-x64-4dfrrlutoe pending_create   job 40000000001 queued\n"
            "instance       i-073e6d23c012be049\n"
            "jit_read           JIT config read (instance)  2026-11-26 02:02:58Z  0.0s  instance\n"
            "cost           not yet priced\n"
            "demo finished in 16.4 s\n"
        )
        other = (
            "  AWS emulator (moto)   http://127.0.0.1:5000  (AWS's limits enforced)\n"
            "11:40:01.002  runner ephemera-linux-x64-zz9yy8xx7w pending_create   job 40000000001 queued\n"
            "instance       i-0abc\n"
            "jit_read           JIT config read (instance)  2026-11-27 11:40:03Z  1.2s  instance\n"
            "cost           $0.0017 (m7i.large on_demand at $0.1008/h, 60 s, launch requested → terminated)\n"
            "demo finished in 21.0 s\n"
        )
        self.assertEqual(demo_sample.differences(one, other.replace("i-0abc", "i-0abcdef12")), [])

    def test_another_resource_count_status_or_stage_is_a_difference(self):
        run = "  stack (template.yaml) 31 resources: table ephemera-runners\nqueued  job queued\n"
        self.assertNotEqual(demo_sample.differences(run.replace("31", "23"), run), [])
        self.assertNotEqual(demo_sample.differences(run.replace("queued  job", "claimed  job"), run), [])
        self.assertNotEqual(demo_sample.differences(run + "extra line\n", run), [])
        self.assertEqual(demo_sample.stack_resources(run), 31)

    def test_a_readme_without_the_sample_block_is_refused(self):
        with self.assertRaises(demo_sample.SampleError):
            demo_sample.sample("# ephemera\n")


if __name__ == "__main__":
    unittest.main()
