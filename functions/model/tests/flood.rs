//! Issue #33 on the model, shortened so that `make test` stays quick: refused requests
//! flood the webhook's URL while 100 jobs arrive. The webhook's reserved concurrency
//! keeps the flood from the scaler and the reaper; the genuine deliveries the flood
//! crowds out are throttled, recorded by GitHub as failed, and recovered by the
//! reaper's redelivery sweep. Without the reservation, a flood at the account's request
//! ceiling takes the executions the scaler needs.

use ephemera_model::burst::{run, BurstOutcome, BurstSpec};
use ephemera_model::flood::Flood;
use ephemera_model::quotas::{Latencies, Quotas, Settings};
use ephemera_model::report::Pattern;
use ephemera_model::world::Assignment;
use serde_json::Value;
use std::time::Duration;

const JOBS: u32 = 100;

fn flooded(settings: Settings, flood: Flood) -> BurstOutcome {
    run(&BurstSpec {
        jobs: JOBS,
        settings,
        quotas: Quotas::default(),
        latencies: Latencies::default(),
        pattern: Pattern::Ephemera,
        webhooks_per_second: 500.0,
        seed: 7,
        assignment: Assignment::Oldest,
        flood: Some(flood),
    })
}

fn unreserved() -> Settings {
    Settings {
        webhook_reserved_concurrency: None,
        ..Settings::default_settings()
    }
}

fn throttles(row: &Value, what: &str) -> u64 {
    row["lambda_throttles"][what]
        .as_u64()
        .unwrap_or_else(|| panic!("no {what} in {row}"))
}

#[test]
fn a_flood_from_the_bursts_start_loses_no_job_and_never_throttles_the_scaler() {
    let flood = Flood {
        lasting: Duration::from_secs(120),
        ..Flood::standard()
    };
    let outcome = flooded(Settings::default_settings(), flood);
    let row = &outcome.row;
    assert_eq!(outcome.jobs_running, JOBS, "every job runs: {row}");
    assert_eq!(outcome.dead_lettered, 0, "{row}");
    assert_eq!(throttles(row, "scaler_throttled"), 0, "{row}");
    assert_eq!(throttles(row, "reaper_throttled"), 0, "{row}");
    // The flood did crowd genuine deliveries out, and the sweep brought them back.
    assert!(row["webhooks_refused"].as_u64() > Some(0), "{row}");
    assert!(throttles(row, "redeliveries") > 0, "{row}");
    assert!(row["lambda_throttles"]["flood"]["throttled"].as_u64() > Some(0));
}

#[test]
fn only_the_webhooks_reservation_keeps_a_flood_at_the_accounts_ceiling_from_the_scaler() {
    // From just after the jobs' `queued` deliveries, while the scaler has their batches
    // to run: 10,000 a second is 10 requests a second on each of the account's 1,000.
    let flood = Flood {
        per_second: 10_000.0,
        lasting: Duration::from_secs(60),
        starts_after: Duration::from_secs(1),
        ..Flood::standard()
    };
    let reserved = flooded(Settings::default_settings(), flood.clone());
    assert_eq!(
        throttles(&reserved.row, "scaler_throttled"),
        0,
        "{}",
        reserved.row
    );
    assert_eq!(reserved.jobs_running, JOBS, "{}", reserved.row);
    let unreserved = flooded(unreserved(), flood);
    assert!(
        throttles(&unreserved.row, "scaler_throttled") > 0,
        "with nothing reserved the flood takes the scaler's executions: {}",
        unreserved.row
    );
}
