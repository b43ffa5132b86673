//! A spot interruption through the reaper's Lambda entry point, as EventBridge delivers
//! EC2's events to it: the warning is recorded on the runner while its job runs; EC2
//! reclaims the instance (terminated in moto; the simulator fails the job, as GitHub
//! does when a runner's host disappears); the termination event sends the record to be
//! deleted with the interruption as its reason; the next scheduled run removes the
//! runner's GitHub registration. An event about another instance changes nothing. And
//! the spot circuit breaker: interruptions past the pool's allowance send its next launch
//! on-demand, and `ephemera pools` says so.

use super::follow::deployment_environment;
use crate::cli::{config_yaml, Operator};
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::ports::{Fleet, Market, RunnerStore};
use ephemera_tests::functions::Function;
use ephemera_tests::pipeline::{Pipeline, PipelineOptions, DEPLOYMENT};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const LABELS: [&str; 3] = ["self-hosted", "linux", "x64"];

fn ec2_event(detail_type: &str, detail: Value) -> Value {
    json!({
        "version": "0",
        "id": "7bf73129-1428-4cd3-a780-95db273d1602",
        "detail-type": detail_type,
        "source": "aws.ec2",
        "account": "123456789012",
        "time": "2026-01-01T12:00:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": detail,
    })
}

