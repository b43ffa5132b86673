//! The limits a burst meets past the calls' own quotas: the runner group's cap (a
//! failure: registrations refused, their jobs dead-lettered), the organization's
//! registrations every 5 minutes (a wait), and the figures' sources.

use ephemera_model::bucket::BucketSpec;
use ephemera_model::burst::{run, BurstSpec};
use ephemera_model::quotas::{figures, Latencies, Quotas, Settings};
use ephemera_model::report::Pattern;
use ephemera_model::world::Assignment;

fn spec(jobs: u32, quotas: Quotas) -> BurstSpec {
    BurstSpec {
        jobs,
        settings: Settings::default_settings(),
        quotas,
        latencies: Latencies::default(),
        pattern: Pattern::Ephemera,
        webhooks_per_second: 500.0,
        seed: 7,
        assignment: Assignment::Oldest,
        flood: None,
    }
}

#[test]
fn registrations_past_the_runner_groups_cap_are_refused_and_their_jobs_dead_lettered() {
    let quotas = Quotas {
        github_runners_per_group: 50,
        ..Quotas::default()
    };
    let outcome = run(&spec(60, quotas));
    let row = &outcome.row;
    // 50 runners fill the group and run 50 jobs; the other 10 jobs' registrations are
    // refused on every try: each try fails its runner's creation (its instance is
    // launched first, and ended) and the message, and after maxReceiveCount (5) tries
    // the job is dead-lettered. No job finishes in a burst, so no place in the group
    // frees; the run ends once each of the 10 has been dead-lettered (the reaper then
    // sends each again while GitHub holds it queued).
    assert_eq!(outcome.jobs_running, 50, "{row}");
    assert_eq!(row["runners_in_group"], 50, "{row}");
    assert_eq!(
        row["dead_lettered_jobs"], 10,
        "only the refused jobs: {row}"
    );
    let refused = row["registrations_refused"].as_u64().unwrap();
    assert!(
        refused >= 10 * 5,
        "each refused job tried 5 times at least: {row}"
    );
    // Nothing past the cap was registered: every refusal is a generate-jitconfig call
    // that registered no runner.
    let registered = outcome.world.forge.runners().len() as u64;
    assert_eq!(registered, 50, "{row}");
}

#[test]
fn under_the_cap_nothing_is_refused() {
    let outcome = run(&spec(60, Quotas::default()));
    assert_eq!(outcome.row["registrations_refused"], 0);
    assert_eq!(outcome.dead_lettered, 0);
    assert_eq!(outcome.jobs_running, 60);
}

#[test]
fn the_organizations_registrations_make_a_burst_wait() {
    // A small organization bucket (20 at once, 1 a second) under the App's pace.
    let small = Quotas {
        github_org_registrations: Some(BucketSpec {
            capacity: 20.0,
            per_second: 1.0,
        }),
        ..Quotas::default()
    };
    let limited = run(&spec(60, small));
    let row = &limited.row;
    assert_eq!(limited.jobs_running, 60, "a wait, not a failure: {row}");
    assert_eq!(limited.dead_lettered, 0, "{row}");
    assert!(
        row["github_refusals"]["org_registrations"]
            .as_u64()
            .unwrap()
            > 0,
        "{row}"
    );
    // 40 registrations past the first 20, at 1 a second.
    assert!(row["all_registered_s"].as_f64().unwrap() >= 40.0, "{row}");
    let lifted = Quotas {
        github_org_registrations: None,
        ..Quotas::default()
    };
    let free = run(&spec(60, lifted));
    assert!(free.row["github_refusals"]
        .get("org_registrations")
        .is_none());
    assert!(free.row["all_registered_s"].as_f64() < row["all_registered_s"].as_f64());
}

#[test]
fn every_figure_the_model_runs_on_has_a_value_and_a_source() {
    let all = figures();
    assert!(!all.is_empty());
    for figure in all {
        assert!(!figure.figure.is_empty());
        assert!(!figure.value.trim().is_empty(), "{figure:?}");
        assert!(!figure.source.trim().is_empty(), "{figure:?}");
    }
}
