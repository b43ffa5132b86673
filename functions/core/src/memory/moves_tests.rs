//! The memory store against the lifecycle's runner-status and claim tables: every move
//! the tables allow is made, every other is refused and writes nothing, and a hand-over
//! is all or nothing.

use super::*;
use crate::lifecycle::RunnerStatus;
use time::macros::datetime;

const START: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);
const LATER: OffsetDateTime = datetime!(2026-01-01 00:05 UTC);

fn runner(name: &str, job_id: u64, runner_status: RunnerStatus) -> RunnerRecord {
    let mut record = RunnerRecord::new(name.to_owned(), "linux".to_owned(), START);
    record.job_id = Some(job_id);
    record.runner_status = runner_status;
    record
}

fn job(job_id: u64, status: JobStatus, runner_name: Option<&str>) -> JobRecord {
    JobRecord {
        status,
        runner_name: runner_name.map(str::to_owned),
        launched_runner: runner_name.map(str::to_owned),
        ..super::tests::job(job_id)
    }
}

fn set_status(to: RunnerStatus, guarded: bool) -> RunnerUpdate {
    RunnerUpdate {
        runner_status: Some(to),
        unchanged_since: guarded.then_some(START),
        ..RunnerUpdate::default()
    }
}

#[tokio::test]
async fn store_allows_exactly_the_runner_status_moves_the_table_allows() {
    for from in RunnerStatus::ALL {
        for to in RunnerStatus::ALL {
            for guarded in [false, true] {
                let store = MemoryStore::new();
                store.put_runner(runner("r", 1, from));
                let result = store
                    .update_runner("r", &set_status(to, guarded), LATER)
                    .await;
                if from.can_move_to(to) {
                    assert_eq!(result.expect("allowed").runner_status, to, "{from} -> {to}");
                    continue;
                }
                match result {
                    Err(StoreError::Conflict(_)) if guarded => {}
                    Err(StoreError::NotFound(_)) if !guarded => {}
                    other => panic!("{from} -> {to} must be refused: {other:?}"),
                }
                let kept = store.runner("r").expect("record");
                assert_eq!((kept.runner_status, kept.updated_at), (from, START));
            }
        }
    }
}

#[tokio::test]
async fn a_claim_of_a_claimed_job_writes_no_second_runner() {
    let store = MemoryStore::new();
    store.put_job(job(1, JobStatus::Queued, Some("a")));
    let second = runner("b", 1, RunnerStatus::Pending);
    let claim = store.claim_job(1, &second, 5).await.expect("answered");
    assert_eq!(
        claim,
        Claim::AlreadyClaimed {
            runner_name: "a".to_owned()
        }
    );
    assert!(store.runner("b").is_none());
    assert_eq!(store.slots_used("linux"), 0);
}

#[tokio::test]
async fn a_hand_over_or_a_drop_of_a_job_not_claimed_by_the_taker_is_refused() {
    let bind = |seen| RunnerUpdate {
        job_id: Some(2),
        unchanged_since: Some(seen),
        ..RunnerUpdate::default()
    };
    for (state, record) in [
        ("unclaimed", job(1, JobStatus::Queued, None)),
        ("bound", job(1, JobStatus::InProgress, Some("a"))),
        ("claimed by another", job(1, JobStatus::Queued, Some("c"))),
    ] {
        for to in [Some(("b".to_owned(), bind(START))), None] {
            let store = MemoryStore::new();
            store.put_job(record.clone());
            store.put_runner(runner("a", 1, RunnerStatus::Pending));
            store.put_runner(runner("b", 2, RunnerStatus::Pending));
            let hand_over = ClaimHandOver {
                job_id: 1,
                taker: ("a".to_owned(), bind(START)),
                to,
            };
            let moved = store.hand_over_claim(&hand_over, LATER).await;
            assert!(!moved.expect("answered"), "{state}: refused");
            assert_eq!(store.job(1), Some(record.clone()), "{state}: job as it was");
            assert_eq!(store.runner("a").and_then(|r| r.job_id), Some(1), "{state}");
            assert_eq!(store.runner("b").and_then(|r| r.job_id), Some(2), "{state}");
        }
    }
    // Nor is a claim dropped off a job past `queued`.
    let store = MemoryStore::new();
    store.put_job(job(1, JobStatus::InProgress, Some("a")));
    store.unclaim_job(1, "a").await.expect("answered");
    assert_eq!(
        store.job(1).and_then(|j| j.runner_name).as_deref(),
        Some("a")
    );
}

#[tokio::test]
async fn a_hand_over_with_one_record_changed_writes_nothing() {
    let store = MemoryStore::new();
    store.put_job(job(1, JobStatus::Queued, Some("a")));
    store.put_runner(runner("a", 1, RunnerStatus::Pending));
    store.put_runner(runner("b", 2, RunnerStatus::Pending));
    let taker = RunnerUpdate {
        job_id: Some(2),
        runner_status: Some(RunnerStatus::Active),
        unchanged_since: Some(START),
        ..RunnerUpdate::default()
    };
    let given = RunnerUpdate {
        job_id: Some(1),
        // Read before another writer touched b.
        unchanged_since: Some(START - time::Duration::seconds(1)),
        ..RunnerUpdate::default()
    };
    let hand_over = ClaimHandOver {
        job_id: 1,
        taker: ("a".to_owned(), taker),
        to: Some(("b".to_owned(), given)),
    };
    let result = store.hand_over_claim(&hand_over, LATER).await;
    assert!(matches!(result, Err(StoreError::Conflict(_))), "{result:?}");
    assert_eq!(
        store.job(1).and_then(|j| j.runner_name).as_deref(),
        Some("a")
    );
    let a = store.runner("a").expect("a");
    assert_eq!(
        (a.job_id, a.runner_status),
        (Some(1), RunnerStatus::Pending)
    );
    assert_eq!(store.runner("b").and_then(|r| r.job_id), Some(2));
}
