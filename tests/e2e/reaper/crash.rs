//! Crash injection: the scaler is stopped dead between each pair of its external calls
//! (after 0, 1, 2, ... calls, until one run completes without a crash), and after at
//! most two reaper runs nothing is leaked: every instance and GitHub runner of the
//! deployment has a live record, no JIT config waits for an instance without one, and
//! the pool counter equals the slots the live records hold. And a job handed to the
//! record the scaler died on runs on it.

use super::*;
use ephemera_core::handlers::scaler::Scaler;
use ephemera_core::memory::{CrashSwitch, Intercept};
use ephemera_core::message::QueueMessage;
use ephemera_core::ports::*;
use ephemera_tests::pipeline::{PipelineOptions, LABELS};
use std::collections::HashSet;
use std::sync::Arc;

/// The scaler with every port behind `switch`.
fn crashing_scaler(p: &Pipeline, switch: &Arc<CrashSwitch>) -> Arc<Scaler> {
    let store: Arc<dyn RunnerStore> = p.store.clone();
    let launcher: Arc<dyn Launcher> = p.fleet.clone();
    let forge: Arc<dyn Forge> = p.scaler_forge.clone();
    let jit_store: Arc<dyn JitConfigStore> = Arc::new(p.jit_configs());
    let queue: Arc<dyn JobQueue> = p.queue.clone();
    Arc::new(Scaler::bare(
        p.config.clone(),
        Intercept::new(store, switch),
        Intercept::new(launcher, switch),
        Intercept::new(forge, switch),
        Intercept::new(jit_store, switch),
        Intercept::new(queue, switch),
    ))
}

fn queued(job_id: u64, run_id: u64) -> QueueMessage {
    queued_message("crash", job_id, run_id)
}

/// Every live runner record, by the status index.
async fn live_records(p: &Pipeline) -> anyhow::Result<Vec<RunnerRecord>> {
    let far = now() + Duration::from_secs(366 * 24 * 3600);
    let mut live = Vec::new();
    for status in InstanceStatus::ALL.into_iter().filter(|s| s.is_live()) {
        live.extend(p.store.runners_in_status(status, far, 1000).await?);
    }
    Ok(live)
}

