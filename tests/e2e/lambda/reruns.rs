//! The re-run of an interrupted job, in the strict world, through the reaper's Lambda
//! entry point: a spot runner is interrupted in the middle of its job (the simulator
//! warns, then EC2 reclaims the instance and GitHub fails the job with its shutdown
//! message); the re-run waits while another job of the same workflow run still runs,
//! is asked exactly once when the run completes, and its new job runs to success on an
//! on-demand runner. A job that fails for another reason is never re-run, the
//! interrupted record says so, nothing leaks and no busy runner is killed.

use super::follow::deployment_environment;
use crate::cli::config_yaml;
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::ports::{Fleet, Market, RunnerStore};
use ephemera_tests::functions::Function;
use ephemera_tests::pipeline::{Pipeline, PipelineOptions, DEPLOYMENT};
use ephemera_tests::sim::state::SHUTDOWN_SIGNAL;
use ephemera_tests::sim::SimState;
use serde_json::json;
use std::time::{Duration, Instant};

const LABELS: [&str; 3] = ["self-hosted", "linux", "x64"];
const SPOT: &str = "    spot: true\n";
const RERUN_ROUTE: &str = "POST /repos/{owner}/{repo}/actions/jobs/{job_id}/rerun";

/// Waits (at most 90 s) until `done` holds for the simulator's state, invoking the
/// reaper's schedule between looks when `reaper` is given.
async fn wait_for(
    p: &Pipeline,
    mut reaper: Option<&mut Function>,
    what: &str,
    done: impl Fn(&SimState) -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if done(&p.sim.snapshot()) {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "timed out waiting for {what}");
        if let Some(reaper) = reaper.as_deref_mut() {
            reaper
                .invoke(json!({"source": "aws.events", "detail-type": "Scheduled Event"}))
                .await?;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn reruns_asked(state: &SimState) -> u64 {
    state
        .counters
        .api_calls
        .get(RERUN_ROUTE)
        .copied()
        .unwrap_or(0)
}

#[tokio::test]
async fn an_interrupted_job_is_rerun_once_on_demand_and_no_other_failed_job_is(
) -> anyhow::Result<()> {
    let p = Pipeline::start(PipelineOptions {
        job_duration: Duration::from_secs(2),
        reaper_interval: None,
        pool_extra: SPOT.to_owned(),
        ..PipelineOptions::default()
    })
    .await?;
    let config = format!("{}{SPOT}", config_yaml(DEPLOYMENT, &p.sim.url));
    let env = deployment_environment(&p, &config, &[]).await?;
    let mut reaper = Function::start("reaper", &env).await?;

    // Job A runs long; job B, of the same workflow run, keeps the run in progress a while;
    // job C fails on its own (a step's exit code).
    let a = p
        .sim
        .create_job("octo-org", "app", &LABELS, Some(Duration::from_secs(600)))
        .await?;
    let b = p
        .sim
        .create_job("octo-org", "app", &LABELS, Some(Duration::from_secs(25)))
        .await?;
    let c = p
        .sim
        .create_job("octo-org", "app", &LABELS, Some(Duration::from_secs(1)))
        .await?;
    let run_id = p.sim.with_state(|s| {
        let run_id = s.jobs[&a].run_id;
        s.jobs.get_mut(&b).expect("job b").run_id = run_id;
        s.jobs.get_mut(&c).expect("job c").failure =
            Some("Process completed with exit code 1.".into());
        run_id
    });
    wait_for(&p, None, "jobs A and B to start", |s| {
        s.jobs[&a].status == "in_progress" && s.jobs[&b].status == "in_progress"
    })
    .await?;
    let runner_a = p.runner_for_job(a).await?.expect("A's runner");
    assert_eq!(runner_a.market, Some(Market::Spot));

    // EC2 warns, the reaper records it; two minutes later EC2 reclaims the instance and
    // GitHub fails the job.
    let interruption = p.sim.spot_interruption_warning(a)?;
    let warned = reaper.invoke(interruption.warning.clone()).await?;
    assert_eq!(
        warned["instance_event"]["outcome"], "warning_recorded",
        "{warned}"
    );
    let terminated = p.sim.reclaim(&interruption).await?;
    let answer = reaper.invoke(terminated).await?;
    assert!(answer["instance_event"]["outcome"].is_string(), "{answer}");
    let failed = p.sim.snapshot().jobs[&a].clone();
    assert_eq!(failed.conclusion.as_deref(), Some("failure"));
    assert_eq!(failed.failure.as_deref(), Some(SHUTDOWN_SIGNAL));

    // While B still runs, the run is in progress: scheduled runs ask nothing.
    wait_for(&p, None, "job C to fail", |s| {
        s.jobs[&c].status == "completed"
    })
    .await?;
    for _ in 0..3 {
        reaper
            .invoke(json!({"source": "aws.events", "detail-type": "Scheduled Event"}))
            .await?;
    }
    let state = p.sim.snapshot();
    assert_eq!(
        state.jobs[&b].status, "in_progress",
        "B ran too short for this test"
    );
    assert_eq!(reruns_asked(&state), 0);

    // B done, the run completes: the next runs ask once, and the re-run's job runs to
    // success on an on-demand runner.
    let rerun_of_a = |s: &SimState| {
        s.jobs
            .values()
            .find(|j| j.run_id == run_id && j.run_attempt == 2)
            .cloned()
    };
    wait_for(&p, Some(&mut reaper), "the re-run to succeed", |s| {
        rerun_of_a(s).is_some_and(|j| j.conclusion.as_deref() == Some("success"))
    })
    .await?;
    let rerun = rerun_of_a(&p.sim.snapshot()).expect("re-run");
    let runner = p
        .runner_for_job(rerun.id)
        .await?
        .expect("the re-run's runner");
    assert_eq!(runner.market, Some(Market::OnDemand), "{runner:?}");

    // Everything is cleaned up; the reaper's later runs ask nothing more.
    wait_for(&p, Some(&mut reaper), "every runner to be removed", |s| {
        s.runners.is_empty()
    })
    .await?;
    let state = p.sim.snapshot();
    assert_eq!(reruns_asked(&state), 1, "{:?}", state.counters.api_calls);
    assert_eq!(state.counters.jobs_rerun, 1);
    assert_eq!(state.counters.jobs_killed, 0, "no busy runner is killed");
    let c_run = state.jobs[&c].run_id;
    assert!(
        !state
            .jobs
            .values()
            .any(|j| j.run_id == c_run && j.run_attempt > 1),
        "job C failed on its own and is never re-run"
    );
    let record = p
        .store
        .get_runner(&runner_a.name)
        .await?
        .expect("A's record");
    assert!(record.interrupted_at.is_some(), "{:?}", record.history);
    let said = record
        .history
        .iter()
        .filter_map(|h| h.reason.as_deref())
        .collect::<Vec<_>>()
        .join(" | ");
    assert!(said.contains("spot interruption"), "{said}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let live = p.fleet.describe_live().await?;
        let mut records = Vec::new();
        for job in [a, b, c, rerun.id] {
            records.extend(p.runner_for_job(job).await?);
        }
        let open: Vec<_> = records
            .iter()
            .filter(|r| r.status != InstanceStatus::Deleted)
            .map(|r| (r.name.clone(), r.status))
            .collect();
        if live.is_empty() && open.is_empty() {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "left behind: instances {live:?}, records {open:?}"
        );
        reaper
            .invoke(json!({"source": "aws.events", "detail-type": "Scheduled Event"}))
            .await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}
