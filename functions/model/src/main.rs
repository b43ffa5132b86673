//! `make bench-model`: bursts of 100, 1,000 and 10,000 jobs on the model, for ephemera's
//! default settings, with two GitHub Apps, without the registration pace (what stood in
//! the way), for the best settings found, for terraform-aws-github-runner's call
//! pattern, the 1,000-job burst with GitHub's content-creation limit applied to
//! registrations, and the 1,000-job burst under the standard flood (with the webhook's
//! reserved concurrency and without); written to `bench/model.json` and printed as a
//! table.
//!
//! Usage: `bench-model [--out FILE] [--jobs 100,1000,10000] [--seed N] [--apps N]
//! [--flood-seeds N] [--default-only] [--flood-only] [--limits-only] [--start-only]`
//! (`--default-only`, `--flood-only`: those bursts only, `--apps` the GitHub Apps of the
//! default-only bursts; `--flood-seeds`: the flooded cases are also run over N seeds
//! from `--seed`, default 20; `--limits-only`: the runner group's cap and the
//! organization's registrations; `--start-only`: queued → started per host mode; each
//! printed, nothing written)
//!
//! Besides the bursts, `bench/model.json` holds the figures the model runs on
//! (`quotas`), the account the largest burst assumes (`account`), a burst past the
//! runner group's cap (`runner_group_cap`), and 10,000 jobs with EC2's launch bucket
//! lifted and 1 to 3 GitHub Apps against the organization's registrations
//! (`org_registrations`).
//!
//! Every random draw of a burst (latencies, retry jitter, runner names) comes from one
//! RNG seeded with `--seed` (default [`DEFAULT_SEED`]) and the burst's size, so a seed
//! gives the same figures every time.

use ephemera_model::account::preconditions;
use ephemera_model::burst::{run, BurstOutcome, BurstSpec};
use ephemera_model::flood::{deliveries_report, Flood};
use ephemera_model::quotas::{figures, ContentCreation, Latencies, Quotas, Settings};
use ephemera_model::report::{bounds, Pattern};
use ephemera_model::start::start_latency;
use ephemera_model::world::Assignment;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The seed when `--seed` is not given.
const DEFAULT_SEED: u64 = 1;
/// The seeds the flooded cases run over when `--flood-seeds` is not given.
const DEFAULT_FLOOD_SEEDS: u64 = 20;

fn spec(seed: u64, jobs: u32, settings: Settings, pattern: Pattern) -> BurstSpec {
    BurstSpec {
        jobs,
        settings,
        quotas: Quotas::default(),
        latencies: Latencies::default(),
        pattern,
        webhooks_per_second: 500.0,
        seed: burst_seed(seed, jobs),
        assignment: Assignment::Oldest,
        flood: None,
    }
}

/// The seed of one burst: the run's seed and the burst's size.
fn burst_seed(seed: u64, jobs: u32) -> u64 {
    seed.wrapping_mul(1_000_003).wrapping_add(u64::from(jobs))
}

fn unpaced() -> Settings {
    Settings {
        name: "unpaced".to_owned(),
        registrations_per_minute: None,
        ..Settings::default_settings()
    }
}

fn with_concurrency(concurrency: u32) -> Settings {
    Settings {
        name: format!("concurrency {concurrency}"),
        scaler_max_concurrency: concurrency,
        ..Settings::default_settings()
    }
}

fn peer_settings() -> Settings {
    Settings {
        name: "terraform-aws-github-runner defaults".to_owned(),
        scaler_max_concurrency: 1,
        batch_size: 10,
        // runners_scale_up_lambda_timeout defaults to 30 s, and the queue's visibility
        // timeout is set to it (main.tf); redrive_build_queue is off by default, so a
        // message is handed out again until it succeeds.
        visibility: Duration::from_secs(30),
        max_receives: u32::MAX,
        scaler_timeout: Duration::from_secs(30),
        registrations_per_minute: None,
        webhook_reserved_concurrency: None,
        github_apps: 1,
    }
}

fn with_apps(apps: u32) -> Settings {
    Settings {
        name: if apps == 1 {
            "default".to_owned()
        } else {
            format!("default, {apps} GitHub Apps")
        },
        github_apps: apps,
        ..Settings::default_settings()
    }
}

/// The 1,000-job burst with GitHub's content-creation limit (80 a minute, 500 an hour)
/// applied to registrations, and the bound it sets on 10,000 jobs (a run of those would
/// take most of a day of simulated time).
fn content_creation(seed: u64) -> Value {
    let quotas = Quotas {
        github_content_creation: Some(ContentCreation::documented()),
        ..Quotas::default()
    };
    let mut applied = spec(seed, 1_000, Settings::default_settings(), Pattern::Ephemera);
    applied.quotas = quotas.clone();
    let row = burst(&applied);
    // Its `core` calls are not counted (the burst is not run): content creation binds
    // long before.
    let ten_thousand = bounds(10_000, 10, &quotas, Pattern::Ephemera, 1, 0.0);
    let (binding, bound) = ten_thousand.first().cloned().unwrap_or_default();
    json!({
        "applied_1000": row,
        "bound_10000_s": (bound * 10.0).round() / 10.0,
        "binding_10000": binding,
    })
}

