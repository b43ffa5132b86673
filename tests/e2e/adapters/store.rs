//! The DynamoDB runner store against moto: the table itself refuses forbidden status
//! changes, claims never overfill a pool, slots are released once, jobs never move
//! backwards, and the reaper's status query reads only what is due.

use ephemera_aws::{ensure_resources, runner_to_item, sdk_config, AwsSettings, DynamoRunnerStore};
use ephemera_aws::{ResourceNames, Resources};
use ephemera_core::lifecycle::{InstanceStatus, RunnerStatus};
use ephemera_core::model::{JobRecord, JobStatus, RunnerRecord};
use ephemera_core::ports::{
    Claim, ClaimHandOver, HostStamps, RunnerStore, RunnerUpdate, StoreError, Transition,
};
use ephemera_tests::moto::Moto;
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;

struct Table {
    _moto: Moto,
    client: aws_sdk_dynamodb::Client,
    resources: Resources,
    store: DynamoRunnerStore,
}

async fn table() -> anyhow::Result<Table> {
    on(Moto::start().await?).await
}

async fn on(moto: Moto) -> anyhow::Result<Table> {
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let resources = ensure_resources(&config, &ResourceNames::for_deployment("eph")).await?;
    let client = aws_sdk_dynamodb::Client::new(&config);
    let store = DynamoRunnerStore::new(client.clone(), &resources.table);
    Ok(Table {
        _moto: moto,
        client,
        resources,
        store,
    })
}

impl Table {
    /// Writes a runner record as it is, in whatever status (no transition checks).
    async fn plant(&self, runner: &RunnerRecord) -> anyhow::Result<()> {
        self.client
            .put_item()
            .table_name(&self.resources.table)
            .set_item(Some(runner_to_item(runner)))
            .send()
            .await?;
        Ok(())
    }
}

fn now() -> OffsetDateTime {
    // Whole milliseconds, as the table keeps `next_attempt_at`.
    let now = OffsetDateTime::now_utc();
    now.replace_nanosecond(now.millisecond() as u32 * 1_000_000)
        .unwrap_or(now)
}

fn runner(name: &str, status: InstanceStatus, at: OffsetDateTime) -> RunnerRecord {
    let mut runner = RunnerRecord::new(name.to_owned(), "linux".to_owned(), at);
    runner.status = status;
    runner.labels = vec!["self-hosted".to_owned(), "linux".to_owned()];
    runner.owner = "octo".to_owned();
    runner
}

fn job(job_id: u64, at: OffsetDateTime) -> JobRecord {
    JobRecord {
        job_id,
        status: JobStatus::Queued,
        pool: "linux".to_owned(),
        owner: "octo".to_owned(),
        repo: "hello".to_owned(),
        run_id: 100 + job_id,
        installation_id: Some(7),
        labels: vec!["self-hosted".to_owned(), "linux".to_owned()],
        runner_name: None,
        launched_runner: None,
        received_at: at,
        updated_at: at,
        github: Default::default(),
        claimed_at: None,
    }
}

fn any_transition(to: InstanceStatus, at: OffsetDateTime) -> Transition {
    Transition {
        to,
        expect: None,
        at,
        next_attempt_at: at,
        reason: Some("test".to_owned()),
        attempts: Some(1),
        error: None,
        ttl: None,
    }
}

