//! The lease item of the DynamoDB store against moto: taken by one holder at a time,
//! given back with an update (the reaper's role may update the table's items but delete
//! none, template.yaml's ReaperRole) that frees it at once, never given back by anyone
//! but its holder, and never made by a release.

use ephemera_aws::{ensure_resources, sdk_config, AwsSettings, DynamoRunnerStore, ResourceNames};
use ephemera_core::ports::Leases;
use ephemera_tests::moto::Moto;
use std::collections::HashMap;
use time::{Duration, OffsetDateTime};

struct Table {
    _moto: Moto,
    client: aws_sdk_dynamodb::Client,
    name: String,
    store: DynamoRunnerStore,
}

async fn table() -> anyhow::Result<Table> {
    let moto = Moto::start().await?;
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let resources = ensure_resources(&config, &ResourceNames::for_deployment("eph")).await?;
    let client = aws_sdk_dynamodb::Client::new(&config);
    let store = DynamoRunnerStore::new(client.clone(), &resources.table);
    Ok(Table {
        _moto: moto,
        client,
        name: resources.table,
        store,
    })
}

impl Table {
    /// The lease item `name` as the table holds it, if any.
    async fn lease_item(
        &self,
        name: &str,
    ) -> anyhow::Result<Option<HashMap<String, aws_sdk_dynamodb::types::AttributeValue>>> {
        let key = ephemera_aws::items::key(format!("LEASE#{name}"));
        let got = self
            .client
            .get_item()
            .table_name(&self.name)
            .set_key(Some(key))
            .consistent_read(true)
            .send()
            .await?;
        Ok(got.item().cloned())
    }
}

#[tokio::test]
async fn a_released_lease_is_taken_at_once_by_the_next_holder() -> anyhow::Result<()> {
    let t = table().await?;
    let now = OffsetDateTime::now_utc();
    let until = now + Duration::seconds(115);
    assert!(t.store.acquire("reaper", "first", until, now).await?);
    assert!(
        !t.store.acquire("reaper", "second", until, now).await?,
        "held until its expiry"
    );
    t.store.release("reaper", "first").await?;
    // A minute later, long before the first holder's time would have run out.
    let next_minute = now + Duration::minutes(1);
    assert!(
        t.store
            .acquire(
                "reaper",
                "second",
                next_minute + Duration::seconds(115),
                next_minute
            )
            .await?,
        "a lease given back is free at once"
    );
    Ok(())
}

#[tokio::test]
async fn only_the_holder_gives_a_lease_back() -> anyhow::Result<()> {
    let t = table().await?;
    let now = OffsetDateTime::now_utc();
    let until = now + Duration::seconds(115);
    assert!(t.store.acquire("reaper", "first", until, now).await?);
    // Someone whose lease ran out and was taken since: nothing happens, no error.
    t.store.release("reaper", "stranger").await?;
    assert!(!t.store.acquire("reaper", "second", until, now).await?);
    // Twice by its holder: the second is a no-op.
    t.store.release("reaper", "first").await?;
    t.store.release("reaper", "first").await?;
    assert!(t.store.acquire("reaper", "second", until, now).await?);
    Ok(())
}

#[tokio::test]
async fn releasing_a_lease_nobody_took_makes_no_item() -> anyhow::Result<()> {
    let t = table().await?;
    t.store.release("reaper", "ghost").await?;
    assert_eq!(t.lease_item("reaper").await?, None);
    Ok(())
}
