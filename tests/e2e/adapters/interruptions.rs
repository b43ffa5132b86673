//! A runner's spot interruption in the DynamoDB store against moto: the warning's time
//! is an attribute of the runner's item, written once (a warning delivered again keeps
//! the first time), and a record written before the attribute was kept reads its
//! interruption from the warning's history note.

use ephemera_aws::ResourceNames;
use ephemera_aws::{ensure_resources, sdk_config, AwsSettings, DynamoRunnerStore};
use ephemera_core::model::{HistoryEntry, RunnerRecord, INTERRUPTION_NOTE};
use ephemera_core::ports::{RunnerStore, RunnerUpdate};
use ephemera_tests::moto::Moto;
use time::{Duration, OffsetDateTime};

fn at(seconds: i64) -> OffsetDateTime {
    time::macros::datetime!(2026-11-22 10:00:00 UTC) + Duration::seconds(seconds)
}

async fn store(moto: &Moto) -> anyhow::Result<DynamoRunnerStore> {
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let resources = ensure_resources(&config, &ResourceNames::for_deployment("eph")).await?;
    Ok(DynamoRunnerStore::new(
        aws_sdk_dynamodb::Client::new(&config),
        &resources.table,
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_warning_is_kept_on_the_item_and_an_older_item_reads_its_note(
) -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let store = store(&moto).await?;

    let warned = RunnerRecord::new("eph-linux-a".to_owned(), "linux".to_owned(), at(0));
    assert!(store.reserve_runner(&warned, 5).await?);
    let read = store.get_runner("eph-linux-a").await?.expect("runner");
    assert_eq!(read.interrupted_at, None, "no warning yet");
    for (warning, delivered) in [(100, 101), (100, 160), (130, 161)] {
        let update = RunnerUpdate {
            note: Some(format!(
                "{INTERRUPTION_NOTE}: EC2 will terminate the instance"
            )),
            interrupted_at: Some(at(warning)),
            ..RunnerUpdate::default()
        };
        store
            .update_runner("eph-linux-a", &update, at(delivered))
            .await?;
    }
    let read = store.get_runner("eph-linux-a").await?.expect("runner");
    assert_eq!(
        read.interrupted_at,
        Some(at(100)),
        "the first warning stands"
    );

    // An item as a build before the attribute wrote it: the note alone says so.
    let mut older = RunnerRecord::new("eph-linux-b".to_owned(), "linux".to_owned(), at(0));
    older.note(HistoryEntry {
        at: at(50),
        status: None,
        runner_status: None,
        reason: Some(format!(
            "{INTERRUPTION_NOTE}: EC2 will terminate the instance"
        )),
    });
    assert!(store.reserve_runner(&older, 5).await?);
    let read = store.get_runner("eph-linux-b").await?.expect("runner");
    assert_eq!(read.interrupted_at, Some(at(50)));

    // Neither attribute nor note: not interrupted, whatever else its history says.
    let mut calm = RunnerRecord::new("eph-linux-c".to_owned(), "linux".to_owned(), at(0));
    calm.note(HistoryEntry {
        at: at(60),
        status: None,
        runner_status: None,
        reason: Some("running job 3".to_owned()),
    });
    assert!(store.reserve_runner(&calm, 5).await?);
    let read = store.get_runner("eph-linux-c").await?.expect("runner");
    assert_eq!(read.interrupted_at, None);
    Ok(())
}
