"""Runs the bootstrap harness's test modules a few at a time, each in its own process
with its own emulator (harness.BootstrapHarness starts one per class), and prints each
module's output whole, in name order, once all are done: `make test-bootstrap`.

The harness's tests mostly wait on the script's own pauses, the emulator and curl's
timeouts, not on the CPU, so two or three modules at once finish sooner than one after
another on a 2-core machine; the same tests run either way
(`python -m unittest discover -s tests/bootstrap` still runs them all, one at a time).

Exit status: 0 when every module passed, 1 otherwise (naming the modules that failed)."""

import argparse
import concurrent.futures
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def modules():
    """The harness's test modules, by name."""
    return sorted(path.stem for path in HERE.glob("test_*.py"))


def run(module):
    """One module's tests: (exit status, its output, seconds)."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "unittest", "-v", module],
        cwd=HERE,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    return done.returncode, done.stdout, time.monotonic() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("BOOTSTRAP_JOBS", "3")))
    args = parser.parse_args()
    if args.jobs < 1:
        parser.error(f"--jobs must be 1 or more, not {args.jobs}")
    names = modules()
    if not names:
        print(f"no test_*.py in {HERE}", file=sys.stderr)
        return 1
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = dict(zip(names, pool.map(run, names)))
    failed = []
    for name in names:
        status, output, seconds = results[name]
        print(f"==== {name} ({seconds:.1f} s)")
        print(output, end="" if output.endswith("\n") else "\n")
        if status != 0:
            failed.append(name)
    took = time.monotonic() - started
    if failed:
        print(f"bootstrap: {len(failed)} of {len(names)} modules failed: {', '.join(failed)} ({took:.1f} s)")
        return 1
    print(f"bootstrap: {len(names)} modules passed, {args.jobs} at a time, in {took:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