#[tokio::test]
async fn every_forbidden_transition_is_refused_by_the_table_and_every_allowed_one_succeeds(
) -> anyhow::Result<()> {
    let t = table().await?;
    let at = now();
    for from in InstanceStatus::ALL {
        for to in InstanceStatus::ALL {
            let name = format!("eph-linux-{from}-{to}");
            t.plant(&runner(&name, from, at)).await?;
            let result = t.store.transition(&name, &any_transition(to, at)).await;
            let stored = t.store.get_runner(&name).await?.expect("planted");
            if from.can_move_to(to) {
                let moved = result.map_err(|e| anyhow::anyhow!("{from} -> {to}: {e}"))?;
                assert_eq!(moved.status, to, "{from} -> {to}");
                assert_eq!(moved.reason.as_deref(), Some("test"));
                assert_eq!(moved.attempts, 1);
                assert_eq!(stored.status, to, "{from} -> {to}");
            } else {
                match result {
                    Err(StoreError::TransitionRefused { actual, .. }) => {
                        assert_eq!(actual, from.as_str(), "{from} -> {to}")
                    }
                    other => panic!("{from} -> {to} should be refused, got {other:?}"),
                }
                assert_eq!(stored.status, from, "{from} -> {to} changed the record");
            }
        }
    }
    // An expectation that does not hold is refused too, and a missing record says so.
    let name = "eph-linux-expect";
    t.plant(&runner(name, InstanceStatus::Running, at)).await?;
    let refused = t
        .store
        .transition(
            name,
            &Transition::new(InstanceStatus::Creating, InstanceStatus::PendingDelete, at),
        )
        .await;
    assert!(
        matches!(refused, Err(StoreError::TransitionRefused { actual, .. }) if actual == "running")
    );
    let missing = t
        .store
        .transition(
            "eph-linux-nobody",
            &any_transition(InstanceStatus::Creating, at),
        )
        .await;
    assert!(
        matches!(missing, Err(StoreError::TransitionRefused { actual, .. }) if actual == "missing")
    );
    Ok(())
}

#[tokio::test]
async fn claim_never_exceeds_max_runners_under_concurrency() -> anyhow::Result<()> {
    let t = table().await?;
    let at = now();
    for job_id in 1..=20 {
        t.store.record_job(&job(job_id, at)).await?;
    }
    let store = Arc::new(t.store);
    let claims = (1..=20u64).map(|job_id| {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            let runner = runner(
                &format!("eph-linux-{job_id}"),
                InstanceStatus::PendingCreate,
                at,
            );
            // DynamoDB cancels a claim that overlaps another transaction on the pool
            // item (the strict world models it): it is tried again, as the scaler does.
            for _ in 0..100 {
                match store.claim_job(job_id, &runner, 5).await {
                    Err(StoreError::Conflict(_)) => {
                        tokio::time::sleep(Duration::from_millis(5 + job_id * 3)).await
                    }
                    other => return other,
                }
            }
            Err(StoreError::Conflict(format!("job {job_id}: 100 conflicts")))
        })
    });
    let mut claimed = 0;
    let mut full = 0;
    for claim in futures_join(claims).await {
        match claim?? {
            Claim::Claimed => claimed += 1,
            Claim::PoolFull => full += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((claimed, full), (5, 15));
    assert_eq!(store.get_pool("linux").await?.slots_used, 5);
    let mut runners = 0;
    for job_id in 1..=20u64 {
        let runner = store.get_runner(&format!("eph-linux-{job_id}")).await?;
        let job = store.get_job(job_id).await?.expect("recorded");
        assert_eq!(runner.is_some(), job.runner_name.is_some(), "job {job_id}");
        runners += usize::from(runner.is_some());
    }
    assert_eq!(runners, 5);
    Ok(())
}

#[tokio::test]
async fn warm_reservations_take_a_slot_each_and_stop_at_max_runners() -> anyhow::Result<()> {
    let t = table().await?;
    let at = now();
    let store = Arc::new(t.store);
    let reservations = (1..=6u64).map(|i| {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            let warm = runner(
                &format!("eph-linux-w{i}"),
                InstanceStatus::PendingCreate,
                at,
            );
            // A reservation cancelled by an overlapping transaction is tried again.
            for _ in 0..100 {
                match store.reserve_runner(&warm, 4).await {
                    Err(StoreError::Conflict(_)) => {
                        tokio::time::sleep(Duration::from_millis(5 + i * 3)).await
                    }
                    other => return other,
                }
            }
            Err(StoreError::Conflict(format!(
                "reservation {i}: 100 conflicts"
            )))
        })
    });
    let mut reserved = 0;
    for result in futures_join(reservations).await {
        reserved += usize::from(result??);
    }
    assert_eq!(reserved, 4, "two found the pool full");
    assert_eq!(store.get_pool("linux").await?.slots_used, 4);
    let written = store
        .runners_in_status(InstanceStatus::PendingCreate, at, 10)
        .await?;
    assert_eq!(written.len(), 4, "a record only with a slot");
    assert!(written.iter().all(|r| r.job_id.is_none() && r.slot_held));
    // One that holds a slot: which four won depends on the race above.
    let again = runner(&written[0].name, InstanceStatus::PendingCreate, at);
    assert!(
        !store.reserve_runner(&again, 4).await?,
        "full: nothing is written"
    );
    let taken = store.reserve_runner(&again, 10).await;
    assert!(matches!(taken, Err(StoreError::Conflict(_))), "{taken:?}");
    assert_eq!(store.get_pool("linux").await?.slots_used, 4);
    Ok(())
}

