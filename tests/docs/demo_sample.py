"""The README's sample of `make demo` is a real run's transcript; this keeps it one.

`make demo` writes what it printed to `target/demo/transcript.txt`. Two transcripts are
the same run in structure when they agree line by line once what varies from run to run
is taken out: clock times, dates, durations, ports, runner names, instance ids. So a
sample that shows another resource count, another status, another field or stage of
`jobs show` than a run prints today is stale.

    python tests/docs/demo_sample.py --check target/demo/transcript.txt   # make check-demo
    python tests/docs/demo_sample.py --write target/demo/transcript.txt   # make demo-sample
    python tests/docs/demo_sample.py --check target/demo/transcript.txt --warn  # make demo
"""

import argparse
import difflib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SAMPLE = re.compile(r"(<!-- demo-sample -->\n```console\n\$ make demo\n)(.*?)(```\n<!-- /demo-sample -->)", re.S)

# What changes from one run to the next, and what stands for it in the structure.
VARYING = [
    (re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}Z"), "<date>"),
    (re.compile(r"\b\d{2}:\d{2}:\d{2}\.\d{3}\b"), "<time>"),
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:<port>"),
    (re.compile(r"\bephemera-[a-z0-9-]+-[a-z0-9]{10}\b"), "<runner>"),
    (re.compile(r"\bi-[0-9a-f]{8,17}\b"), "<instance>"),
    (re.compile(r"\b\d+(\.\d+)?\s?(s|ms)\b"), "<duration>"),
    # Priced or not yet, by whether the reaper's price read came before the job ended.
    (re.compile(r"^cost\s+.*$"), "cost <cost>"),
]


class SampleError(Exception):
    """The README has no sample block where one is expected."""


def sample(text):
    """The README's sample transcript (without the `$ make demo` line)."""
    match = SAMPLE.search(text)
    if not match:
        raise SampleError("README.md has no `<!-- demo-sample -->` block opening with `$ make demo`")
    return match.group(2)


def structure(transcript):
    """The lines of `transcript` with what varies between runs replaced, spaces collapsed."""
    lines = []
    for line in transcript.splitlines():
        for pattern, stand_in in VARYING:
            line = pattern.sub(stand_in, line)
        line = " ".join(line.split())
        if line:
            lines.append(line)
    return lines


def differences(sample_text, run_text):
    """How the sample differs from the run in structure, as a unified diff (empty: none)."""
    return list(
        difflib.unified_diff(
            structure(sample_text), structure(run_text), "README.md's sample", "the run", lineterm="", n=1
        )
    )


def timeline_stages(transcript):
    """The STAGE column of the `jobs show` timeline in `transcript`."""
    stages, inside = [], False
    for line in transcript.splitlines():
        if line.startswith("STAGE "):
            inside = True
            continue
        if inside:
            if not line.strip() or line.startswith("demo finished"):
                break
            stages.append(line.split()[0])
    return stages


def stack_resources(transcript):
    """The resource count on the transcript's `stack (template.yaml)` line."""
    match = re.search(r"stack \(template\.yaml\) (\d+) resources", transcript)
    return int(match.group(1)) if match else None


def write(run_text):
    text = README.read_text()
    sample(text)
    README.write_text(SAMPLE.sub(lambda m: m.group(1) + run_text + m.group(3), text, count=1))
    print("README.md: demo sample written from the run")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", metavar="TRANSCRIPT", type=Path)
    mode.add_argument("--write", metavar="TRANSCRIPT", type=Path)
    parser.add_argument("--warn", action="store_true", help="report a stale sample, exit 0")
    args = parser.parse_args()
    run_text = (args.check or args.write).read_text()
    if args.write:
        write(run_text)
        return 0
    diff = differences(sample(README.read_text()), run_text)
    if not diff:
        print("check-demo: README.md's sample is this run, in structure")
        return 0
    level = "warning" if args.warn else "error"
    print(f"check-demo: {level}: README.md's sample of `make demo` is not what the demo prints now:", file=sys.stderr)
    print("\n".join(diff), file=sys.stderr)
    print("check-demo: `make demo-sample` writes this run into README.md", file=sys.stderr)
    return 0 if args.warn else 1


if __name__ == "__main__":
    sys.exit(main())
