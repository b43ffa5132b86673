//! The take of a stopped instance (docs/design.md, "Stopped pool"): one transaction moves
//! the stopped runner record to `starting` for a queued job and claims the job for it,
//! so two jobs can never take one instance.

use super::runners::append_history;
use super::{
    cancellation_codes, cancelled_by_conflict, store_error, transact_update, DynamoRunnerStore,
    Expr,
};
use crate::items;
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::model::{HistoryEntry, JobStatus};
use ephemera_core::ports::StoreError;
use time::OffsetDateTime;
use tracing::instrument;

impl DynamoRunnerStore {
    #[instrument(skip_all, fields(job_id, runner = %runner_name))]
    pub(super) async fn take(
        &self,
        job_id: u64,
        runner_name: &str,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let reason = format!("job {job_id} queued: takes the stopped instance");
        let mut runner = Expr::default();
        let entry = HistoryEntry::status(at, InstanceStatus::Starting, Some(reason.clone()));
        let runner_sets = [
            runner.assign(items::STATUS, items::s(InstanceStatus::Starting.as_str())),
            runner.assign(items::JOB_ID, items::n(job_id)),
            runner.assign(items::UPDATED_AT, items::timestamp(at)),
            runner.assign(items::REASON, items::s(reason.as_str())),
            append_history(&mut runner, &entry),
        ];
        let runner_condition = format!(
            "{} = {} AND attribute_not_exists({})",
            runner.name(items::STATUS),
            runner.value("stopped", items::s(InstanceStatus::Stopped.as_str())),
            runner.name(items::JOB_ID),
        );
        let mut job = Expr::default();
        let job_sets = [
            job.assign(items::RUNNER_NAME, items::s(runner_name)),
            job.assign(items::LAUNCHED_RUNNER, items::s(runner_name)),
            job.assign(items::UPDATED_AT, items::timestamp(at)),
            job.assign(items::CLAIMED_AT, items::timestamp(at)),
        ];
        let job_condition = format!(
            "{} = {} AND attribute_not_exists({})",
            job.name(items::STATUS),
            job.value("queued", items::s(JobStatus::Queued.as_str())),
            job.name(items::RUNNER_NAME),
        );
        let result = self
            .client
            .transact_write_items()
            .transact_items(transact_update(
                &self.table,
                items::key(items::runner_key(runner_name)),
                format!("SET {}", runner_sets.join(", ")),
                runner_condition,
                &runner,
            )?)
            .transact_items(transact_update(
                &self.table,
                items::key(items::job_key(job_id)),
                format!("SET {}", job_sets.join(", ")),
                job_condition,
                &job,
            )?)
            .send()
            .await;
        let err = match result {
            Ok(_) => return Ok(true),
            Err(err) => err,
        };
        let reasons = cancellation_codes(&err).ok_or_else(|| store_error(err))?;
        if cancelled_by_conflict(&reasons) {
            return Err(StoreError::Conflict(items::runner_key(runner_name)));
        }
        // A condition failed: the instance was taken, or the job claimed or moved on.
        Ok(false)
    }
}