/// Awaits every task, in order.
async fn futures_join<T>(
    tasks: impl Iterator<Item = tokio::task::JoinHandle<T>>,
) -> Vec<Result<T, tokio::task::JoinError>> {
    let tasks: Vec<_> = tasks.collect();
    let mut results = Vec::with_capacity(tasks.len());
    for task in tasks {
        results.push(task.await);
    }
    results
}

#[tokio::test]
async fn second_claim_of_a_job_reports_the_first_runner() -> anyhow::Result<()> {
    let t = table().await?;
    let at = now();
    t.store.record_job(&job(1, at)).await?;
    let first = runner("eph-linux-first", InstanceStatus::PendingCreate, at);
    let second = runner("eph-linux-second", InstanceStatus::PendingCreate, at);
    assert_eq!(t.store.claim_job(1, &first, 5).await?, Claim::Claimed);
    assert_eq!(
        t.store.claim_job(1, &second, 5).await?,
        Claim::AlreadyClaimed {
            runner_name: "eph-linux-first".to_owned()
        }
    );
    assert!(t.store.get_runner("eph-linux-second").await?.is_none());
    assert_eq!(t.store.get_pool("linux").await?.slots_used, 1);

    // Dropping the claim lets a retry claim the job again; a stale unclaim is harmless.
    t.store.unclaim_job(1, "eph-linux-other").await?;
    assert_eq!(
        t.store.get_job(1).await?.and_then(|j| j.runner_name),
        Some("eph-linux-first".to_owned())
    );
    t.store.unclaim_job(1, "eph-linux-first").await?;
    assert_eq!(t.store.claim_job(1, &second, 5).await?, Claim::Claimed);

    // A job no longer queued, or never seen, cannot be claimed.
    t.store.record_job(&job(2, at)).await?;
    t.store
        .advance_job(&job(2, at), JobStatus::InProgress, None)
        .await?;
    let third = runner("eph-linux-third", InstanceStatus::PendingCreate, at);
    assert_eq!(
        t.store.claim_job(2, &third, 5).await?,
        Claim::NotQueued(JobStatus::InProgress)
    );
    assert!(matches!(
        t.store.claim_job(3, &third, 5).await,
        Err(StoreError::NotFound(_))
    ));
    // With no room at all, the pool is full.
    t.store.record_job(&job(4, at)).await?;
    assert_eq!(t.store.claim_job(4, &third, 0).await?, Claim::PoolFull);
    Ok(())
}

#[tokio::test]
async fn finish_deletion_releases_the_slot_once() -> anyhow::Result<()> {
    let t = table().await?;
    let at = now();
    let ttl = at + Duration::from_secs(86_400);
    t.store.record_job(&job(1, at)).await?;
    let record = runner("eph-linux-a", InstanceStatus::PendingCreate, at);
    assert_eq!(t.store.claim_job(1, &record, 5).await?, Claim::Claimed);
    assert_eq!(t.store.get_pool("linux").await?.slots_used, 1);

    // Not yet deleting: refused, and the slot stays taken.
    let none = HostStamps::default();
    let early = t
        .store
        .finish_deletion("eph-linux-a", at, ttl, &none, None)
        .await;
    assert!(
        matches!(early, Err(StoreError::TransitionRefused { actual, .. }) if actual == "pending_create")
    );
    assert_eq!(t.store.get_pool("linux").await?.slots_used, 1);

    use InstanceStatus::*;
    for (from, to) in [(PendingCreate, PendingDelete), (PendingDelete, Deleting)] {
        t.store
            .transition("eph-linux-a", &Transition::new(from, to, at))
            .await?;
    }
    let host = HostStamps {
        instance_launched_at: Some(at - time::Duration::seconds(90)),
        jit_read_at: Some(at - time::Duration::seconds(60)),
        runner: ephemera_core::model::HostRunner {
            runner_version: Some("2.337.0".into()),
            runner_image_version: Some("2.336.0".into()),
            runner_swap_ms: Some(4_200),
        },
    };
    t.store
        .finish_deletion("eph-linux-a", at, ttl, &host, None)
        .await?;
    let deleted = t
        .store
        .get_runner("eph-linux-a")
        .await?
        .expect("kept until its TTL");
    assert_eq!(deleted.status, Deleted);
    assert_eq!(
        deleted.ttl.map(|t| t.unix_timestamp()),
        Some(ttl.unix_timestamp())
    );
    assert_eq!(
        (deleted.instance_launched_at, deleted.jit_read_at),
        (host.instance_launched_at, host.jit_read_at),
        "the host's stamps ride on the same write"
    );
    assert_eq!(deleted.host_runner, host.runner, "and the runner it ran");
    assert_eq!(t.store.get_pool("linux").await?.slots_used, 0);

    let again = t
        .store
        .finish_deletion("eph-linux-a", at, ttl, &none, None)
        .await;
    assert!(
        matches!(again, Err(StoreError::TransitionRefused { actual, .. }) if actual == "deleted")
    );
    assert_eq!(t.store.get_pool("linux").await?.slots_used, 0);

    // Drift: a deleting runner whose slot was never counted still reaches `deleted`,
    // and the counter does not go below zero.
    t.plant(&runner("eph-linux-b", Deleting, at)).await?;
    t.store
        .finish_deletion("eph-linux-b", at, ttl, &none, None)
        .await?;
    assert_eq!(
        t.store.get_runner("eph-linux-b").await?.map(|r| r.status),
        Some(Deleted)
    );
    assert_eq!(t.store.get_pool("linux").await?.slots_used, 0);
    Ok(())
}

