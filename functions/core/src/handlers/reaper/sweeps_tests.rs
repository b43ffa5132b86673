//! The sweeps' decisions: orphan instances and GitHub runners, the slots held, the warm
//! shortfall.

use super::*;
use crate::handlers::reaper::decide::tests::{alive, idle_for, minutes, queued, record};
use crate::handlers::test_support::{config, config_with, now, POOL};

#[test]
fn orphan_instances_exclude_claimed_young_and_dying_ones() {
    let live = vec![record(
        "eph-linux-a",
        InstanceStatus::Running,
        RunnerStatus::Idle,
    )];
    let mut young = alive("i-young");
    young.launched_at = Some(now());
    let mut dying = alive("i-dying");
    dying.state = InstanceState::ShuttingDown;
    let mut unknown_age = alive("i-unknown-age");
    unknown_age.launched_at = None;
    let instances = [
        alive("i-eph-linux-a"),
        alive("i-lost"),
        young,
        dying,
        unknown_age,
    ];
    assert_eq!(
        orphan_instances(&instances, &live, now() + minutes(5), minutes(10)),
        ["i-lost"]
    );
}

#[test]
fn orphan_runners_are_ours_offline_and_unnamed_by_any_record() {
    let live = vec![record(
        "eph-linux-live",
        InstanceStatus::Running,
        RunnerStatus::Idle,
    )];
    let runner = |name: &str, online| ForgeRunner {
        id: 1,
        name: name.to_owned(),
        online,
        busy: false,
    };
    let listed = [
        runner("eph-linux-live", false),
        runner("eph-linux-gone", false),
        runner("eph-linux-up", true),
        runner("theirs-linux-x", false),
    ];
    let orphans: Vec<&str> = orphan_runners("eph", &listed, &live)
        .into_iter()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(orphans, ["eph-linux-gone"]);
}

#[test]
fn slots_held_counts_live_records_holding_a_slot_per_configured_pool() {
    let config = config(5);
    let mut released = record("eph-linux-b", InstanceStatus::Error, RunnerStatus::Pending);
    released.slot_held = false;
    let live = vec![
        record("eph-linux-a", InstanceStatus::Running, RunnerStatus::Idle),
        released,
    ];
    assert_eq!(
        slots_held(&config, &live),
        BTreeMap::from([(POOL.to_owned(), 1)])
    );
    assert_eq!(
        slots_held(&config, &[]),
        BTreeMap::from([(POOL.to_owned(), 0)])
    );
}

#[test]
fn warm_shortfall_counts_unbound_runners_idle_or_on_their_way() {
    let config = config_with(9, "    min_idle: 6\n");
    let mut creating = record(
        "eph-linux-c",
        InstanceStatus::Creating,
        RunnerStatus::Pending,
    );
    creating.job_id = None;
    let mut booting = record(
        "eph-linux-b",
        InstanceStatus::Running,
        RunnerStatus::Pending,
    );
    booting.job_id = None;
    let mut busy = record(
        "eph-linux-busy",
        InstanceStatus::Running,
        RunnerStatus::Active,
    );
    busy.job_id = Some(1);
    let live = vec![
        idle_for("eph-linux-free", 5, None),
        idle_for("eph-linux-ended", 5, Some(2)),
        idle_for("eph-linux-spoken-for", 5, Some(4)),
        idle_for("eph-linux-leaving", 5, None),
        creating,
        booting,
        busy,
    ];
    let leaving = HashSet::from(["eph-linux-leaving"]);
    let short = warm_shortfall(&config, &live, &[queued(4)], &leaving, now());
    assert_eq!(
        short,
        [WarmShortfall {
            pool: POOL.to_owned(),
            ready: 4,
            missing: 2
        }]
    );
    assert!(warm_shortfall(&config_with(9, ""), &live, &[], &leaving, now()).is_empty());
}

#[test]
fn warm_shortfall_follows_the_min_idle_schedule() {
    // now() is a Sunday, 10:00 UTC.
    let weekdays = config_with(
        9,
        "    min_idle: 2\n    min_idle_schedule: { days: [mon, tue, wed, thu, fri], from: \"08:00\", to: \"18:00\" }\n",
    );
    assert!(warm_shortfall(&weekdays, &[], &[], &HashSet::new(), now()).is_empty());
    let sunday_morning = config_with(
        9,
        "    min_idle: 2\n    min_idle_schedule: { days: [sun], from: \"09:00\", to: \"12:00\" }\n",
    );
    let short = warm_shortfall(&sunday_morning, &[], &[], &HashSet::new(), now());
    assert_eq!(short.len(), 1);
    assert_eq!(short[0].missing, 2);
}