/// What is leaked: instances, GitHub runners and JIT configs without a live record, and
/// a pool counter that differs from the slots held.
async fn leaks(p: &Pipeline) -> anyhow::Result<Vec<String>> {
    let live = live_records(p).await?;
    let names: HashSet<&str> = live.iter().map(|r| r.name.as_str()).collect();
    let instances: HashSet<&str> = live
        .iter()
        .filter_map(|r| r.instance_id.as_deref())
        .collect();
    let mut leaks = Vec::new();
    for instance in p.fleet.inner().describe().await? {
        let alive = !matches!(
            instance.state,
            InstanceState::Terminated | InstanceState::ShuttingDown
        );
        if alive && !instances.contains(instance.id.as_str()) {
            leaks.push(format!("instance {} ({:?})", instance.id, instance.state));
        }
    }
    for runner in p.sim.snapshot().runners.values() {
        if !names.contains(runner.name.as_str()) {
            leaks.push(format!("GitHub runner {}", runner.name));
        }
    }
    for instance_arn in p.waiting_jit_configs().await? {
        let instance_id = instance_arn.rsplit('/').next().unwrap_or_default();
        if !instances.contains(instance_id) {
            leaks.push(format!("JIT config {instance_arn}"));
        }
    }
    let held = live.iter().filter(|r| r.slot_held).count() as u32;
    let counter = p.store.get_pool(POOL).await?.slots_used;
    if counter != held {
        leaks.push(format!("pool counter {counter}, slots held {held}"));
    }
    Ok(leaks)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaler_crash_between_any_two_calls_leaks_nothing_after_two_reaper_runs(
) -> anyhow::Result<()> {
    let options = PipelineOptions {
        reaper_interval: None,
        drain_queue: false,
        ..PipelineOptions::default()
    };
    let p = Pipeline::start(options).await?;
    lose_webhooks(&p)?;
    let switch = CrashSwitch::new();
    let scaler = crashing_scaler(&p, &switch);
    let mut clock = now();
    for calls in 0..40 {
        let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
        let run_id = p.sim.snapshot().jobs[&job_id].run_id;
        switch.arm(calls);
        let message = queued(job_id, run_id);
        let crashed = tokio::select! {
            _ = scaler.handle(&message, now()) => false,
            _ = switch.crashed() => true,
        };
        switch.disarm();
        // Two reaper runs, past every timeout and grace.
        clock = clock.max(now()) + minutes(25);
        p.reap_at(clock).await?;
        clock += minutes(1);
        p.reap_at(clock).await?;
        let leaked = leaks(&p).await?;
        assert!(
            leaked.is_empty(),
            "crash after {calls} calls leaked: {leaked:?}"
        );
        if !crashed {
            // Every earlier iteration crashed at its own point.
            let crash_points = calls;
            println!(
                "the scaler makes {} external calls for a job; {crash_points} crash points swept",
                switch.calls()
            );
            assert!(crash_points >= 8, "only {crash_points} crash points");
            return Ok(());
        }
    }
    anyhow::bail!("the scaler never finished a job without a crash")
}

/// The scaler dies right after writing the runner record of job A (claimed, nothing
/// launched); GitHub then gives A to the runner launched for job B. Job B is handed to
/// A's stalled record, whose creation resumes, and B runs on it: at the latest within 2
/// reaper runs past the creation lease (here at once, through the hand-over's message).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_handed_to_a_record_the_scaler_died_on_runs_on_it() -> anyhow::Result<()> {
    let options = PipelineOptions {
        reaper_interval: None,
        pickup_delay: Duration::from_secs(1),
        ..PipelineOptions::default()
    };
    let p = Pipeline::start(options).await?;
    lose_webhooks(&p)?;
    let job_a = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    let run_a = p.sim.snapshot().jobs[&job_a].run_id;
    // Stop the scaler at its first call after the claim wrote the record.
    let switch = CrashSwitch::new();
    let scaler = crashing_scaler(&p, &switch);
    let mut stalled = None;
    for calls in 0..10 {
        switch.arm(calls);
        let message = queued(job_a, run_a);
        let crashed = tokio::select! {
            _ = scaler.handle(&message, now()) => false,
            _ = switch.crashed() => true,
        };
        switch.disarm();
        anyhow::ensure!(
            crashed,
            "the scaler finished job {job_a} before any record stalled"
        );
        if let Some(record) = p.runner_for_job(job_a).await? {
            stalled = Some(record);
            break;
        }
    }
    let stalled = stalled.ok_or_else(|| anyhow::anyhow!("no record was ever written"))?;
    assert_eq!(stalled.status, InstanceStatus::PendingCreate);
    assert!(stalled.instance_id.is_none());

    // Job B is delivered; its runner comes online and GitHub gives it the older job A.
    p.sim.set_webhook_url(&p.webhook_url);
    let job_b = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    let clock = now() + ephemera_core::lifecycle::CREATE_LEASE + minutes(1);
    for _ in 0..2 {
        p.wait_for("both jobs to have run", LIMIT, || async {
            let sim = p.sim.snapshot();
            let done = [job_a, job_b]
                .iter()
                .all(|id| sim.jobs[id].status == "completed");
            Ok(done.then_some(()))
        })
        .await
        .ok();
        p.reap_at(clock).await?;
    }
    let sim = p.sim.snapshot();
    for id in [job_a, job_b] {
        assert_eq!(
            sim.jobs[&id].conclusion.as_deref(),
            Some("success"),
            "job {id}"
        );
    }
    assert_eq!(
        sim.jobs[&job_b].runner_name.as_deref(),
        Some(stalled.name.as_str()),
        "job B ran on the record the scaler died on"
    );
    assert_eq!(sim.counters.runners_registered, 2);
    assert_eq!(sim.counters.jobs_killed, 0);
    let leaked = leaks(&p).await?;
    assert!(leaked.is_empty(), "{leaked:?}");
    Ok(())
}
