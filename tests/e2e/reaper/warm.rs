//! The warm pool end to end: a pool keeping two idle runners gets them from the reaper
//! (which reserves them) and the scaler (which creates them), registered and online on
//! the simulator before any job; a job then runs on one of them, and the next runs bring
//! the pool back to two idle runners — never above `max_runners`.

use super::*;
use ephemera_core::lifecycle::RunnerStatus;
use ephemera_core::model::JobStatus;
use ephemera_core::ports::RunnerStore;
use ephemera_tests::pipeline::{PipelineOptions, LABELS};
use std::collections::HashSet;

const MAX_RUNNERS: u32 = 2;

/// The pool's live records, checking on the way that it never holds more than allowed.
async fn live_runners(p: &Pipeline) -> anyhow::Result<Vec<RunnerRecord>> {
    let slots = p.store.get_pool(POOL).await?.slots_used;
    anyhow::ensure!(slots <= MAX_RUNNERS, "{slots} slots taken");
    let live = [
        InstanceStatus::PendingCreate,
        InstanceStatus::Creating,
        InstanceStatus::Running,
    ];
    Ok(p.store.list_runners(&live).await?)
}

/// Runs the reaper until the pool has two idle runners free for any job; returns their
/// names.
async fn two_idle(p: &Pipeline, what: &str) -> anyhow::Result<HashSet<String>> {
    p.wait_for(what, LIMIT, || async {
        p.reap_once().await?;
        let idle: HashSet<String> = live_runners(p)
            .await?
            .into_iter()
            .filter(|r| {
                r.status == InstanceStatus::Running && r.runner_status == RunnerStatus::Idle
            })
            .map(|r| r.name)
            .collect();
        Ok((idle.len() == 2).then_some(idle))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_pool_keeps_two_idle_runners_and_refills_after_a_job() -> anyhow::Result<()> {
    let p = Pipeline::start(PipelineOptions {
        max_runners: MAX_RUNNERS,
        reaper_interval: None,
        pool_extra: "    min_idle: 2\n    warm_owner: octo-org\n".to_owned(),
        ..PipelineOptions::default()
    })
    .await?;

    let first = p.reap_once().await?;
    assert_eq!(first.warm_requested, 2, "{first:?}");
    let warm = two_idle(&p, "two warm runners idle").await?;
    let online: HashSet<String> = p
        .sim
        .snapshot()
        .runners
        .values()
        .filter(|r| r.status == "online" && !r.busy)
        .map(|r| r.name.clone())
        .collect();
    assert_eq!(online, warm, "registered and online on GitHub, with no job");

    // The pool is full, so the job has no runner of its own: a warm one takes it.
    let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    let ran_on = p
        .wait_for("the job to complete", LIMIT, || async {
            Ok(p.store
                .get_job(job_id)
                .await?
                .filter(|j| j.status == JobStatus::Completed)
                .and_then(|j| j.runner_name))
        })
        .await?;
    assert!(warm.contains(&ran_on), "{ran_on} is not one of {warm:?}");

    let refilled = two_idle(&p, "the warm pool refilled").await?;
    assert!(!refilled.contains(&ran_on), "the used runner is gone");
    assert_eq!(
        refilled.intersection(&warm).count(),
        1,
        "one old, one new: {refilled:?}"
    );
    assert_eq!(record(&p, &ran_on).await?.status, InstanceStatus::Deleted);
    Ok(())
}