#[tokio::test]
async fn advance_job_never_moves_backwards() -> anyhow::Result<()> {
    let t = table().await?;
    let at = now();
    let recorded = t.store.record_job(&job(1, at)).await?;
    assert_eq!(recorded.status, JobStatus::Queued);

    t.store
        .advance_job(&job(1, at), JobStatus::Completed, Some("eph-linux-a"))
        .await?;
    t.store
        .advance_job(&job(1, at), JobStatus::InProgress, Some("eph-linux-b"))
        .await?;
    t.store
        .advance_job(&job(1, at), JobStatus::Queued, None)
        .await?;
    let stored = t.store.get_job(1).await?.expect("recorded");
    assert_eq!(stored.status, JobStatus::Completed);
    assert_eq!(stored.runner_name.as_deref(), Some("eph-linux-a"));

    // A second sighting returns what is stored, not what was sent.
    let again = t.store.record_job(&job(1, at)).await?;
    assert_eq!(again.status, JobStatus::Completed);

    // A job first seen as in progress gets a whole record.
    let mut unseen = job(2, at);
    unseen.status = JobStatus::InProgress;
    t.store
        .advance_job(&unseen, JobStatus::InProgress, Some("eph-linux-c"))
        .await?;
    let created = t.store.get_job(2).await?.expect("created");
    assert_eq!(created.status, JobStatus::InProgress);
    assert_eq!(created.runner_name.as_deref(), Some("eph-linux-c"));
    assert_eq!(
        (
            created.pool.as_str(),
            created.run_id,
            created.installation_id
        ),
        ("linux", 102, Some(7))
    );
    assert_eq!(created.labels, unseen.labels);

    // Advanced by the reaper from GitHub's answer (no runner known), then the webhook
    // names the runner that took it; a later nameless advance keeps that name.
    t.store.record_job(&job(3, at)).await?;
    t.store
        .advance_job(&job(3, at), JobStatus::InProgress, None)
        .await?;
    t.store
        .advance_job(&job(3, at), JobStatus::InProgress, Some("eph-linux-d"))
        .await?;
    t.store
        .advance_job(&job(3, at), JobStatus::InProgress, None)
        .await?;
    let named = t.store.get_job(3).await?.expect("recorded");
    assert_eq!(
        (named.status, named.runner_name.as_deref()),
        (JobStatus::InProgress, Some("eph-linux-d"))
    );
    Ok(())
}

