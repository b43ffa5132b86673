//! [`DynamoRunnerStore`]: the [`RunnerStore`] port on one DynamoDB table.
//!
//! Every status change is a conditional write whose condition comes from the core
//! transition table, so the table itself refuses a forbidden move even when two writers
//! race. Claims and slot releases are transactions over the job, runner and pool items.
//! Runner operations live in `dynamo/runners.rs`, job operations in `dynamo/jobs.rs`;
//! this module holds the shared plumbing (reads, expressions, error mapping).

mod conflicts;
mod handover;
mod jobs;
mod lease;
mod listing;
mod reconcile;
mod runners;
mod slots;
mod take;

use crate::items::{self, Item};
use async_trait::async_trait;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::model::{JobRecord, JobStatus, PoolRecord, RunnerRecord};
use ephemera_core::ports::{
    Claim, ClaimHandOver, HostStamps, PoolCounter, RunnerStore, RunnerUpdate, StoreError,
    Transition,
};
use ephemera_core::prices::JobCost;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use time::OffsetDateTime;

/// The runner store on a DynamoDB table laid out as [`crate::items`] describes.
#[derive(Debug)]
pub struct DynamoRunnerStore {
    client: Client,
    table: String,
    items_read: AtomicU64,
}

impl DynamoRunnerStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        DynamoRunnerStore {
            // Claims and slot releases are transactions: a single-item write to one of
            // their items meanwhile is refused, and is retried.
            client: conflicts::retrying_transaction_conflicts(&client),
            table: table.into(),
            items_read: AtomicU64::new(0),
        }
    }

    /// Items read so far (GetItem hits and Query results): what a run of the reaper
    /// costs, which must grow with pending work and not with the table.
    pub fn items_read(&self) -> u64 {
        self.items_read.load(Ordering::Relaxed)
    }

    fn count_read(&self, items: usize) {
        self.items_read.fetch_add(items as u64, Ordering::Relaxed);
    }

    /// A strongly consistent read of one item.
    async fn get_item(&self, pk: String) -> Result<Option<Item>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(items::key(pk)))
            .consistent_read(true)
            .send()
            .await
            .map_err(store_error)?;
        let item = output.item;
        if item.is_some() {
            self.count_read(1);
        }
        Ok(item)
    }

    /// The current status of a runner item as text, `missing` when there is none.
    async fn current_status(&self, name: &str) -> Result<String, StoreError> {
        let item = self.get_item(items::runner_key(name)).await?;
        Ok(describe_status(item.as_ref()))
    }
}

/// The status an item is in, for a refusal message.
fn describe_status(item: Option<&Item>) -> String {
    match item {
        None => "missing".to_owned(),
        Some(item) => items::status_of(item).unwrap_or("unknown").to_owned(),
    }
}

/// Builds the names and values of one expression, aliasing every attribute name (many,
/// like `status`, `name` and `ttl`, are reserved words).
#[derive(Debug, Default)]
struct Expr {
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
}

impl Expr {
    /// The placeholder of an attribute name.
    fn name(&mut self, attribute: &str) -> String {
        let placeholder = format!("#{attribute}");
        self.names.insert(placeholder.clone(), attribute.to_owned());
        placeholder
    }

    /// Binds a value to a placeholder (`:label`).
    fn value(&mut self, label: &str, value: AttributeValue) -> String {
        let placeholder = format!(":{label}");
        self.values.insert(placeholder.clone(), value);
        placeholder
    }

    /// `#attribute = :attribute`, for a SET clause.
    fn assign(&mut self, attribute: &str, value: AttributeValue) -> String {
        let name = self.name(attribute);
        let value = self.value(attribute, value);
        format!("{name} = {value}")
    }

