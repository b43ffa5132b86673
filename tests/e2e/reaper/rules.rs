//! The rules that act on what creation and GitHub left behind, end to end: a creation
//! that failed after launching and registering (`creation_failed`), a warm pool scaled
//! down to `min_idle` (`static_idle`), idle ephemeral runners with no job left for them
//! (`ephemeral_idle`), and a deletion through three EC2 failures, graceful (it backs
//! off) and forced (it does not).

use super::*;
use ephemera_core::backoff;
use ephemera_core::handlers::scaler::{Handled, Scaler, ScalerError};
use ephemera_core::lifecycle::RunnerStatus;
use ephemera_core::message::QueueMessage;
use ephemera_core::model::JobStatus;
use ephemera_core::ports::{InstanceState, RunnerStore, Transition};
use ephemera_tests::faults::FaultyForge;
use ephemera_tests::pipeline::{PipelineOptions, LABELS, WEBHOOK_SECRET};
use ephemera_tests::sim::SimRunner;
use std::sync::Arc;

/// The reaper by hand; runners online on GitHub wait this long before taking a job, so
/// a job cancelled while they come up leaves them idle.
fn slow_pickup(pool_extra: &str) -> PipelineOptions {
    PipelineOptions {
        reaper_interval: None,
        pickup_delay: minutes(30),
        pool_extra: pool_extra.to_owned(),
        ..PipelineOptions::default()
    }
}

/// The runner named `name` as GitHub knows it.
fn on_github(p: &Pipeline, name: &str) -> Option<SimRunner> {
    p.sim
        .snapshot()
        .runners
        .into_values()
        .find(|r| r.name == name)
}

/// Waits until the runner launched for `job_id` is `running` and online on GitHub.
async fn online_runner(p: &Pipeline, job_id: u64) -> anyhow::Result<RunnerRecord> {
    let runner = runner_in(p, job_id, InstanceStatus::Running).await?;
    let what = format!("runner {} online on GitHub", runner.name);
    p.wait_for(&what, LIMIT, || async {
        Ok(on_github(p, &runner.name).filter(|r| r.status == "online"))
    })
    .await?;
    Ok(runner)
}

/// Cancels a job that no runner took: GitHub completes it as `cancelled`, with no
/// runner, and sends the signed `completed` delivery; returns once it is recorded.
async fn cancel(p: &Pipeline, job_id: u64) -> anyhow::Result<()> {
    let job = p.sim.with_state(|s| {
        let job = s.jobs.get_mut(&job_id)?;
        job.status = "completed".to_owned();
        job.conclusion = Some("cancelled".to_owned());
        job.completed_at = Some(now());
        Some(job.clone())
    });
    let job = job.ok_or_else(|| anyhow::anyhow!("no job {job_id} on GitHub"))?;
    anyhow::ensure!(job.runner_id.is_none(), "job {job_id} was taken");
    // Installation 1: the simulator's, as in its own deliveries.
    let body = ephemera_tests::sim::webhook_payload("completed", &job, 1).to_string();
    let signature =
        ephemera_core::webhook::signature_header(WEBHOOK_SECRET.as_bytes(), body.as_bytes());
    let status = reqwest::Client::new()
        .post(&p.webhook_url)
        .header("x-github-event", "workflow_job")
        .header("x-github-delivery", format!("cancel-{job_id}"))
        .header("x-hub-signature-256", signature)
        .header("content-type", "application/json")
        .body(body)
        .timeout(LIMIT)
        .send()
        .await?
        .status();
    anyhow::ensure!(status.is_success(), "cancel delivery refused: {status}");
    let what = format!("job {job_id} recorded as completed");
    p.wait_for(&what, LIMIT, || async {
        Ok(p.store
            .get_job(job_id)
            .await?
            .filter(|j| j.status == JobStatus::Completed))
    })
    .await?;
    Ok(())
}

/// Asserts that the runner `name` is gone everywhere: record `deleted` without a slot,
/// instance terminated, not on GitHub, no JIT config.
async fn assert_gone(p: &Pipeline, name: &str) -> anyhow::Result<()> {
    let gone = record(p, name).await?;
    assert_eq!(gone.status, InstanceStatus::Deleted, "{name}");
    assert!(!gone.slot_held, "{name} still holds a slot");
    let instance_id = gone.instance_id.as_deref().expect("instance");
    assert_eq!(
        p.instance_state(instance_id).await?,
        Some(InstanceState::Terminated),
        "{name}"
    );
    assert!(on_github(p, name).is_none(), "{name} still on GitHub");
    assert!(
        !p.jit_config_exists(instance_id).await?,
        "{name}'s JIT config"
    );
    Ok(())
}

