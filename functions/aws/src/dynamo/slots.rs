//! Status changes that give a pool slot back — `deleting` → `deleted`, and a failed
//! launch (`creating` → `error`) — each in one transaction with the pool's counter, so a
//! slot is released exactly once: the record says whether it still holds one.

use super::runners::append_history;
use super::{cancellation_codes, cancelled_by_conflict, store_error, DynamoRunnerStore, Expr};
use crate::items;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::model::{HistoryEntry, RunnerRecord};
use ephemera_core::ports::{HostStamps, StoreError};
use ephemera_core::prices::JobCost;
use time::OffsetDateTime;
use tracing::{instrument, warn};

/// How often a release cancelled by another transaction on its pool item is tried.
const RELEASE_TRIES: u32 = 8;
/// The bound of the first random wait between tries; it doubles with each try.
const RELEASE_FIRST_WAIT: std::time::Duration = std::time::Duration::from_millis(20);

/// A status change that gives the record's slot back.
struct SlotRelease {
    from: InstanceStatus,
    to: InstanceStatus,
    at: OffsetDateTime,
    reason: Option<&'static str>,
    /// Further attributes to set.
    fields: Vec<(&'static str, AttributeValue)>,
}

impl DynamoRunnerStore {
    /// `deleting` → `deleted` with its TTL, the host's stamps and its instance's cost,
    /// giving the slot back.
    #[instrument(skip_all, fields(runner = %name))]
    pub(super) async fn delete_and_release(
        &self,
        name: &str,
        at: OffsetDateTime,
        ttl: OffsetDateTime,
        host: &HostStamps,
        cost: Option<&JobCost>,
    ) -> Result<(), StoreError> {
        let stamps = [
            (items::INSTANCE_LAUNCHED_AT, host.instance_launched_at),
            (items::JIT_READ_AT, host.jit_read_at),
        ];
        let stamps = stamps
            .into_iter()
            .filter_map(|(name, at)| Some((name, items::timestamp(at?))));
        let mut fields: Vec<_> = std::iter::once((items::TTL, items::epoch_seconds(ttl)))
            .chain(stamps)
            .collect();
        fields.extend(items::host_runner_values(&host.runner));
        if let Some(cost) = cost {
            fields.push((items::COST, items::cost_value(cost)));
        }
        let change = SlotRelease {
            from: InstanceStatus::Deleting,
            to: InstanceStatus::Deleted,
            at,
            reason: None,
            fields,
        };
        self.release_with(name, change).await
    }

    /// `creating` → `error` with the error kept, giving the slot back at once.
    #[instrument(skip_all, fields(runner = %name))]
    pub(super) async fn fail_and_release(
        &self,
        name: &str,
        at: OffsetDateTime,
        error: &str,
    ) -> Result<RunnerRecord, StoreError> {
        let change = SlotRelease {
            from: InstanceStatus::Creating,
            to: InstanceStatus::Error,
            at,
            reason: Some("creation failed"),
            fields: vec![(items::LAST_ERROR, items::s(error))],
        };
        self.release_with(name, change).await?;
        let item = self.get_item(items::runner_key(name)).await?;
        let item = item.ok_or_else(|| StoreError::NotFound(format!("runner {name}")))?;
        items::runner_from_item(&item)
    }