#[tokio::test]
async fn unclaim_never_drops_the_runner_of_a_job_that_started() -> anyhow::Result<()> {
    let t = table().await?;
    let at = now();
    t.store.record_job(&job(1, at)).await?;
    let first = runner("eph-linux-first", InstanceStatus::PendingCreate, at);
    assert_eq!(t.store.claim_job(1, &first, 5).await?, Claim::Claimed);
    t.store
        .advance_job(&job(1, at), JobStatus::InProgress, Some("eph-linux-first"))
        .await?;
    t.store.unclaim_job(1, "eph-linux-first").await?;
    assert_eq!(
        t.store.get_job(1).await?.and_then(|j| j.runner_name),
        Some("eph-linux-first".to_owned())
    );
    Ok(())
}

#[tokio::test]
async fn runners_in_status_reads_only_due_records_of_that_status() -> anyhow::Result<()> {
    let t = table().await?;
    let at = now();
    let second = Duration::from_secs(1);
    let planted = |name: String, status, due: OffsetDateTime| {
        let mut record = runner(&name, status, at);
        record.next_attempt_at = due;
        record
    };
    let mut records = vec![
        planted(
            "eph-linux-due-3".into(),
            InstanceStatus::PendingDelete,
            at - second,
        ),
        planted(
            "eph-linux-due-1".into(),
            InstanceStatus::PendingDelete,
            at - 3 * second,
        ),
        planted(
            "eph-linux-due-2".into(),
            InstanceStatus::PendingDelete,
            at - 2 * second,
        ),
        planted(
            "eph-linux-later".into(),
            InstanceStatus::PendingDelete,
            at + 60 * second,
        ),
        planted(
            "eph-linux-running".into(),
            InstanceStatus::Running,
            at - second,
        ),
    ];
    // History the reaper must not pay for.
    records.extend((0..30).map(|i| {
        planted(
            format!("eph-linux-old-{i}"),
            InstanceStatus::Deleted,
            at - second,
        )
    }));
    for record in &records {
        t.plant(record).await?;
    }
    t.store.record_job(&job(1, at - second)).await?;

    let before = t.store.items_read();
    let due = t
        .store
        .runners_in_status(InstanceStatus::PendingDelete, at, 10)
        .await?;
    let names: Vec<&str> = due.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        ["eph-linux-due-1", "eph-linux-due-2", "eph-linux-due-3"]
    );
    assert_eq!(t.store.items_read() - before, 3);

    let first_two = t
        .store
        .runners_in_status(InstanceStatus::PendingDelete, at, 2)
        .await?;
    let names: Vec<&str> = first_two.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["eph-linux-due-1", "eph-linux-due-2"]);
    assert!(t.store.items_read() - before <= 6);

    let running = t
        .store
        .runners_in_status(InstanceStatus::Running, at, 10)
        .await?;
    assert_eq!(running.len(), 1);
    assert_eq!(running[0], records[4]);
    Ok(())
}

#[tokio::test]
async fn guarded_updates_fail_once_the_record_has_moved_on_or_names_another_instance(
) -> anyhow::Result<()> {
    let t = table().await?;
    // Full precision, as a handler's clock gives it.
    let at = OffsetDateTime::now_utc();
    let name = "eph-linux-leased";
    t.plant(&runner(name, InstanceStatus::Creating, at)).await?;
    let seen = t.store.get_runner(name).await?.expect("planted").updated_at;
    let lease = |note: &str| RunnerUpdate {
        note: Some(note.to_owned()),
        unchanged_since: Some(seen),
        ..RunnerUpdate::default()
    };
    t.store
        .update_runner(name, &lease("first"), at + Duration::from_secs(1))
        .await?;
    let second = t
        .store
        .update_runner(name, &lease("second"), at + Duration::from_secs(2))
        .await;
    assert!(matches!(second, Err(StoreError::Conflict(_))), "{second:?}");
    // A creation records its instance once; a second instance is refused, and the
    // GitHub runner is recorded only for the instance the record names.
    let record = |id: &str| RunnerUpdate {
        instance_id: Some(id.to_owned()),
        expect_instance: Some(None),
        ..RunnerUpdate::default()
    };
    t.store.update_runner(name, &record("i-1"), at).await?;
    let second = t.store.update_runner(name, &record("i-2"), at).await;
    assert!(matches!(second, Err(StoreError::Conflict(_))), "{second:?}");
    let registered = |id: &str| RunnerUpdate {
        github_runner_id: Some(42),
        expect_instance: Some(Some(id.to_owned())),
        ..RunnerUpdate::default()
    };
    let wrong = t.store.update_runner(name, &registered("i-2"), at).await;
    assert!(matches!(wrong, Err(StoreError::Conflict(_))), "{wrong:?}");
    let stored = t.store.update_runner(name, &registered("i-1"), at).await?;
    assert_eq!(
        (stored.instance_id.as_deref(), stored.github_runner_id),
        (Some("i-1"), Some(42))
    );
    let gone = t
        .store
        .update_runner("eph-linux-never", &RunnerUpdate::default(), at)
        .await;
    assert!(matches!(gone, Err(StoreError::NotFound(_))), "{gone:?}");
    Ok(())
}