    /// `#status IN (:s0, :s1, ...)`.
    fn status_in<'a>(&mut self, statuses: impl IntoIterator<Item = &'a str>) -> String {
        let status = self.name(items::STATUS);
        let values: Vec<String> = statuses
            .into_iter()
            .enumerate()
            .map(|(i, s)| self.value(&format!("s{i}"), items::s(s)))
            .collect();
        format!("{status} IN ({})", values.join(", "))
    }

    fn names(&self) -> Option<HashMap<String, String>> {
        (!self.names.is_empty()).then(|| self.names.clone())
    }

    fn values(&self) -> Option<HashMap<String, AttributeValue>> {
        (!self.values.is_empty()).then(|| self.values.clone())
    }
}

/// Whether DynamoDB said it is being asked too much.
fn is_throttling(code: Option<&str>) -> bool {
    matches!(
        code,
        Some(
            "ProvisionedThroughputExceededException"
                | "ThrottlingException"
                | "RequestLimitExceeded"
        )
    )
}

/// Maps a failed request onto the port's error, keeping it as the cause.
pub(crate) fn store_error<E, R>(err: SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    if is_throttling(err.code()) {
        StoreError::Throttled(Box::new(err))
    } else {
        StoreError::Transient(Box::new(err))
    }
}

/// A conditional write whose condition failed is `Ok(None)`: for the writes where that
/// means "someone else's write stands", not an error.
pub(crate) fn unless_condition_failed<T, E, R>(
    result: Result<T, SdkError<E, R>>,
) -> Result<Option<T>, StoreError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match result {
        Ok(answer) => Ok(Some(answer)),
        Err(err) if err.code() == Some("ConditionalCheckFailedException") => Ok(None),
        Err(err) => Err(store_error(err)),
    }
}

/// The codes of a cancelled transaction's reasons, one per item (`None` where that item
/// was fine); `None` for any other failure.
fn cancellation_codes(
    err: &SdkError<aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError>,
) -> Option<Vec<String>> {
    use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
    match err.as_service_error() {
        Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) => Some(
            cancelled
                .cancellation_reasons()
                .iter()
                .map(|reason| reason.code().unwrap_or("None").to_owned())
                .collect(),
        ),
        _ => None,
    }
}

/// A request element that failed to build (a missing required field: a bug here).
fn build_error(err: aws_sdk_dynamodb::error::BuildError) -> StoreError {
    StoreError::Transient(Box::new(err))
}

/// One conditional update of the item at `key`, as a transaction item.
fn transact_update(
    table: &str,
    key: Item,
    update: String,
    condition: String,
    expr: &Expr,
) -> Result<aws_sdk_dynamodb::types::TransactWriteItem, StoreError> {
    let update = aws_sdk_dynamodb::types::Update::builder()
        .table_name(table)
        .set_key(Some(key))
        .update_expression(update)
        .condition_expression(condition)
        .set_expression_attribute_names(expr.names())
        .set_expression_attribute_values(expr.values())
        .build()
        .map_err(build_error)?;
    Ok(aws_sdk_dynamodb::types::TransactWriteItem::builder()
        .update(update)
        .build())
}

/// Whether another transaction on one of its items cancelled this one.
fn cancelled_by_conflict(codes: &[String]) -> bool {
    codes.iter().any(|code| code == "TransactionConflict")
}

#[async_trait]
impl RunnerStore for DynamoRunnerStore {
    async fn record_job(&self, job: &JobRecord) -> Result<JobRecord, StoreError> {
        self.put_job(job).await
    }

    async fn get_job(&self, job_id: u64) -> Result<Option<JobRecord>, StoreError> {
        self.get_item(items::job_key(job_id))
            .await?
            .map(|item| items::job_from_item(&item))
            .transpose()
    }

    async fn advance_job(
        &self,
        job: &JobRecord,
        status: JobStatus,
        runner_name: Option<&str>,
    ) -> Result<(), StoreError> {
        self.update_job_status(job, status, runner_name).await
    }

    async fn claim_job(
        &self,
        job_id: u64,
        runner: &RunnerRecord,
        max_runners: u32,
    ) -> Result<Claim, StoreError> {
        self.claim(job_id, runner, max_runners).await
    }

