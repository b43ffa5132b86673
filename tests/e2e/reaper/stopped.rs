//! The stopped pool end to end in the strict world (docs/design.md, "Stopped pool"): the
//! reaper reserves a pool's `stopped` instances, the scaler launches each with the stop
//! behaviour and a `prepare` JIT item, the simulated host prepares and powers off, EC2
//! (the strict layer) stops it, and the reaper records it `stopped`, with no JIT config
//! anywhere. A job then takes one and runs on it once started, with no launch of its
//! own, and the next reaper runs refill the pool; a start refused for capacity launches
//! for the job instead and replaces the refused instance.

use super::*;
use aws_sdk_ec2::types::InstanceAttributeName;
use ephemera_core::model::JobStatus;
use ephemera_core::ports::{InstanceState, RunnerStore};
use ephemera_tests::pipeline::{PipelineOptions, LABELS};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

/// How long a phase may take: instances launch, boot, stop and start in seconds here.
const PHASE: Duration = Duration::from_secs(20);
/// Pause between two reaper runs while waiting on the pool.
const BETWEEN_RUNS: Duration = Duration::from_millis(300);

/// A pipeline whose pool keeps `stopped` instances, the reaper driven by hand (pricing
/// in us-east-1), EC2's stop and start a second each.
async fn stopped_pool(stopped: u32, max_runners: u32) -> anyhow::Result<Pipeline> {
    let p = Pipeline::start(PipelineOptions {
        max_runners,
        reaper_interval: None,
        priced_in: Some("us-east-1"),
        pool_extra: format!("    stopped: {stopped}\n    warm_owner: octo-org\n"),
        ..PipelineOptions::default()
    })
    .await?;
    p.moto
        .set_strict(json!({"ec2_stop_seconds": 1, "ec2_start_seconds": 1}))
        .await?;
    Ok(p)
}

/// The pool's records marked `prepare` that are `stopped`, by name, with their instance.
async fn stopped_records(p: &Pipeline) -> anyhow::Result<BTreeMap<String, String>> {
    let records = p.store.list_runners(&[InstanceStatus::Stopped]).await?;
    Ok(records
        .into_iter()
        .filter(|r| r.prepare && r.pool == POOL && r.job_id.is_none())
        .filter_map(|r| Some((r.name, r.instance_id?)))
        .collect())
}

/// Runs the reaper (at most one run per [`BETWEEN_RUNS`], for at most [`PHASE`]) until
/// `count` records other than `besides` are `stopped`; returns them.
async fn stopped_besides(
    p: &Pipeline,
    count: usize,
    besides: &BTreeMap<String, String>,
) -> anyhow::Result<BTreeMap<String, String>> {
    let started = std::time::Instant::now();
    for _ in 0..(PHASE.as_millis() / BETWEEN_RUNS.as_millis()) {
        p.reap_once().await?;
        let mut stopped = stopped_records(p).await?;
        stopped.retain(|name, _| !besides.contains_key(name));
        if stopped.len() == count {
            return Ok(stopped);
        }
        anyhow::ensure!(stopped.len() < count, "too many stopped: {stopped:?}");
        if started.elapsed() > PHASE {
            break;
        }
        tokio::time::sleep(BETWEEN_RUNS).await;
    }
    anyhow::bail!("{count} new stopped records not seen within {PHASE:?}")
}

/// The instance ARNs of JIT items that hold a config, scanned as the operator.
async fn items_with_a_config(p: &Pipeline) -> anyhow::Result<Vec<String>> {
    let jit = p.jit_configs();
    let items = aws_sdk_dynamodb::Client::new(&p.sdk)
        .scan()
        .table_name(jit.table())
        .consistent_read(true)
        .into_paginator()
        .items()
        .send()
        .collect::<Result<Vec<_>, _>>()
        .await?;
    let arn = ephemera_aws::jit::INSTANCE_ARN;
    Ok(items
        .iter()
        .filter(|item| item.contains_key(ephemera_aws::jit::JIT_CONFIG))
        .filter_map(|item| item.get(arn)?.as_s().ok().cloned())
        .collect())
}

/// The instance's shutdown behaviour, as EC2 says it to the operator.
async fn shutdown_behaviour(p: &Pipeline, instance_id: &str) -> anyhow::Result<String> {
    let attribute = aws_sdk_ec2::Client::new(&p.sdk)
        .describe_instance_attribute()
        .instance_id(instance_id)
        .attribute(InstanceAttributeName::InstanceInitiatedShutdownBehavior)
        .send()
        .await?;
    let value = attribute
        .instance_initiated_shutdown_behavior()
        .and_then(|v| v.value());
    Ok(value.unwrap_or_default().to_owned())
}

/// Checks (a): each record's instance is EC2-`stopped`, set back to `terminate`, and no
/// JIT item holds a config.
async fn check_prepared(p: &Pipeline, stopped: &BTreeMap<String, String>) -> anyhow::Result<()> {
    for (name, instance_id) in stopped {
        let state = p.instance_state(instance_id).await?;
        assert_eq!(state, Some(InstanceState::Stopped), "{name} {instance_id}");
        assert_eq!(shutdown_behaviour(p, instance_id).await?, "terminate");
    }
    assert_eq!(items_with_a_config(p).await?, Vec::<String>::new());
    Ok(())
}

