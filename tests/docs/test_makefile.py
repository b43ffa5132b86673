"""`make help` lists every target the Makefile declares phony, from its `## name: text` comment."""

import re
import subprocess
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


if __name__ == "__main__":
    unittest.main()