/// The delivery of `job_id`'s `queued` message, as the queue hands it to the scaler.
fn queued(p: &Pipeline, job_id: u64) -> QueueMessage {
    queued_message("rule3", job_id, p.sim.snapshot().jobs[&job_id].run_id)
}

/// `creation_failed`, one run: the answer to the JIT registration is lost (GitHub registered the
/// runner, the scaler never learnt its id), the retried delivery meets 409 "already
/// exists" and the record goes to `error` holding a launched instance and a registration
/// only findable by name. One reaper run terminates the one and removes the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_after_launch_and_registration_is_cleaned_in_one_run() -> anyhow::Result<()> {
    let options = PipelineOptions {
        reaper_interval: None,
        drain_queue: false,
        ..PipelineOptions::default()
    };
    let p = Pipeline::start(options).await?;
    lose_webhooks(&p)?;
    let forge = Arc::new(FaultyForge::new(p.scaler_forge.clone()));
    let jit_store = Arc::new(p.jit_configs());
    let scaler = Arc::new(Scaler::bare(
        p.config.clone(),
        p.store.clone(),
        p.fleet.clone(),
        forge.clone(),
        jit_store,
        p.queue.clone(),
    ));
    let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    let message = queued(&p, job_id);
    let at = now();

    forge.lose_jit_answers(1);
    let first = scaler.handle(&message, at).await;
    assert!(
        matches!(first, Err(ScalerError::Creation { .. })),
        "{first:?}"
    );
    let made = p.runner_for_job(job_id).await?.expect("claimed");
    assert_eq!(made.status, InstanceStatus::Creating);
    assert_eq!(made.github_runner_id, None, "the answer was lost");
    assert!(
        on_github(&p, &made.name).is_some(),
        "registered all the same"
    );
    let instance_id = made.instance_id.clone().expect("launched");

    // The queue delivers the message again once the creation lease is over.
    let second = scaler.handle(&message, at + minutes(2)).await;
    assert!(
        matches!(second, Err(ScalerError::Creation { .. })),
        "{second:?}"
    );
    let failed = record(&p, &made.name).await?;
    assert_eq!(failed.status, InstanceStatus::Error);
    let error = failed.last_error.clone().unwrap_or_default();
    assert!(error.contains("already exists"), "{error}");
    assert!(!failed.slot_held, "a failed creation gives its slot back");
    assert_eq!(
        p.instance_state(&instance_id).await?,
        Some(InstanceState::Running)
    );

    // Before the job's queued grace is over, so only `creation_failed` has anything to do.
    let report = p.reap_at(at + minutes(2) + Duration::from_secs(30)).await?;
    assert_eq!(
        (report.sent_to_delete, report.deleted),
        (1, 1),
        "{report:?}"
    );
    assert_gone(&p, &made.name).await?;
    assert_eq!(p.store.get_pool(POOL).await?.slots_used, 0);

    // The job was freed: its next delivery launches a fresh runner, which runs it.
    let third = scaler.handle(&message, at + minutes(4)).await?;
    assert!(
        matches!(&third, Handled::RunnerUp(name) if *name != made.name),
        "{third:?}"
    );
    p.wait_for("the job to run on the fresh runner", LIMIT, || async {
        Ok((p.sim.snapshot().jobs[&job_id].conclusion.as_deref() == Some("success")).then_some(()))
    })
    .await?;
    assert_eq!(p.sim.snapshot().counters.jobs_killed, 0);
    Ok(())
}

