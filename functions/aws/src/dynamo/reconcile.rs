//! What the reaper's reconciliation needs beyond the runner lifecycle: queued jobs by
//! due time from the status index, pushing a job's or a runner's next look later (the
//! index's sort key, conditional on the status), and reading and repairing a pool
//! counter conditionally on exactly what was read.

use super::{store_error, DynamoRunnerStore, Expr};
use crate::items;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::update_item::{UpdateItemError, UpdateItemOutput};
use aws_sdk_dynamodb::types::AttributeValue;
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::model::{JobRecord, JobStatus};
use ephemera_core::ports::{PoolCounter, StoreError};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use tracing::{instrument, warn};

/// A conditional update's answer: applied, or refused by its condition.
fn applied<R>(
    result: Result<UpdateItemOutput, SdkError<UpdateItemError, R>>,
) -> Result<bool, StoreError>
where
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match result {
        Ok(_) => Ok(true),
        Err(err)
            if err
                .as_service_error()
                .is_some_and(UpdateItemError::is_conditional_check_failed_exception) =>
        {
            Ok(false)
        }
        Err(err) => Err(store_error(err)),
    }
}

impl DynamoRunnerStore {
    #[instrument(skip_all, fields(status = %status, limit))]
    pub(super) async fn query_jobs(
        &self,
        status: JobStatus,
        due: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<JobRecord>, StoreError> {
        let mut expr = Expr::default();
        let key_condition = format!(
            "{} AND {} <= {}",
            expr.assign(items::STATUS, items::s(status.as_str())),
            expr.name(items::NEXT_ATTEMPT_AT),
            expr.value("due", items::millis(due)),
        );
        let found = self
            .query_status_index(&expr, &key_condition, Some(limit))
            .await?;
        let mut jobs = Vec::new();
        for item in &found {
            if items::kind_of(item) != Some(items::KIND_JOB) {
                warn!(kind = ?items::kind_of(item), "skipping an item that is not a job in the status index");
                continue;
            }
            jobs.push(items::job_from_item(item)?);
        }
        Ok(jobs)
    }

    /// `SET next_attempt_at = :at IF status = :status` on the item `pk`.
    async fn set_next_look(
        &self,
        pk: String,
        status: &str,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let mut expr = Expr::default();
        let update = format!(
            "SET {}",
            expr.assign(items::NEXT_ATTEMPT_AT, items::millis(at))
        );
        let condition = format!(
            "{} = {}",
            expr.name(items::STATUS),
            expr.value("expected", items::s(status))
        );
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(items::key(pk)))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(expr.names())
            .set_expression_attribute_values(expr.values())
            .send()
            .await;
        applied(result)
    }

    #[instrument(skip_all, fields(job_id))]
    pub(super) async fn job_next_look(
        &self,
        job_id: u64,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.set_next_look(items::job_key(job_id), JobStatus::Queued.as_str(), at)
            .await
    }

    #[instrument(skip_all, fields(runner = %name))]
    pub(super) async fn runner_next_look(
        &self,
        name: &str,
        status: InstanceStatus,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.set_next_look(items::runner_key(name), status.as_str(), at)
            .await
    }

    pub(super) async fn read_pool_counter(&self, pool: &str) -> Result<PoolCounter, StoreError> {
        let Some(item) = self.get_item(items::pool_key(pool)).await? else {
            return Ok(PoolCounter {
                slots_used: 0,
                updated_at: None,
            });
        };
        let slots_used = items::pool_from_item(pool, &item)?.slots_used;
        let updated_at = match item.get(items::UPDATED_AT) {
            Some(AttributeValue::S(text)) => Some(OffsetDateTime::parse(text, &Rfc3339).map_err(
                |_| StoreError::Corrupt {
                    key: items::pool_key(pool),
                    message: format!("updated_at {text:?} is not an RFC 3339 time"),
                },
            )?),
            _ => None,
        };
        Ok(PoolCounter {
            slots_used,
            updated_at,
        })
    }

    /// `SET slots_used = :to, updated_at = :at` if the counter and its change time are
    /// still what was observed (or the item still does not exist).
    #[instrument(skip_all, fields(pool = %pool, to = slots_used))]
    pub(super) async fn set_pool_counter(
        &self,
        pool: &str,
        observed: &PoolCounter,
        slots_used: u32,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let mut expr = Expr::default();
        let slots = expr.name(items::SLOTS_USED);
        let updated = expr.name(items::UPDATED_AT);
        let update = format!(
            "SET {slots} = {}, {updated} = {}, {}",
            expr.value("to", items::n(slots_used)),
            expr.value("at", items::timestamp(at)),
            expr.assign(items::NAME, items::s(pool)),
        );
        let update = format!(
            "{update}, {}",
            expr.assign(items::KIND, items::s(items::KIND_POOL))
        );
        let same_count = if observed.slots_used == 0 {
            format!(
                "(attribute_not_exists({slots}) OR {slots} = {})",
                expr.value("observed", items::n(0))
            )
        } else {
            format!(
                "{slots} = {}",
                expr.value("observed", items::n(observed.slots_used))
            )
        };
        let same_time = match observed.updated_at {
            Some(when) => format!("{updated} = {}", expr.value("when", items::timestamp(when))),
            None => format!("attribute_not_exists({updated})"),
        };
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(items::key(items::pool_key(pool))))
            .update_expression(update)
            .condition_expression(format!("{same_count} AND {same_time}"))
            .set_expression_attribute_names(expr.names())
            .set_expression_attribute_values(expr.values())
            .send()
            .await;
        applied(result)
    }
}
