//! The simulator's runner agent against moto: a job runs on its instance and the runner
//! deregisters; a terminated busy instance counts as a killed job.

use super::{config, installation_token, register, Receiver};
use anyhow::Context;
use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};
use ephemera_aws::{DynamoJitConfigs, ResourceNames};
use ephemera_core::ports::{JitConfig, JitSecrets};
use ephemera_core::webhook::JobAction;
use ephemera_tests::moto::Moto;
use ephemera_tests::sim::{self, SimHandle};
use serde_json::{json, Value};
use std::time::Duration;

/// moto, a simulator whose agent watches it, a webhook receiver, and an EC2 client.
struct AgentWorld {
    _moto: Moto,
    sim: SimHandle,
    receiver: Receiver,
    ec2: aws_sdk_ec2::Client,
    dynamodb: aws_sdk_dynamodb::Client,
    jit: DynamoJitConfigs,
    token: String,
}

async fn agent_world(deployment: &str, job_duration: Duration) -> anyhow::Result<AgentWorld> {
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
        _moto: moto,
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
    let answer = register(&world.sim, &world.token, name).await?;
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

#[tokio::test]
async fn agent_runs_the_job_on_its_instance_and_deregisters() -> anyhow::Result<()> {
    let world = agent_world("eph-run", Duration::from_millis(500)).await?;
    let instance_id = launch_runner(&world, "eph-run", "eph-run-linux-1").await?;
    let job_id = world
        .sim
        .create_job("acme", "app", &["self-hosted", "linux"], None)
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
    assert!(
        !jit_item_exists(&world, &instance_id).await?,
        "the agent deleted its JIT config"
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

async fn jit_item_exists(world: &AgentWorld, instance_id: &str) -> anyhow::Result<bool> {
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
    Ok(output.item.is_some())
}
