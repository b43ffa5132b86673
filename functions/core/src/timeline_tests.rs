//! The timeline's stamps, gaps and order, from records built by hand.

use super::*;
use crate::model::{GitHubTimes, HistoryEntry, HostRunner, JobStatus};
use time::macros::datetime;

const T0: OffsetDateTime = datetime!(2026-11-22 10:00:00 UTC);

fn secs(s: i64) -> OffsetDateTime {
    T0 + Duration::seconds(s)
}

fn job() -> JobRecord {
    JobRecord {
        job_id: 7,
        status: JobStatus::Completed,
        pool: "linux".into(),
        owner: "o".into(),
        repo: "r".into(),
        run_id: 8,
        installation_id: None,
        labels: vec!["linux".into()],
        runner_name: Some("eph-linux-a".into()),
        launched_runner: Some("eph-linux-a".into()),
        received_at: secs(1),
        updated_at: secs(90),
        github: GitHubTimes {
            created_at: Some(T0),
            started_at: Some(secs(40)),
            completed_at: Some(secs(80)),
        },
        claimed_at: Some(secs(2)),
    }
}

fn runner() -> RunnerRecord {
    let mut runner = RunnerRecord::new("eph-linux-a".into(), "linux".into(), secs(2));
    for (at, status) in [
        (3, InstanceStatus::Creating),
        (5, InstanceStatus::Running),
        (85, InstanceStatus::PendingDelete),
        (86, InstanceStatus::Deleting),
        (88, InstanceStatus::Deleted),
    ] {
        runner.note(HistoryEntry::status(secs(at), status, None));
    }
    runner.instance_launched_at = Some(secs(4));
    runner.jit_read_at = Some(secs(30));
    runner.online_at = Some(secs(38));
    runner
}

#[test]
fn every_stage_of_a_finished_job_is_stamped_with_its_gap() {
    let timeline = Timeline::of(&job(), Some(&runner()));
    assert!(timeline.missing().is_empty(), "{:?}", timeline.missing());
    assert!(timeline.out_of_order().is_empty());
    assert!(timeline.own_runner);
    let gaps: Vec<(Stage, Option<i64>)> = timeline
        .stamps
        .iter()
        .map(|s| (s.stage, s.gap.map(|g| g.whole_seconds())))
        .collect();
    assert_eq!(
        gaps,
        [
            (Stage::Queued, None),
            (Stage::Received, Some(1)),
            (Stage::Claimed, Some(1)),
            (Stage::LaunchRequested, Some(1)),
            (Stage::InstanceLaunched, Some(1)),
            (Stage::JitStored, Some(1)),
            (Stage::JitRead, Some(25)),
            (Stage::Online, Some(8)),
            (Stage::Started, Some(2)),
            (Stage::Completed, Some(40)),
            (Stage::Terminated, Some(8)),
        ]
    );
}

#[test]
fn a_runner_that_swapped_shows_the_update_before_its_jit_read() {
    let mut runner = runner();
    runner.host_runner = HostRunner {
        runner_version: Some("2.337.0".into()),
        runner_image_version: Some("2.336.0".into()),
        runner_swap_ms: Some(6_000),
    };
    let timeline = Timeline::of(&job(), Some(&runner));
    assert_eq!(timeline.at(Stage::RunnerUpdate), Some(secs(24)));
    assert!(timeline.missing().is_empty(), "{:?}", timeline.missing());
    assert!(timeline.out_of_order().is_empty());
    let gap = |stage| {
        let stamp = timeline.stamps.iter().find(|s| s.stage == stage);
        stamp.and_then(|s| s.gap).map(|g| g.whole_seconds())
    };
    assert_eq!(
        gap(Stage::RunnerUpdate),
        Some(19),
        "since the JIT config was stored"
    );
    assert_eq!(gap(Stage::JitRead), Some(6), "the swap");
    let current = runner_with_report(Some("2.337.0"), Some("2.337.0"), None);
    let shown = Timeline::of(&job(), Some(&current));
    assert!(shown.stamps.iter().all(|s| s.stage != Stage::RunnerUpdate));
    assert_eq!(shown.stamps.len(), Stage::ALL.len() - 1);
}

fn runner_with_report(ran: Option<&str>, baked: Option<&str>, swap: Option<u64>) -> RunnerRecord {
    let mut runner = runner();
    runner.host_runner = HostRunner {
        runner_version: ran.map(Into::into),
        runner_image_version: baked.map(Into::into),
        runner_swap_ms: swap,
    };
    runner
}

#[test]
fn an_image_is_behind_only_when_it_baked_another_version_than_ran() {
    let behind = |ran, baked| {
        runner_with_report(ran, baked, None)
            .host_runner
            .image_behind()
    };
    assert_eq!(behind(Some("2.337.0"), Some("2.336.0")), Some(true));
    assert_eq!(behind(Some("2.337.0"), Some("2.337.0")), Some(false));
    assert_eq!(behind(Some("2.337.0"), None), None, "a stock image");
    assert_eq!(
        behind(None, Some("2.336.0")),
        None,
        "a host that said nothing"
    );
}

