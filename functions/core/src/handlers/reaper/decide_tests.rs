//! Unit tests of the pure decisions: each rule's threshold, and what the sweeps leave alone.

use super::*;
use crate::handlers::test_support::{config, config_with, now, POOL};
use crate::model::HistoryEntry;

pub(crate) fn minutes(n: u64) -> Duration {
    Duration::from_secs(60 * n)
}

pub(crate) fn record(
    name: &str,
    status: InstanceStatus,
    runner_status: RunnerStatus,
) -> RunnerRecord {
    let mut record = RunnerRecord::new(name.to_owned(), POOL.to_owned(), now());
    record.status = status;
    record.runner_status = runner_status;
    record.instance_id = Some(format!("i-{name}"));
    record
}

pub(crate) fn alive(id: &str) -> Instance {
    Instance {
        id: id.to_owned(),
        state: InstanceState::Running,
        pool: None,
        launched_at: Some(now() - minutes(60)),
        image_id: None,
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
    // A runner created for a job (a stalled creation is `creation_stalled`'s, below).
    let mut for_a_job = record(
        "eph-linux-a",
        InstanceStatus::Running,
        RunnerStatus::Pending,
    );
    for_a_job.job_id = Some(1);
    let live = vec![for_a_job];
    let alive = [alive("i-eph-linux-a")];
    let at = |m| verdicts(&config, &live, Some(&alive), &[], now() + minutes(m));
    assert!(at(19).is_empty());
    assert_eq!(at(20)[0].1, Verdict::Clean(Cleanup::BootstrapTimeout));
}

#[test]
fn the_bootstrap_timeout_starts_when_the_jit_config_was_stored() {
    let config = config(5);
    // Claimed at `now`, its JIT config stored 30 minutes later (the registration pace
    // and EC2's launch bucket held it back): its instance had no config to come online
    // with before then.
    let mut late = record(
        "eph-linux-a",
        InstanceStatus::Running,
        RunnerStatus::Pending,
    );
    late.job_id = Some(1);
    late.note(HistoryEntry::status(
        now() + minutes(30),
        InstanceStatus::Running,
        None,
    ));
    let live = vec![late];
    let alive = [alive("i-eph-linux-a")];
    let at = |m| verdicts(&config, &live, Some(&alive), &[], now() + minutes(m));
    assert!(at(40).is_empty(), "{:?}", at(40));
    assert_eq!(at(50)[0].1, Verdict::Clean(Cleanup::BootstrapTimeout));
}

#[test]
fn a_creation_for_a_job_stalls_one_lease_after_its_last_step() {
    let config = config(5);
    for status in [InstanceStatus::PendingCreate, InstanceStatus::Creating] {
        let mut for_a_job = record("eph-linux-a", status, RunnerStatus::Pending);
        for_a_job.job_id = Some(1);
        let live = vec![for_a_job];
        let within = now() + CREATE_LEASE - Duration::from_secs(1);
        assert!(verdicts(&config, &live, None, &[], within).is_empty());
        let past = verdicts(&config, &live, None, &[], now() + CREATE_LEASE);
        assert_eq!(past[0].1, Verdict::StalledCreation, "{status}");
    }
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
    let mut names: Vec<&str> = gone.iter().map(|(r, _)| r.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["eph-linux-0", "eph-linux-1"]);
}

pub(crate) fn idle_for(name: &str, minutes_ago: u64, job_id: Option<u64>) -> RunnerRecord {
    let mut r = record(name, InstanceStatus::Running, RunnerStatus::Idle);
    r.job_id = job_id;
    r.note(HistoryEntry::runner_status(
        now() - minutes(minutes_ago),
        RunnerStatus::Idle,
    ));
    r
}

pub(crate) fn queued(job_id: u64) -> JobRecord {
    JobRecord {
        job_id,
        status: crate::model::JobStatus::Queued,
        pool: "other".to_owned(),
        owner: "o".to_owned(),
        repo: "r".to_owned(),
        run_id: 1,
        installation_id: None,
        labels: Vec::new(),
        runner_name: None,
        launched_runner: None,
        received_at: now(),
        updated_at: now(),
        github: Default::default(),
        claimed_at: None,
    }
}

#[test]
fn rule_11_spares_the_min_idle_most_recently_idle_unbound_runners() {
    let config = config_with(5, "    min_idle: 1\n");
    let live = vec![
        idle_for("eph-linux-old", 40, None),
        idle_for("eph-linux-new", 20, Some(3)),
    ];
    let gone = verdicts(&config, &live, None, &[], now());
    let names: Vec<&str> = gone.iter().map(|(r, _)| r.name.as_str()).collect();
    assert_eq!(
        names,
        ["eph-linux-old"],
        "a spare whose job ended is warm too"
    );
    assert_eq!(gone[0].1, Verdict::Clean(Cleanup::IdleNoWork));
    let without_min_idle = verdicts(&config_with(5, ""), &live, None, &[], now());
    assert_eq!(without_min_idle.len(), 2);
}

#[test]
fn job_less_creation_stalls_after_warm_stall() {
    let config = config(5);
    let live = vec![record(
        "eph-linux-w",
        InstanceStatus::PendingCreate,
        RunnerStatus::Pending,
    )];
    let before = WARM_STALL - minutes(1);
    assert!(verdicts(&config, &live, None, &[], now() + before).is_empty());
    let stalled = verdicts(&config, &live, None, &[], now() + WARM_STALL);
    assert_eq!(stalled[0].1, Verdict::Clean(Cleanup::WarmStalled));
}

fn queued_job(owner: &str, repo: &str) -> JobRecord {
    JobRecord {
        job_id: 11,
        status: crate::model::JobStatus::Queued,
        pool: POOL.to_owned(),
        owner: owner.into(),
        repo: repo.into(),
        run_id: 111,
        installation_id: Some(5),
        labels: vec!["self-hosted".into(), "linux".into()],
        runner_name: None,
        launched_runner: None,
        received_at: now(),
        updated_at: now(),
        github: Default::default(),
        claimed_at: None,
    }
}

#[test]
fn idle_ephemeral_runner_is_kept_only_for_a_queued_job_it_could_take() {
    let config = config(5);
    let mut org_runner = record("eph-linux-org", InstanceStatus::Running, RunnerStatus::Idle);
    org_runner.owner = "octo-org".into();
    let mut repo_runner = org_runner.clone();
    repo_runner.name = "eph-linux-repo".into();
    repo_runner.repo = Some("app".into());
    let live = vec![org_runner, repo_runner];
    let later = now() + minutes(60);
    let deleted = |jobs: &[JobRecord]| -> Vec<String> {
        verdicts(&config, &live, None, jobs, later)
            .into_iter()
            .filter(|(_, v)| *v == Verdict::Clean(Cleanup::IdleNoWork))
            .map(|(r, _)| r.name)
            .collect()
    };
    // A job of another organization keeps neither.
    assert_eq!(
        deleted(&[queued_job("other-org", "app")]),
        ["eph-linux-org", "eph-linux-repo"]
    );
    // Another repository of the organization keeps the organization's runner only.
    assert_eq!(
        deleted(&[queued_job("octo-org", "lib")]),
        ["eph-linux-repo"]
    );
    // Its own repository keeps both; GitHub's names are case-insensitive.
    assert!(deleted(&[queued_job("Octo-Org", "App")]).is_empty());
    assert_eq!(deleted(&[]), ["eph-linux-org", "eph-linux-repo"]);
}

#[test]
fn idle_runner_is_not_kept_for_a_sized_job_its_labels_do_not_cover() {
    let config = config(5);
    let mut idle = record(
        "eph-linux-plain",
        InstanceStatus::Running,
        RunnerStatus::Idle,
    );
    idle.owner = "octo-org".into();
    idle.labels = vec!["self-hosted".into(), "linux".into()];
    let mut sized = queued_job("octo-org", "app");
    sized.labels = vec!["self-hosted".into(), "ephemera.cpu=8".into()];
    let verdict = verdicts(&config, &[idle], None, &[sized], now() + minutes(60));
    assert_eq!(
        verdict[0].1,
        Verdict::Clean(Cleanup::IdleNoWork),
        "{verdict:?}"
    );
}
