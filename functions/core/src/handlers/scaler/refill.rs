//! Refill: a stopped pool's instance, launched for the record the reaper reserved, is
//! set to stop when its OS shuts it down, then handed its `prepare` JIT item (no config),
//! and its record moves `creating` → `preparing`; the host prepares and powers off, and
//! the reaper records it `stopped` (docs/design.md, "Stopped pool").
//!
//! The order is the design's guarantee: the host learns it is a prepare host only from
//! the item, written after the behaviour is `stop`, so no prepared host powers off into
//! termination, and no host without the item ever stops instead of terminating.

use super::{Handled, Scaler, ScalerError};
use crate::clock::Clock;
use crate::lifecycle::InstanceStatus;
use crate::model::RunnerRecord;
use crate::ports::*;
use tracing::info;

impl Scaler {
    /// Sets the launched instance's shutdown behaviour to `stop`, writes its `prepare`
    /// item and records it `preparing`. A failed call is retried by the message (each is
    /// safe to repeat); the record's creation lease keeps other deliveries off meanwhile,
    /// and a creation that never gets there is the reaper's to clean.
    pub(super) async fn send_to_prepare(
        &self,
        runner: RunnerRecord,
        clock: &Clock,
    ) -> Result<Handled, ScalerError> {
        let Some(instance_id) = runner.instance_id.as_deref() else {
            return self
                .fail(&runner, "stopped pool record has no instance".into(), clock)
                .await;
        };
        let creation = |cause: Cause| ScalerError::Creation {
            runner: runner.name.clone(),
            cause,
        };
        self.launcher
            .set_shutdown_behaviour(instance_id, ShutdownBehaviour::Stop)
            .await
            .map_err(|err| creation(Box::new(err)))?;
        self.jit_store
            .put_prepare(instance_id, &runner.name)
            .await
            .map_err(|err| creation(Box::new(err)))?;
        let to_preparing = Transition::new(
            InstanceStatus::Creating,
            InstanceStatus::Preparing,
            clock.now(),
        )
        .because("instance launched to prepare: shutdown behaviour stop, prepare item written");
        match self.store.transition(&runner.name, &to_preparing).await {
            Ok(_) => {}
            // Moved on meanwhile: another delivery recorded it first.
            Err(StoreError::TransitionRefused { .. }) => return Ok(Handled::NothingToDo),
            Err(err) => return Err(err.into()),
        }
        info!(runner = %runner.name, %instance_id, pool = %runner.pool, "stopped pool instance preparing");
        Ok(Handled::RunnerUp(runner.name))
    }
}
