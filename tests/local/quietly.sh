#!/usr/bin/env bash
# `make test`'s parts, each shown as one summary line when it passes, and with its output
# when it fails: `quietly.sh NAME COMMAND...` runs COMMAND with its output (stdout and
# stderr) into target/make-test/NAME.log; exit 0 prints "NAME: ok in N s" (and the part's
# own "name: warning: ..." lines), anything else
# prints the log's last LINES lines (default 400), then "NAME: FAILED (exit N) ..." naming
# the log, and exits with COMMAND's own status. VERBOSE=1 shows everything as it runs.
set -uo pipefail

if (($# < 2)); then
    echo "usage: quietly.sh NAME COMMAND..." >&2
    exit 2
fi
name=$1
shift
dir=${QUIETLY_DIR:-target/make-test}
lines=${LINES_ON_FAILURE:-400}
mkdir -p "$dir"
log="$dir/$name.log"
started=$SECONDS

if [[ ${VERBOSE:-0} == 1 ]]; then
    "$@" 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
else
    "$@" >"$log" 2>&1
    status=$?
fi
took=$((SECONDS - started))

if ((status == 0)); then
    # The tests' own counts, where the part ran Rust tests.
    passed=$(grep -Eo 'test result: ok\. [0-9]+ passed' "$log" | awk '{sum += $4} END {print sum + 0}')
    if ((passed > 0)); then
        echo "$name: ok in ${took} s ($passed tests passed)"
    else
        echo "$name: ok in ${took} s"
    fi
    # A passing part's own warnings (a stale bench file) are still said, at most 10.
    grep -E '^[a-z-]+: warning: ' "$log" | head -n 10 | sed 's/^/  /'
    exit 0
fi
if [[ ${VERBOSE:-0} != 1 ]]; then
    echo "---- $name: the last $lines lines of $log ----"
    tail -n "$lines" "$log"
    echo "----"
fi
echo "$name: FAILED (exit $status) in ${took} s; its whole output: $log" >&2
exit "$status"
