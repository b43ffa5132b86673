//! Job items: the idempotent first sighting, moving forward only, and the claim
//! transaction that binds a queued job to one runner and one pool slot (and its job-less
//! twin, the reservation of a warm runner: the runner and the slot alone).

use super::{
    build_error, cancellation_codes, cancelled_by_conflict, store_error, transact_update,
    DynamoRunnerStore, Expr,
};
use crate::items::{self, Item};
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem};
use ephemera_core::model::{JobRecord, JobStatus, RunnerRecord};
use ephemera_core::ports::{Claim, StoreError};
use tracing::instrument;

impl DynamoRunnerStore {
    #[instrument(skip_all, fields(job_id = job.job_id))]
    pub(super) async fn put_job(&self, job: &JobRecord) -> Result<JobRecord, StoreError> {
        let mut expr = Expr::default();
        let condition = format!("attribute_not_exists({})", expr.name(items::PK));
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(items::job_to_item(job)))
            .condition_expression(condition)
            .set_expression_attribute_names(expr.names())
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let err = match result {
            Ok(_) => return Ok(job.clone()),
            Err(err) => err,
        };
        let existing: Option<Option<Item>> = match err.as_service_error() {
            Some(PutItemError::ConditionalCheckFailedException(failed)) => {
                Some(failed.item().cloned())
            }
            _ => None,
        };
        match existing {
            None => Err(store_error(err)),
            Some(Some(item)) => {
                self.count_read(1);
                items::job_from_item(&item)
            }
            Some(None) => match self.get_item(items::job_key(job.job_id)).await? {
                Some(item) => items::job_from_item(&item),
                // Deleted in between (expired): there is nothing to return but a conflict.
                None => Err(StoreError::Conflict(items::job_key(job.job_id))),
            },
        }
    }

    #[instrument(skip_all, fields(job_id = job.job_id, status = %status))]
    pub(super) async fn update_job_status(
        &self,
        job: &JobRecord,
        status: JobStatus,
        runner_name: Option<&str>,
    ) -> Result<(), StoreError> {
        let mut expr = Expr::default();
        let mut sets = vec![
            expr.assign(items::STATUS, items::s(status.as_str())),
            expr.assign(items::UPDATED_AT, items::timestamp(job.updated_at)),
        ];
        if let Some(runner_name) = runner_name {
            sets.push(expr.assign(items::RUNNER_NAME, items::s(runner_name)));
        }
        // A job first seen by this call gets a whole record; a known job keeps its own.
        let mut keep = |attribute: &str, value| {
            let name = expr.name(attribute);
            let value = expr.value(attribute, value);
            format!("{name} = if_not_exists({name}, {value})")
        };
        sets.extend([
            keep(items::KIND, items::s(items::KIND_JOB)),
            keep(items::JOB_ID, items::n(job.job_id)),
            keep(items::POOL, items::s(job.pool.as_str())),
            keep(items::OWNER, items::s(job.owner.as_str())),
            keep(items::REPO, items::s(job.repo.as_str())),
            keep(items::RUN_ID, items::n(job.run_id)),
            keep(items::LABELS, items::list(&job.labels)),
            keep(items::RECEIVED_AT, items::timestamp(job.received_at)),
            keep(items::NEXT_ATTEMPT_AT, items::millis(job.received_at)),
        ]);
        if let Some(installation_id) = job.installation_id {
            sets.push(keep(items::INSTALLATION_ID, items::n(installation_id)));
        }
        // GitHub's times ride on the same write: each is kept from the first body that
        // carried it.
        for (attribute, at) in items::github_times(&job.github) {
            if let Some(at) = at {
                sets.push(keep(attribute, items::timestamp(at)));
            }
        }
        let pk = expr.name(items::PK);
        let mut condition = format!("attribute_not_exists({pk})");
        let earlier = status.earlier();
        if !earlier.is_empty() {
            let status_in = expr.status_in(earlier.iter().map(|s| s.as_str()));
            condition = format!("{condition} OR {status_in}");
        }
        if runner_name.is_some() {
            // Already at `status` (the reaper advanced it from GitHub's answer): a webhook
            // naming the runner still names it.
            let status_name = expr.name(items::STATUS);
            let at = expr.value("at_status", items::s(status.as_str()));
            condition = format!("{condition} OR {status_name} = {at}");
        }
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(items::key(items::job_key(job.job_id))))
            .update_expression(format!("SET {}", sets.join(", ")))
            .condition_expression(condition)
            .set_expression_attribute_names(expr.names())
            .set_expression_attribute_values(expr.values())
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            // Already at or past `status`: progress is never undone.
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(UpdateItemError::is_conditional_check_failed_exception) =>
            {
                Ok(())
            }
            Err(err) => Err(store_error(err)),
        }
    }

    #[instrument(skip_all, fields(job_id, runner = %runner.name, pool = %runner.pool, max_runners))]
    pub(super) async fn claim(
        &self,
        job_id: u64,
        runner: &RunnerRecord,
        max_runners: u32,
    ) -> Result<Claim, StoreError> {
        let result = self
            .client
            .transact_write_items()
            .transact_items(self.claim_job_update(job_id, runner)?)
            .transact_items(self.put_new_runner(runner)?)
            .transact_items(self.take_slot(runner, max_runners)?)
            .send()
            .await;
        let err = match result {
            Ok(_) => return Ok(Claim::Claimed),
            Err(err) => err,
        };
        let reasons = cancellation_codes(&err).ok_or_else(|| store_error(err))?;
        // Another transaction on the same items (the pool item, in a burst): try again.
        if cancelled_by_conflict(&reasons) {
            return Err(StoreError::Conflict(items::runner_key(&runner.name)));
        }
        // Which condition failed: read what the transaction saw.
        let Some(item) = self.get_item(items::job_key(job_id)).await? else {
            return Err(StoreError::NotFound(format!("job {job_id}")));
        };
        let job = items::job_from_item(&item)?;
        if let Some(runner_name) = job.runner_name {
            return Ok(Claim::AlreadyClaimed { runner_name });
        }
        if job.status != JobStatus::Queued {
            return Ok(Claim::NotQueued(job.status));
        }
        // The job was claimable, so the pool's condition failed: it was full when the
        // transaction ran, even if a deletion has freed a slot since (in a burst at
        // capacity, slots come and go every moment). The job waits like any other.
        Ok(Claim::PoolFull)
    }

    /// The runner record and a pool slot, in one transaction, for a warm runner.
    #[instrument(skip_all, fields(runner = %runner.name, pool = %runner.pool, max_runners))]
    pub(super) async fn reserve(
        &self,
        runner: &RunnerRecord,
        max_runners: u32,
    ) -> Result<bool, StoreError> {
        let result = self
            .client
            .transact_write_items()
            .transact_items(self.put_new_runner(runner)?)
            .transact_items(self.take_slot(runner, max_runners)?)
            .send()
            .await;
        let err = match result {
            Ok(_) => return Ok(true),
            Err(err) => err,
        };
        let reasons = cancellation_codes(&err).ok_or_else(|| store_error(err))?;
        if cancelled_by_conflict(&reasons) {
            return Err(StoreError::Conflict(items::runner_key(&runner.name)));
        }
        // Which condition failed: a full pool, or (names are random) a slot freed since.
        if self.get_pool_counter(&runner.pool).await? >= max_runners {
            return Ok(false);
        }
        Err(StoreError::Conflict(items::runner_key(&runner.name)))
    }

    /// The job: queued and not yet claimed → claimed by this runner.
    fn claim_job_update(
        &self,
        job_id: u64,
        runner: &RunnerRecord,
    ) -> Result<TransactWriteItem, StoreError> {
        let mut expr = Expr::default();
        let sets = [
            expr.assign(items::RUNNER_NAME, items::s(runner.name.as_str())),
            expr.assign(items::LAUNCHED_RUNNER, items::s(runner.name.as_str())),
            expr.assign(items::UPDATED_AT, items::timestamp(runner.updated_at)),
            expr.assign(items::CLAIMED_AT, items::timestamp(runner.created_at)),
        ];
        let condition = format!(
            "{} = {} AND attribute_not_exists({})",
            expr.name(items::STATUS),
            expr.value("queued", items::s(JobStatus::Queued.as_str())),
            expr.name(items::RUNNER_NAME),
        );
        transact_update(
            &self.table,
            items::key(items::job_key(job_id)),
            format!("SET {}", sets.join(", ")),
            condition,
            &expr,
        )
    }

    /// The runner record, which must not exist yet.
    fn put_new_runner(&self, runner: &RunnerRecord) -> Result<TransactWriteItem, StoreError> {
        let mut expr = Expr::default();
        let condition = format!("attribute_not_exists({})", expr.name(items::PK));
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(items::runner_to_item(runner)))
            .condition_expression(condition)
            .set_expression_attribute_names(expr.names())
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// One more slot in the runner's pool, if fewer than `max_runners` are taken.
    fn take_slot(
        &self,
        runner: &RunnerRecord,
        max_runners: u32,
    ) -> Result<TransactWriteItem, StoreError> {
        let mut expr = Expr::default();
        let slots = expr.name(items::SLOTS_USED);
        let zero = expr.value("zero", items::n(0));
        let one = expr.value("one", items::n(1));
        let max = expr.value("max", items::n(max_runners));
        let sets = [
            format!("{slots} = if_not_exists({slots}, {zero}) + {one}"),
            expr.assign(items::KIND, items::s(items::KIND_POOL)),
            expr.assign(items::NAME, items::s(runner.pool.as_str())),
            expr.assign(items::UPDATED_AT, items::timestamp(runner.updated_at)),
        ];
        // A missing counter is zero, which is below any maximum but zero.
        let condition = if max_runners == 0 {
            format!("{slots} < {max}")
        } else {
            format!("attribute_not_exists({slots}) OR {slots} < {max}")
        };
        transact_update(
            &self.table,
            items::key(items::pool_key(&runner.pool)),
            format!("SET {}", sets.join(", ")),
            condition,
            &expr,
        )
    }

    #[instrument(skip_all, fields(job_id, runner = %runner_name))]
    pub(super) async fn release_claim(
        &self,
        job_id: u64,
        runner_name: &str,
    ) -> Result<(), StoreError> {
        let mut expr = Expr::default();
        let runner = expr.name(items::RUNNER_NAME);
        let launched = expr.name(items::LAUNCHED_RUNNER);
        // Only a queued job's claim: a job in progress or completed keeps its runner.
        let queued = expr.status_in([JobStatus::Queued.as_str()]);
        let condition = format!(
            "{queued} AND {runner} = {}",
            expr.value("runner", items::s(runner_name))
        );
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(items::key(items::job_key(job_id))))
            .update_expression(format!("REMOVE {runner}, {launched}"))
            .condition_expression(condition)
            .set_expression_attribute_names(expr.names())
            .set_expression_attribute_values(expr.values())
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            // Not this runner's claim (any more): nothing to drop.
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(UpdateItemError::is_conditional_check_failed_exception) =>
            {
                Ok(())
            }
            Err(err) => Err(store_error(err)),
        }
    }
}
