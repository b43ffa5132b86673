//! EC2's own word on the deployment's instances, as EventBridge delivers it to the
//! reaper's function: a spot interruption warning, two minutes before EC2 reclaims a spot
//! instance, and an instance's move to `terminated`. Without them an interrupted runner
//! just disappears and is noticed a minute later by the `instance_gone` rule, with no
//! word of why.
//!
//! - A warning is recorded on the runner (its `interrupted_at`, and a history entry
//!   naming the interruption) and counted in `SpotInterruptions` by pool and instance type.
//! - A termination of a runner's instance that ephemera did not ask for (its record is
//!   not being deleted) sends the record to `pending_delete`, with the interruption as
//!   its reason when a warning came first; the reaper's next run then removes its GitHub
//!   registration, the instance being gone.
//!
//! Events for instances of other deployments or none reach the function too (EventBridge
//! patterns cannot match tags): they find no record and are ignored. Each event costs one
//! query of the table's instance index (keys only), plus the read of the record it
//! names; a deployment's own terminations, one per runner, are ignored the same way,
//! their records being `deleting` or `deleted`. Only when that query fails (an index
//! still being built after a stack update adds it) are the live records read status by
//! status, as before the index.
//! The event shapes are EC2's: <https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html>
//! (the warning) and <https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/monitoring-instance-state-changes.html>
//! (state changes).

use super::{Reaper, EVERYTHING_DUE, LIVE, LIVE_LIMIT};
use crate::lifecycle::InstanceStatus;
use crate::metrics::{Dimension, Metric};
use crate::model::{RunnerRecord, INTERRUPTION_NOTE};
use crate::ports::{RunnerUpdate, StoreError};
use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use tracing::{debug, info, warn};

/// EventBridge's `detail-type` of a spot interruption warning.
pub const SPOT_INTERRUPTION_WARNING: &str = "EC2 Spot Instance Interruption Warning";
/// EventBridge's `detail-type` of an instance's state change.
pub const STATE_CHANGE: &str = "EC2 Instance State-change Notification";

/// What EC2 said about one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstanceEventKind {
    /// EC2 reclaims the spot instance in two minutes (`instance-action`: terminate,
    /// stop or hibernate).
    SpotInterruptionWarning { action: String },
    /// The instance entered `state`.
    StateChange { state: String },
}

/// One EC2 event about one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceEvent {
    pub kind: InstanceEventKind,
    pub instance_id: String,
    /// When EC2 emitted it (the event's `time`).
    pub at: OffsetDateTime,
}

impl InstanceEvent {
    /// The EC2 event an EventBridge event carries; `Ok(None)` for an event of another
    /// kind (the reaper's schedule); an error naming the field for an EC2 event that lacks
    /// what this build reads.
    pub fn from_eventbridge(event: &Value) -> Result<Option<InstanceEvent>, String> {
        let detail_type = event["detail-type"].as_str().unwrap_or_default();
        if event["source"] != "aws.ec2"
            || ![SPOT_INTERRUPTION_WARNING, STATE_CHANGE].contains(&detail_type)
        {
            return Ok(None);
        }
        let text = |field: &str| {
            event["detail"][field]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("{detail_type}: no detail.{field}"))
        };
        let instance_id = text("instance-id")?;
        let kind = if detail_type == SPOT_INTERRUPTION_WARNING {
            InstanceEventKind::SpotInterruptionWarning {
                action: text("instance-action")?,
            }
        } else {
            InstanceEventKind::StateChange {
                state: text("state")?,
            }
        };
        let time = event["time"].as_str().unwrap_or_default();
        let at = OffsetDateTime::parse(time, &Rfc3339)
            .map_err(|err| format!("{detail_type}: time {time:?}: {err}"))?;
        Ok(Some(InstanceEvent {
            kind,
            instance_id,
            at,
        }))
    }
}

/// What the reaper did with an event (the function's answer, e.g.
/// `{"outcome": "sent_to_delete", "runner": "…"}`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum InstanceEventOutcome {
    /// No live record names the instance (another deployment's, or one being deleted).
    NotOurs,
    /// A warning recorded on the runner.
    WarningRecorded { runner: String },
    /// The runner's record sent to `pending_delete`.
    SentToDelete { runner: String },
    /// A state other than `terminated`, or a record already on its way out.
    Nothing { runner: String },
}

impl Reaper {
    /// Acts on one EC2 event about one instance (see the module's documentation).
    pub async fn on_instance_event(
        &self,
        event: &InstanceEvent,
        now: OffsetDateTime,
    ) -> Result<InstanceEventOutcome, StoreError> {
        let outcome = self.act_on_instance_event(event, now).await;
        self.metrics.flush();
        outcome
    }

