"""The figure check fails on a page that quotes what its bench file does not hold, and on a
bench file older than the code it measures (`make check-figures`)."""

import json
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import figures  # noqa: E402
from figure_sandbox import FigureSandbox  # noqa: E402

MODEL = {
    "seed": 1,
    "bursts": [{"jobs": 1000, "settings": "default", "all_registered_s": 297.5}],
    "peer": {},
}


class FigureCheck(FigureSandbox):
    def setUp(self):
        super().setUp()
        (self.root / "bench/model.json").write_text(json.dumps(MODEL))
        figures.BENCHES = {"bench/model.json": {"command": "make bench-model", "paths": ["functions/model/src"]}}
        figures.fingerprint = lambda paths: "today"
        self.stamp("today")

    def stamp(self, sha):
        data = dict(MODEL, source={"paths": ["functions/model/src"], "sha256": sha})
        (self.root / "bench/model.json").write_text(json.dumps(data))

    def page(self, figure):
        marker = "<!--fig bench/model.json bursts[jobs=1000,settings=default].all_registered_s-->"
        (self.root / "README.md").write_text(f"All registered after {marker}{figure}<!--/fig--> s.\n")

    def test_a_page_quoting_its_file_passes(self):
        self.page("297.5")
        self.assertEqual(figures.check(), 0)

    def test_a_changed_figure_fails(self):
        self.page("297.6")
        self.assertEqual(figures.check(), 1)
        self.assertIn("README.md quotes figures its bench files do not hold", self.printed.getvalue())
        self.assertIn("+All registered after", self.printed.getvalue())

    def test_write_puts_the_file_figure_back(self):
        self.page("290")
        figures.write()
        self.assertIn("-->297.5<!--/fig-->", (self.root / "README.md").read_text())
        self.assertEqual(figures.check(), 0)

    def test_a_block_edited_by_hand_fails(self):
        self.page("297.5")
        block = figures.render_model_vs_peer()
        (self.root / "docs/performance.md").write_text(
            f"<!-- figures:model-vs-peer -->\n{block}edited\n<!-- /figures -->\n"
        )
        self.assertEqual(figures.check(), 1)

    def test_a_bench_file_older_than_its_code_fails_naming_the_command(self):
        self.page("297.5")
        self.stamp("yesterday")
        self.assertIn("make bench-model", figures.stale("bench/model.json"))
        self.assertEqual(figures.check(), 1)

    def test_an_unstamped_bench_file_fails(self):
        self.page("297.5")
        (self.root / "bench/model.json").write_text(json.dumps(MODEL))
        self.assertIn("no source stamp", figures.stale("bench/model.json"))

    def test_the_refusal_table_renders_each_refusal_with_its_share_of_a_genuine_delivery(self):
        refused = {"payload": "no signature", "bytes": 8380, "events_per_second": 5212903.4,
                   "p50_us": 0.2, "share_of_genuine": 0.015}
        (self.root / "bench/webhook.json").write_text(json.dumps({"webhook_refused": [refused]}))
        block = figures.render_webhook_refused()
        self.assertIn("| no signature | 8,380 | 5,212,903 | 0.2 µs | 0.015 |", block)
        (self.root / "docs/performance.md").write_text(f"<!-- figures:webhook-refused -->\n{block}<!-- /figures -->\n")
        self.page("297.5")
        self.assertEqual(figures.check(), 0)
        (self.root / "docs/performance.md").write_text(
            f"<!-- figures:webhook-refused -->\n{block.replace('0.015', '0.005')}<!-- /figures -->\n"
        )
        self.assertEqual(figures.check(), 1)


if __name__ == "__main__":
    unittest.main()