/// `static_idle`, one run: three static runners, idle since three successive reaper runs, are
/// all past `idle_timeout`; the run deletes the two idle longest (GitHub first) and keeps
/// the most recently idle one for `min_idle`, in that run and every later one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_pool_is_scaled_down_to_min_idle_in_one_run() -> anyhow::Result<()> {
    let pool = "    ephemeral: false\n    min_idle: 1\n    idle_timeout: 5m\n";
    let p = Pipeline::start(slow_pickup(pool)).await?;
    let start = now();
    let mut runners = Vec::new();
    for minute in 0..3 {
        let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
        runners.push(online_runner(&p, job_id).await?);
        cancel(&p, job_id).await?;
        // This run sees it online: idle from this minute on.
        let report = p.reap_at(start + minutes(minute)).await?;
        assert_eq!(
            (report.came_online, report.sent_to_delete),
            (1, 0),
            "minute {minute}: {report:?}"
        );
    }

    let report = p.reap_at(start + minutes(8)).await?;
    assert_eq!(
        (report.sent_to_delete, report.deleted),
        (2, 2),
        "{report:?}"
    );
    for scaled_down in &runners[..2] {
        assert_gone(&p, &scaled_down.name).await?;
    }
    let kept = &runners[2];
    let check_kept = || async {
        let item = record(&p, &kept.name).await?;
        assert_eq!(
            (item.status, item.runner_status),
            (InstanceStatus::Running, RunnerStatus::Idle)
        );
        let instance_id = item.instance_id.as_deref().expect("instance");
        assert_eq!(
            p.instance_state(instance_id).await?,
            Some(InstanceState::Running)
        );
        let github = on_github(&p, &kept.name).expect("kept on GitHub");
        assert_eq!(github.status, "online");
        anyhow::Ok(())
    };
    check_kept().await?;
    assert_eq!(p.store.get_pool(POOL).await?.slots_used, 1);

    let later = p.reap_at(start + minutes(60)).await?;
    assert_eq!(later.sent_to_delete, 0, "min_idle is kept: {later:?}");
    check_kept().await?;
    let sim = p.sim.snapshot();
    assert_eq!(sim.counters.runners_deleted, 2);
    assert_eq!(sim.counters.jobs_killed, 0);
    Ok(())
}

/// `ephemeral_idle`: two ephemeral runners idle past `idle_timeout`; while one job of their pool
/// is still queued (either could take it) neither is touched, and once that job is
/// cancelled too, one run deletes both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_ephemeral_runners_are_kept_while_a_job_waits_then_deleted_in_one_run(
) -> anyhow::Result<()> {
    let p = Pipeline::start(slow_pickup("    idle_timeout: 5m\n")).await?;
    let cancelled_job = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    let spare = online_runner(&p, cancelled_job).await?;
    cancel(&p, cancelled_job).await?;
    let waiting_job = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    let waiting = online_runner(&p, waiting_job).await?;
    let start = now();
    let first = p.reap_at(start).await?;
    assert_eq!(first.came_online, 2, "{first:?}");

    let kept = p.reap_at(start + minutes(6)).await?;
    assert_eq!(kept.sent_to_delete, 0, "a job is still queued: {kept:?}");
    for runner in [&spare, &waiting] {
        let item = record(&p, &runner.name).await?;
        assert_eq!(
            (item.status, item.runner_status),
            (InstanceStatus::Running, RunnerStatus::Idle)
        );
        let instance_id = item.instance_id.as_deref().expect("instance");
        assert_eq!(
            p.instance_state(instance_id).await?,
            Some(InstanceState::Running)
        );
    }
    assert_eq!(p.fleet.terminate_calls(), 0);

    cancel(&p, waiting_job).await?;
    let report = p.reap_at(start + minutes(7)).await?;
    assert_eq!(
        (report.sent_to_delete, report.deleted),
        (2, 2),
        "{report:?}"
    );
    for runner in [&spare, &waiting] {
        assert_gone(&p, &runner.name).await?;
        let history = record(&p, &runner.name).await?.history;
        assert!(
            history
                .iter()
                .any(|e| e.reason.as_deref()
                    == Some("idle past idle_timeout with no queued job left")),
            "{history:?}"
        );
    }
    assert_eq!(p.store.get_pool(POOL).await?.slots_used, 0);
    assert_eq!(p.sim.snapshot().counters.jobs_killed, 0);
    Ok(())
}

/// An ephemeral runner through its job, parked in `pending_delete`; its instance id.
async fn finished_runner(p: &Pipeline) -> anyhow::Result<(RunnerRecord, String)> {
    let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    let runner = runner_in(p, job_id, InstanceStatus::PendingDelete).await?;
    let instance_id = runner.instance_id.clone().expect("instance");
    Ok((runner, instance_id))
}

fn by_hand() -> PipelineOptions {
    PipelineOptions {
        reaper_interval: None,
        ..PipelineOptions::default()
    }
}

/// By hand, with runner hosts that hang instead of powering off when their runner
/// exits: only the reaper's terminate can end such an instance.
fn by_hand_on_hung_hosts() -> PipelineOptions {
    PipelineOptions {
        github_faults: ephemera_tests::sim::SimFaults {
            hung_hosts: 1.0,
            ..Default::default()
        },
        ..by_hand()
    }
}

