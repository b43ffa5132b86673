//! Runner items: conditional status changes, field updates, the final `deleted` step with
//! its slot release, and the status-index query the reaper reads its work from.

use super::{describe_status, store_error, DynamoRunnerStore, Expr};
use crate::items::{self, Item};
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::model::{HistoryEntry, RunnerRecord, HISTORY_CAP};
use ephemera_core::ports::{RunnerUpdate, StoreError, Transition};
use std::collections::HashMap;
use time::OffsetDateTime;
use tracing::{instrument, warn};

impl DynamoRunnerStore {
    #[instrument(skip_all, fields(runner = %name, to = %transition.to))]
    pub(super) async fn move_status(
        &self,
        name: &str,
        transition: &Transition,
    ) -> Result<RunnerRecord, StoreError> {
        let to = transition.to;
        let refused = |actual: String| StoreError::TransitionRefused {
            name: name.to_owned(),
            to,
            actual,
        };
        let predecessors = to.allowed_predecessors();
        if predecessors.is_empty() {
            return Err(refused(self.current_status(name).await?));
        }
        let mut expr = Expr::default();
        let mut sets = vec![
            expr.assign(items::STATUS, items::s(to.as_str())),
            expr.assign(items::UPDATED_AT, items::timestamp(transition.at)),
            expr.assign(
                items::NEXT_ATTEMPT_AT,
                items::millis(transition.next_attempt_at),
            ),
        ];
        if let Some(reason) = &transition.reason {
            sets.push(expr.assign(items::REASON, items::s(reason.as_str())));
        }
        if let Some(attempts) = transition.attempts {
            sets.push(expr.assign(items::ATTEMPTS, items::n(attempts)));
        }
        if let Some(error) = &transition.error {
            sets.push(expr.assign(items::LAST_ERROR, items::s(error.as_str())));
        }
        if let Some(ttl) = transition.ttl {
            sets.push(expr.assign(items::TTL, items::epoch_seconds(ttl)));
        }
        let entry = HistoryEntry::status(transition.at, to, transition.reason.clone());
        sets.push(append_history(&mut expr, &entry));
        let pk = expr.name(items::PK);
        let mut condition = format!(
            "attribute_exists({pk}) AND {}",
            expr.status_in(predecessors.iter().map(|s| s.as_str()))
        );
        if let Some(expect) = transition.expect {
            let status = expr.name(items::STATUS);
            let expect = expr.value("expect", items::s(expect.as_str()));
            condition.push_str(&format!(" AND {status} = {expect}"));
        }
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(items::key(items::runner_key(name))))
            .update_expression(format!("SET {}", sets.join(", ")))
            .condition_expression(condition)
            .set_expression_attribute_names(expr.names())
            .set_expression_attribute_values(expr.values())
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(output) => self.trim_history(decode_new(output.attributes)?).await,
            Err(err) => {
                let refusal = match err.as_service_error() {
                    Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                        Some(failed.item().map(|old| describe_status(Some(old))))
                    }
                    _ => None,
                };
                match refusal {
                    Some(Some(actual)) => Err(refused(actual)),
                    // No old item came back: the record is missing, or this table does
                    // not return it; a consistent read tells which.
                    Some(None) => Err(refused(self.current_status(name).await?)),
                    None => Err(store_error(err)),
                }
            }
        }
    }

    #[instrument(skip_all, fields(runner = %name))]
    pub(super) async fn update_fields(
        &self,
        name: &str,
        update: &RunnerUpdate,
        at: OffsetDateTime,
    ) -> Result<RunnerRecord, StoreError> {
        let (expr, sets, condition) = field_update(update, at);
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(items::key(items::runner_key(name))))
            .update_expression(sets)
            .condition_expression(condition)
            .set_expression_attribute_names(expr.names())
            .set_expression_attribute_values(expr.values())
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match result {
            Ok(output) => self.trim_history(decode_new(output.attributes)?).await,
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(UpdateItemError::is_conditional_check_failed_exception) =>
            {
                // With a guard the record most likely exists and moved on; without, it is gone.
                let guarded = update.unchanged_since.is_some() || update.expect_instance.is_some();
                Err(if guarded {
                    StoreError::Conflict(format!("runner {name}"))
                } else {
                    StoreError::NotFound(format!("runner {name}"))
                })
            }
            Err(err) => Err(store_error(err)),
        }
    }

    /// A pool's counter, read consistently.
    pub(super) async fn get_pool_counter(&self, pool: &str) -> Result<u32, StoreError> {
        match self.get_item(items::pool_key(pool)).await? {
            Some(item) => Ok(items::pool_from_item(pool, &item)?.slots_used),
            None => Ok(0),
        }
    }

    #[instrument(skip_all, fields(status = %status, limit))]
    pub(super) async fn query_status(
        &self,
        status: InstanceStatus,
        due: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<RunnerRecord>, StoreError> {
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
        let mut runners = Vec::new();
        for item in &found {
            if items::kind_of(item) != Some(items::KIND_RUNNER) {
                warn!(kind = ?items::kind_of(item), "skipping an item that is not a runner in the status index");
                continue;
            }
            runners.push(items::runner_from_item(item)?);
        }
        Ok(runners)
    }

    /// The runner records naming `instance_id`: the instance index (keys only, one query
    /// answering one key or none) names their items, each then read by key.
    #[instrument(skip_all, fields(instance_id))]
    pub(super) async fn query_instance(
        &self,
        instance_id: &str,
    ) -> Result<Vec<RunnerRecord>, StoreError> {
        let mut expr = Expr::default();
        let key_condition = expr.assign(items::INSTANCE_ID, items::s(instance_id));
        let output = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(items::INSTANCE_INDEX)
            .key_condition_expression(key_condition)
            .set_expression_attribute_names(expr.names())
            .set_expression_attribute_values(expr.values())
            .send()
            .await
            .map_err(store_error)?;
        self.count_read(output.items().len());
        let mut runners = Vec::new();
        for keys in output.items() {
            let Some(AttributeValue::S(pk)) = keys.get(items::PK) else {
                continue;
            };
            let Some(item) = self.get_item(pk.clone()).await? else {
                continue;
            };
            if items::kind_of(&item) == Some(items::KIND_RUNNER) {
                runners.push(items::runner_from_item(&item)?);
            }
        }
        Ok(runners)
    }

    /// Items of the status index matching `key_condition` (written with `expr`), in
    /// `next_attempt_at` order, following pages until `limit` items (all when `None`).
    pub(super) async fn query_status_index(
        &self,
        expr: &Expr,
        key_condition: &str,
        limit: Option<usize>,
    ) -> Result<Vec<Item>, StoreError> {
        let mut found = Vec::new();
        let mut start: Option<HashMap<String, AttributeValue>> = None;
        loop {
            let page_size =
                limit.map(|limit| i32::try_from(limit - found.len()).unwrap_or(i32::MAX));
            let output = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(items::STATUS_INDEX)
                .key_condition_expression(key_condition)
                .set_expression_attribute_names(expr.names())
                .set_expression_attribute_values(expr.values())
                .scan_index_forward(true)
                .set_limit(page_size)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(store_error)?;
            let page = output.items.unwrap_or_default();
            self.count_read(page.len());
            found.extend(page);
            if limit.is_some_and(|limit| found.len() >= limit) {
                break;
            }
            match output.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        Ok(found)
    }
}

impl DynamoRunnerStore {
    /// Drops the oldest history entries of a record past the cap. The append cannot cap
    /// itself (an update expression cannot count a list), so the few records that grow
    /// past it (a runner busy through many reaper runs) pay one more write.
    async fn trim_history(&self, mut record: RunnerRecord) -> Result<RunnerRecord, StoreError> {
        let excess = record.history.len().saturating_sub(HISTORY_CAP);
        if excess == 0 {
            return Ok(record);
        }
        let mut expr = Expr::default();
        let history = expr.name(items::HISTORY);
        let removals: Vec<String> = (0..excess).map(|i| format!("{history}[{i}]")).collect();
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(items::key(items::runner_key(&record.name))))
            .update_expression(format!("REMOVE {}", removals.join(", ")))
            .set_expression_attribute_names(expr.names())
            .send()
            .await
            .map_err(store_error)?;
        record.history.drain(..excess);
        Ok(record)
    }
}

