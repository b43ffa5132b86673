//! The ports as the handlers see them in a schedule: every call goes through a [`Gate`]
//! to the in-memory fakes. The gate's [`CrashSwitch`], armed with `n`, lets `n` calls
//! through and stops the caller dead before call `n + 1` — that call never starts and
//! never returns, as when a Lambda dies there; the schedule then drops the handler's
//! future. The gate also watches `terminate`: an instance whose runner GitHub shows busy
//! must never be terminated (the suite never force-deletes). A redelivery the reaper
//! asks for through the gate goes to GitHub's outbox, for the schedule to deliver.
//! Before each take of a stopped record the gate yields, so that the takes of
//! invocations that read the same record race. Every committed take of a stopped record is noted with its job, and every
//! StartInstances that succeeds with the takes of its instance's record: an instance
//! started for a second job is a breach (a stopped instance is taken for one job, once).

use crate::queue::SimQueue;
use crate::world::World;
use ephemera_core::memory::{
    Arg, Call, CrashSwitch, FakeFleet, FakeForge, FakeWorkflowRuns, Hook, Intercept,
    MemoryDeliveries, MemoryJitStore, MemoryReruns, MemoryStore, Refusal,
};
use ephemera_core::ports::{FleetError, ForgeError, StoreError};
use std::any::Any;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What the gate does around each call: the crash switch first, then the world's watch.
pub struct Watch {
    world: Arc<World>,
    switch: Arc<CrashSwitch>,
}

#[async_trait::async_trait]
impl Hook for Watch {
    async fn before(&self, call: &Call<'_>) -> Result<(), Refusal> {
        self.switch.before(call).await?;
        if let ("RunnerStore", "take_stopped", [_, Arg::Text(runner), _]) =
            (call.port, call.name, call.args)
        {
            // The fakes answer at once, so invocations interleave only where one waits:
            // here every other scaler (and every other message of the batch) that read
            // the same stopped record runs up to its own take first, and the takes race.
            tokio::task::yield_now().await;
            if self.world.break_take_condition.load(Ordering::SeqCst) {
                self.world.forget_take(runner);
            }
        }
        Ok(())
    }

    fn after(&self, call: &Call<'_>, outcome: &dyn Any) {
        match (call.port, call.name, call.args) {
            ("Fleet", "terminate", [Arg::Text(instance_id)]) => {
                let terminated = matches!(
                    outcome.downcast_ref::<Result<(), FleetError>>(),
                    Some(Ok(()))
                );
                // The fleet's terminate does not touch GitHub's side: the runner busy
                // now was busy when the terminate was asked for.
                if let Some(runner) = self.world.busy_runner_on(instance_id) {
                    if terminated {
                        self.world.breach(format!(
                            "busy runner {runner} had its instance {instance_id} terminated without force"
                        ));
                    }
                }
            }
            ("RunnerStore", "take_stopped", [Arg::Number(job_id), Arg::Text(runner), _]) => {
                if let Some(Ok(true)) = outcome.downcast_ref::<Result<bool, StoreError>>() {
                    self.world.taken(runner, *job_id);
                }
            }
            ("Launcher", "start", [Arg::Text(instance_id)]) => {
                let started = matches!(
                    outcome.downcast_ref::<Result<(), FleetError>>(),
                    Some(Ok(()))
                );
                if started {
                    self.world.started(instance_id);
                } else {
                    self.world.stats().starts_refused += 1;
                }
            }
            // GitHub takes the request and, later, makes the delivery (the schedule plays it).
            ("HookDeliveries", "redeliver", [Arg::Number(id)]) => {
                let taken = matches!(
                    outcome.downcast_ref::<Result<(), ForgeError>>(),
                    Some(Ok(()))
                );
                if taken {
                    self.world.redeliver(*id);
                }
            }
            _ => {}
        }
    }
}

/// Every port of the handlers, wired to the world's fakes through one crash switch.
pub struct Gate {
    pub store: Arc<Intercept<MemoryStore, Watch>>,
    pub fleet: Arc<Intercept<FakeFleet, Watch>>,
    pub forge: Arc<Intercept<FakeForge, Watch>>,
    pub jit_store: Arc<Intercept<MemoryJitStore, Watch>>,
    pub queue: Arc<Intercept<SimQueue, Watch>>,
    pub deliveries: Arc<Intercept<MemoryDeliveries, Watch>>,
    pub reruns: Arc<Intercept<MemoryReruns, Watch>>,
    pub runs: Arc<Intercept<FakeWorkflowRuns, Watch>>,
}

impl Gate {
    pub fn new(world: &Arc<World>, switch: &Arc<CrashSwitch>) -> Gate {
        let watch = Arc::new(Watch {
            world: world.clone(),
            switch: switch.clone(),
        });
        Gate {
            store: Intercept::new(world.store.clone(), &watch),
            fleet: Intercept::new(world.fleet.clone(), &watch),
            forge: Intercept::new(world.forge.clone(), &watch),
            jit_store: Intercept::new(world.jit_store.clone(), &watch),
            queue: Intercept::new(world.queue.clone(), &watch),
            deliveries: Intercept::new(world.deliveries.clone(), &watch),
            reruns: Intercept::new(world.reruns.clone(), &watch),
            runs: Intercept::new(world.runs.clone(), &watch),
        }
    }
}
