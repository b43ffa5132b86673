//! A small burst for comparing the model with the emulator pipeline: the calls a job
//! costs, per operation, named as the emulator's call counter names them
//! (`"DynamoDB/UpdateItem"`, `"SQS/SendMessage"`, `"EC2/CreateFleet"`,
//! `"GitHub/generate_jitconfig"`).

use crate::burst::{run, BurstSpec};
use crate::cloud::Caller;
use crate::quotas::{Latencies, Latency, Quotas, Settings};
use crate::report::Pattern;
use crate::world::Assignment;
use std::collections::BTreeMap;
use std::time::Duration;

/// Jobs in the comparison burst: fewer than any quota's burst allowance, so nothing
/// binds and no call is throttled.
pub const AGREEMENT_JOBS: u32 = 30;

/// Over how long the comparison burst's instances boot, each at a time of its own: the
/// emulator pipeline's simulator spreads its instances' boots evenly over this, and the
/// model draws boots of the same median and spread (EC2's own, 40 to 90 s, would make
/// the emulator test wait that long). Long enough that each runner's `in_progress` is
/// handled before the next comes online, on a busy machine too (with 10 s the
/// emulator's hand-overs varied with the machine's load).
pub const AGREEMENT_BOOT_SPREAD: Duration = Duration::from_secs(30);

/// The model's boot latency for the comparison: median half the spread, p99 all of it.
fn agreement_boot() -> Latency {
    Latency {
        median: AGREEMENT_BOOT_SPREAD / 2,
        p99: AGREEMENT_BOOT_SPREAD,
    }
}

/// Runs `jobs` jobs through the model with the default settings and quotas, and returns
/// the webhook's and the scaler's calls per job by `"Service/Operation"` (the reaper's
/// and the runner instances' own calls are not a job's cost). Panics if the burst did
/// not run every job, or if anything was throttled or dead-lettered: then it is not the
/// comparison it claims to be.
pub fn calls_per_job(jobs: u32, seed: u64) -> BTreeMap<String, f64> {
    let outcome = run(&BurstSpec {
        jobs,
        // One scaler invocation at a time, as the emulator pipeline's one drain loop: the
        // claims and bindings then meet the same (few) conflicts in both.
        settings: Settings {
            scaler_max_concurrency: 1,
            ..Settings::default_settings()
        },
        quotas: Quotas::default(),
        latencies: Latencies {
            instance_boot: agreement_boot(),
            ..Latencies::default()
        },
        pattern: Pattern::Ephemera,
        webhooks_per_second: 500.0,
        seed,
        assignment: Assignment::Oldest,
        flood: None,
    });
    assert_eq!(outcome.jobs_running, jobs, "{}", outcome.row);
    assert_eq!(outcome.dead_lettered, 0, "{}", outcome.row);
    assert_eq!(
        outcome.row["throttled"],
        serde_json::json!({}),
        "a quota bound the comparison burst: {}",
        outcome.row
    );
    let mut per_job = BTreeMap::new();
    for ((caller, service, operation), count) in &outcome.calls {
        if matches!(caller, Caller::Webhook | Caller::Scaler) {
            *per_job
                .entry(format!("{service}/{operation}"))
                .or_insert(0.0) += *count as f64 / f64::from(jobs);
        }
    }
    per_job
}
