#!/usr/bin/env bash
# `make job`: queues COUNT jobs with LABELS (comma-separated) through the GitHub simulator
# of a running `make up` (GITHUB_SIM, from the environment it printed), each running
# DURATION seconds. The simulator creates each job and sends its signed `queued` webhook
# to `ephemera local`, as GitHub would (POST /_sim/jobs, tests/src/sim/routes.rs).
set -euo pipefail

count=${COUNT:-1}
labels=${LABELS:-self-hosted,linux,x64}
duration=${DURATION:-60}
owner=${OWNER:-octo-org}

if [[ -z ${GITHUB_SIM:-} ]]; then
    echo "make job: GITHUB_SIM is not set: paste the environment \`make up\` printed" >&2
    exit 1
fi
for value in "$count" "$duration"; do
    if ! [[ $value =~ ^[0-9]+$ ]] || ((value < 1)); then
        echo "make job: COUNT and DURATION must be whole numbers from 1, not \"$value\"" >&2
        exit 1
    fi
done

json_labels=""
IFS=',' read -ra names <<<"$labels"
for name in "${names[@]}"; do
    if ! [[ $name =~ ^[A-Za-z0-9._-]+$ ]]; then
        echo "make job: a label is letters, digits, '.', '_' or '-', not \"$name\"" >&2
        exit 1
    fi
    json_labels+="${json_labels:+,}\"$name\""
done

for ((i = 1; i <= count; i++)); do
    answer=$(curl -sS --fail-with-body -X POST "$GITHUB_SIM/_sim/jobs" \
        -H 'content-type: application/json' \
        -d "{\"owner\":\"$owner\",\"repo\":\"demo\",\"labels\":[$json_labels],\"duration_ms\":$((duration * 1000))}")
    echo "queued: $answer  (labels $labels, $owner/demo, runs ${duration}s)"
done
echo "follow it with: ephemera jobs list; ephemera jobs show JOB"
