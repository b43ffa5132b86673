//! The simulator's stopped pool host against moto: a host whose JIT item says `prepare`
//! powers off once (its stop behaviour stops it); started again with its item still
//! saying `prepare`, it waits and stays up; once its config replaces the item, it reads
//! it, runs its job and powers off as any runner host.

use super::agent::{
    agent_world, instance_state, jit_item, launch_tagged, wait_for_state, AgentWorld,
};
use super::register_with;
use anyhow::Context;
use aws_sdk_ec2::types::{InstanceAttributeName, InstanceStateName, ShutdownBehavior};
use ephemera_core::ports::{JitConfig, JitConfigStore};
use ephemera_core::webhook::JobAction;
use std::time::Duration;

const DEPLOYMENT: &str = "eph-prep";
const RUNNER: &str = "eph-prep-linux-1";

/// Starts the instance (the strict layer: pending, then running) and waits until it runs.
async fn start(world: &AgentWorld, instance_id: &str) -> anyhow::Result<()> {
    let call = world.ec2.start_instances().instance_ids(instance_id);
    call.send().await?;
    wait_for_state(world, instance_id, InstanceStateName::Running).await
}

/// The agent's counts of hosts that prepared and that powered off.
fn power_counts(world: &AgentWorld) -> (u64, u64) {
    let counters = world.sim.snapshot().counters;
    (counters.hosts_prepared, counters.hosts_powered_off)
}

#[tokio::test]
async fn a_prepare_host_powers_off_once_and_once_started_runs_the_config_that_replaced_it(
) -> anyhow::Result<()> {
    let world = agent_world(DEPLOYMENT, Duration::from_millis(300)).await?;
    let quick = serde_json::json!({"ec2_stop_seconds": 1, "ec2_start_seconds": 1});
    world.moto.set_strict(quick).await?;
    // As the scaler does: the stop behaviour set before the prepare item is written.
    let instance_id = launch_tagged(&world, DEPLOYMENT, RUNNER, ShutdownBehavior::Stop).await?;
    world.jit.put_prepare(&instance_id, RUNNER).await?;
    wait_for_state(&world, &instance_id, InstanceStateName::Stopped).await?;
    assert_eq!(power_counts(&world), (1, 1));

    // Started with its item still saying prepare: it waits for its config, many ticks.
    start(&world, &instance_id).await?;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        instance_state(&world, &instance_id).await?,
        InstanceStateName::Running
    );
    assert_eq!(power_counts(&world), (1, 1), "it prepares only once");

    // A take: the runner registered, its config over the prepare item, the behaviour
    // back to terminate (the reaper's reset); the host reads it and runs the job.
    let answer = register_with(&world.sim, &world.token, RUNNER, &["linux"]).await?;
    let jit = JitConfig {
        runner_id: answer["runner"]["id"].as_u64().context("runner id")?,
        encoded: answer["encoded_jit_config"]
            .as_str()
            .context("jit config")?
            .to_owned()
            .into(),
    };
    world.jit.put(&instance_id, RUNNER, &jit).await?;
    world
        .ec2
        .modify_instance_attribute()
        .instance_id(&instance_id)
        // The `Attribute`/`Value` form, the one moto implements (as the reaper sends it).
        .attribute(InstanceAttributeName::InstanceInitiatedShutdownBehavior)
        .value("terminate")
        .send()
        .await?;
    let job_id = world
        .sim
        .create_job("acme", "app", &["linux"], None)
        .await?;
    world.receiver.wait_for(3, Duration::from_secs(20)).await?;
    let last = world.receiver.events().pop().context("a delivery")?;
    assert_eq!(last, (JobAction::Completed, job_id, "success".into()));
    let job = world.sim.snapshot().jobs[&job_id].clone();
    assert_eq!(job.runner_name.as_deref(), Some(RUNNER));
    let tombstone = jit_item(&world, &instance_id)
        .await?
        .context("a tombstone")?;
    assert!(!tombstone.contains_key(ephemera_aws::jit::JIT_CONFIG));
    assert!(tombstone.contains_key(ephemera_aws::jit::JIT_READ_AT));
    wait_for_state(&world, &instance_id, InstanceStateName::Terminated).await?;
    Ok(())
}
