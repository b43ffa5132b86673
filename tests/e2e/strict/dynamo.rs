//! DynamoDB through the strict layer: a transaction that overlaps another in-flight
//! transaction on one item is cancelled with `TransactionConflict` at that item's index,
//! a single write to such an item gets TransactionConflictException, transactions on
//! other items go through; the 100-action and 400 KB item limits. The layer's clock is
//! paused, so "in flight" lasts until the test moves the clock past the window.

use crate::strict::refusal;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use aws_sdk_dynamodb::Client;
use ephemera_aws::items::PK;
use ephemera_aws::{ensure_resources, sdk_config, AwsSettings, ResourceNames};
use ephemera_tests::moto::Moto;
use serde_json::json;
use std::time::Duration;

async fn dynamo(moto: &Moto) -> anyhow::Result<(Client, String)> {
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let resources = ensure_resources(&config, &ResourceNames::for_deployment("strict")).await?;
    Ok((Client::new(&config), resources.table))
}

fn put(table: &str, key: &str, padding: usize) -> TransactWriteItem {
    let item = Put::builder()
        .table_name(table)
        .item(PK, AttributeValue::S(key.to_owned()))
        .item("padding", AttributeValue::S("p".repeat(padding)))
        .build()
        .expect("table and item are set");
    TransactWriteItem::builder().put(item).build()
}

async fn transact(
    client: &Client,
    actions: Vec<TransactWriteItem>,
) -> Result<
    (),
    aws_sdk_dynamodb::error::SdkError<
        TransactWriteItemsError,
        aws_smithy_runtime_api::client::orchestrator::HttpResponse,
    >,
> {
    client
        .transact_write_items()
        .set_transact_items(Some(actions))
        .send()
        .await
        .map(drop)
}

/// The cancellation reason codes of a cancelled transaction.
fn reasons(
    err: &aws_sdk_dynamodb::error::SdkError<
        TransactWriteItemsError,
        aws_smithy_runtime_api::client::orchestrator::HttpResponse,
    >,
) -> Vec<String> {
    match err.as_service_error() {
        Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) => cancelled
            .cancellation_reasons()
            .iter()
            .map(|r| r.code().unwrap_or_default().to_owned())
            .collect(),
        other => panic!("expected TransactionCanceledException, got {other:?}"),
    }
}

#[tokio::test]
async fn overlapping_transactions_on_one_item_conflict_and_others_go_through() -> anyhow::Result<()>
{
    let moto = Moto::start().await?;
    let (client, table) = dynamo(&moto).await?;
    moto.set_strict(json!({"dynamodb_transaction_conflicts": true}))
        .await?;
    moto.pause_strict_clock().await?;

    transact(
        &client,
        vec![put(&table, "pool#a", 1), put(&table, "pool#b", 1)],
    )
    .await?;
    // Another transaction on other items goes through while the first is in flight.
    transact(&client, vec![put(&table, "pool#x", 1)]).await?;
    let err = transact(
        &client,
        vec![put(&table, "pool#c", 1), put(&table, "pool#a", 2)],
    )
    .await
    .unwrap_err();
    assert_eq!(reasons(&err), ["None", "TransactionConflict"]);
    let refused = refusal(&err);
    assert_eq!(refused.status, 400);
    assert_eq!(
        refused.message,
        "Transaction cancelled, please refer cancellation reasons for specific reasons [None, TransactionConflict]"
    );
    let single = client
        .put_item()
        .table_name(&table)
        .item(PK, AttributeValue::S("pool#b".to_owned()))
        .send()
        .await
        .unwrap_err();
    let refused = refusal(&single);
    assert_eq!(
        (refused.code.as_str(), refused.message.as_str()),
        (
            "TransactionConflictException",
            "Transaction is ongoing for the item"
        )
    );

    // Once the first transaction is over, the same transaction goes through.
    moto.advance_strict_clock(Duration::from_secs(1)).await?;
    transact(
        &client,
        vec![put(&table, "pool#c", 1), put(&table, "pool#a", 2)],
    )
    .await?;
    let stats = moto.strict_stats().await?;
    assert_eq!(stats.count("dynamodb_transaction_conflict"), 1);
    assert_eq!(stats.count("dynamodb_write_conflict"), 1);
    Ok(())
}

#[tokio::test]
async fn two_concurrent_transactions_on_one_item_one_wins_one_is_cancelled() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let (client, table) = dynamo(&moto).await?;
    moto.set_strict(json!({"dynamodb_transaction_conflicts": true}))
        .await?;
    moto.pause_strict_clock().await?;
    let (first, second) = tokio::join!(
        transact(&client, vec![put(&table, "pool#same", 1)]),
        transact(
            &client,
            vec![put(&table, "other#1", 1), put(&table, "pool#same", 2)]
        ),
    );
    let outcomes = [first.is_ok(), second.is_ok()];
    assert_eq!(
        outcomes.iter().filter(|ok| **ok).count(),
        1,
        "{first:?} {second:?}"
    );
    if let Err(err) = &first {
        assert_eq!(reasons(err), ["TransactionConflict"]);
    }
    if let Err(err) = &second {
        assert_eq!(reasons(err), ["None", "TransactionConflict"]);
    }
    // Switched off, the layer lets overlapping transactions through.
    moto.set_strict(json!({"dynamodb_transaction_conflicts": false}))
        .await?;
    transact(&client, vec![put(&table, "pool#same", 3)]).await?;
    transact(&client, vec![put(&table, "pool#same", 4)]).await?;
    Ok(())
}

#[tokio::test]
async fn transactions_hold_at_most_100_actions_and_items_at_most_400_kb() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let (client, table) = dynamo(&moto).await?;

    let hundred = (0..100)
        .map(|i| put(&table, &format!("many#{i}"), 1))
        .collect();
    transact(&client, hundred).await?;
    let too_many = (0..101)
        .map(|i| put(&table, &format!("more#{i}"), 1))
        .collect();
    let err = transact(&client, too_many).await.unwrap_err();
    let refused = refusal(&err);
    assert_eq!(
        (refused.code.as_str(), refused.status),
        ("ValidationException", 400)
    );
    assert!(
        refused
            .message
            .starts_with("1 validation error detected: Value '["),
        "{refused:?}"
    );
    assert!(
        refused.message.ends_with(
            "at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to 100"
        ),
        "{refused:?}"
    );

    // 400 KB is 409,600 bytes, attribute names included.
    let fits = 400 * 1024 - PK.len() - "big#ok".len() - "padding".len();
    transact(&client, vec![put(&table, "big#ok", fits)]).await?;
    let err = transact(&client, vec![put(&table, "big#no", fits + 7)])
        .await
        .unwrap_err();
    let refused = refusal(&err);
    assert_eq!(
        (refused.code.as_str(), refused.message.as_str()),
        (
            "ValidationException",
            "Item size has exceeded the maximum allowed size"
        )
    );
    let err = client
        .put_item()
        .table_name(&table)
        .item(PK, AttributeValue::S("big#single".to_owned()))
        .item("padding", AttributeValue::S("p".repeat(fits + 1)))
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&err).message,
        "Item size has exceeded the maximum allowed size"
    );
    let stats = moto.strict_stats().await?;
    assert_eq!(stats.count("dynamodb_too_many_actions"), 1);
    assert_eq!(stats.count("dynamodb_item_too_large"), 2);
    Ok(())
}
