//! SSM Parameter Store through the strict layer: value sizes by tier, the PutParameter
//! and DeleteParameter token buckets, and the Standard-parameter count, as AWS documents
//! them. The layer's clock is paused so rates are tested without timing.

use crate::strict::refusal;
use aws_sdk_ssm::types::{ParameterTier, ParameterType};
use aws_sdk_ssm::Client;
use ephemera_aws::{sdk_config, AwsSettings};
use ephemera_tests::moto::Moto;
use serde_json::json;
use std::time::Duration;

async fn ssm(moto: &Moto) -> Client {
    Client::new(&sdk_config(&AwsSettings::emulator(&moto.endpoint)).await)
}

/// How many times the SDK sends a throttled request (it retries ThrottlingException).
fn attempts(ssm: &Client) -> u64 {
    let retry = ssm.config().retry_config().map_or(1, |r| r.max_attempts());
    u64::from(retry)
}

async fn put(
    ssm: &Client,
    name: &str,
    value: &str,
    tier: ParameterTier,
) -> Result<
    (),
    aws_sdk_ssm::error::SdkError<
        aws_sdk_ssm::operation::put_parameter::PutParameterError,
        aws_smithy_runtime_api::client::orchestrator::HttpResponse,
    >,
> {
    ssm.put_parameter()
        .name(name)
        .value(value)
        .r#type(ParameterType::SecureString)
        .tier(tier)
        .overwrite(true)
        .send()
        .await
        .map(drop)
}

/// Lets a second pass, so the PutParameter bucket is full again.
async fn next_second(moto: &Moto) -> anyhow::Result<()> {
    moto.advance_strict_clock(Duration::from_secs(1)).await
}

#[tokio::test]
async fn ssm_value_fits_its_tier_or_is_refused_as_aws_refuses_it() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    moto.pause_strict_clock().await?;
    let ssm = ssm(&moto).await;

    put(
        &ssm,
        "/strict/standard",
        &"s".repeat(4096),
        ParameterTier::Standard,
    )
    .await?;
    let err = put(
        &ssm,
        "/strict/standard",
        &"s".repeat(4097),
        ParameterTier::Standard,
    )
    .await
    .unwrap_err();
    let refused = refusal(&err);
    assert_eq!(
        (refused.code.as_str(), refused.status),
        ("ValidationException", 400)
    );
    assert!(
        refused.message.starts_with(
            "Standard tier parameters support a maximum parameter value of 4096 characters."
        ),
        "{refused:?}"
    );
    next_second(&moto).await?;

    put(
        &ssm,
        "/strict/advanced",
        &"a".repeat(8192),
        ParameterTier::Advanced,
    )
    .await?;
    let err = put(
        &ssm,
        "/strict/advanced",
        &"a".repeat(8193),
        ParameterTier::Advanced,
    )
    .await
    .unwrap_err();
    assert_eq!(refusal(&err).code, "ValidationException");
    // Intelligent-Tiering takes a value over 4 KB into the Advanced tier.
    put(
        &ssm,
        "/strict/smart",
        &"i".repeat(5000),
        ParameterTier::IntelligentTiering,
    )
    .await?;
    next_second(&moto).await?;

    let kept = ssm
        .get_parameter()
        .name("/strict/standard")
        .with_decryption(true)
        .send()
        .await?;
    let value = kept.parameter().and_then(|p| p.value()).unwrap_or_default();
    assert_eq!(
        value.len(),
        4096,
        "the refused overwrite left the value as it was"
    );
    assert_eq!(moto.strict_stats().await?.count("ssm_value_too_large"), 2);
    Ok(())
}

#[tokio::test]
async fn ssm_put_parameter_is_throttled_past_3_a_second_until_the_bucket_refills(
) -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    moto.pause_strict_clock().await?;
    let ssm = ssm(&moto).await;
    for i in 0..3 {
        put(&ssm, &format!("/strict/p{i}"), "v", ParameterTier::Standard).await?;
    }
    let err = put(&ssm, "/strict/p3", "v", ParameterTier::Standard)
        .await
        .unwrap_err();
    let refused = refusal(&err);
    assert_eq!(
        (
            refused.code.as_str(),
            refused.message.as_str(),
            refused.status
        ),
        ("ThrottlingException", "Rate exceeded", 400)
    );
    moto.advance_strict_clock(Duration::from_millis(340))
        .await?;
    put(&ssm, "/strict/p3", "v", ParameterTier::Standard).await?;
    assert!(put(&ssm, "/strict/p4", "v", ParameterTier::Standard)
        .await
        .is_err());

    // With higher throughput the account gets 10 a second.
    moto.set_strict(json!({"ssm_high_throughput": true}))
        .await?;
    next_second(&moto).await?;
    for i in 0..10 {
        put(&ssm, &format!("/strict/h{i}"), "v", ParameterTier::Standard).await?;
    }
    assert!(put(&ssm, "/strict/h10", "v", ParameterTier::Standard)
        .await
        .is_err());

    // DeleteParameter: 5 a second.
    for i in 0..5 {
        ssm.delete_parameter()
            .name(format!("/strict/h{i}"))
            .send()
            .await?;
    }
    let err = ssm
        .delete_parameter()
        .name("/strict/h5")
        .send()
        .await
        .unwrap_err();
    assert_eq!(refusal(&err).code, "ThrottlingException");
    // Three PutParameter and one DeleteParameter calls were throttled, each attempt of each.
    let stats = moto.strict_stats().await?;
    assert_eq!(
        stats.count("ssm_put_parameter_throttled"),
        3 * attempts(&ssm)
    );
    assert_eq!(
        stats.count("ssm_delete_parameter_throttled"),
        attempts(&ssm)
    );
    Ok(())
}

#[tokio::test]
async fn ssm_refuses_a_standard_parameter_past_the_account_limit() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    moto.pause_strict_clock().await?;
    moto.set_strict(json!({"ssm_standard_parameter_limit": 2}))
        .await?;
    let ssm = ssm(&moto).await;
    put(&ssm, "/strict/one", "1", ParameterTier::Standard).await?;
    put(&ssm, "/strict/two", "2", ParameterTier::Standard).await?;
    next_second(&moto).await?;
    let err = put(&ssm, "/strict/three", "3", ParameterTier::Standard)
        .await
        .unwrap_err();
    let refused = refusal(&err);
    assert_eq!(
        (refused.code.as_str(), refused.status),
        ("ParameterLimitExceeded", 400)
    );
    assert!(
        refused
            .message
            .contains("exceeded the number of parameters"),
        "{refused:?}"
    );
    // Overwriting adds no parameter; Advanced parameters count apart.
    put(&ssm, "/strict/one", "1 again", ParameterTier::Standard).await?;
    put(&ssm, "/strict/three", "3", ParameterTier::Advanced).await?;
    assert_eq!(
        moto.strict_stats()
            .await?
            .count("ssm_parameter_limit_exceeded"),
        1
    );
    Ok(())
}
