use super::*;
use time::macros::datetime;
use time::Duration;
use InstanceStatus::*;

const START: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

fn minute(n: i64) -> OffsetDateTime {
    START + Duration::minutes(n)
}

fn runner(name: &str, status: InstanceStatus) -> RunnerRecord {
    let mut record = RunnerRecord::new(name.to_owned(), "linux".to_owned(), START);
    record.status = status;
    record
}

/// A queued job of the `linux` pool, claimed by no runner.
pub(super) fn job(job_id: u64) -> JobRecord {
    JobRecord {
        job_id,
        status: JobStatus::Queued,
        pool: "linux".to_owned(),
        owner: "acme".to_owned(),
        repo: "app".to_owned(),
        run_id: 1,
        installation_id: Some(9),
        labels: vec!["linux".to_owned()],
        runner_name: None,
        launched_runner: None,
        received_at: START,
        updated_at: START,
        github: Default::default(),
        claimed_at: None,
    }
}

fn store_with_jobs(ids: impl IntoIterator<Item = u64>) -> MemoryStore {
    let store = MemoryStore::new();
    for id in ids {
        store.put_job(job(id));
    }
    store
}

#[tokio::test]
async fn store_allows_exactly_the_transitions_the_table_allows() {
    for from in InstanceStatus::ALL {
        for to in InstanceStatus::ALL {
            for expect in [None, Some(from)] {
                let store = MemoryStore::new();
                store.put_runner(runner("r", from));
                let mut transition = Transition::new(from, to, minute(1));
                transition.expect = expect;
                let result = store.transition("r", &transition).await;
                if from.can_move_to(to) {
                    assert_eq!(result.expect("allowed").status, to, "{from} -> {to}");
                } else {
                    let actual = from.as_str().to_owned();
                    assert!(
                        matches!(result, Err(StoreError::TransitionRefused { to: t, actual: a, .. }) if t == to && a == actual),
                        "{from} -> {to} must be refused"
                    );
                    assert_eq!(store.runner("r").expect("kept").status, from);
                }
            }
        }
    }
}

#[tokio::test]
async fn transition_expecting_another_status_is_refused() {
    let store = MemoryStore::new();
    store.put_runner(runner("r", Running));
    let transition = Transition::new(Creating, PendingDelete, minute(1));
    let err = store
        .transition("r", &transition)
        .await
        .expect_err("refused");
    assert!(matches!(err, StoreError::TransitionRefused { actual, .. } if actual == "running"));
    assert_eq!(store.runner("r").expect("kept").status, Running);
}

#[tokio::test]
async fn transition_of_a_missing_record_is_refused_as_missing() {
    let store = MemoryStore::new();
    let transition = Transition::new(PendingDelete, Deleting, minute(1));
    let err = store
        .transition("ghost", &transition)
        .await
        .expect_err("refused");
    assert!(
        matches!(err, StoreError::TransitionRefused { name, actual, .. } if name == "ghost" && actual == "missing")
    );
}

#[tokio::test]
async fn transition_writes_what_it_carries_and_keeps_what_it_does_not() {
    let store = MemoryStore::new();
    let mut record = runner("r", Deleting);
    record.attempts = 2;
    record.last_error = Some("old".to_owned());
    store.put_runner(record);
    let mut back = Transition::new(Deleting, PendingDelete, minute(1)).because("retrying");
    back.attempts = Some(3);
    back.error = Some("boom".to_owned());
    back.next_attempt_at = minute(5);
    let moved = store.transition("r", &back).await.expect("allowed");
    assert_eq!(
        (moved.attempts, moved.last_error.as_deref()),
        (3, Some("boom"))
    );
    assert_eq!(
        (moved.updated_at, moved.next_attempt_at),
        (minute(1), minute(5))
    );
    assert_eq!(moved.reason.as_deref(), Some("retrying"));

    let again = store
        .transition("r", &Transition::new(PendingDelete, Deleting, minute(6)))
        .await
        .expect("allowed");
    assert_eq!(
        (again.attempts, again.last_error.as_deref()),
        (3, Some("boom"))
    );
    assert_eq!(
        (again.reason.as_deref(), again.ttl),
        (Some("retrying"), None)
    );
    let steps: Vec<_> = again.history.iter().filter_map(|e| e.status).collect();
    assert_eq!(
        steps.last(),
        Some(&Deleting),
        "each transition is in the history"
    );
}

