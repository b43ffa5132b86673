//! The hand-over of a queued job's claim: the job item and both runner items in one
//! TransactWriteItems, so that no crash between the writes leaves two runner records
//! naming one queued job.

use super::runners::field_update;
use super::{
    cancellation_codes, cancelled_by_conflict, store_error, transact_update, DynamoRunnerStore,
    Expr,
};
use crate::items;
use aws_sdk_dynamodb::types::TransactWriteItem;
use ephemera_core::model::JobStatus;
use ephemera_core::ports::{ClaimHandOver, RunnerUpdate, StoreError};
use time::OffsetDateTime;
use tracing::instrument;

impl DynamoRunnerStore {
    #[instrument(skip_all, fields(job_id = hand_over.job_id, taker = %hand_over.taker.0))]
    pub(super) async fn hand_claim_over(
        &self,
        hand_over: &ClaimHandOver,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let mut request = self
            .client
            .transact_write_items()
            .transact_items(self.claim_moves(hand_over)?)
            .transact_items(self.runner_update(&hand_over.taker.0, &hand_over.taker.1, at)?);
        if let Some((to, update)) = &hand_over.to {
            request = request.transact_items(self.runner_update(to, update, at)?);
        }
        let err = match request.send().await {
            Ok(_) => return Ok(true),
            Err(err) => err,
        };
        let reasons = cancellation_codes(&err).ok_or_else(|| store_error(err))?;
        if cancelled_by_conflict(&reasons) {
            return Err(StoreError::Conflict(items::job_key(hand_over.job_id)));
        }
        // The job item comes first: its condition failing means the claim moved on.
        if reasons
            .first()
            .is_some_and(|code| code == "ConditionalCheckFailed")
        {
            return Ok(false);
        }
        Err(StoreError::Conflict(format!(
            "runner {} or {}",
            hand_over.taker.0,
            hand_over.to.as_ref().map_or("-", |(to, _)| to.as_str())
        )))
    }

    /// The job: queued and claimed by the taker → claimed by the free runner, or by none.
    fn claim_moves(&self, hand_over: &ClaimHandOver) -> Result<TransactWriteItem, StoreError> {
        let mut expr = Expr::default();
        let runner = expr.name(items::RUNNER_NAME);
        let launched = expr.name(items::LAUNCHED_RUNNER);
        let condition = format!(
            "{} = {} AND {runner} = {}",
            expr.name(items::STATUS),
            expr.value("queued", items::s(JobStatus::Queued.as_str())),
            expr.value("from", items::s(hand_over.taker.0.as_str())),
        );
        let update = match &hand_over.to {
            Some((to, _)) => {
                let to = expr.value("to", items::s(to.as_str()));
                format!("SET {runner} = {to}, {launched} = {to}")
            }
            None => format!("REMOVE {runner}, {launched}"),
        };
        transact_update(
            &self.table,
            items::key(items::job_key(hand_over.job_id)),
            update,
            condition,
            &expr,
        )
    }

    /// One runner's update, with its guards, as a transaction item.
    fn runner_update(
        &self,
        name: &str,
        update: &RunnerUpdate,
        at: OffsetDateTime,
    ) -> Result<TransactWriteItem, StoreError> {
        let (expr, sets, condition) = field_update(update, at);
        transact_update(
            &self.table,
            items::key(items::runner_key(name)),
            sets,
            condition,
            &expr,
        )
    }
}