/// Graceful, four runs: EC2's terminate fails in runs 1-3, each sending the record back
/// to `pending_delete` with one more attempt and a doubled delay (1 s, 2 s, 4 s); run 4,
/// when the last delay is over, terminates the instance and deletes the record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_delete_backs_off_through_three_ec2_failures_and_completes_in_run_four(
) -> anyhow::Result<()> {
    let p = Pipeline::start(by_hand_on_hung_hosts()).await?;
    let (runner, instance_id) = finished_runner(&p).await?;
    p.fleet.fail_terminate(3);
    let mut at = now();
    for attempt in 1..=3 {
        let report = p.reap_at(at).await?;
        assert_eq!(
            (report.backed_off, report.deleted),
            (1, 0),
            "run {attempt}: {report:?}"
        );
        let item = record(&p, &runner.name).await?;
        assert_eq!(item.status, InstanceStatus::PendingDelete);
        assert_eq!(item.attempts, attempt);
        // `next_attempt_at` is kept in milliseconds (the index's sort key).
        let delay = item.next_attempt_at - item.updated_at;
        let expected = time::Duration::try_from(backoff::delay_after(attempt))?;
        assert!(
            delay <= expected && expected - delay < time::Duration::milliseconds(1),
            "run {attempt}: next attempt in {delay}, expected {expected}"
        );
        let error = item.last_error.unwrap_or_default();
        assert!(error.contains("injected failure"), "{error}");
        assert_eq!(
            p.instance_state(&instance_id).await?,
            Some(InstanceState::Running)
        );
        at = item.next_attempt_at;
    }
    let report = p.reap_at(at).await?;
    assert_eq!((report.backed_off, report.deleted), (0, 1), "{report:?}");
    assert_gone(&p, &runner.name).await?;
    assert_eq!(p.fleet.terminate_calls(), 4);
    assert_eq!(p.store.get_pool(POOL).await?.slots_used, 0);
    assert_eq!(p.sim.snapshot().counters.jobs_killed, 0);
    Ok(())
}

/// Forced, one run for the record: the terminate failure is logged and ignored, and the
/// record is `deleted` at once with its slot given back — leaving the instance running
/// with no record. It is then an orphan: the sweep suspects it once past the grace (run
/// 2), its terminate fails twice more (runs 3 and 4), and run 5 terminates it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_delete_finishes_in_one_run_despite_ec2_failures_and_the_orphan_sweep_ends_the_instance(
) -> anyhow::Result<()> {
    let p = Pipeline::start(by_hand_on_hung_hosts()).await?;
    let (runner, instance_id) = finished_runner(&p).await?;
    // What `ephemera runners delete --force` writes once GitHub has let the runner go.
    let at = now();
    let force = Transition::new(
        InstanceStatus::PendingDelete,
        InstanceStatus::PendingForceDelete,
        at,
    )
    .because("operator --force");
    p.store.transition(&runner.name, &force).await?;
    p.fleet.fail_terminate(3);

    let report = p.reap_at(at).await?;
    assert_eq!((report.deleted, report.backed_off), (1, 0), "{report:?}");
    let deleted = record(&p, &runner.name).await?;
    assert_eq!(deleted.status, InstanceStatus::Deleted);
    assert_eq!(deleted.attempts, 0, "no retry for a forced delete");
    assert!(!deleted.slot_held);
    assert_eq!(p.store.get_pool(POOL).await?.slots_used, 0);
    assert_eq!(
        p.instance_state(&instance_id).await?,
        Some(InstanceState::Running),
        "the failed terminate was ignored, not retried"
    );
    assert!(!p.jit_config_exists(&instance_id).await?);

    let past_grace = at + p.config.reaper.orphan_grace + minutes(1);
    for run in 2..=4 {
        let report = p.reap_at(past_grace + minutes(run - 2)).await?;
        assert_eq!(report.orphans_reaped, 0, "run {run}: {report:?}");
        assert_eq!(
            p.instance_state(&instance_id).await?,
            Some(InstanceState::Running)
        );
    }
    assert_eq!(p.fleet.terminate_calls(), 3, "runs 1, 3 and 4 tried");
    let report = p.reap_at(past_grace + minutes(3)).await?;
    assert_eq!(report.orphans_reaped, 1, "run 5: {report:?}");
    assert_eq!(
        p.instance_state(&instance_id).await?,
        Some(InstanceState::Terminated)
    );
    assert_eq!(p.sim.snapshot().counters.jobs_killed, 0);
    Ok(())
}