/// Waits for job `job_id` to complete; returns the instance of the runner GitHub says
/// ran it (the record of that runner names its instance).
async fn completed_on(p: &Pipeline, job_id: u64) -> anyhow::Result<String> {
    let what = format!("job {job_id} to complete");
    p.wait_for(&what, PHASE, || async {
        let done = p.store.get_job(job_id).await?;
        Ok(done
            .filter(|j| j.status == JobStatus::Completed)
            .map(|_| ()))
    })
    .await?;
    let job = p.sim.snapshot().jobs[&job_id].clone();
    assert_eq!(job.conclusion.as_deref(), Some("success"), "{job:?}");
    let runner = job.runner_name.as_deref().unwrap_or_default();
    let instance = record(p, runner).await?.instance_id;
    instance.ok_or_else(|| anyhow::anyhow!("job {job_id}'s runner {runner} has no instance"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_pool_prepares_two_instances_that_two_jobs_start_and_refills(
) -> anyhow::Result<()> {
    let p = stopped_pool(2, 4).await?;

    // (a) Two instances prepared and stopped, with no config anywhere.
    let first = p.reap_once().await?;
    assert_eq!(first.stopped_requested, 2, "{first:?}");
    let prepared = stopped_besides(&p, 2, &BTreeMap::new()).await?;
    check_prepared(&p, &prepared).await?;
    assert_eq!(p.sim.snapshot().counters.hosts_prepared, 2);
    assert_eq!(p.fleet.launch_calls(), 2, "one launch each");

    // (b) Two jobs take them: each runs on one of the two, started, with no launch.
    let jobs = [
        p.sim.create_job("octo-org", "app", &LABELS, None).await?,
        p.sim.create_job("octo-org", "app", &LABELS, None).await?,
    ];
    let mut ran_on = BTreeSet::new();
    for job_id in jobs {
        ran_on.insert(completed_on(&p, job_id).await?);
    }
    let stopped_instances: BTreeSet<String> = prepared.values().cloned().collect();
    assert_eq!(ran_on, stopped_instances, "each job on a stopped instance");
    assert_eq!(p.fleet.launch_calls(), 2, "no launch for the jobs");

    // Both slots refilled: two new instances prepared and stopped.
    let refilled = stopped_besides(&p, 2, &prepared).await?;
    check_prepared(&p, &refilled).await?;
    assert_eq!(p.fleet.launch_calls(), 4, "one launch per refilled slot");
    assert_eq!(p.sim.snapshot().counters.jobs_killed, 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_refused_for_capacity_launches_for_the_job_and_replaces_the_instance(
) -> anyhow::Result<()> {
    let p = stopped_pool(1, 3).await?;
    let prepared = stopped_besides(&p, 1, &BTreeMap::new()).await?;
    let (refused, refused_instance) = prepared.iter().next().expect("one stopped record");
    assert_eq!(p.fleet.launch_calls(), 1);

    // (c) The next StartInstances is refused for capacity: the job is launched for.
    p.moto
        .set_strict(json!({"ec2_start_insufficient_capacity": 1}))
        .await?;
    // It waits stopped a few seconds, to be priced as its volume.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    let ran_on = completed_on(&p, job_id).await?;
    assert_ne!(&ran_on, refused_instance, "the job ran on a launch");
    assert_eq!(p.fleet.launch_calls(), 2, "one launch for the job");
    let stats = p.moto.strict_stats().await?;
    assert_eq!(stats.count("ec2_start_insufficient_capacity"), 1);
    let ended = [
        InstanceStatus::PendingDelete,
        InstanceStatus::Deleting,
        InstanceStatus::Deleted,
    ];
    let status = record(&p, refused).await?.status;
    assert!(ended.contains(&status), "{refused} is {status}");

    // The refused instance is replaced: its record ended, the instance terminated.
    let what = "the refused instance replaced";
    p.wait_for(what, PHASE, || async {
        p.reap_once().await?;
        let gone = matches!(
            p.instance_state(refused_instance).await?,
            None | Some(InstanceState::Terminated)
        );
        let status = record(&p, refused).await?.status;
        Ok((gone && status == InstanceStatus::Deleted).then_some(()))
    })
    .await?;

    // Its cost: the time it waited stopped priced as its root volume (gp3's GB-month
    // price), counted by pool in `ephemera costs`.
    let cost = record(&p, refused)
        .await?
        .cost
        .expect("priced at its deletion");
    assert!(cost.stopped_seconds >= 3, "{cost:?}");
    let volume = cost.volume_usd_micros.expect("the gp3 price was read");
    assert!(
        volume > 0 && cost.usd_micros.is_some_and(|all| all > volume),
        "{cost:?}"
    );
    let op = crate::cli::Operator::new(&p)?;
    let out = op
        .run(&["costs", "--since", "1h", "--json"])?
        .assert()
        .success();
    let sums: serde_json::Value = serde_json::from_slice(&out.get_output().stdout)?;
    let pool = &sums["by_pool"][POOL];
    assert!(
        pool["stopped_seconds"].as_u64().is_some_and(|s| s >= 3),
        "{sums}"
    );
    assert_eq!(
        pool["stopped_volumes_usd"].as_f64(),
        Some(ephemera_core::prices::usd_f64(volume)),
        "{sums}"
    );
    let out = op.run(&["costs", "--since", "1h"])?.assert().success();
    let text = crate::cli::stdout_of(out.get_output());
    assert!(
        text.contains("STOPPED-HOURS") && text.contains("VOLUMES"),
        "{text}"
    );
    Ok(())
}
