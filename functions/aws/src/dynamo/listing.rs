//! Listing for operators: every runner or job in some statuses, read through the
//! `by-status` index one status at a time (never a scan of the table), oldest first.
//!
//! Unlike the reaper's query these read every page with no due time: an operator wants
//! the whole picture of what is live, which is bounded by the pools' sizes and the jobs
//! not yet expired.

use super::{DynamoRunnerStore, Expr};
use crate::items::{self, Item};
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::model::{JobRecord, JobStatus, RunnerRecord};
use ephemera_core::ports::StoreError;
use tracing::instrument;

impl DynamoRunnerStore {
    /// Every runner record in any of `statuses`, by status in the order given, then
    /// by `next_attempt_at`. Reads the status index only.
    pub async fn list_runners(
        &self,
        statuses: &[InstanceStatus],
    ) -> Result<Vec<RunnerRecord>, StoreError> {
        let mut runners = Vec::new();
        for status in statuses {
            for item in self.items_in_status(status.as_str()).await? {
                if items::kind_of(&item) == Some(items::KIND_RUNNER) {
                    runners.push(items::runner_from_item(&item)?);
                }
            }
        }
        Ok(runners)
    }

    /// Every job record in any of `statuses`, by status in the order given, then by the
    /// time it was received. Reads the status index only.
    pub async fn list_jobs(&self, statuses: &[JobStatus]) -> Result<Vec<JobRecord>, StoreError> {
        let mut jobs = Vec::new();
        for status in statuses {
            for item in self.items_in_status(status.as_str()).await? {
                if items::kind_of(&item) == Some(items::KIND_JOB) {
                    jobs.push(items::job_from_item(&item)?);
                }
            }
        }
        Ok(jobs)
    }

    /// All items of one partition of the status index, following every page.
    #[instrument(skip_all, fields(status))]
    async fn items_in_status(&self, status: &str) -> Result<Vec<Item>, StoreError> {
        let mut expr = Expr::default();
        let key_condition = expr.assign(items::STATUS, items::s(status));
        self.query_status_index(&expr, &key_condition, None).await
    }
}
