"""The figures of README.md and docs/ come from the committed bench files; this keeps them so.

A page holds measured figures only in two forms, both written from bench/*.json:
- a block between `<!-- figures:NAME -->` and `<!-- /figures -->`, rendered by the
  renderer NAME below (a table, or a sentence of figures);
- a single figure in prose, `<!--fig FILE PATH-->VALUE<!--/fig-->`, where PATH walks the
  JSON: `bursts[jobs=1000,settings=default].all_registered_s`, `each[0].binary_bytes`;
  `PATH|N` rounds to N decimals, `PATH|MB` writes bytes as megabytes.

Each bench file carries a `source` stamp: the paths of the code it measures and a hash of
their tracked content as git's index holds it (`git ls-files -s`). `make bench*` stamps
what it writes; the check recomputes the hash, so a file older than the code it measures
fails, naming the command that regenerates it.

    python tests/docs/figures.py --check            # make check-figures (in make test)
    python tests/docs/figures.py --write            # make docs-figures
    python tests/docs/figures.py --stamp bench/model.json
"""

import argparse
import difflib
import hashlib
import json
import re
import subprocess
import sys
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# What each bench file measures, and the command that writes it. Test files are left
# out: they do not change what a bench measures.
NOT_TESTS = [":(exclude,glob)**/*_tests.rs", ":(exclude,glob)**/tests.rs"]
BENCHES = {
    "bench/webhook.json": {
        "command": "make bench",
        "paths": [
            "functions/core/benches/webhook.rs",
            "functions/core/fixtures/workflow_job_queued.json",
            "functions/core/src/handlers/webhook.rs",
            "functions/core/src/webhook.rs",
            "functions/core/src/screen.rs",
            "functions/core/src/routing.rs",
            "functions/core/src/message.rs",
            "functions/core/src/names.rs",
            "functions/core/src/unrouted.rs",
            "functions/core/src/metrics.rs",
            "functions/core/src/metrics",
        ],
    },
    "bench/model.json": {
        "command": "make bench-model",
        # Everything the model runs: its code and the handlers', the webhook body it
        # sends (include_str!), and what its figures transcribe: the GitHub client's
        # retries, the template's settings, the runner host's bootstrap and the baked
        # image's recipe.
        "paths": [
            "functions/model/src",
            "functions/core/src",
            "functions/core/fixtures/workflow_job_queued.json",
            "functions/github/src/retry.rs",
            "infra/runner/bootstrap.sh",
            "infra/image/template.yaml",
            "template.yaml",
        ],
    },
    "bench/results.json": {
        "command": "make bench",
        "paths": [
            "functions/core/src",
            "functions/aws/src",
            "functions/github/src",
            "functions/cli/src",
            "functions/webhook/src",
            "functions/scaler/src",
            "functions/reaper/src",
            "tests/src/bin/bench.rs",
            "tests/src/pipeline.rs",
            "tests/src/plant.rs",
            "tests/src/moto.rs",
            "tests/src/sim",
            "tests/src/strict_moto",
        ],
    },
}

BLOCK = re.compile(r"(<!-- figures:([\w-]+) -->\n)(.*?)(<!-- /figures -->)", re.S)
INLINE = re.compile(r"<!--fig (\S+) (\S+)-->(.*?)<!--/fig-->")


class FigureError(Exception):
    """A page names a figure its file does not have."""