#[tokio::test]
async fn claim_never_takes_more_slots_than_max_runners() {
    let store = store_with_jobs(1..=3);
    let mut claims = Vec::new();
    for id in 1..=3 {
        claims.push(
            store
                .claim_job(id, &runner(&format!("r{id}"), PendingCreate), 2)
                .await
                .expect("claim"),
        );
    }
    assert_eq!(claims, [Claim::Claimed, Claim::Claimed, Claim::PoolFull]);
    assert_eq!(store.slots_used("linux"), 2);
    assert_eq!(store.runners().len(), 2, "a refused claim writes no runner");
    assert_eq!(store.job(3).expect("job").runner_name, None);
}

#[tokio::test]
async fn second_claim_of_a_job_returns_the_first_runner_and_takes_no_slot() {
    let store = store_with_jobs([7]);
    let first = store
        .claim_job(7, &runner("first", PendingCreate), 5)
        .await
        .expect("claim");
    let second = store
        .claim_job(7, &runner("second", PendingCreate), 5)
        .await
        .expect("claim");
    assert_eq!(first, Claim::Claimed);
    assert_eq!(
        second,
        Claim::AlreadyClaimed {
            runner_name: "first".to_owned()
        }
    );
    assert_eq!(store.slots_used("linux"), 1);
    assert!(store.runner("second").is_none());
    assert_eq!(
        store.job(7).expect("job").runner_name.as_deref(),
        Some("first")
    );
}

#[tokio::test]
async fn claim_needs_a_known_queued_job() {
    let store = store_with_jobs([]);
    let unknown = store.claim_job(1, &runner("r", PendingCreate), 5).await;
    assert!(matches!(unknown, Err(StoreError::NotFound(_))));
    let mut done = job(2);
    done.status = JobStatus::Completed;
    store.put_job(done);
    let claim = store
        .claim_job(2, &runner("r", PendingCreate), 5)
        .await
        .expect("claim");
    assert_eq!(claim, Claim::NotQueued(JobStatus::Completed));
    assert_eq!(store.slots_used("linux"), 0);
}

#[tokio::test]
async fn unclaim_drops_only_its_own_claim() {
    let store = store_with_jobs([7]);
    store
        .claim_job(7, &runner("first", PendingCreate), 5)
        .await
        .expect("claim");
    store.unclaim_job(7, "other").await.expect("idempotent");
    assert_eq!(
        store.job(7).expect("job").runner_name.as_deref(),
        Some("first")
    );
    store.unclaim_job(7, "first").await.expect("unclaim");
    store.unclaim_job(7, "first").await.expect("idempotent");
    assert_eq!(store.job(7).expect("job").runner_name, None);
    assert_eq!(
        store.slots_used("linux"),
        1,
        "the slot stays with the runner record"
    );
}

#[tokio::test]
async fn finish_deletion_releases_the_slot_once() {
    let store = store_with_jobs([1, 2]);
    store
        .claim_job(1, &runner("a", PendingCreate), 5)
        .await
        .expect("claim");
    store
        .claim_job(2, &runner("b", PendingCreate), 5)
        .await
        .expect("claim");
    store.put_runner(RunnerRecord {
        status: Deleting,
        ..store.runner("a").expect("a")
    });
    store
        .finish_deletion("a", minute(1), minute(60), &HostStamps::default(), None)
        .await
        .expect("finish");
    let again = store
        .finish_deletion("a", minute(2), minute(61), &HostStamps::default(), None)
        .await;
    assert!(
        matches!(again, Err(StoreError::TransitionRefused { actual, .. }) if actual == "deleted")
    );
    assert_eq!(store.slots_used("linux"), 1);
    let deleted = store.runner("a").expect("kept until ttl");
    assert_eq!((deleted.status, deleted.ttl), (Deleted, Some(minute(60))));
}