    async fn reserve_runner(
        &self,
        runner: &RunnerRecord,
        max_runners: u32,
    ) -> Result<bool, StoreError> {
        self.reserve(runner, max_runners).await
    }

    async fn unclaim_job(&self, job_id: u64, runner_name: &str) -> Result<(), StoreError> {
        self.release_claim(job_id, runner_name).await
    }

    async fn hand_over_claim(
        &self,
        hand_over: &ClaimHandOver,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.hand_claim_over(hand_over, at).await
    }

    async fn take_stopped(
        &self,
        job_id: u64,
        runner_name: &str,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.take(job_id, runner_name, at).await
    }

    async fn get_runner(&self, name: &str) -> Result<Option<RunnerRecord>, StoreError> {
        self.get_item(items::runner_key(name))
            .await?
            .map(|item| items::runner_from_item(&item))
            .transpose()
    }

    async fn update_runner(
        &self,
        name: &str,
        update: &RunnerUpdate,
        at: OffsetDateTime,
    ) -> Result<RunnerRecord, StoreError> {
        self.update_fields(name, update, at).await
    }

    async fn transition(
        &self,
        name: &str,
        transition: &Transition,
    ) -> Result<RunnerRecord, StoreError> {
        self.move_status(name, transition).await
    }

    async fn fail_creation(
        &self,
        name: &str,
        at: OffsetDateTime,
        error: &str,
    ) -> Result<RunnerRecord, StoreError> {
        self.fail_and_release(name, at, error).await
    }

    async fn finish_deletion(
        &self,
        name: &str,
        at: OffsetDateTime,
        ttl: OffsetDateTime,
        host: &HostStamps,
        cost: Option<&JobCost>,
    ) -> Result<(), StoreError> {
        self.delete_and_release(name, at, ttl, host, cost).await
    }

    async fn runners_in_status(
        &self,
        status: InstanceStatus,
        due: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<RunnerRecord>, StoreError> {
        self.query_status(status, due, limit).await
    }

    async fn runners_on_instance(
        &self,
        instance_id: &str,
    ) -> Result<Vec<RunnerRecord>, StoreError> {
        self.query_instance(instance_id).await
    }

    async fn get_pool(&self, name: &str) -> Result<PoolRecord, StoreError> {
        match self.get_item(items::pool_key(name)).await? {
            Some(item) => items::pool_from_item(name, &item),
            None => Ok(PoolRecord {
                name: name.to_owned(),
                slots_used: 0,
            }),
        }
    }

    async fn jobs_in_status(
        &self,
        status: JobStatus,
        due: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<JobRecord>, StoreError> {
        self.query_jobs(status, due, limit).await
    }

    async fn recheck_job_at(&self, job_id: u64, at: OffsetDateTime) -> Result<bool, StoreError> {
        self.job_next_look(job_id, at).await
    }

    async fn recheck_runner_at(
        &self,
        name: &str,
        status: InstanceStatus,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.runner_next_look(name, status, at).await
    }

    async fn pool_counter(&self, name: &str) -> Result<PoolCounter, StoreError> {
        self.read_pool_counter(name).await
    }

    async fn repair_pool_counter(
        &self,
        name: &str,
        observed: &PoolCounter,
        slots_used: u32,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.set_pool_counter(name, observed, slots_used, at).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttling_codes_are_recognised() {
        assert!(is_throttling(Some("ThrottlingException")));
        assert!(is_throttling(Some(
            "ProvisionedThroughputExceededException"
        )));
        assert!(!is_throttling(Some("ValidationException")));
        assert!(!is_throttling(None));
    }

    #[test]
    fn expressions_alias_every_name() {
        let mut expr = Expr::default();
        let condition = expr.status_in(["creating", "running"]);
        assert_eq!(condition, "#status IN (:s0, :s1)");
        assert_eq!(expr.assign("ttl", items::n(5)), "#ttl = :ttl");
        assert_eq!(expr.names().map(|n| n.len()), Some(2));
        assert_eq!(expr.values().map(|v| v.len()), Some(3));
    }
}
