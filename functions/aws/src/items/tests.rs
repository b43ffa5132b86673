//! Round trips of records through items, and how bad items are reported.

use super::*;
use time::macros::datetime;

fn runner() -> RunnerRecord {
    let mut runner = RunnerRecord::new(
        "eph-linux-abc".into(),
        "linux".into(),
        datetime!(2025-03-01 12:00:00.123456789 UTC),
    );
    runner.instance_id = Some("i-123".into());
    runner.github_runner_id = Some(42);
    runner.job_id = Some(7);
    runner.job_queued_at = Some(datetime!(2025-03-01 11:59:58.5 UTC));
    runner.labels = vec!["self-hosted".into(), "linux".into()];
    runner.repo = Some("repo".into());
    runner.reason = Some("busy".into());
    runner.last_error = Some("boom".into());
    runner.attempts = 3;
    runner.next_attempt_at = datetime!(2025-03-01 12:00:05.250 UTC);
    runner.ttl = Some(datetime!(2025-03-08 12:00:00 UTC));
    runner.online_at = Some(datetime!(2025-03-01 12:00:40.5 UTC));
    runner.instance_launched_at = Some(datetime!(2025-03-01 12:00:01 UTC));
    runner.jit_read_at = Some(datetime!(2025-03-01 12:00:30 UTC));
    runner.host_runner = ephemera_core::model::HostRunner {
        runner_version: Some("2.337.0".into()),
        runner_image_version: Some("2.336.0".into()),
        runner_swap_ms: Some(4_200),
    };
    runner.instance_type = Some("m7i.large".into());
    runner.market = Some(Market::Spot);
    runner.interrupted_at = Some(datetime!(2025-03-01 12:10:00 UTC));
    runner.cost = Some(ephemera_core::prices::JobCost {
        seconds: 1800,
        usd_micros_per_hour: Some(36_100),
        usd_micros: Some(18_050),
        unpriced: None,
        repository: Some("octo/repo".into()),
        stopped_seconds: 0,
        volume_usd_micros: None,
    });
    runner
}

#[test]
fn runner_records_round_trip() {
    let record = runner();
    let item = runner_to_item(&record);
    assert_eq!(
        item[NEXT_ATTEMPT_AT],
        AttributeValue::N("1740830405250".into())
    );
    assert_eq!(runner_from_item(&item).expect("decodes"), record);
    let bare = RunnerRecord::new("n".into(), "p".into(), datetime!(2025-03-01 0:00 UTC));
    assert!(!runner_to_item(&bare).contains_key(TTL));
    assert_eq!(
        runner_from_item(&runner_to_item(&bare)).expect("decodes"),
        bare
    );
}

#[test]
fn an_interruption_is_an_attribute_and_its_absence_reads_as_none() {
    let record = runner();
    let item = runner_to_item(&record);
    assert_eq!(item[INTERRUPTED_AT], s("2025-03-01T12:10:00Z"));
    let never = RunnerRecord {
        interrupted_at: None,
        ..record
    };
    let item = runner_to_item(&never);
    assert!(!item.contains_key(INTERRUPTED_AT));
    assert_eq!(
        runner_from_item(&item).expect("decodes").interrupted_at,
        None
    );
}

#[test]
fn an_item_written_before_the_attribute_reads_its_interruption_from_the_warnings_note() {
    let mut old = runner();
    old.interrupted_at = None;
    old.note(HistoryEntry {
        at: datetime!(2025-03-01 12:20:00 UTC),
        status: None,
        runner_status: None,
        reason: Some("job 7 handed over".into()),
    });
    for minute in [21, 25] {
        old.note(HistoryEntry {
            at: datetime!(2025-03-01 12:00:00 UTC) + time::Duration::minutes(minute),
            status: None,
            runner_status: None,
            reason: Some(format!(
                "{INTERRUPTION_NOTE}: EC2 will terminate the instance (i-123 at 2025-03-01T12:{minute}:00Z)"
            )),
        });
    }
    let item = runner_to_item(&old);
    assert!(
        !item.contains_key(INTERRUPTED_AT),
        "as an earlier build wrote it"
    );
    let read = runner_from_item(&item).expect("decodes");
    assert_eq!(
        read.interrupted_at,
        Some(datetime!(2025-03-01 12:21:00 UTC)),
        "the first warning's time"
    );
    // Written back, it carries the attribute: the note is read no more.
    assert_eq!(
        runner_to_item(&read)[INTERRUPTED_AT],
        s("2025-03-01T12:21:00Z")
    );
}

#[test]
fn job_records_round_trip() {
    let job = JobRecord {
        job_id: 9,
        status: JobStatus::InProgress,
        pool: "linux".into(),
        owner: "octo".into(),
        repo: "hello".into(),
        run_id: 3,
        installation_id: Some(11),
        labels: vec!["self-hosted".into()],
        runner_name: Some("eph-linux-x".into()),
        launched_runner: Some("eph-linux-x".into()),
        received_at: datetime!(2025-03-01 12:00:00 UTC),
        updated_at: datetime!(2025-03-01 12:01:00 UTC),
        github: Default::default(),
        claimed_at: None,
    };
    assert_eq!(job_from_item(&job_to_item(&job)).expect("decodes"), job);
    let stamped = JobRecord {
        github: GitHubTimes {
            created_at: Some(datetime!(2025-03-01 11:59:59 UTC)),
            started_at: Some(datetime!(2025-03-01 12:00:30.25 UTC)),
            completed_at: Some(datetime!(2025-03-01 12:05:00 UTC)),
        },
        claimed_at: Some(datetime!(2025-03-01 12:00:01 UTC)),
        ..job
    };
    let item = job_to_item(&stamped);
    assert!(item.contains_key(GITHUB_CREATED_AT) && !item.contains_key(CREATED_AT));
    assert_eq!(job_from_item(&item).expect("decodes"), stamped);
}

#[test]
fn bad_items_are_corrupt_and_named() {
    let mut item = runner_to_item(&runner());
    item.insert(STATUS.into(), s("runnning"));
    match runner_from_item(&item) {
        Err(StoreError::Corrupt { key, message }) => {
            assert_eq!(key, "RUNNER#eph-linux-abc");
            assert!(message.contains("runnning"), "{message}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(runner_from_item(&job_to_item(&JobRecord {
        job_id: 1,
        status: JobStatus::Queued,
        pool: "p".into(),
        owner: String::new(),
        repo: String::new(),
        run_id: 1,
        installation_id: None,
        labels: vec![],
        runner_name: None,
        launched_runner: None,
        received_at: datetime!(2025-03-01 0:00 UTC),
        updated_at: datetime!(2025-03-01 0:00 UTC),
        github: Default::default(),
        claimed_at: None,
    }))
    .is_err());
}