    async fn release_with(&self, name: &str, change: SlotRelease) -> Result<(), StoreError> {
        let refused = |actual: String| StoreError::TransitionRefused {
            name: name.to_owned(),
            to: change.to,
            actual,
        };
        // The pool to give the slot back to, and whether there is one, is on the record.
        let Some(item) = self.get_item(items::runner_key(name)).await? else {
            return Err(refused("missing".to_owned()));
        };
        let runner = items::runner_from_item(&item)?;
        if runner.status != change.from {
            return Err(refused(runner.status.as_str().to_owned()));
        }
        let runner_update = self.status_update(name, &change)?;
        if !runner.slot_held {
            return self.update_alone(runner_update, refused).await;
        }
        let mut expr = Expr::default();
        let slots = expr.name(items::SLOTS_USED);
        let pool_update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(items::key(items::pool_key(&runner.pool))))
            .update_expression(format!(
                "SET {slots} = {slots} - {one}, {}",
                expr.assign(items::UPDATED_AT, items::timestamp(change.at)),
                one = expr.value("one", items::n(1)),
            ))
            .condition_expression(format!("{slots} > {}", expr.value("zero", items::n(0))))
            .set_expression_attribute_names(expr.names())
            .set_expression_attribute_values(expr.values())
            .build()
            .map_err(|err| StoreError::Transient(Box::new(err)))?;
        // Another transaction on the pool item (a burst's claims and releases) cancels
        // this one with `TransactionConflict`: it is tried again, after a short random wait.
        let mut tries = 0;
        let err = loop {
            tries += 1;
            let result = self
                .client
                .transact_write_items()
                .transact_items(
                    TransactWriteItem::builder()
                        .update(runner_update.clone())
                        .build(),
                )
                .transact_items(
                    TransactWriteItem::builder()
                        .update(pool_update.clone())
                        .build(),
                )
                .send()
                .await;
            let Err(err) = result else { return Ok(()) };
            let conflict = cancellation_codes(&err).is_some_and(|c| cancelled_by_conflict(&c));
            if !conflict || tries >= RELEASE_TRIES {
                break err;
            }
            let bound = RELEASE_FIRST_WAIT.saturating_mul(1 << tries.min(6));
            tokio::time::sleep(bound.mul_f64(rand::random::<f64>())).await;
        };
        if !err
            .as_service_error()
            .is_some_and(TransactWriteItemsError::is_transaction_canceled_exception)
        {
            return Err(store_error(err));
        }
        if cancellation_codes(&err).is_some_and(|c| cancelled_by_conflict(&c)) {
            return Err(StoreError::Conflict(items::runner_key(name)));
        }
        let status = self.current_status(name).await?;
        if status != change.from.as_str() {
            return Err(refused(status));
        }
        let pool = self.get_pool_counter(&runner.pool).await?;
        if pool > 0 {
            // Both conditions held when read again: a concurrent writer got in between.
            return Err(StoreError::Conflict(items::runner_key(name)));
        }
        warn!(pool = %runner.pool, "pool counter already at zero (drift); moving without releasing a slot");
        self.update_alone(runner_update, refused).await
    }

    /// Applies a status update outside a transaction.
    async fn update_alone(
        &self,
        runner_update: Update,
        refused: impl Fn(String) -> StoreError,
    ) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(runner_update.key))
            .update_expression(runner_update.update_expression)
            .set_condition_expression(runner_update.condition_expression)
            .set_expression_attribute_names(runner_update.expression_attribute_names)
            .set_expression_attribute_values(runner_update.expression_attribute_values)
            .send()
            .await
            .map_err(|err| {
                if err
                    .as_service_error()
                    .is_some_and(UpdateItemError::is_conditional_check_failed_exception)
                {
                    refused("changed concurrently".to_owned())
                } else {
                    store_error(err)
                }
            })?;
        Ok(())
    }

    /// The status change of `change`, as one transaction element; the record holds no
    /// slot afterwards.
    fn status_update(&self, name: &str, change: &SlotRelease) -> Result<Update, StoreError> {
        let mut expr = Expr::default();
        let mut sets = vec![
            expr.assign(items::STATUS, items::s(change.to.as_str())),
            expr.assign(items::UPDATED_AT, items::timestamp(change.at)),
            expr.assign(items::NEXT_ATTEMPT_AT, items::millis(change.at)),
            expr.assign(items::SLOT_HELD, AttributeValue::Bool(false)),
        ];
        for (attribute, value) in &change.fields {
            sets.push(expr.assign(attribute, value.clone()));
        }
        if let Some(reason) = change.reason {
            sets.push(expr.assign(items::REASON, items::s(reason)));
        }
        let entry = HistoryEntry::status(change.at, change.to, change.reason.map(str::to_owned));
        sets.push(append_history(&mut expr, &entry));
        let status = expr.name(items::STATUS);
        let deleting = expr.value("from", items::s(change.from.as_str()));
        Update::builder()
            .table_name(&self.table)
            .set_key(Some(items::key(items::runner_key(name))))
            .update_expression(format!("SET {}", sets.join(", ")))
            .condition_expression(format!("{status} = {deleting}"))
            .set_expression_attribute_names(expr.names())
            .set_expression_attribute_values(expr.values())
            .build()
            .map_err(|err| StoreError::Transient(Box::new(err)))
    }
}