/// The runner group's cap: 10,100 jobs, 100 past the 10,000 runners a group holds.
/// GitHub refuses their registrations; each refusal fails its runner's creation, and a
/// job refused `maxReceiveCount` times is dead-lettered (no job finishes in a burst, so
/// no place frees).
fn runner_group_cap(seed: u64) -> Value {
    let jobs = Quotas::default().github_runners_per_group + 100;
    burst(&spec(
        seed,
        jobs,
        Settings::default_settings(),
        Pattern::Ephemera,
    ))
}

/// EC2's launch bucket as if AWS had raised it (assumed: 10,000 instances, 20 a second),
/// so that GitHub's limits bind a 10,000-job burst.
fn ec2_lifted() -> Quotas {
    Quotas {
        ec2_launch_resource: ephemera_model::bucket::BucketSpec {
            capacity: 10_000.0,
            per_second: 20.0,
        },
        ..Quotas::default()
    }
}

/// What a second and a third GitHub App add once EC2 does not bind: the 10,000-job
/// burst with 1, 2 and 3 Apps on [`ec2_lifted`], against the organization's 1,500
/// registrations every 5 minutes, which every App shares.
fn org_registrations(seed: u64) -> Value {
    let quotas = ec2_lifted();
    let runs: Vec<Value> = [1, 2, 3]
        .into_iter()
        .map(|apps| {
            let mut settings = with_apps(apps);
            settings.name = format!("{}, EC2 launch bucket lifted", settings.name);
            let mut lifted = spec(seed, 10_000, settings, Pattern::Ephemera);
            lifted.quotas = quotas.clone();
            burst(&lifted)
        })
        .collect();
    let unlimited = Quotas {
        github_org_registrations: None,
        ..quotas.clone()
    };
    let bound_without = |apps| {
        bounds(10_000, 10, &unlimited, Pattern::Ephemera, apps, 0.0)
            .first()
            .map_or(0.0, |(_, s)| (s * 10.0).round() / 10.0)
    };
    json!({
        "ec2_launch_resource": { "capacity": quotas.ec2_launch_resource.capacity, "per_second": quotas.ec2_launch_resource.per_second },
        "bursts": runs,
        "bound_without_org_limit_s": { "1": bound_without(1), "2": bound_without(2), "3": bound_without(3) },
    })
}

fn unreserved() -> Settings {
    Settings {
        name: "default, webhook unreserved".to_owned(),
        webhook_reserved_concurrency: None,
        ..Settings::default_settings()
    }
}

