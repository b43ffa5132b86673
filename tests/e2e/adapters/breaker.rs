//! A pool's spot circuit breaker in the runners table, against moto through the real SDK:
//! an instance counted once however often reported, old entries forgotten, a later pause
//! kept over an earlier one.

use ephemera_aws::breaker::DynamoSpotBreakers;
use ephemera_aws::{ensure_resources, sdk_config, AwsSettings, ResourceNames};
use ephemera_core::ports::SpotBreakerStore;
use ephemera_tests::moto::Moto;
use time::{Duration, OffsetDateTime};

#[tokio::test]
async fn interruptions_count_once_old_ones_are_forgotten_and_the_later_pause_stands(
) -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let resources = ensure_resources(&config, &ResourceNames::for_deployment("eph")).await?;
    let breakers =
        DynamoSpotBreakers::new(aws_sdk_dynamodb::Client::new(&config), &resources.table);
    let now = OffsetDateTime::now_utc().replace_nanosecond(0)?;
    let long_ago = now - Duration::hours(1);

    assert_eq!(breakers.breaker_state("linux").await?, Default::default());
    breakers
        .note_interruption("linux", "i-old", long_ago, long_ago)
        .await?;
    let state = breakers
        .note_interruption("linux", "i-1", now, long_ago)
        .await?;
    assert_eq!(state.interrupted.len(), 2);
    // Reported again later: counted at its first report.
    let state = breakers
        .note_interruption("linux", "i-1", now + Duration::minutes(1), long_ago)
        .await?;
    assert_eq!(state.interrupted.get("i-1"), Some(&now));
    // Entries before `forget_before` go.
    let forget_before = now - Duration::minutes(10);
    let state = breakers
        .note_interruption("linux", "i-2", now, forget_before)
        .await?;
    assert_eq!(state.interrupted.keys().collect::<Vec<_>>(), ["i-1", "i-2"]);
    assert_eq!(
        breakers.breaker_state("linux").await?,
        state,
        "and from the item"
    );
    assert!(breakers
        .breaker_state("other")
        .await?
        .interrupted
        .is_empty());

    breakers
        .pause_spot("linux", now + Duration::minutes(30))
        .await?;
    breakers
        .pause_spot("linux", now + Duration::minutes(5))
        .await?;
    let state = breakers.breaker_state("linux").await?;
    assert_eq!(state.paused_until, Some(now + Duration::minutes(30)));
    assert!(state.paused(now + Duration::minutes(29)));
    assert!(!state.paused(now + Duration::minutes(30)));
    Ok(())
}
