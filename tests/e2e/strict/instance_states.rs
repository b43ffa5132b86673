//! EC2 StopInstances and StartInstances through the strict layer: only a running instance
//! stops and only a stopped one starts, each through its in-between state for its time; a
//! spot instance of a one-time request cannot be stopped; a start can be refused for
//! capacity (an injected fault).

use super::refusal;
use aws_sdk_ec2::types::{InstanceMarketOptionsRequest, InstanceStateName, MarketType};
use ephemera_aws::{sdk_config, AwsSettings};
use ephemera_tests::moto::Moto;
use serde_json::json;
use std::time::Duration;

async fn run_one(ec2: &aws_sdk_ec2::Client, spot: bool) -> anyhow::Result<String> {
    let mut call = ec2
        .run_instances()
        .image_id("ami-12c6146b")
        .instance_type(aws_sdk_ec2::types::InstanceType::T3Micro)
        .min_count(1)
        .max_count(1);
    if spot {
        let market = InstanceMarketOptionsRequest::builder()
            .market_type(MarketType::Spot)
            .build();
        call = call.instance_market_options(market);
    }
    let output = call.send().await?;
    let id = output.instances().first().and_then(|i| i.instance_id());
    Ok(id
        .ok_or_else(|| anyhow::anyhow!("no instance in {output:?}"))?
        .to_owned())
}

async fn state_of(ec2: &aws_sdk_ec2::Client, id: &str) -> anyhow::Result<InstanceStateName> {
    let output = ec2.describe_instances().instance_ids(id).send().await?;
    let state = output
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .find_map(|i| i.state().and_then(|s| s.name()).cloned());
    state.ok_or_else(|| anyhow::anyhow!("no state for {id}"))
}

/// The code of the error EC2 answers a StartInstances of `id` with (the test expects one).
async fn start_refused(ec2: &aws_sdk_ec2::Client, id: &str) -> String {
    let err = ec2
        .start_instances()
        .instance_ids(id)
        .send()
        .await
        .expect_err("the start is refused");
    refusal(&err).code
}

#[tokio::test]
async fn an_instance_stops_only_from_running_and_starts_only_from_stopped_each_taking_time(
) -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let ec2 = aws_sdk_ec2::Client::new(&config);
    let id = run_one(&ec2, false).await?;
    moto.pause_strict_clock().await?;

    ec2.stop_instances().instance_ids(&id).send().await?;
    assert_eq!(state_of(&ec2, &id).await?, InstanceStateName::Stopping);
    assert_eq!(start_refused(&ec2, &id).await, "IncorrectInstanceState");
    moto.advance_strict_clock(Duration::from_secs(3)).await?;
    assert_eq!(state_of(&ec2, &id).await?, InstanceStateName::Stopped);
    // A stop of a stopped instance changes nothing and is not refused.
    ec2.stop_instances().instance_ids(&id).send().await?;
    assert_eq!(state_of(&ec2, &id).await?, InstanceStateName::Stopped);

    moto.set_strict(json!({"ec2_start_insufficient_capacity": 1}))
        .await?;
    assert_eq!(
        start_refused(&ec2, &id).await,
        "InsufficientInstanceCapacity"
    );
    assert_eq!(state_of(&ec2, &id).await?, InstanceStateName::Stopped);
    ec2.start_instances().instance_ids(&id).send().await?;
    assert_eq!(state_of(&ec2, &id).await?, InstanceStateName::Pending);
    moto.advance_strict_clock(Duration::from_secs(2)).await?;
    assert_eq!(state_of(&ec2, &id).await?, InstanceStateName::Running);

    let stats = moto.strict_stats().await?;
    assert_eq!(stats.count("ec2_start_refused"), 1);
    assert_eq!(stats.count("ec2_start_insufficient_capacity"), 1);
    Ok(())
}

#[tokio::test]
async fn a_spot_instance_of_a_one_time_request_cannot_be_stopped() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let ec2 = aws_sdk_ec2::Client::new(&config);
    let id = run_one(&ec2, true).await?;
    let err = ec2
        .stop_instances()
        .instance_ids(&id)
        .send()
        .await
        .unwrap_err();
    let refused = refusal(&err);
    assert_eq!(refused.code, "UnsupportedOperation");
    assert!(
        refused.message.contains("one-time Spot Instance request"),
        "{refused:?}"
    );
    assert_eq!(state_of(&ec2, &id).await?, InstanceStateName::Running);
    Ok(())
}