/// The flooded cases: (name in bench/model.json, settings, refused requests a second).
fn flooded_cases() -> [(&'static str, Settings, f64); 4] {
    [
        ("reserved", Settings::default_settings(), 2_000.0),
        ("unreserved", unreserved(), 2_000.0),
        // The account's own ceiling (10 requests a second per execution, 1,000 of them):
        // a flood there takes every unreserved execution the webhook may use.
        (
            "reserved_10000_per_second",
            Settings::default_settings(),
            10_000.0,
        ),
        ("unreserved_10000_per_second", unreserved(), 10_000.0),
    ]
}

/// One flooded 1,000-job burst: its row, with GitHub's record of its deliveries.
fn flooded(seed: u64, settings: Settings, per_second: f64) -> Value {
    let flood = Flood {
        per_second,
        ..Flood::standard()
    };
    let mut spec = spec(seed, 1_000, settings, Pattern::Ephemera);
    spec.flood = Some(flood.clone());
    let outcome = burst_outcome(&spec);
    let mut row = outcome.row;
    row["deliveries"] = deliveries_report(&outcome.world.deliveries.deliveries(), &flood);
    row
}

/// The 1,000-job burst without a flood, under the standard flood (2,000 a second for 10
/// minutes) and under one at the account's request ceiling (10,000 a second), each with
/// the webhook's reserved concurrency and with nothing reserved; each flooded row says
/// how much later its jobs were all registered than without the flood.
fn flood_cases(seed: u64) -> Value {
    let calm = burst(&spec(
        seed,
        1_000,
        Settings::default_settings(),
        Pattern::Ephemera,
    ));
    let mut cases = serde_json::Map::new();
    cases.insert("no_flood".to_owned(), calm.clone());
    for (name, settings, per_second) in flooded_cases() {
        let mut row = flooded(seed, settings, per_second);
        let delay = registered_s(&row) - registered_s(&calm);
        row["delay_against_no_flood_s"] = json!((delay * 10.0).round() / 10.0);
        cases.insert(name.to_owned(), row);
    }
    Value::Object(cases)
}

/// The flooded cases over `seeds` seeds (from `first`): per case the mean, least and
/// most of when every job was registered, and of what the sweep asked; and on how many
/// seeds the flood at 10,000 a second finished sooner than the one at 2,000.
fn flood_seeds(first: u64, seeds: u64) -> Value {
    let mut per_case: Vec<(&str, Vec<Value>)> = flooded_cases()
        .iter()
        .map(|(name, _, _)| (*name, Vec::new()))
        .collect();
    for seed in first..first + seeds {
        for ((_, settings, per_second), (_, rows)) in flooded_cases().into_iter().zip(&mut per_case)
        {
            rows.push(flooded(seed, settings, per_second));
        }
    }
    let figure = |row: &Value, path: &[&str]| {
        path.iter()
            .fold(row, |value, key| &value[*key])
            .as_f64()
            .unwrap_or(f64::NAN)
    };
    let spread = |rows: &[Value], path: &[&str]| {
        let all: Vec<f64> = rows.iter().map(|row| figure(row, path)).collect();
        let mean = all.iter().sum::<f64>() / all.len().max(1) as f64;
        let round = |v: f64| (v * 10.0).round() / 10.0;
        json!({
            "mean": round(mean),
            "min": round(all.iter().copied().fold(f64::INFINITY, f64::min)),
            "max": round(all.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
        })
    };
    let mut cases = serde_json::Map::new();
    for (name, rows) in &per_case {
        cases.insert(
            (*name).to_owned(),
            json!({
                "all_registered_s": spread(rows, &["all_registered_s"]),
                "last_queued_delivered_s": spread(rows, &["deliveries", "last_queued_delivered_s"]),
                "queued_first_attempts_throttled": spread(rows, &["deliveries", "by_action", "queued", "first_attempts_throttled"]),
                "queued_redeliveries": spread(rows, &["deliveries", "by_action", "queued", "redeliveries"]),
                "queued_redeliveries_during_flood": spread(rows, &["deliveries", "by_action", "queued", "redeliveries_during_flood"]),
                "queued_redeliveries_throttled": spread(rows, &["deliveries", "by_action", "queued", "redeliveries_throttled"]),
                "in_progress_first_attempts_throttled": spread(rows, &["deliveries", "by_action", "in_progress", "first_attempts_throttled"]),
                "in_progress_redeliveries": spread(rows, &["deliveries", "by_action", "in_progress", "redeliveries"]),
                "jobs_running": spread(rows, &["jobs_running"]),
            }),
        );
    }
    let registered = |case: &str| -> Vec<f64> {
        per_case
            .iter()
            .find(|(name, _)| *name == case)
            .map(|(_, rows)| rows.iter().map(registered_s).collect())
            .unwrap_or_default()
    };
    let sooner = registered("reserved_10000_per_second")
        .iter()
        .zip(registered("reserved"))
        .filter(|(ten_thousand, two_thousand)| **ten_thousand < *two_thousand)
        .count();
    json!({
        "seeds": seeds,
        "first_seed": first,
        "cases": cases,
        "reserved_10000_sooner_than_2000_on_seeds": sooner,
    })
}

fn burst(spec: &BurstSpec) -> Value {
    burst_outcome(spec).row
}

/// Runs a burst, prints its line, and returns its outcome.
fn burst_outcome(spec: &BurstSpec) -> BurstOutcome {
    let started = Instant::now();
    let outcome = run(spec);
    let row = &outcome.row;
    eprintln!(
        "{:>6} jobs  {:<38} launch requested {:>7}s  registered {:>7}s  bound {:>7}s ({})  p50 {}s p99 {}s  dead {}  throttled {}  conflicts {}  [{:.1?}]",
        spec.jobs,
        row["settings"].as_str().unwrap_or_default(),
        row["all_launch_requested_s"],
        row["all_registered_s"],
        row["limit_bound_s"],
        row["binding_limit"].as_str().unwrap_or_default(),
        row["queued_to_launch_p50_s"],
        row["queued_to_launch_p99_s"],
        row["dead_lettered"],
        row["throttled"],
        row["transaction_conflicts"],
        started.elapsed(),
    );
    outcome
}

fn registered_s(row: &Value) -> f64 {
    row["all_registered_s"].as_f64().unwrap_or(f64::INFINITY)
}

fn main() {
    let mut out = "bench/model.json".to_owned();
    let mut sizes = vec![100, 1_000, 10_000];
    let mut seed = DEFAULT_SEED;
    let mut default_only = false;
    let mut flood_only = false;
    let mut start_only = false;
    let mut limits_only = false;
    let mut apps = 1;
    let mut flood_seed_count = DEFAULT_FLOOD_SEEDS;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--default-only" {
            default_only = true;
            continue;
        }
        if arg == "--flood-only" {
            flood_only = true;
            continue;
        }
        if arg == "--limits-only" {
            limits_only = true;
            continue;
        }
        if arg == "--start-only" {
            start_only = true;
            continue;
        }
        match (arg.as_str(), args.next()) {
            ("--out", Some(path)) => out = path,
            ("--jobs", Some(list)) => {
                sizes = list
                    .split(',')
                    .map(|n| {
                        n.trim()
                            .parse()
                            .unwrap_or_else(|_| panic!("--jobs: {n:?} is not a number"))
                    })
                    .collect();
            }
            ("--apps", Some(text)) => {
                apps = text
                    .trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("--apps: {text:?} is not a whole number"));
            }
            ("--flood-seeds", Some(text)) => {
                flood_seed_count = text
                    .trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("--flood-seeds: {text:?} is not a whole number"));
            }
            ("--seed", Some(text)) => {
                seed = text
                    .trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("--seed: {text:?} is not a whole number"));
            }
            _ => panic!("usage: bench-model [--out FILE] [--jobs 100,1000,10000] [--seed N] [--apps N] [--flood-seeds N] [--default-only] [--flood-only] [--limits-only] [--start-only]"),
        }
    }
    if start_only {
        let start = start_latency(seed);
        println!("{}", serde_json::to_string_pretty(&start).expect("JSON"));
        return;
    }
    if limits_only {
        let cases = json!({
            "runner_group_cap": runner_group_cap(seed),
            "org_registrations": org_registrations(seed),
        });
        println!("{}", serde_json::to_string_pretty(&cases).expect("JSON"));
        return;
    }
    if flood_only {
        let mut cases = flood_cases(seed);
        cases["seeds"] = flood_seeds(seed, flood_seed_count);
        println!("{}", serde_json::to_string_pretty(&cases).expect("JSON"));
        return;
    }
    if default_only {
        for &jobs in &sizes {
            burst(&spec(seed, jobs, with_apps(apps), Pattern::Ephemera));
        }
        return;
    }
    // The best settings: the event source concurrency that registers 1,000 jobs soonest.
    let candidates = [5, 10, 20, 50];
    let best = candidates
        .iter()
        .map(|&c| {
            (
                c,
                burst(&spec(seed, 1_000, with_concurrency(c), Pattern::Ephemera)),
            )
        })
        .min_by(|a, b| registered_s(&a.1).total_cmp(&registered_s(&b.1)))
        .map_or(5, |(c, _)| c);
    let mut bursts = Vec::new();
    let mut peer = Vec::new();
    for &jobs in &sizes {
        bursts.push(burst(&spec(
            seed,
            jobs,
            Settings::default_settings(),
            Pattern::Ephemera,
        )));
        bursts.push(burst(&spec(seed, jobs, with_apps(2), Pattern::Ephemera)));
        bursts.push(burst(&spec(seed, jobs, unpaced(), Pattern::Ephemera)));
        let best_name = format!("best (ScalerMaxConcurrency {best})");
        if best == Settings::default_settings().scaler_max_concurrency {
            // The default's own run: the same spec and seed give the same figures.
            let mut same = bursts[bursts.len() - 3].clone();
            same["settings"] = json!(best_name);
            bursts.push(same);
        } else {
            let mut best_settings = with_concurrency(best);
            best_settings.name = best_name;
            bursts.push(burst(&spec(seed, jobs, best_settings, Pattern::Ephemera)));
        }
        peer.push(burst(&spec(seed, jobs, peer_settings(), Pattern::Peer)));
    }
    let core_per_job = bursts
        .iter()
        .filter(|row| row["settings"] == "default")
        .max_by_key(|row| row["jobs"].as_u64())
        .and_then(|row| row["core_calls_per_job"].as_f64())
        .unwrap_or(0.0);
    let largest = sizes.iter().copied().max().unwrap_or(10_000);
    let results = json!({
        "seed": seed,
        "quotas": figures().iter().map(|f| f.to_json()).collect::<Vec<_>>(),
        "account": { "jobs": largest, "limits": preconditions(largest, &Quotas::default(), core_per_job) },
        "runner_group_cap": runner_group_cap(seed),
        "org_registrations": org_registrations(seed),
        "bursts": bursts,
        "peer": { "terraform-aws-github-runner": peer },
        "content_creation": content_creation(seed),
        "flood": flood_cases(seed),
        "flood_seeds": flood_seeds(seed, flood_seed_count),
        "start_latency": start_latency(seed),
    });
    let text = serde_json::to_string_pretty(&results).expect("results are JSON");
    std::fs::write(&out, text + "\n").unwrap_or_else(|err| panic!("cannot write {out}: {err}"));
    eprintln!("wrote {out}");
}
