//! Running the handlers as Lambda would: the scaler on a batch received from the queue
//! (handled messages deleted, failed ones left to come back), the reaper on its schedule,
//! each behind its own crash switch, one at a time or several at once on the schedule's
//! single-threaded runtime, where every port call is a point at which another invocation
//! may run.

use crate::gate::Gate;
use crate::queue::Stored;
use crate::world::World;
use ephemera_core::handlers::reaper::{Reaper, Reruns};
use ephemera_core::handlers::scaler::{BatchItem, Scaler, ScalerCapabilities, ScalerPorts};
use ephemera_core::memory::{CrashPoint, CrashSwitch};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;

/// One invocation to run.
pub enum Invocation {
    Scaler {
        received: Vec<Stored>,
        crash_after: Option<usize>,
        /// A crash at a named call instead (a stopped pool's take, refill or reset).
        crash_at: Option<CrashPoint>,
        /// The handled messages' deletes are lost: SQS delivers them again.
        lose_deletes: bool,
    },
    Reaper {
        crash_after: Option<usize>,
        crash_at: Option<CrashPoint>,
    },
}

/// How an invocation ended.
pub enum Ended {
    /// The scaler returned these failed message ids.
    Scaler {
        failed: Vec<String>,
    },
    Reaper {
        error: Option<String>,
    },
    Crashed,
}

/// Arms `switch` to crash after `crash_after` calls, or at `crash_at`, or never.
fn arm(switch: &CrashSwitch, crash_after: Option<usize>, crash_at: Option<CrashPoint>) {
    match (crash_after, crash_at) {
        (_, Some(point)) => switch.arm_at(point),
        (Some(calls), None) => switch.arm(calls),
        (None, None) => switch.disarm(),
    }
}

/// A new switch armed as [`arm`] does.
fn armed(crash_after: Option<usize>, crash_at: Option<CrashPoint>) -> Arc<CrashSwitch> {
    let switch = CrashSwitch::new();
    arm(&switch, crash_after, crash_at);
    switch
}

type Running = Pin<Box<dyn Future<Output = Ended> + Send>>;

/// Runs `future`, or gives up on it (drops it) when its switch stops a call.
async fn unless_crashed<F: Future>(switch: Arc<CrashSwitch>, future: F) -> Option<F::Output> {
    tokio::select! {
        biased;
        out = future => Some(out),
        () = switch.crashed() => None,
    }
}

fn scaler(
    world: &Arc<World>,
    received: &[Stored],
    crash_after: Option<usize>,
    crash_at: Option<CrashPoint>,
    now: OffsetDateTime,
) -> Running {
    let switch = armed(crash_after, crash_at);
    let gate = Gate::new(world, &switch);
    let scaler = Arc::new(Scaler::new(
        ScalerPorts {
            config: world.config.clone(),
            store: gate.store,
            launcher: gate.fleet,
            forge: gate.forge,
            jit_store: gate.jit_store,
            queue: gate.queue,
        },
        ScalerCapabilities {
            reruns: Some(gate.reruns),
            ..ScalerCapabilities::none()
        },
    ));
    let items: Vec<BatchItem> = received
        .iter()
        .map(|stored| BatchItem {
            message_id: stored.id.clone(),
            body: stored.message.encode(),
        })
        .collect();
    Box::pin(async move {
        match unless_crashed(switch, scaler.handle_batch(items, now)).await {
            Some(failed) => Ended::Scaler { failed },
            None => Ended::Crashed,
        }
    })
}

fn reaper(
    reaper: &Reaper,
    switch: &Arc<CrashSwitch>,
    crash_after: Option<usize>,
    crash_at: Option<CrashPoint>,
    now: OffsetDateTime,
) -> Running {
    arm(switch, crash_after, crash_at);
    let reaper = reaper.clone();
    let switch = switch.clone();
    Box::pin(async move {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(50);
        match unless_crashed(switch, reaper.run(now, deadline)).await {
            Some(Ok(_)) => Ended::Reaper { error: None },
            Some(Err(err)) => Ended::Reaper {
                error: Some(err.to_string()),
            },
            None => Ended::Crashed,
        }
    })
}

/// The long-lived reaper of a schedule (it remembers orphan and drift suspects from run
/// to run, as a warm Lambda does) and the switch its ports go through.
pub struct ReaperHandle {
    pub reaper: Reaper,
    pub switch: Arc<CrashSwitch>,
}

impl ReaperHandle {
    pub fn new(world: &Arc<World>) -> ReaperHandle {
        let switch = CrashSwitch::new();
        let gate = Gate::new(world, &switch);
        let reaper = Reaper::bare(
            world.config.clone(),
            gate.store,
            gate.fleet,
            gate.forge,
            gate.jit_store,
            gate.queue,
        )
        .with_deliveries(gate.deliveries)
        .with_reruns(Reruns {
            store: gate.reruns,
            runs: gate.runs,
        });
        ReaperHandle { reaper, switch }
    }
}

/// Runs the invocations at once and settles the queue after them (deletes what each
/// scaler handled). Returns how each ended, in the order given.
pub async fn run_all(
    world: &Arc<World>,
    reaper_handle: &ReaperHandle,
    invocations: Vec<Invocation>,
    now: OffsetDateTime,
) -> Vec<Ended> {
    world.sync_runs();
    let mut tasks = Vec::new();
    for invocation in &invocations {
        let running = match invocation {
            Invocation::Scaler {
                received,
                crash_after,
                crash_at,
                ..
            } => scaler(world, received, *crash_after, *crash_at, now),
            Invocation::Reaper {
                crash_after,
                crash_at,
            } => reaper(
                &reaper_handle.reaper,
                &reaper_handle.switch,
                *crash_after,
                *crash_at,
                now,
            ),
        };
        tasks.push(tokio::spawn(running));
    }
    let mut ended = Vec::new();
    for task in tasks {
        ended.push(task.await.expect("invocation task"));
    }
    for (invocation, end) in invocations.iter().zip(&ended) {
        if let (
            Invocation::Scaler {
                received,
                lose_deletes: false,
                ..
            },
            Ended::Scaler { failed },
        ) = (invocation, end)
        {
            for stored in received.iter().filter(|s| !failed.contains(&s.id)) {
                world.queue.delete(&stored.id);
            }
        }
    }
    ended
}
