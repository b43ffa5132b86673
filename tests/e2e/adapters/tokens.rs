//! The shared installation token in the runners table, against moto through the real
//! SDK: the later token stays when two processes shelve at once, a withdrawal takes
//! only the refused token, and the item never shows on the status index.

use ephemera_aws::token_shelf::DynamoTokenShelf;
use ephemera_aws::ResourceNames;
use ephemera_aws::{ensure_resources, sdk_config, AwsSettings, DynamoRunnerStore};
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::ports::{RunnerStore, SharedToken, TokenShelf};
use ephemera_tests::moto::Moto;
use secrecy::{ExposeSecret, SecretString};
use time::{Duration, OffsetDateTime};

fn token(text: &str, expires_at: OffsetDateTime) -> SharedToken {
    SharedToken {
        token: SecretString::from(text.to_owned()),
        expires_at,
    }
}

#[tokio::test]
async fn the_later_token_stays_and_only_the_refused_one_is_withdrawn() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let resources = ensure_resources(&config, &ResourceNames::for_deployment("eph")).await?;
    let client = aws_sdk_dynamodb::Client::new(&config);
    let shelf = DynamoTokenShelf::new(client.clone(), &resources.table);
    let now = OffsetDateTime::now_utc().replace_nanosecond(0)?;

    assert!(shelf.read(42, 7).await?.is_none());
    shelf
        .shelve(42, 7, &token("ghs_later", now + Duration::minutes(60)))
        .await?;
    // A process that minted at the same time, a little earlier, shelves late.
    shelf
        .shelve(42, 7, &token("ghs_earlier", now + Duration::minutes(59)))
        .await?;
    let held = shelf.read(42, 7).await?.expect("shelved");
    assert_eq!(held.token.expose_secret(), "ghs_later");
    assert_eq!(held.expires_at, now + Duration::minutes(60));
    // Another installation and another App are other items.
    assert!(shelf.read(42, 8).await?.is_none());
    assert!(shelf.read(43, 7).await?.is_none());

    // A refusal of the earlier token leaves the later one.
    let earlier = token("ghs_earlier", now);
    shelf.withdraw(42, 7, &earlier.fingerprint()).await?;
    let held = shelf.read(42, 7).await?.expect("still shelved");
    assert_eq!(held.token.expose_secret(), "ghs_later");
    assert!(held.expires_at > now);
    // A refusal of the shelved one marks it expired; the next mint replaces it.
    shelf.withdraw(42, 7, &held.fingerprint()).await?;
    let withdrawn = shelf.read(42, 7).await?.expect("item kept");
    assert!(withdrawn.expires_at < now, "withdrawn means expired");
    shelf
        .shelve(42, 7, &token("ghs_next", now + Duration::minutes(60)))
        .await?;
    let held = shelf.read(42, 7).await?.expect("shelved");
    assert_eq!(held.token.expose_secret(), "ghs_next");
    // A withdrawal of an absent item creates nothing.
    shelf.withdraw(42, 9, &held.fingerprint()).await?;
    assert!(shelf.read(42, 9).await?.is_none());

    // No status: the reaper's index never lists it.
    let store = DynamoRunnerStore::new(client, &resources.table);
    for status in InstanceStatus::ALL {
        let far = now + Duration::days(365);
        assert!(store.runners_in_status(status, far, 100).await?.is_empty());
    }
    Ok(())
}