#[test]
fn a_missing_stage_is_bridged_by_the_gap_from_the_last_known_one() {
    let mut job = job();
    job.claimed_at = None;
    let timeline = Timeline::of(&job, Some(&runner()));
    assert_eq!(timeline.missing(), [Stage::Claimed]);
    let launch = timeline.stamps[3];
    assert_eq!(launch.stage, Stage::LaunchRequested);
    assert_eq!(launch.gap, Some(Duration::seconds(2)), "since received");
}

#[test]
fn a_waiting_job_has_only_its_own_stages_and_waits_until_now() {
    let mut job = job();
    job.status = JobStatus::Queued;
    job.github = GitHubTimes {
        created_at: Some(T0),
        ..GitHubTimes::default()
    };
    job.claimed_at = None;
    let timeline = Timeline::of(&job, None);
    assert_eq!(timeline.missing().len(), 9);
    assert!(!timeline.own_runner);
    assert_eq!(Timeline::wait(&job, secs(30)), Some(Duration::seconds(30)));
}

#[test]
fn the_wait_is_queued_to_started_and_falls_back_to_the_webhook_receipt() {
    assert_eq!(
        Timeline::wait(&job(), secs(1000)),
        Some(Duration::seconds(40))
    );
    let mut unknown_queue = job();
    unknown_queue.github.created_at = None;
    assert_eq!(
        Timeline::wait(&unknown_queue, secs(1000)),
        Some(Duration::seconds(39))
    );
    let mut never_started = job();
    never_started.github.started_at = None;
    assert_eq!(Timeline::wait(&never_started, secs(1000)), None);
}

#[test]
fn stamps_against_the_order_are_reported() {
    let mut job = job();
    job.github.completed_at = Some(secs(30));
    let timeline = Timeline::of(&job, Some(&runner()));
    assert_eq!(
        timeline.out_of_order(),
        [(Stage::Started, Stage::Completed)]
    );
}

#[test]
fn a_whole_second_clock_is_ordered_to_the_second() {
    let half = Duration::milliseconds(500);
    let mut runner = runner();
    // EC2 says 10:00:03 for a launch at 10:00:03.9, requested at 10:00:03.5.
    runner.history[1].at = secs(3) + half;
    runner.instance_launched_at = Some(secs(3));
    let timeline = Timeline::of(&job(), Some(&runner));
    assert!(timeline.out_of_order().is_empty(), "{timeline:?}");
    runner.instance_launched_at = Some(secs(2));
    runner.jit_read_at = Some(secs(1));
    assert_eq!(
        Timeline::of(&job(), Some(&runner)).out_of_order(),
        [
            (Stage::LaunchRequested, Stage::InstanceLaunched),
            (Stage::InstanceLaunched, Stage::JitRead)
        ]
    );
    let mut late_read = self::runner();
    late_read.jit_read_at = Some(secs(41));
    assert_eq!(
        Timeline::of(&job(), Some(&late_read)).out_of_order(),
        [(Stage::JitRead, Stage::Started)]
    );
}

#[test]
fn a_gap_to_or_from_a_whole_second_clock_is_in_whole_seconds() {
    let tenths = Duration::milliseconds(300);
    let mut runner = runner();
    runner.history[1].at = secs(3) + tenths; // launch requested at 10:00:03.3
    runner.instance_launched_at = Some(secs(3)); // EC2: launched at 10:00:03.x
    let timeline = Timeline::of(&job(), Some(&runner));
    let gap = |stage| timeline.stamps.iter().find(|s| s.stage == stage)?.gap;
    assert_eq!(
        gap(Stage::InstanceLaunched),
        Some(Duration::ZERO),
        "not -0.3 s"
    );
    assert_eq!(gap(Stage::JitStored), Some(Duration::seconds(2)));
    assert_eq!(
        gap(Stage::LaunchRequested),
        Some(Duration::seconds(1) + tenths)
    );
}

#[test]
fn a_runner_launched_for_another_job_is_not_ordered_against_this_claim() {
    let mut job = job();
    job.claimed_at = Some(secs(4));
    job.launched_runner = Some("eph-linux-other".into());
    let timeline = Timeline::of(&job, Some(&runner()));
    assert!(!timeline.own_runner);
    assert!(timeline.out_of_order().is_empty());
    job.launched_runner = Some("eph-linux-a".into());
    assert_eq!(
        Timeline::of(&job, Some(&runner())).out_of_order(),
        [(Stage::Claimed, Stage::LaunchRequested)]
    );
}

#[test]
fn stage_names_are_distinct_snake_case() {
    let mut names: Vec<&str> = Stage::ALL.iter().map(|s| s.as_str()).collect();
    assert!(names
        .iter()
        .all(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '_')));
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), Stage::ALL.len());
}
