//! The simulator's runner agent against moto: a job runs on its instance, the runner
//! deregisters and the host powers off (terminated, or stopped, as its shutdown
//! behaviour says; left running when it hangs); jobs go only to runners with all of
//! their labels; a terminated busy instance counts as a killed job.

use super::{config, installation_token, register_with, Receiver};
use anyhow::Context;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_ec2::types::{
    InstanceStateName, ResourceType, ShutdownBehavior, Tag, TagSpecification,
};
use ephemera_aws::{DynamoJitConfigs, ResourceNames};
use ephemera_core::ports::{JitConfig, JitConfigStore};
use ephemera_core::webhook::JobAction;
use ephemera_tests::moto::Moto;
use ephemera_tests::sim::{self, SimFaults, SimHandle};
use serde_json::{json, Value};
use std::time::Duration;

/// moto, a simulator whose agent watches it, a webhook receiver, and an EC2 client.
pub(super) struct AgentWorld {
    pub(super) moto: Moto,
    pub(super) sim: SimHandle,
    pub(super) receiver: Receiver,
    pub(super) ec2: aws_sdk_ec2::Client,
    dynamodb: aws_sdk_dynamodb::Client,
    pub(super) jit: DynamoJitConfigs,
    pub(super) token: String,
}

pub(super) async fn agent_world(
    deployment: &str,
    job_duration: Duration,
) -> anyhow::Result<AgentWorld> {
    let moto = Moto::start().await?;
    let (receiver, url) = Receiver::start().await?;
    let mut config = config(deployment);
    config.aws_endpoint = Some(moto.endpoint.clone());
    config.webhook_url = Some(url);
    config.job_duration = job_duration;
    config.pickup_delay = Duration::from_millis(200);
    config.agent_poll = Duration::from_millis(100);
    let sim = sim::start(config).await?;
    let sdk = ephemera_aws::sdk_config(&ephemera_aws::AwsSettings::emulator(&moto.endpoint)).await;
    let token = installation_token(&sim).await?;
    let names = ResourceNames::for_deployment(deployment);
    ephemera_aws::ensure_resources(&sdk, &names).await?;
    Ok(AgentWorld {
        moto,
        sim,
        receiver,
        ec2: aws_sdk_ec2::Client::new(&sdk),
        dynamodb: aws_sdk_dynamodb::Client::new(&sdk),
        jit: DynamoJitConfigs::new(aws_sdk_dynamodb::Client::new(&sdk), names.jit_table),
        token,
    })
}

/// Registers a runner, launches its tagged instance and leaves its JIT config in the JIT
/// table, as the scaler does. Returns the instance id.
async fn launch_runner(world: &AgentWorld, deployment: &str, name: &str) -> anyhow::Result<String> {
    let labels = ["linux", "x64"];
    launch_runner_with(
        world,
        deployment,
        name,
        &labels,
        ShutdownBehavior::Terminate,
    )
    .await
}

async fn launch_runner_with(
    world: &AgentWorld,
    deployment: &str,
    name: &str,
    labels: &[&str],
    shutdown: ShutdownBehavior,
) -> anyhow::Result<String> {
    let answer = register_with(&world.sim, &world.token, name, labels).await?;
    let instance_id = launch_tagged(world, deployment, name, shutdown).await?;
    let jit = JitConfig {
        runner_id: answer["runner"]["id"].as_u64().context("runner id")?,
        encoded: answer["encoded_jit_config"]
            .as_str()
            .context("jit config")?
            .to_owned()
            .into(),
    };
    world.jit.put(&instance_id, name, &jit).await?;
    Ok(instance_id)
}

