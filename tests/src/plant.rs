//! Runner items written straight into the table, many at a time: history and backlog
//! for the reaper's cost test and `make bench`, where going through the pipeline would
//! take hours on the emulator.

use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::model::RunnerRecord;
use std::collections::HashMap;
use std::time::Duration;
use time::OffsetDateTime;

/// Writes `count` runner items of `pool` in `status`, named `<prefix>-<n>`, 25 to a
/// batch, retrying what DynamoDB leaves unprocessed (at most 10 times per batch).
/// `shape` may change each record before it is written.
pub async fn write_runners(
    sdk: &SdkConfig,
    table: &str,
    prefix: &str,
    pool: &str,
    status: InstanceStatus,
    count: usize,
    shape: impl Fn(usize, &mut RunnerRecord),
) -> anyhow::Result<()> {
    // Thousands of batches into a table that grows: the emulator's answer slows as it
    // fills, so each batch may wait far longer than a function's call would.
    let slow_answers = aws_config::timeout::TimeoutConfig::builder()
        .read_timeout(Duration::from_secs(120))
        .operation_attempt_timeout(Duration::from_secs(180))
        .operation_timeout(Duration::from_secs(600))
        .build();
    let client = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::config::Builder::from(sdk)
            .timeout_config(slow_answers)
            .build(),
    );
    let at = OffsetDateTime::now_utc();
    let mut batch = Vec::new();
    for i in 0..count {
        let mut runner = RunnerRecord::new(format!("{prefix}-{i:06}"), pool.to_owned(), at);
        runner.status = status;
        runner.slot_held = false;
        // The simulator's organization: every runner of a real table has an owner.
        runner.owner = "octo-org".to_owned();
        shape(i, &mut runner);
        let item: HashMap<String, AttributeValue> = ephemera_aws::items::runner_to_item(&runner);
        batch.push(
            WriteRequest::builder()
                .put_request(PutRequest::builder().set_item(Some(item)).build()?)
                .build(),
        );
        if batch.len() == 25 || i + 1 == count {
            let mut pending = HashMap::from([(table.to_owned(), std::mem::take(&mut batch))]);
            for _ in 0..10 {
                let output = client
                    .batch_write_item()
                    .set_request_items(Some(pending))
                    .send()
                    .await?;
                pending = output.unprocessed_items.unwrap_or_default();
                if pending.values().all(Vec::is_empty) {
                    break;
                }
            }
            if !pending.values().all(Vec::is_empty) {
                anyhow::bail!("DynamoDB left items unwritten after 10 tries");
            }
        }
    }
    Ok(())
}