/// The expression of a [`RunnerUpdate`]: its names and values, the `SET` clause, and the
/// condition (the record exists, its runner status allows the new one, and the update's
/// guards hold).
pub(super) fn field_update(update: &RunnerUpdate, at: OffsetDateTime) -> (Expr, String, String) {
    let mut expr = Expr::default();
    let mut sets = vec![expr.assign(items::UPDATED_AT, items::timestamp(at))];
    if let Some(instance_id) = &update.instance_id {
        sets.push(expr.assign(items::INSTANCE_ID, items::s(instance_id.as_str())));
    }
    if let Some(id) = update.github_runner_id {
        sets.push(expr.assign(items::GITHUB_RUNNER_ID, items::n(id)));
    }
    let mut from = None;
    if let Some(status) = update.runner_status {
        sets.push(expr.assign(items::RUNNER_STATUS, items::s(status.as_str())));
        // The core runner-status table, as the condition of the write.
        let allowed: Vec<String> = status
            .allowed_predecessors()
            .iter()
            .enumerate()
            .map(|(i, before)| expr.value(&format!("rs{i}"), items::s(before.as_str())))
            .collect();
        from = Some(format!(
            "{} IN ({})",
            expr.name(items::RUNNER_STATUS),
            allowed.join(", ")
        ));
    }
    // A note alone (a job handed over) is kept in the history too.
    if let Some(entry) = HistoryEntry::of_update(at, update.runner_status, update.note.as_deref()) {
        sets.push(append_history(&mut expr, &entry));
    }
    if let Some(job_id) = update.job_id {
        sets.push(expr.assign(items::JOB_ID, items::n(job_id)));
    }
    if let Some(instance_type) = &update.instance_type {
        sets.push(expr.assign(items::INSTANCE_TYPE, items::s(instance_type.as_str())));
    }
    if let Some(market) = update.market {
        sets.push(expr.assign(items::MARKET, items::s(market.as_str())));
    }
    if let Some(root) = &update.root_volume {
        sets.push(expr.assign(items::ROOT_VOLUME_GIB, items::n(root.gib)));
        if let Some(volume_type) = &root.volume_type {
            sets.push(expr.assign(items::ROOT_VOLUME_TYPE, items::s(volume_type.as_str())));
        }
    }
    if let Some(online_at) = update.online_at {
        let name = expr.name(items::ONLINE_AT);
        let value = expr.value(items::ONLINE_AT, items::timestamp(online_at));
        sets.push(format!("{name} = if_not_exists({name}, {value})"));
    }
    if let Some(interrupted_at) = update.interrupted_at {
        let name = expr.name(items::INTERRUPTED_AT);
        let value = expr.value(items::INTERRUPTED_AT, items::timestamp(interrupted_at));
        sets.push(format!("{name} = if_not_exists({name}, {value})"));
    }
    let pk = expr.name(items::PK);
    let mut condition = format!("attribute_exists({pk})");
    if let Some(from) = from {
        condition.push_str(&format!(" AND {from}"));
    }
    if let Some(seen) = update.unchanged_since {
        let updated_at = expr.name(items::UPDATED_AT);
        let seen = expr.value("seen", items::timestamp(seen));
        condition.push_str(&format!(" AND {updated_at} = {seen}"));
    }
    match &update.expect_instance {
        Some(None) => {
            let instance = expr.name(items::INSTANCE_ID);
            condition.push_str(&format!(" AND attribute_not_exists({instance})"));
        }
        Some(Some(id)) => {
            let instance = expr.name(items::INSTANCE_ID);
            let expected = expr.value("expected_instance", items::s(id.as_str()));
            condition.push_str(&format!(" AND {instance} = {expected}"));
        }
        None => {}
    }
    (expr, format!("SET {}", sets.join(", ")), condition)
}

/// `#history = list_append(if_not_exists(#history, :no_history), :history_entry)`.
pub(super) fn append_history(expr: &mut Expr, entry: &HistoryEntry) -> String {
    let history = expr.name(items::HISTORY);
    let empty = expr.value("no_history", AttributeValue::L(Vec::new()));
    let appended = expr.value("history_entry", items::history(std::slice::from_ref(entry)));
    format!("{history} = list_append(if_not_exists({history}, {empty}), {appended})")
}

/// The record an update returned (`ReturnValues = ALL_NEW`).
fn decode_new(attributes: Option<Item>) -> Result<RunnerRecord, StoreError> {
    match attributes {
        Some(item) => items::runner_from_item(&item),
        None => Err(StoreError::Corrupt {
            key: "<update>".to_owned(),
            message: "the table returned no attributes for ALL_NEW".to_owned(),
        }),
    }
}