#[tokio::test]
async fn finish_deletion_refuses_a_record_that_is_not_deleting() {
    let store = MemoryStore::new();
    store.set_slots_used("linux", 1);
    store.put_runner(runner("r", PendingDelete));
    let err = store
        .finish_deletion("r", minute(1), minute(60), &HostStamps::default(), None)
        .await
        .expect_err("refused");
    assert!(
        matches!(err, StoreError::TransitionRefused { actual, .. } if actual == "pending_delete")
    );
    let missing = store
        .finish_deletion("ghost", minute(1), minute(60), &HostStamps::default(), None)
        .await;
    assert!(
        matches!(missing, Err(StoreError::TransitionRefused { actual, .. }) if actual == "missing")
    );
    assert_eq!(store.slots_used("linux"), 1);
}

#[tokio::test]
async fn finish_deletion_never_takes_the_counter_below_zero() {
    let store = MemoryStore::new();
    store.put_runner(runner("r", Deleting));
    store
        .finish_deletion("r", minute(1), minute(60), &HostStamps::default(), None)
        .await
        .expect("finish");
    assert_eq!(store.get_pool("linux").await.expect("pool").slots_used, 0);
}

#[tokio::test]
async fn advance_job_never_moves_backwards() {
    let store = store_with_jobs([7]);
    store
        .advance_job(&job(7), JobStatus::Completed, Some("r"))
        .await
        .expect("advance");
    store
        .advance_job(&job(7), JobStatus::InProgress, Some("late"))
        .await
        .expect("no-op");
    store
        .advance_job(&job(7), JobStatus::Queued, None)
        .await
        .expect("no-op");
    let stored = store.job(7).expect("job");
    assert_eq!(
        (stored.status, stored.runner_name.as_deref()),
        (JobStatus::Completed, Some("r"))
    );
}

#[tokio::test]
async fn an_instance_is_recorded_once_and_other_changes_do_not_stand_in_the_way() {
    let store = store_with_jobs([7]);
    store
        .claim_job(7, &runner("first", PendingCreate), 5)
        .await
        .expect("claim");
    // A job handed over meanwhile changes the record, but not its instance.
    let handed = RunnerUpdate {
        job_id: Some(8),
        ..RunnerUpdate::default()
    };
    store
        .update_runner("first", &handed, START)
        .await
        .expect("handed over");
    let record = |id: &str| RunnerUpdate {
        instance_id: Some(id.to_owned()),
        expect_instance: Some(None),
        ..RunnerUpdate::default()
    };
    store
        .update_runner("first", &record("i-1"), START)
        .await
        .expect("first instance recorded");
    let second = store.update_runner("first", &record("i-2"), START).await;
    assert!(matches!(second, Err(StoreError::Conflict(_))), "{second:?}");
    let registered = |instance: &str| RunnerUpdate {
        github_runner_id: Some(42),
        expect_instance: Some(Some(instance.to_owned())),
        ..RunnerUpdate::default()
    };
    let wrong = store
        .update_runner("first", &registered("i-2"), START)
        .await;
    assert!(matches!(wrong, Err(StoreError::Conflict(_))), "{wrong:?}");
    let stored = store
        .update_runner("first", &registered("i-1"), START)
        .await
        .expect("registered");
    assert_eq!(
        (stored.instance_id.as_deref(), stored.github_runner_id),
        (Some("i-1"), Some(42))
    );
}

