//! Unit tests of the pure decisions: each rule's threshold, and what the sweeps leave alone.

use super::*;
use crate::handlers::test_support::{config, config_with, now, POOL};
use crate::model::HistoryEntry;

fn minutes(n: u64) -> Duration {
    Duration::from_secs(60 * n)
}

fn record(name: &str, status: InstanceStatus, runner_status: RunnerStatus) -> RunnerRecord {
    let mut record = RunnerRecord::new(name.to_owned(), POOL.to_owned(), now());
    record.status = status;
    record.runner_status = runner_status;
    record.instance_id = Some(format!("i-{name}"));
    record
}

fn alive(id: &str) -> Instance {
    Instance {
        id: id.to_owned(),
        state: InstanceState::Running,
        pool: None,
        launched_at: Some(now() - minutes(60)),
    }
}

#[test]
fn idle_since_is_the_latest_idle_entry_or_the_last_change() {
    let mut r = record("eph-linux-a", InstanceStatus::Running, RunnerStatus::Idle);
    r.updated_at = now() + minutes(9);
    assert_eq!(idle_since(&r), r.updated_at);
    r.note(HistoryEntry::runner_status(
        now() + minutes(2),
        RunnerStatus::Idle,
    ));
    r.note(HistoryEntry::runner_status(
        now() + minutes(5),
        RunnerStatus::Active,
    ));
    assert_eq!(idle_since(&r), now() + minutes(2));
}

#[test]
fn pending_runner_times_out_only_after_its_pool_bootstrap_timeout() {
    let config = config(5);
    let live = vec![record(
        "eph-linux-a",
        InstanceStatus::Creating,
        RunnerStatus::Pending,
    )];
    assert!(verdicts(&config, &live, None, &[], now() + minutes(19)).is_empty());
    let at_timeout = verdicts(&config, &live, None, &[], now() + minutes(20));
    assert_eq!(at_timeout[0].1, Verdict::Clean(Cleanup::BootstrapTimeout));
}

#[test]
fn instance_rules_wait_when_ec2_could_not_be_read() {
    let config = config(5);
    let live = vec![record(
        "eph-linux-a",
        InstanceStatus::Running,
        RunnerStatus::Idle,
    )];
    let later = now() + minutes(5);
    assert!(verdicts(&config, &live, None, &[], later).is_empty());
    let gone = verdicts(&config, &live, Some(&[]), &[], later);
    assert_eq!(gone[0].1, Verdict::Clean(Cleanup::InstanceGone));
    let there = [alive("i-eph-linux-a")];
    assert!(verdicts(&config, &live, Some(&there), &[], later).is_empty());
}

#[test]
fn active_runner_is_checked_only_when_due() {
    let config = config(5);
    let mut active = record("eph-linux-a", InstanceStatus::Running, RunnerStatus::Active);
    active.job_id = Some(1);
    active.next_attempt_at = now() + minutes(3);
    let there = [alive("i-eph-linux-a")];
    let live = [active];
    assert!(verdicts(&config, &live, Some(&there), &[], now() + minutes(2)).is_empty());
    let due = verdicts(&config, &live, Some(&there), &[], now() + minutes(3));
    assert_eq!(due[0].1, Verdict::CheckJob);
}

#[test]
fn creating_runner_that_came_online_is_recorded_running_once_its_lease_is_over() {
    let config = config(5);
    let live = vec![
        record(
            "eph-linux-a",
            InstanceStatus::Creating,
            RunnerStatus::Active,
        ),
        record(
            "eph-linux-b",
            InstanceStatus::Creating,
            RunnerStatus::Pending,
        ),
    ];
    let held = now() + CREATE_LEASE - Duration::from_secs(1);
    assert!(verdicts(&config, &live, Some(&[]), &[], held).is_empty());
    let over = verdicts(&config, &live, Some(&[]), &[], now() + CREATE_LEASE);
    let names: Vec<(&str, &Verdict)> = over.iter().map(|(r, v)| (r.name.as_str(), v)).collect();
    assert_eq!(names, [("eph-linux-a", &Verdict::Created)]);
}

#[test]
fn stuck_deleting_and_error_records_are_cleaned() {
    let config = config(5);
    let live = vec![
        record("eph-linux-a", InstanceStatus::Deleting, RunnerStatus::Idle),
        record("eph-linux-b", InstanceStatus::Error, RunnerStatus::Pending),
    ];
    let soon = verdicts(&config, &live, None, &[], now() + minutes(1));
    assert_eq!(soon.len(), 1, "error at once, deleting not yet: {soon:?}");
    let later = verdicts(&config, &live, None, &[], now() + minutes(6));
    let cleanups: Vec<&Verdict> = later.iter().map(|(_, v)| v).collect();
    assert_eq!(
        cleanups,
        [
            &Verdict::Clean(Cleanup::StuckDeleting),
            &Verdict::Clean(Cleanup::CreationFailed)
        ]
    );
}

#[test]
fn min_idle_keeps_the_most_recently_idle_static_runners() {
    let config = config_with(5, "    ephemeral: false\n    min_idle: 2\n");
    let live: Vec<RunnerRecord> = (0..4)
        .map(|i| {
            let mut r = record(
                &format!("eph-linux-{i}"),
                InstanceStatus::Running,
                RunnerStatus::Idle,
            );
            r.ephemeral = false;
            r.note(HistoryEntry::runner_status(
                now() + minutes(i),
                RunnerStatus::Idle,
            ));
            r
        })
        .collect();
    let there: Vec<Instance> = live
        .iter()
        .map(|r| alive(r.instance_id.as_deref().unwrap_or("")))
        .collect();
    let gone = verdicts(&config, &live, Some(&there), &[], now() + minutes(60));
    let names: Vec<&str> = gone.iter().map(|(r, _)| r.name.as_str()).collect();
    assert_eq!(names, ["eph-linux-1", "eph-linux-0"]);
}

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
        orphan_instances(&instances, &live, now() + minutes(5)),
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
