"""No symbol of ephemera-core's fakes in what the Lambda functions link: `make check-release-symbols`.

After `cargo build --release -p ephemera-webhook -p ephemera-scaler -p ephemera-reaper`,
each ephemera-core library of target/release that cargo built without the `fakes`
feature (its fingerprint names the features) must hold no symbol of `memory` (the
in-memory ports and the `Intercept` decorator); the three binaries neither. A library
built with `fakes` (by `make bench`'s core benches, or any build that unifies it) is
listed as the control: it holds them, which shows the search finds them when they are
there. Exit status 1 on a symbol found, or when no library without the fakes exists.
"""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RELEASE = ROOT / "target" / "release"
FAKES = "ephemera_core::memory"


def fake_symbols(path):
    listing = subprocess.run(["nm", "-C", str(path)], capture_output=True, text=True, check=False).stdout
    return sum(1 for line in listing.splitlines() if FAKES in line)


def core_libraries():
    """(rlib, its features) of every ephemera-core library built in target/release."""
    for fingerprint in sorted((RELEASE / ".fingerprint").glob("ephemera-core-*/lib-ephemera_core.json")):
        suffix = fingerprint.parent.name.removeprefix("ephemera-core-")
        rlib = RELEASE / "deps" / f"libephemera_core-{suffix}.rlib"
        if rlib.exists():
            yield rlib, json.loads(json.loads(fingerprint.read_text())["features"])


def main():
    failed, clean = False, 0
    for rlib, features in core_libraries():
        found = fake_symbols(rlib)
        role = "control, built with fakes" if "fakes" in features else "linked by the functions"
        print(f"{rlib.relative_to(ROOT)} ({role}): {found} symbols of {FAKES}")
        if "fakes" not in features:
            clean += 1
            failed |= found > 0
    for name in ("webhook", "scaler", "reaper"):
        binary = RELEASE / name
        found = fake_symbols(binary) if binary.exists() else None
        print(f"target/release/{name}: {'missing' if found is None else f'{found} symbols of {FAKES}'}")
        failed |= found is None or found > 0
    if clean == 0:
        print("no ephemera-core library built without the fakes: build the functions first")
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