#[tokio::test]
async fn unclaim_never_drops_the_runner_of_a_job_that_started() {
    let store = store_with_jobs([7]);
    store
        .claim_job(7, &runner("first", PendingCreate), 5)
        .await
        .expect("claim");
    store
        .advance_job(&job(7), JobStatus::InProgress, Some("first"))
        .await
        .expect("advance");
    store.unclaim_job(7, "first").await.expect("no-op");
    assert_eq!(
        store.job(7).expect("job").runner_name.as_deref(),
        Some("first")
    );
}

#[tokio::test]
async fn a_webhook_names_the_runner_of_a_job_already_advanced_without_one() {
    let store = store_with_jobs([7]);
    store
        .claim_job(7, &runner("claimant", PendingCreate), 5)
        .await
        .expect("claim");
    // The reaper saw the job in progress on GitHub before the webhook came.
    store
        .advance_job(&job(7), JobStatus::InProgress, None)
        .await
        .expect("advance");
    store
        .advance_job(&job(7), JobStatus::InProgress, Some("taker"))
        .await
        .expect("name");
    let stored = store.job(7).expect("job");
    assert_eq!(
        (stored.status, stored.runner_name.as_deref()),
        (JobStatus::InProgress, Some("taker"))
    );
    store
        .advance_job(&job(7), JobStatus::InProgress, None)
        .await
        .expect("no-op");
    assert_eq!(
        store.job(7).expect("job").runner_name.as_deref(),
        Some("taker")
    );
}

#[tokio::test]
async fn advance_job_creates_a_job_it_has_never_seen() {
    let store = MemoryStore::new();
    store
        .advance_job(&job(7), JobStatus::InProgress, Some("r"))
        .await
        .expect("advance");
    let stored = store.job(7).expect("created");
    assert_eq!(
        (stored.status, stored.runner_name.as_deref()),
        (JobStatus::InProgress, Some("r"))
    );
    assert_eq!(stored.repo, "app");
}

#[tokio::test]
async fn record_job_keeps_the_first_record() {
    let store = MemoryStore::new();
    let first = store.record_job(&job(7)).await.expect("record");
    let mut later = job(7);
    later.repo = "other".to_owned();
    let second = store.record_job(&later).await.expect("record");
    assert_eq!(first, job(7));
    assert_eq!(second, job(7));
}

#[tokio::test]
async fn runners_in_status_returns_due_records_earliest_first_up_to_limit() {
    let store = MemoryStore::new();
    for (name, due, status) in [
        ("c", 3, PendingDelete),
        ("a", 1, PendingDelete),
        ("b", 2, PendingDelete),
        ("late", 9, PendingDelete),
        ("other", 0, Running),
    ] {
        store.put_runner(RunnerRecord {
            next_attempt_at: minute(due),
            ..runner(name, status)
        });
    }
    let names =
        |records: Vec<RunnerRecord>| records.into_iter().map(|r| r.name).collect::<Vec<_>>();
    let due = store
        .runners_in_status(PendingDelete, minute(5), 10)
        .await
        .expect("query");
    assert_eq!(names(due), ["a", "b", "c"]);
    let limited = store
        .runners_in_status(PendingDelete, minute(5), 2)
        .await
        .expect("query");
    assert_eq!(names(limited), ["a", "b"]);
}

#[tokio::test]
async fn injected_failures_hit_only_their_method_and_write_nothing() {
    let store = store_with_jobs([7]);
    store.fail(StoreOp::ClaimJob, 1);
    let failed = store.claim_job(7, &runner("r", PendingCreate), 5).await;
    assert!(matches!(failed, Err(StoreError::Transient(_))));
    assert!(store
        .get_job(7)
        .await
        .expect("other methods work")
        .is_some());
    assert_eq!(store.slots_used("linux"), 0);
    let claim = store
        .claim_job(7, &runner("r", PendingCreate), 5)
        .await
        .expect("second try");
    assert_eq!(claim, Claim::Claimed);
}