    async fn act_on_instance_event(
        &self,
        event: &InstanceEvent,
        now: OffsetDateTime,
    ) -> Result<InstanceEventOutcome, StoreError> {
        let Some(record) = self.live_record_of(&event.instance_id, now).await? else {
            debug!(instance_id = %event.instance_id, "EC2 event for an instance no live runner names");
            return Ok(InstanceEventOutcome::NotOurs);
        };
        let runner = record.name.clone();
        match &event.kind {
            InstanceEventKind::SpotInterruptionWarning { action } => {
                let note = format!(
                    "{INTERRUPTION_NOTE}: EC2 will {action} the instance ({} at {})",
                    event.instance_id,
                    event.at.format(&Rfc3339).unwrap_or_default()
                );
                let update = RunnerUpdate {
                    note: Some(note),
                    interrupted_at: Some(event.at),
                    ..RunnerUpdate::default()
                };
                self.store.update_runner(&runner, &update, now).await?;
                let instance_type = record.instance_type.as_deref().unwrap_or("unknown");
                self.metrics.record(
                    Metric::SpotInterruptions,
                    &[
                        (Dimension::Pool, record.pool.as_str()),
                        (Dimension::InstanceType, instance_type),
                    ],
                    1.0,
                );
                warn!(%runner, pool = %record.pool, instance_id = %event.instance_id, %action, instance_type, "spot interruption warning: the runner's job will fail");
                self.count_for_breaker(&record, &event.instance_id, now)
                    .await?;
                Ok(InstanceEventOutcome::WarningRecorded { runner })
            }
            InstanceEventKind::StateChange { state } if state == "terminated" => {
                if !matches!(
                    record.status,
                    InstanceStatus::Creating | InstanceStatus::Running | InstanceStatus::Error
                ) {
                    return Ok(InstanceEventOutcome::Nothing { runner });
                }
                let reason = if record.interrupted_at.is_some() {
                    "spot interruption: EC2 reclaimed the instance"
                } else {
                    "instance terminated outside ephemera (EC2 reported it terminated)"
                };
                match self
                    .send_to_delete(&record, "instance_terminated", reason, now)
                    .await?
                {
                    Some(_) => {
                        info!(%runner, instance_id = %event.instance_id, reason, "runner's instance terminated");
                        Ok(InstanceEventOutcome::SentToDelete { runner })
                    }
                    None => Ok(InstanceEventOutcome::Nothing { runner }),
                }
            }
            InstanceEventKind::StateChange { .. } => Ok(InstanceEventOutcome::Nothing { runner }),
        }
    }

    /// Counts the interruption for the pool's spot circuit breaker, and opens it when
    /// the pool's interruptions spike.
    async fn count_for_breaker(
        &self,
        record: &RunnerRecord,
        instance_id: &str,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let Some(breakers) = &self.breakers else {
            return Ok(());
        };
        let Some(pool) = self.config.pools.iter().find(|p| p.name == record.pool) else {
            return Ok(());
        };
        let breaker = &pool.spot_breaker;
        let state = breakers
            .note_interruption(&pool.name, instance_id, now, now - breaker.within)
            .await?;
        if let Some(until) = state.opens(breaker, now) {
            breakers.pause_spot(&pool.name, until).await?;
            self.metrics.record(
                Metric::SpotBreakerOpened,
                &[(Dimension::Pool, pool.name.as_str())],
                1.0,
            );
            warn!(pool = %pool.name, interruptions = state.recent(breaker, now), within = ?breaker.within, until = %until.format(&Rfc3339).unwrap_or_default(), "spot circuit breaker open: the pool launches on-demand until then");
        }
        Ok(())
    }

    /// The live record naming `instance_id`, read through the instance index; through
    /// the status index when that fails.
    async fn live_record_of(
        &self,
        instance_id: &str,
        now: OffsetDateTime,
    ) -> Result<Option<RunnerRecord>, StoreError> {
        match self.store.runners_on_instance(instance_id).await {
            Ok(records) => {
                return Ok(records
                    .into_iter()
                    .find(|record| LIVE.contains(&record.status)))
            }
            Err(err) => {
                warn!(%instance_id, error = %crate::handlers::error_chain(&err), "instance index unreadable; reading the live records by status");
            }
        }
        for status in self.live_statuses() {
            let found = self
                .store
                .runners_in_status(status, now + EVERYTHING_DUE, LIVE_LIMIT)
                .await?;
            if let Some(record) = found
                .into_iter()
                .find(|r| r.instance_id.as_deref() == Some(instance_id))
            {
                return Ok(Some(record));
            }
        }
        Ok(None)
    }
}
