//! A small burst for comparing the model with the emulator pipeline: the calls a job
//! costs, per operation, named as the emulator's call counter names them
//! (`"DynamoDB/UpdateItem"`, `"SQS/SendMessage"`, `"EC2/CreateFleet"`,
//! `"GitHub/generate_jitconfig"`).

use crate::burst::{run, BurstSpec};
use crate::cloud::Caller;
use crate::quotas::{Latencies, Quotas, Settings};
use crate::report::Pattern;
use std::collections::BTreeMap;

/// Jobs in the comparison burst: fewer than any quota's burst allowance, so nothing
/// binds and no call is throttled.
pub const AGREEMENT_JOBS: u32 = 30;

/// Runs `jobs` jobs through the model with the default settings and quotas, and returns
/// the webhook's and the scaler's calls per job by `"Service/Operation"` (the reaper's
/// and the runner instances' own calls are not a job's cost). Panics if the burst did
/// not run every job, or if anything was throttled or dead-lettered: then it is not the
/// comparison it claims to be.
pub fn calls_per_job(jobs: u32, seed: u64) -> BTreeMap<String, f64> {
    let outcome = run(&BurstSpec {
        jobs,
        settings: Settings::default_settings(),
        quotas: Quotas::default(),
        latencies: Latencies::default(),
        pattern: Pattern::Ephemera,
        webhooks_per_second: 500.0,
        seed,
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
