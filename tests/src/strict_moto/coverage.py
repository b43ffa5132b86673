"""The grant coverage of a test run: which grants of the templates' roles no request needed.

    python -m strict_moto.coverage [--warn] DIR OUT.json

DIR holds the files every strict layer of the run wrote (EPHEMERA_IAM_COVERAGE_DIR, one
JSON line per grant a request needed). Every grant the templates write (role × statement ×
action × resource) that no request needed must be kept with a reason, written in the
template as a comment:

    # iam-kept: ROLE/SID ACTION: why no test needs it

(ROLE, SID and ACTION may use `*`; the comment covers every resource of the statements and
actions it matches). The
result is written to OUT.json; the exit status is 1 if a grant is unneeded and not kept,
or a comment keeps a grant that a request did need (the reason is then stale). With
--warn the result is written and summed up in one line, and the exit status is 0: what
`make test` runs while grants remain that are neither needed by a test nor kept with a
reason (docs/testing.md)."""

import fnmatch
import glob
import json
import os
import re
import sys

from . import iam_policies

KEPT = re.compile(r"#\s*iam-kept:\s*(\S+)/(\S+)\s+(\S+):\s*(.+)$")


def key(grant):
    return tuple(grant[k] for k in ("template", "role", "policy", "sid", "action", "resource_index"))


def used_grants(directory):
    used = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.jsonl"))):
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    grant = json.loads(line)
                    used[key(grant)] = grant
    return used


def kept_reasons(template_name):
    """(role, sid, action pattern, reason, line number) of the template's iam-kept comments."""
    found = []
    path = iam_policies.WORKSPACE / template_name
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        match = KEPT.search(line)
        if match:
            found.append((*match.groups(), number))
    return found


def report(directory):
    used = used_grants(directory)
    written, kept = [], []
    for name in iam_policies.TEMPLATES:
        written += iam_policies.written_grants(name)
        kept += [(name, *entry) for entry in kept_reasons(name)]

    def reason_for(grant):
        for template, role, sid, action, reason, line in kept:
            if template == grant["template"] and fnmatch.fnmatchcase(grant["role"], role) and fnmatch.fnmatchcase(
                grant["sid"], sid
            ) and fnmatch.fnmatchcase(
                grant["action"].lower(), action.lower()
            ):
                return f"{template}:{line}: {reason}"
        return None

    unused, unexplained, stale = [], [], []
    for grant in written:
        if key(grant) in used:
            if reason_for(grant):
                stale.append({**grant, "reason": reason_for(grant)})
            continue
        reason = reason_for(grant)
        unused.append({**grant, "reason": reason})
        if reason is None:
            unexplained.append(grant)
    return {
        "used": sorted(used.values(), key=lambda g: json.dumps(g, sort_keys=True)),
        "unused": unused,
        "unexplained": unexplained,
        "stale_reasons": stale,
    }


def line_of(grant):
    return (
        f"{grant['role']}/{grant['sid']} {grant['action']} on {grant['resource']}"
        f" ({grant['template']})"
    )


def main(argv):
    warn = "--warn" in argv
    argv = [arg for arg in argv if arg != "--warn"]
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    directory, out = argv
    if not glob.glob(os.path.join(directory, "*.jsonl")):
        print(f"iam coverage: no coverage files in {directory}: did the tests run?", file=sys.stderr)
        return 1
    result = report(directory)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w", encoding="utf-8") as file:
        json.dump(result, file, indent=2)
    print(f"iam coverage: {len(result['used'])} grants needed by a request, {len(result['unused'])} not ({out})")
    if warn:
        print(
            f"iam coverage: {len(result['unexplained'])} grants neither needed nor kept with a reason,"
            f" {len(result['stale_reasons'])} stale reasons (a warning; `make iam-coverage` fails on them)"
        )
        return 0
    for grant in result["unused"]:
        if grant["reason"]:
            print(f"  kept   {line_of(grant)}\n         {grant['reason']}")
    for grant in result["unexplained"]:
        print(f"  UNUSED {line_of(grant)}: no request needed it and no iam-kept comment keeps it")
    for grant in result["stale_reasons"]:
        print(f"  STALE  {line_of(grant)}: a request needed it, but {grant['reason']}")
    return 1 if result["unexplained"] or result["stale_reasons"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