def fingerprint(paths):
    """The hash of the tracked content of `paths` (blob ids and modes, as git holds them)."""
    listing = subprocess.run(
        ["git", "ls-files", "-s", "--", *paths, *NOT_TESTS],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return hashlib.sha256(listing.encode()).hexdigest()


def head_commit():
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()


def stamp(name):
    """Adds (or replaces) the `source` stamp of a bench file just written."""
    bench = BENCHES[name]
    path = ROOT / name
    data = json.loads(path.read_text())
    data["source"] = {
        "paths": bench["paths"],
        "sha256": fingerprint(bench["paths"]),
        "commit": head_commit(),
        "command": bench["command"],
    }
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    print(f"{name}: stamped with the source of {', '.join(bench['paths'])}")


def stale(name):
    """Why the bench file `name` no longer measures today's code, or None."""
    bench = BENCHES[name]
    data = json.loads((ROOT / name).read_text())
    source = data.get("source")
    regenerate = f"regenerate it with `{bench['command']}` and commit it"
    if not source:
        return f"{name} has no source stamp, so nothing says which code it measured: {regenerate}"
    if source.get("paths") != bench["paths"]:
        return f"{name} was stamped for other paths than tests/docs/figures.py names: {regenerate}"
    if source.get("sha256") == fingerprint(bench["paths"]):
        return None
    changed = subprocess.run(
        ["git", "diff", "--name-only", source.get("commit", ""), "--", *bench["paths"], *NOT_TESTS],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.split()
    since = f" ({', '.join(changed[:8])}{' …' if len(changed) > 8 else ''} changed)" if changed else ""
    return f"{name} is older than the code it measures{since}: {regenerate}"



def load(name):
    return json.loads((ROOT / name).read_text())


def walk(data, path):
    """The value at `path` in `data`: dotted keys, `[n]` indexes, `[key=value,...]` finds."""
    value = data
    for part in re.findall(r"[^.\[\]]+|\[[^\]]*\]", path):
        if part.startswith("["):
            inner = part[1:-1]
            if "=" in inner:
                wanted = dict(pair.split("=", 1) for pair in inner.split(","))
                found = [row for row in value if all(str(row.get(k)) == v for k, v in wanted.items())]
                if len(found) != 1:
                    raise FigureError(f"{path}: {len(found)} rows match [{inner}], not one")
                value = found[0]
            else:
                value = value[int(inner)]
        else:
            if not isinstance(value, dict) or part not in value:
                raise FigureError(f"{path}: no `{part}`")
            value = value[part]
    return value


def number(value, decimals=None):
    """A figure as the pages write it: thousands separated, decimals as measured or as asked."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    if decimals is not None:
        value = Decimal(str(value)).quantize(Decimal(1).scaleb(-decimals), ROUND_HALF_UP)
        return f"{value:,}"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{Decimal(str(value)):,}"


def figure(name, spec):
    path, _, form = spec.partition("|")
    value = walk(load(name), path)
    if form == "MB":
        return f"{value / 1e6:.1f} MB"
    return number(value, int(form) if form else None)



def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def calls(by_operation):
    return ", ".join(f"{op} {number(n)}" for op, n in sorted(by_operation.items(), key=lambda kv: -kv[1]))


def render_webhook():
    rows = [
        (f"`{r['payload'].split(',')[0]}`," + r["payload"].split(",", 1)[1], number(r["bytes"]),
         number(r["events_per_second"], 0), f"{number(r['p50_us'])} µs", f"{number(r['p99_us'])} µs")
        for r in load("bench/webhook.json")["webhook"]
    ]
    return table(["delivery", "bytes", "events/s", "p50", "p99"], rows)


def render_webhook_refused():
    rows = [
        (r["payload"].replace("<", "&lt;").replace(">", "&gt;"), number(r["bytes"]), number(r["events_per_second"], 0),
         f"{number(r['p50_us'])} µs", number(r["share_of_genuine"]))
        for r in load("bench/webhook.json")["webhook_refused"]
    ]
    return table(["refused request", "bytes", "refusals/s, one core", "p50", "share of a genuine delivery's CPU time"], rows)


def render_functions():
    data = load("bench/results.json")["functions"]
    rows = [
        (r["function"], f"{r['binary_bytes'] / 1e6:.1f} MB", f"{number(r['cold_start_ms_p50'])} ms",
         f"{number(r['cold_start_ms_max'])} ms", number(r["cold_starts"]))
        for r in data["each"]
    ]
    return f"Built for {data['target']}.\n\n" + table(["function", "binary", "cold start p50", "max", "starts"], rows)


def render_burst_calls():
    burst = load("bench/results.json")["burst"]
    rows = []
    for service, ops in sorted(burst["calls_per_job"].items()):
        total = sum(ops.values())
        rows.append((service, f"{number(round(total, 2))} ({calls(ops)})"))
    return f"{number(burst['jobs'])} jobs:\n\n" + table(["service", "calls per job"], rows)


def render_burst_times():
    burst = load("bench/results.json")["burst"]
    machine = load("bench/results.json")["machine"]
    return (
        f"Measured {machine['measured_at'][:10]} on {machine['cores']} cores ({machine['arch']}): "
        f"every job had its instance requested after {number(burst['all_launched_s'])} s; "
        f"webhook → launch requested was {number(burst['queued_to_launched_ms_p50'] / 1000, 0)} s at p50 "
        f"and {number(burst['queued_to_launched_ms_p99'] / 1000, 0)} s at p99, in "
        f"{number(burst['fleet_requests'])} CreateFleet requests.\n"
    )


def render_reaper():
    reaper = load("bench/results.json")["reaper"]
    rows = [
        (r["run"], number(r["items_read"]), number(r["deleted"]), number(r["aws_calls"]), f"{number(r['seconds'])} s")
        for r in reaper["runs"]
    ]
    return (
        f"{number(reaper['deleted_items'])} `deleted` items, {number(reaper['live_runners'])} live runners and "
        f"{number(reaper['pending_items'])} `pending_delete` runners with instances:\n\n"
        + table(["run", "items read", "deleted", "AWS calls", "time on the emulator"], rows)
    )


def burst_rows(bursts, label=None):
    rows = []
    for b in bursts:
        bound = "none binds" if not b["limit_bound_s"] else f"{number(b['limit_bound_s'])} ({b['binding_limit']})"
        registered = b["all_registered_s"]
        times = "—" if registered is None or not b["limit_bound_s"] else f"{registered / b['limit_bound_s']:.1f}"
        if registered is None:
            registered = f"not all ({number(b['jobs_running'])} running)"
        throttled = ", ".join(f"{k} {number(v)}" for k, v in sorted(b["throttled"].items())) or "0"
        rows.append((
            number(b["jobs"]), label or b["settings"], number(b["all_launch_requested_s"]), number(registered),
            f"{number(b['queued_to_launch_p50_s'])} / {number(b['queued_to_launch_p99_s'])}",
            bound, times, throttled, number(b["transaction_conflicts"]), number(b["dead_lettered"]),
        ))
    return rows


def render_model_bursts():
    model = load("bench/model.json")
    rows = burst_rows(model["bursts"])
    for peer, bursts in model["peer"].items():
        rows += burst_rows(bursts, peer)
    rows.sort(key=lambda row: int(row[0].replace(",", "")))
    header = ["jobs", "settings", "all launches requested", "all registered", "queued → launch p50 / p99",
              "bound (binding quota)", "× bound", "throttled calls", "transaction conflicts", "dead-lettered"]
    return f"Seed {model['seed']}; times in seconds of simulated time.\n\n" + table(header, rows)


def render_model_calls():
    model = load("bench/model.json")
    burst = walk(model, "bursts[jobs=100,settings=default]")
    rows = [(service, calls(ops)) for service, ops in sorted(burst["calls_per_job"].items())]
    return "The 100-job burst, default settings:\n\n" + table(["service", "calls per job"], rows)


def render_model_vs_peer():
    model = load("bench/model.json")
    lines = []
    for peer, bursts in model["peer"].items():
        for theirs in bursts:
            ours = walk(model, f"bursts[jobs={theirs['jobs']},settings=default]")
            if ours["all_registered_s"] and theirs["all_registered_s"]:
                lines.append(
                    f"- {number(theirs['jobs'])} jobs: every runner registered after "
                    f"{number(ours['all_registered_s'])} s, {peer}'s call pattern after "
                    f"{number(theirs['all_registered_s'])} s ({theirs['all_registered_s'] / ours['all_registered_s']:.1f} times as long)."
                )
    return "\n".join(lines) + "\n"


def render_model_flood():
    rows = []
    for case, r in load("bench/model.json")["flood"].items():
        flood = r["lambda_throttles"]["flood"] or {}
        reserved = r["webhook_reserved_concurrency"]
        delay = r.get("delay_against_no_flood_s")
        rows.append((
            f"`{case}`",
            number(flood.get("refused_per_second", 0), 0),
            "none" if reserved is None else number(reserved),
            f"{number(r['jobs_running'])} of {number(r['jobs'])}",
            number(r["dead_lettered"]),
            "—" if r["all_registered_s"] is None else f"{number(r['all_registered_s'])} s",
            "—" if delay is None else f"{number(delay)} s",
            number(r["webhooks_refused"]),
            number(r["lambda_throttles"]["redeliveries"]),
            number(r["lambda_throttles"]["scaler_throttled"]),
            number(r["lambda_throttles"]["reaper_throttled"]),
        ))
    return table(
        ["case", "refused/s", "webhook reserved", "jobs run", "dead-lettered", "all registered",
         "later than no flood", "deliveries throttled", "redeliveries", "scaler throttled", "reaper runs throttled"],
        rows,
    )


def render_model_start():
    start = load("bench/model.json")["start_latency"]
    rows = []
    hosts = [("ephemera", mode) for mode in start["modes"]]
    hosts += [(peer, mode) for peer, mode in start["peer"].items()]
    for who, mode in hosts:
        goal = mode.get("goal_p50_s")
        if goal is None:
            verdict = "no goal"
        else:
            verdict = f"p50 ≤ {number(goal, 0)} s: {'met' if mode['goal_met'] else 'missed'}"
        rows.append((who, mode["host"], f"{number(mode['p50_s'], 1)} s", f"{number(mode['p99_s'], 1)} s", verdict))
    return (
        f"{number(start['samples'])} jobs drawn per host, seed {start['seed']}; one job on a quiet pool.\n\n"
        + table(["", "host", "queued → started p50", "p99", "goal"], rows)
    )


def render_model_start_stages():
    start = load("bench/model.json")["start_latency"]
    hosts = [(f"ephemera, {mode['host']}", mode) for mode in start["modes"]]
    hosts += [(peer, mode) for peer, mode in start["peer"].items()]
    stages = {}
    for who, mode in hosts:
        for stage in mode["stages"]:
            row = stages.setdefault(stage["stage"], [stage, []])
            row[1].append(who.replace("ephemera, ", ""))
    def latency(stage):
        text = f"{number(stage['median_s'])} / {number(stage['p99_s'])}"
        late = stage.get("late")
        if late:
            text += f"; {number(late['share'] * 100, 0)}% late: {number(late['median_s'])} / {number(late['p99_s'])}"
        return text

    rows = [(name, latency(stage), ", ".join(whose), stage["source"]) for name, (stage, whose) in stages.items()]
    return table(["stage", "median / p99 (s)", "hosts", "source"], rows)


def render_model_start_goals():
    start = load("bench/model.json")["start_latency"]
    lines = []
    for mode in start["modes"]:
        goal = mode.get("goal_p50_s")
        if goal is None:
            continue
        line = (f"- **{mode['host']}**: p50 {number(mode['p50_s'], 1)} s against a goal of {number(goal, 0)} s: "
                f"{'met' if mode['goal_met'] else 'missed'}")
        if not mode["goal_met"]:
            line += (f"; the stage that costs the most is \"{mode['costliest_stage']}\", median "
                     f"{number(mode['costliest_stage_median_s'])} s")
            if mode["costliest_stage_alone_misses_goal"]:
                line += ", past the goal on its own: no other stage made faster could meet it"
        lines.append(line + ".")
    return "\n".join(lines) + "\n"


def render_model_flood_seeds():
    seeds = load("bench/model.json")["flood_seeds"]
    flood = load("bench/model.json")["flood"]

    def spread(figures, decimals=1):
        return f"{number(figures['mean'], decimals)} ({number(figures['min'], decimals)}–{number(figures['max'], decimals)})"

    rows = []
    for case, figures in seeds["cases"].items():
        reserved = flood[case]["webhook_reserved_concurrency"]
        rows.append((
            f"`{case}`",
            number(flood[case]["lambda_throttles"]["flood"]["refused_per_second"], 0),
            "none" if reserved is None else number(reserved),
            f"{spread(figures['all_registered_s'])} s",
            spread(figures["queued_first_attempts_throttled"], 0),
            spread(figures["queued_redeliveries_during_flood"], 0),
            spread(figures["in_progress_redeliveries"], 0),
        ))
    return (
        f"{number(seeds['seeds'])} seeds from seed {seeds['first_seed']}; mean (least–most) of each figure.\n\n"
        + table(["case", "refused/s", "webhook reserved", "all registered", "`queued` deliveries throttled",
                 "asks made while the flood lasted (all throttled again)", "`in_progress` asks"], rows)
    )


def render_model_quotas():
    rows = [(q["figure"], q["value"], q["source"]) for q in load("bench/model.json")["quotas"]]
    return table(["figure", "value", "source"], rows)


def render_model_account():
    account = load("bench/model.json")["account"]
    rows = [
        (a["limit"], a["default"], a["needed"], a["assumed"], a["past_it"],
         "—" if a["bound_s"] is None else f"{number(a['bound_s'])} s", a["source"])
        for a in account["limits"]
    ]
    return f"A burst of {number(account['jobs'])} jobs:\n\n" + table(
        ["limit", "default", "the burst needs", "the model assumes", "past it", "bound", "source"], rows
    )


def render_model_runner_group_cap():
    r = load("bench/model.json")["runner_group_cap"]
    return (
        f"{number(r['jobs'])} jobs on a runner group of {number(r['runner_group_cap'])}: "
        f"{number(r['jobs_running'])} jobs run, GitHub refused {number(r['registrations_refused'])} registrations, "
        f"{number(r['dead_lettered_jobs'])} jobs were dead-lettered ({number(r['dead_lettered'])} messages), "
        f"{number(r['reaper_calls'].get('SQS', {}).get('SendMessage', 0))} "
        f"messages were sent again by the reaper, and the run was stopped after {number(r['simulated_s'])} s "
        f"of simulated time, once every refused job had reached the DLQ.\n"
    )


def render_model_org_registrations():
    org = load("bench/model.json")["org_registrations"]
    rows = []
    for b in org["bursts"]:
        apps = b["github_apps"]
        refusals = b["github_refusals"].get("org_registrations", 0)
        rows.append((
            number(apps), number(b["all_registered_s"]), f"{number(b['limit_bound_s'])} ({b['binding_limit']})",
            f"{number(org['bound_without_org_limit_s'][str(apps)])} s", number(refusals), number(b["dead_lettered"]),
        ))
    lifted = org["ec2_launch_resource"]
    return (
        f"{number(org['bursts'][0]['jobs'])} jobs, EC2's launch bucket lifted to {number(lifted['capacity'], 0)} "
        f"instances and {number(lifted['per_second'], 0)} a second (assumed):\n\n"
        + table(["GitHub Apps", "all registered (s)", "bound (binding quota)", "bound without the organization's limit",
                 "registrations the organization's limit refused", "dead-lettered"], rows)
    )


RENDERERS = {
    "model-quotas": render_model_quotas,
    "model-account": render_model_account,
    "model-runner-group-cap": render_model_runner_group_cap,
    "model-org-registrations": render_model_org_registrations,
    "webhook": render_webhook,
    "webhook-refused": render_webhook_refused,
    "functions": render_functions,
    "burst-calls": render_burst_calls,
    "burst-times": render_burst_times,
    "reaper": render_reaper,
    "model-bursts": render_model_bursts,
    "model-calls": render_model_calls,
    "model-vs-peer": render_model_vs_peer,
    "model-flood": render_model_flood,
    "model-start": render_model_start,
    "model-start-stages": render_model_start_stages,
    "model-flood-seeds": render_model_flood_seeds,
    "model-start-goals": render_model_start_goals,
}



def pages():
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def rendered(text, problems, where):
    """`text` with every block and single figure written from the bench files."""

    def block(match):
        name = match.group(2)
        if name not in RENDERERS:
            problems.append(f"{where}: no renderer for figures block `{name}`")
            return match.group(0)
        try:
            body = RENDERERS[name]()
        except (FigureError, KeyError, OSError, ValueError) as err:
            problems.append(f"{where}: figures block `{name}`: {err!r}")
            return match.group(0)
        return match.group(1) + body + match.group(4)

    def single(match):
        try:
            value = figure(match.group(1), match.group(2))
        except (FigureError, KeyError, OSError, ValueError, IndexError) as err:
            problems.append(f"{where}: figure {match.group(1)} {match.group(2)}: {err!r}")
            return match.group(0)
        return f"<!--fig {match.group(1)} {match.group(2)}-->{value}<!--/fig-->"

    return INLINE.sub(single, BLOCK.sub(block, text))


def check(warn_stale=False):
    problems = []
    warnings = []
    for page in pages():
        where = page.relative_to(ROOT)
        text = page.read_text()
        want = rendered(text, problems, where)
        if want != text:
            diff = difflib.unified_diff(
                text.splitlines(), want.splitlines(), f"{where} (as committed)", f"{where} (from bench/*.json)",
                lineterm="", n=0,
            )
            problems.append(
                f"{where} quotes figures its bench files do not hold (`make docs-figures` rewrites them):\n"
                + "\n".join(diff)
            )
    try:
        for name in BENCHES:
            reason = stale(name)
            if reason:
                (warnings if warn_stale else problems).append(reason)
    except (OSError, subprocess.CalledProcessError) as err:
        problems.append(f"cannot fingerprint the measured code (a git checkout is needed): {err}")
    for warning in warnings:
        print(f"check-figures: warning: {warning}", file=sys.stderr)
    for problem in problems:
        print(f"check-figures: {problem}", file=sys.stderr)
    if not problems and not warnings:
        print(f"check-figures: {len(pages())} pages agree with {len(BENCHES)} bench files, each as fresh as its code")
    return 1 if problems else 0


def write():
    problems = []
    for page in pages():
        text = page.read_text()
        new = rendered(text, problems, page.relative_to(ROOT))
        if new != text:
            page.write_text(new)
            print(f"{page.relative_to(ROOT)}: figures rewritten")
    for problem in problems:
        print(f"docs-figures: {problem}", file=sys.stderr)
    return 1 if problems else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--check", action="store_true", help="fail on a figure or bench file out of date")
    group.add_argument("--write", action="store_true", help="render every figure from the bench files")
    group.add_argument("--stamp", metavar="FILE", choices=sorted(BENCHES), help="stamp a bench file just written")
    parser.add_argument(
        "--warn-stale", action="store_true",
        help="with --check: a bench file older than its code is a warning, not a failure",
    )
    args = parser.parse_args()
    if args.stamp:
        stamp(args.stamp)
        return 0
    return check(args.warn_stale) if args.check else write()


if __name__ == "__main__":
    sys.exit(main())
