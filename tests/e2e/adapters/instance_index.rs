//! The table's instance index against moto: EC2's events name an instance and nothing
//! else, and the reaper finds the runner on it with one query of keys and one read of
//! the record, whatever the number of live records; an instance of no runner costs the
//! query alone.

use ephemera_aws::ResourceNames;
use ephemera_aws::{ensure_resources, runner_to_item, sdk_config, AwsSettings, DynamoRunnerStore};
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::model::RunnerRecord;
use ephemera_core::ports::RunnerStore;
use ephemera_tests::moto::Moto;
use time::OffsetDateTime;

fn record(name: &str, status: InstanceStatus, instance_id: Option<&str>) -> RunnerRecord {
    let mut runner = RunnerRecord::new(
        name.to_owned(),
        "linux".to_owned(),
        OffsetDateTime::now_utc(),
    );
    runner.status = status;
    runner.owner = "octo".to_owned();
    runner.instance_id = instance_id.map(str::to_owned);
    runner
}

#[tokio::test]
async fn the_runner_on_an_instance_is_one_query_and_one_read_away() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let resources = ensure_resources(&config, &ResourceNames::for_deployment("eph")).await?;
    let client = aws_sdk_dynamodb::Client::new(&config);
    let store = DynamoRunnerStore::new(client.clone(), &resources.table);
    let mut records: Vec<RunnerRecord> = (0..40)
        .map(|i| {
            let instance = format!("i-{i:017x}");
            record(
                &format!("eph-linux-{i}"),
                InstanceStatus::Running,
                Some(&instance),
            )
        })
        .collect();
    // One not launched yet (no instance: not in the sparse index).
    records.push(record(
        "eph-linux-pending",
        InstanceStatus::PendingCreate,
        None,
    ));
    for runner in &records {
        client
            .put_item()
            .table_name(&resources.table)
            .set_item(Some(runner_to_item(runner)))
            .send()
            .await?;
    }

    let before = store.items_read();
    let found = store.runners_on_instance("i-00000000000000011").await?;
    let names: Vec<&str> = found.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["eph-linux-17"]);
    assert_eq!(found[0].instance_id, records[17].instance_id);
    // The index's key, then the record: two items, not the forty live ones.
    assert_eq!(store.items_read() - before, 2);

    let before = store.items_read();
    let none = store.runners_on_instance("i-0ffffffffffffffff").await?;
    assert!(none.is_empty(), "{none:?}");
    assert_eq!(store.items_read() - before, 0);
    Ok(())
}