#[tokio::test]
async fn a_hand_over_moves_the_claim_and_both_records_together_or_not_at_all() -> anyhow::Result<()>
{
    let t = table().await?;
    let at = now();
    t.store.record_job(&job(1, at)).await?;
    t.store.record_job(&job(2, at)).await?;
    let mut taker = runner("eph-linux-taker", InstanceStatus::PendingCreate, at);
    taker.job_id = Some(1);
    let mut free = runner("eph-linux-free", InstanceStatus::PendingCreate, at);
    free.job_id = Some(2);
    assert_eq!(t.store.claim_job(1, &taker, 5).await?, Claim::Claimed);
    assert_eq!(t.store.claim_job(2, &free, 5).await?, Claim::Claimed);
    let taker_seen = t
        .store
        .get_runner("eph-linux-taker")
        .await?
        .expect("taker")
        .updated_at;
    let free_seen = t
        .store
        .get_runner("eph-linux-free")
        .await?
        .expect("free")
        .updated_at;
    let hand_over = |free_seen| ClaimHandOver {
        job_id: 1,
        taker: (
            "eph-linux-taker".to_owned(),
            RunnerUpdate {
                runner_status: Some(RunnerStatus::Active),
                job_id: Some(2),
                unchanged_since: Some(taker_seen),
                ..RunnerUpdate::default()
            },
        ),
        to: Some((
            "eph-linux-free".to_owned(),
            RunnerUpdate {
                job_id: Some(1),
                note: Some("handed job 1".to_owned()),
                unchanged_since: Some(free_seen),
                ..RunnerUpdate::default()
            },
        )),
    };
    // A record read before another writer touched it: nothing is written.
    let stale = hand_over(free_seen - time::Duration::seconds(1));
    assert!(matches!(
        t.store.hand_over_claim(&stale, at).await,
        Err(StoreError::Conflict(_))
    ));
    let job_1 = t.store.get_job(1).await?.expect("job 1");
    assert_eq!(job_1.runner_name.as_deref(), Some("eph-linux-taker"));
    let kept = t.store.get_runner("eph-linux-taker").await?.expect("taker");
    assert_eq!(
        (kept.job_id, kept.runner_status),
        (Some(1), RunnerStatus::Pending)
    );
    // As read: the three move together.
    assert!(
        t.store
            .hand_over_claim(&hand_over(free_seen), now())
            .await?
    );
    let job_1 = t.store.get_job(1).await?.expect("job 1");
    assert_eq!(job_1.runner_name.as_deref(), Some("eph-linux-free"));
    assert_eq!(job_1.launched_runner.as_deref(), Some("eph-linux-free"));
    let taker = t.store.get_runner("eph-linux-taker").await?.expect("taker");
    assert_eq!(
        (taker.job_id, taker.runner_status),
        (Some(2), RunnerStatus::Active)
    );
    let free = t.store.get_runner("eph-linux-free").await?.expect("free");
    assert_eq!(free.job_id, Some(1));
    // Job 1 is no longer the taker's: a second hand-over is refused, writing nothing.
    assert!(
        !t.store
            .hand_over_claim(&hand_over(free.updated_at), now())
            .await?
    );
    // A removed runner is never bound again: the runner-status table refuses it.
    let removed = RunnerUpdate {
        runner_status: Some(RunnerStatus::Terminated),
        ..RunnerUpdate::default()
    };
    t.store
        .update_runner("eph-linux-free", &removed, now())
        .await?;
    let bind = RunnerUpdate {
        runner_status: Some(RunnerStatus::Active),
        ..RunnerUpdate::default()
    };
    assert!(matches!(
        t.store.update_runner("eph-linux-free", &bind, now()).await,
        Err(StoreError::NotFound(_))
    ));
    Ok(())
}
