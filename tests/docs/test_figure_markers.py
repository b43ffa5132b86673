"""The figures docs/performance.md derives from the model sit under markers: the quotas
table (written from `quotas.rs` through bench/model.json) and the "What binds" prose
(EC2's bound for 10,000 jobs) fail `make check-figures` when edited by hand."""

import json
import re
import shutil
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import figures  # noqa: E402
from figure_sandbox import FigureSandbox  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


class HandEditedFigures(FigureSandbox):
    def setUp(self):
        super().setUp()
        # A copy of the pages and the model's bench file as committed, checked against
        # the file's own stamp (freshness is test_figures.py's concern).
        shutil.copytree(REPO / "bench", self.root / "bench", dirs_exist_ok=True)
        shutil.copy(REPO / "README.md", self.root / "README.md")
        shutil.copy(REPO / "docs/performance.md", self.root / "docs/performance.md")
        model = json.loads((self.root / "bench/model.json").read_text())
        figures.BENCHES = {"bench/model.json": dict(figures.BENCHES["bench/model.json"])}
        figures.fingerprint = lambda paths: model["source"]["sha256"]
        self.page = self.root / "docs/performance.md"

    def edit(self, pattern, replacement):
        text = self.page.read_text()
        edited, count = re.subn(pattern, replacement, text, count=1, flags=re.S)
        self.assertEqual(count, 1, f"{pattern} not found in docs/performance.md")
        self.page.write_text(edited)

    def test_the_committed_pages_pass(self):
        self.assertEqual(figures.check(), 0, self.printed.getvalue())

    def test_a_quotas_table_edited_by_hand_fails(self):
        # A value of the EC2 launch bucket's row, as a hand edit would change it.
        self.edit(r"(<!-- figures:model-quotas -->.*?\| EC2 instances launched \| )1,000", r"\g<1>2,000")
        self.assertEqual(figures.check(), 1)
        self.assertIn("docs/performance.md quotes figures its bench files do not hold", self.printed.getvalue())

    def test_a_row_added_to_the_quotas_table_fails(self):
        self.edit(r"(<!-- figures:model-quotas -->\n)", r"\g<1>| a figure | 1 | hand-written |\n")
        self.assertEqual(figures.check(), 1)

    def test_the_ec2_bound_of_what_binds_edited_by_hand_fails(self):
        self.edit(r"(limit_bound_s\|0-->)4,500(<!--/fig--> s for)", r"\g<1>4,400\2")
        self.assertEqual(figures.check(), 1)

    def test_the_launch_buckets_size_in_what_binds_edited_by_hand_fails(self):
        self.edit(r"(ec2_launch_resource\.capacity\|0-->)1,000(<!--/fig-->)", r"\g<1>2,000\2")
        self.assertEqual(figures.check(), 1)


if __name__ == "__main__":
    unittest.main()