#[tokio::test]
async fn an_interrupted_spot_runner_is_recorded_and_removed_from_github_once_gone(
) -> anyhow::Result<()> {
    let p = Pipeline::start(PipelineOptions {
        job_duration: Duration::from_secs(600),
        reaper_interval: None,
        ..PipelineOptions::default()
    })
    .await?;
    let config = config_yaml(DEPLOYMENT, &p.sim.url);
    let env = deployment_environment(&p, &config, &[]).await?;
    let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while p.sim.snapshot().jobs[&job_id].status != "in_progress" {
        anyhow::ensure!(Instant::now() < deadline, "job {job_id} never started");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let runner = p
        .runner_for_job(job_id)
        .await?
        .expect("a runner for the job");
    let instance_id = runner.instance_id.clone().expect("launched");
    let mut reaper = Function::start("reaper", &env).await?;

    let other = reaper
        .invoke(ec2_event(
            "EC2 Instance State-change Notification",
            json!({"instance-id": "i-0123456789abcdef0", "state": "terminated"}),
        ))
        .await?;
    assert_eq!(other, json!({"instance_event": {"outcome": "not_ours"}}));

    let warned = reaper
        .invoke(ec2_event(
            "EC2 Spot Instance Interruption Warning",
            json!({"instance-id": instance_id, "instance-action": "terminate"}),
        ))
        .await?;
    assert_eq!(
        warned,
        json!({"instance_event": {"outcome": "warning_recorded", "runner": runner.name}})
    );
    let record = p.runner_for_job(job_id).await?.expect("record");
    assert_eq!(
        record.interrupted_at,
        Some(time::macros::datetime!(2026-01-01 12:00:00 UTC)),
        "the warning's time, kept on the record"
    );
    assert_eq!(record.status, InstanceStatus::Running, "its job still runs");

    // Two minutes later EC2 reclaims the instance, and GitHub fails the job; which of
    // EC2's termination event and GitHub's `completed` comes first varies, and either way
    // the record goes to be deleted saying why.
    p.fleet.terminate(&instance_id).await?;
    let terminated = reaper
        .invoke(ec2_event(
            "EC2 Instance State-change Notification",
            json!({"instance-id": instance_id, "state": "terminated"}),
        ))
        .await?;
    let outcome = terminated["instance_event"]["outcome"].clone();
    assert!(
        outcome == "sent_to_delete" || outcome == "nothing",
        "{terminated}"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while p.sim.snapshot().jobs[&job_id].status != "completed" {
        anyhow::ensure!(Instant::now() < deadline, "the job outlived its host");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let record = p.store.get_runner(&runner.name).await?.expect("record");
    assert!(
        matches!(
            record.status,
            InstanceStatus::PendingDelete | InstanceStatus::Deleting | InstanceStatus::Deleted
        ),
        "{record:?}"
    );
    let reason = record.reason.clone().unwrap_or_default();
    assert!(reason.contains("spot interruption"), "{reason}");

    // The next scheduled run removes the registration and the record.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        reaper
            .invoke(json!({"source": "aws.events", "detail-type": "Scheduled Event"}))
            .await?;
        let record = p.store.get_runner(&runner.name).await?.expect("record");
        let registered = p
            .sim
            .snapshot()
            .runners
            .values()
            .any(|r| r.name == runner.name);
        if record.status == InstanceStatus::Deleted && !registered {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "still {} and registered: {registered}",
            record.status
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

#[tokio::test]
async fn a_spike_of_interruptions_sends_the_pools_next_launch_on_demand_and_pools_says_so(
) -> anyhow::Result<()> {
    const SPOT: &str = "    spot: true\n    spot_breaker: { interruptions: 1, cool_down: 30m }\n";
    let p = Pipeline::start(PipelineOptions {
        job_duration: Duration::from_secs(600),
        reaper_interval: None,
        pool_extra: SPOT.to_owned(),
        ..PipelineOptions::default()
    })
    .await?;
    // The reaper function runs the same pool, as the deployment's parameter holds it.
    let config = format!("{}{SPOT}", config_yaml(DEPLOYMENT, &p.sim.url));
    let env = deployment_environment(&p, &config, &[]).await?;
    let mut instances = Vec::new();
    for _ in 0..2 {
        let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
        let runner = wait_for_runner(&p, job_id).await?;
        assert_eq!(runner.market, Some(Market::Spot));
        instances.push(runner.instance_id.expect("launched"));
    }
    let mut reaper = Function::start("reaper", &env).await?;
    // The first instance reported twice counts once: the pool allows one.
    for instance_id in [&instances[0], &instances[0], &instances[1]] {
        let answer = reaper
            .invoke(ec2_event(
                "EC2 Spot Instance Interruption Warning",
                json!({"instance-id": instance_id, "instance-action": "terminate"}),
            ))
            .await?;
        assert_eq!(answer["instance_event"]["outcome"], "warning_recorded");
    }

    // The next job's runner is bought on-demand.
    let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    let runner = wait_for_runner(&p, job_id).await?;
    assert_eq!(runner.market, Some(Market::OnDemand), "{runner:?}");

    let op = Operator::new(&p)?;
    let out = op.run(&["pools", "--json"])?.assert().success();
    let json: Value = serde_json::from_slice(&out.get_output().stdout)?;
    let pool = &json["pools"][0];
    assert_eq!(pool["spot_interruptions"], 2, "{json}");
    let until = pool["spot_paused_until"].as_str().expect("paused");
    let until = time::OffsetDateTime::parse(until, &time::format_description::well_known::Rfc3339)?;
    let left = until - time::OffsetDateTime::now_utc();
    assert!(
        left > time::Duration::minutes(25) && left <= time::Duration::minutes(30),
        "{left}"
    );
    let out = op.run(&["pools"])?.assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone())?;
    assert!(
        text.contains("linux-x64: spot paused until") && text.contains("launches go on-demand"),
        "{text}"
    );
    Ok(())
}

/// The runner the scaler launched for `job_id`, once it has its instance (at most 60 s).
async fn wait_for_runner(
    p: &Pipeline,
    job_id: u64,
) -> anyhow::Result<ephemera_core::model::RunnerRecord> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(runner) = p.runner_for_job(job_id).await? {
            if runner.instance_id.is_some() && runner.market.is_some() {
                return Ok(runner);
            }
        }
        anyhow::ensure!(Instant::now() < deadline, "no runner for job {job_id}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