/// Launches an instance tagged as the deployment's runner `name`, with `shutdown` as its
/// shutdown behaviour. Returns its id.
pub(super) async fn launch_tagged(
    world: &AgentWorld,
    deployment: &str,
    name: &str,
    shutdown: ShutdownBehavior,
) -> anyhow::Result<String> {
    let tags = TagSpecification::builder()
        .resource_type(ResourceType::Instance)
        .tags(
            Tag::builder()
                .key("ephemera:deployment")
                .value(deployment)
                .build(),
        )
        .tags(Tag::builder().key("ephemera:runner").value(name).build())
        .build();
    let run = world
        .ec2
        .run_instances()
        .image_id("ami-12c6146b")
        .instance_initiated_shutdown_behavior(shutdown)
        .instance_type(aws_sdk_ec2::types::InstanceType::T3Micro);
    let output = run
        .min_count(1)
        .max_count(1)
        .tag_specifications(tags)
        .send()
        .await?;
    let instance_id = output.instances()[0]
        .instance_id()
        .context("instance id")?
        .to_owned();
    Ok(instance_id)
}

/// Waits (bounded) until the instance is in `wanted`.
pub(super) async fn wait_for_state(
    world: &AgentWorld,
    instance_id: &str,
    wanted: InstanceStateName,
) -> anyhow::Result<()> {
    // Bounded at 30 s: the agent ticks on its own, slower on a loaded machine.
    for _ in 0..600 {
        if instance_state(world, instance_id).await? == wanted {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!("{instance_id} never reached {wanted:?}")
}

pub(super) async fn instance_state(
    world: &AgentWorld,
    instance_id: &str,
) -> anyhow::Result<InstanceStateName> {
    let described = world
        .ec2
        .describe_instances()
        .instance_ids(instance_id)
        .send()
        .await?;
    let instance = described.reservations()[0].instances()[0].clone();
    instance
        .state()
        .and_then(|s| s.name())
        .cloned()
        .context("state")
}

#[tokio::test]
async fn agent_runs_the_job_on_its_instance_and_deregisters() -> anyhow::Result<()> {
    let world = agent_world("eph-run", Duration::from_millis(500)).await?;
    let instance_id = launch_runner(&world, "eph-run", "eph-run-linux-1").await?;
    let job_id = world
        .sim
        .create_job("acme", "app", &["linux", "X64"], None)
        .await?;
    world.receiver.wait_for(3, Duration::from_secs(20)).await?;
    let events = world.receiver.events();
    let actions: Vec<_> = events
        .iter()
        .map(|(a, id, c)| (*a, *id, c.clone()))
        .collect();
    assert_eq!(
        actions,
        vec![
            (JobAction::Queued, job_id, Value::Null),
            (JobAction::InProgress, job_id, Value::Null),
            (JobAction::Completed, job_id, json!("success")),
        ]
    );
    let state = world.sim.snapshot();
    assert_eq!(state.counters.jobs_killed, 0);
    assert!(
        state.runners.is_empty(),
        "the ephemeral runner deregistered"
    );
    assert_eq!(
        state.jobs[&job_id].runner_name.as_deref(),
        Some("eph-run-linux-1")
    );
    let tombstone = jit_item(&world, &instance_id).await?.expect("a tombstone");
    assert!(
        !tombstone.contains_key(ephemera_aws::jit::JIT_CONFIG),
        "the agent removed its JIT config"
    );
    assert!(
        tombstone.contains_key(ephemera_aws::jit::JIT_READ_AT),
        "and stamped its read, as bootstrap.sh does"
    );
    // bootstrap.sh powers off; InstanceInitiatedShutdownBehavior=terminate ends it.
    wait_for_state(&world, &instance_id, InstanceStateName::Terminated).await?;
    // The agent counts the power-off once EC2 has answered its call.
    for _ in 0..100 {
        if world.sim.snapshot().counters.hosts_powered_off > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(world.sim.snapshot().counters.hosts_powered_off, 1);
    Ok(())
}

#[tokio::test]
async fn a_job_goes_only_to_a_runner_with_all_of_its_labels() -> anyhow::Result<()> {
    let world = agent_world("eph-labels", Duration::from_millis(300)).await?;
    let job_id = world
        .sim
        .create_job("acme", "app", &["self-hosted", "linux"], None)
        .await?;
    let without = launch_runner(&world, "eph-labels", "eph-labels-plain").await?;
    // Online and idle for many pickup delays, the runner without `self-hosted` never
    // gets the job.
    for _ in 0..100 {
        let state = world.sim.snapshot();
        if state.runners.values().any(|r| r.status == "online") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let state = world.sim.snapshot();
    assert_eq!(state.jobs[&job_id].status, "queued");
    assert!(state
        .runners
        .values()
        .all(|r| r.status == "online" && !r.busy));

    let labels = ["SELF-HOSTED", "Linux", "x64"];
    let terminate = ShutdownBehavior::Terminate;
    launch_runner_with(&world, "eph-labels", "eph-labels-full", &labels, terminate).await?;
    world.receiver.wait_for(3, Duration::from_secs(20)).await?;
    let state = world.sim.snapshot();
    assert_eq!(state.jobs[&job_id].status, "completed");
    assert_eq!(
        state.jobs[&job_id].runner_name.as_deref(),
        Some("eph-labels-full")
    );
    assert_eq!(
        instance_state(&world, &without).await?,
        InstanceStateName::Running
    );
    Ok(())
}

#[tokio::test]
async fn a_stop_host_stops_and_a_hung_host_keeps_running() -> anyhow::Result<()> {
    let world = agent_world("eph-power", Duration::from_millis(200)).await?;
    let labels = ["linux"];
    let stop = ShutdownBehavior::Stop;
    let stopping = launch_runner_with(&world, "eph-power", "eph-power-1", &labels, stop).await?;
    world.sim.create_job("acme", "app", &labels, None).await?;
    wait_for_state(&world, &stopping, InstanceStateName::Stopped).await?;

    world.sim.set_faults(SimFaults {
        hung_hosts: 1.0,
        ..SimFaults::default()
    });
    let terminate = ShutdownBehavior::Terminate;
    let hung = launch_runner_with(&world, "eph-power", "eph-power-2", &labels, terminate).await?;
    let job_id = world.sim.create_job("acme", "app", &labels, None).await?;
    for _ in 0..600 {
        if world.sim.snapshot().counters.hosts_hung == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let state = world.sim.snapshot();
    assert_eq!(state.jobs[&job_id].status, "completed");
    assert_eq!(
        (state.counters.hosts_powered_off, state.counters.hosts_hung),
        (1, 1)
    );
    assert!(
        state.runners.is_empty(),
        "the runner deregistered all the same"
    );
    assert_eq!(
        instance_state(&world, &hung).await?,
        InstanceStateName::Running
    );
    Ok(())
}

#[tokio::test]
async fn terminating_a_busy_instance_counts_a_killed_job() -> anyhow::Result<()> {
    let world = agent_world("eph-kill", Duration::from_secs(600)).await?;
    let instance_id = launch_runner(&world, "eph-kill", "eph-kill-linux-1").await?;
    let job_id = world
        .sim
        .create_job("acme", "app", &["linux"], None)
        .await?;
    world.receiver.wait_for(2, Duration::from_secs(20)).await?;
    world
        .ec2
        .terminate_instances()
        .instance_ids(&instance_id)
        .send()
        .await?;
    world.receiver.wait_for(3, Duration::from_secs(20)).await?;
    let last = world.receiver.events().pop().context("a delivery")?;
    assert_eq!(last, (JobAction::Completed, job_id, json!("failure")));
    let state = world.sim.snapshot();
    assert_eq!(state.counters.jobs_killed, 1);
    assert!(state
        .runners
        .values()
        .all(|r| r.status == "offline" && !r.busy));
    Ok(())
}

/// The JIT item of `instance_id`, if there is one.
pub(super) async fn jit_item(
    world: &AgentWorld,
    instance_id: &str,
) -> anyhow::Result<Option<std::collections::HashMap<String, AttributeValue>>> {
    let output = world
        .dynamodb
        .get_item()
        .table_name(world.jit.table())
        .set_key(Some(ephemera_aws::jit::item_key(
            &world.jit.instance_arn(instance_id),
        )))
        .consistent_read(true)
        .send()
        .await?;
    Ok(output.item)
}
