//! The batch: messages decoded and prepared each in its own task, the runners to launch
//! grouped by pool for one fleet request each, then each runner registered in its own
//! task; a panic or a failure fails its message only.

use super::{Outcome, Scaler, ScalerError, Step};
use crate::clock::Clock;
use crate::handlers::error_chain;
use crate::message::{MessageKind, QueueMessage};
use crate::model::RunnerRecord;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use tracing::{error, warn, Instrument};

impl Scaler {
    pub(super) async fn process(
        self: &Arc<Self>,
        messages: Vec<(String, QueueMessage)>,
        clock: Clock,
    ) -> Vec<(String, Outcome)> {
        let full = Arc::new(self.full_pools(&messages).await);
        let sent: HashMap<String, QueueMessage> = messages.iter().cloned().collect();
        let prepared = spawn_each(
            messages,
            |scaler: Arc<Scaler>, message: QueueMessage| {
                let full = Arc::clone(&full);
                async move { scaler.prepare(&message, &clock, &full).await }
            },
            self,
        )
        .await;
        let mut outcomes = Vec::new();
        let mut to_launch: BTreeMap<String, Vec<(String, RunnerRecord)>> = BTreeMap::new();
        let mut to_finish = Vec::new();
        for (message_id, step) in prepared {
            match step {
                Ok(Step::Done(handled)) => outcomes.push((message_id, Ok(handled))),
                Ok(Step::Launch(runner)) => to_launch
                    .entry(runner.pool.clone())
                    .or_default()
                    .push((message_id, runner)),
                Ok(Step::Finish(runner)) => to_finish.push((message_id, runner)),
                Err(err) => outcomes.push((message_id, Err(err))),
            }
        }
        for (pool, runners) in to_launch {
            let (launched, failed) = self.launch_pool(&pool, runners, &clock).await;
            to_finish.extend(launched);
            for (message_id, outcome) in failed {
                let outcome = match (outcome, sent.get(&message_id)) {
                    (Err(ScalerError::LaunchThrottled { runner, .. }), Some(message)) => {
                        self.after_throttled_launch(message, &runner).await
                    }
                    (outcome, _) => outcome,
                };
                outcomes.push((message_id, outcome));
            }
        }
        let finished = spawn_each(
            to_finish,
            |scaler: Arc<Scaler>, runner: RunnerRecord| async move {
                scaler.finish(runner, &clock).await
            },
            self,
        )
        .await;
        outcomes.extend(finished);
        outcomes
    }

    /// The pools of the batch's queued jobs that are at `max_runners`: one read per pool
    /// per batch decides the common case of a burst, before any job is claimed (the claim
    /// itself still checks, atomically; a job of a full pool costs one read of its own, to
    /// see whether it is over). A pool that cannot be read is taken as not full.
    pub(super) async fn full_pools(&self, messages: &[(String, QueueMessage)]) -> HashSet<String> {
        let pools: HashSet<&str> = messages
            .iter()
            .filter(|(_, m)| m.kind == MessageKind::Queued)
            .map(|(_, m)| m.pool.as_str())
            .collect();
        let mut full = HashSet::new();
        for name in pools {
            let Some(pool) = self.config.pool(name) else {
                continue;
            };
            match self.store.get_pool(name).await {
                Ok(record) if record.slots_used >= pool.runner_cap() => {
                    full.insert(name.to_owned());
                }
                Ok(_) => {}
                Err(err) => {
                    warn!(pool = %name, error = %error_chain(&err), "cannot read the pool; its jobs try to claim")
                }
            }
        }
        full
    }
}

/// Runs `work` for each item in its own task, so a panic fails that item only; returns
/// each item's id with its result, in no particular order.
async fn spawn_each<T, R, F, Fut>(
    items: Vec<(String, T)>,
    work: F,
    scaler: &Arc<Scaler>,
) -> Vec<(String, Result<R, ScalerError>)>
where
    T: Send + 'static,
    R: Send + 'static,
    F: Fn(Arc<Scaler>, T) -> Fut,
    Fut: std::future::Future<Output = Result<R, ScalerError>> + Send + 'static,
{
    let mut tasks = tokio::task::JoinSet::new();
    let mut ids = std::collections::HashMap::new();
    for (message_id, item) in items {
        let span = tracing::info_span!("message", message_id = %message_id);
        let future = work(Arc::clone(scaler), item);
        let id = message_id.clone();
        let task = tasks.spawn(async move { (id, future.await) }.instrument(span));
        ids.insert(task.id(), message_id);
    }
    let mut results = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(result) => results.push(result),
            Err(join_error) => {
                let message_id = ids.remove(&join_error.id()).unwrap_or_default();
                error!(%message_id, "message handler panicked; it will be retried");
                results.push((message_id, Err(ScalerError::Panicked)));
            }
        }
    }
    results
}
