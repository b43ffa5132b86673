"""A test case's own copy of the repository's figure check: a temporary root, the check's
output kept for the assertions, and figures.py's globals put back afterwards."""

import contextlib
import io
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import figures  # noqa: E402


class FigureSandbox(unittest.TestCase):
    """Sets `self.root` (an empty temporary directory with `bench/` and `docs/`) and
    `self.printed` (what the check prints: its diffs are for the assertions, not shown,
    as `make test` shows failures only); `figures.ROOT` points at the root until the
    test ends."""

    def setUp(self):
        self.printed = io.StringIO()
        for redirect in (contextlib.redirect_stdout, contextlib.redirect_stderr):
            manager = redirect(self.printed)
            manager.__enter__()
            self.addCleanup(manager.__exit__, None, None, None)
        self.root = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, self.root)
        (self.root / "bench").mkdir()
        (self.root / "docs").mkdir()
        saved = figures.ROOT, figures.BENCHES, figures.fingerprint
        self.addCleanup(self.restore, saved)
        figures.ROOT = self.root

    @staticmethod
    def restore(saved):
        figures.ROOT, figures.BENCHES, figures.fingerprint = saved
