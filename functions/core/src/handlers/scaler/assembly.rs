//! What a scaler is made of, in one description: the ports it cannot work without
//! ([`ScalerPorts`]) and every optional capability as a field ([`ScalerCapabilities`]).
//! [`Scaler::new`] is the one place a scaler is put together; an assembly that leaves a
//! capability out does not compile, and one that turns it off writes `None` where it is
//! read.

use super::{Jitter, Scaler, ThreadJitter, CAPACITY_RETRY};
use crate::config::Config;
use crate::metrics::Metrics;
use crate::pace::RegistrationPace;
use crate::ports::RerunStore;
use crate::ports::SpotBreakerStore;
use crate::ports::{Forge, JitConfigStore, JobQueue, Launcher, RunnerStore};
use std::sync::Arc;
use std::time::Duration;

/// The ports every scaler calls.
#[derive(Clone)]
pub struct ScalerPorts {
    pub config: Arc<Config>,
    pub store: Arc<dyn RunnerStore>,
    pub launcher: Arc<dyn Launcher>,
    pub forge: Arc<dyn Forge>,
    pub jit_store: Arc<dyn JitConfigStore>,
    pub queue: Arc<dyn JobQueue>,
}

/// What a scaler does besides creating runners; `None` turns a capability off.
#[derive(Clone)]
pub struct ScalerCapabilities {
    /// Where launches, failures, fallbacks and deferrals are counted; flushed after
    /// every batch.
    pub metrics: Metrics,
    /// Each pool's spot circuit breaker, read before each spot launch: while it is open
    /// the pool launches on-demand ([`crate::breaker`]). None: spot is never paused.
    pub spot_breakers: Option<Arc<dyn SpotBreakerStore>>,
    /// Where the re-run of a job its spot runner's interruption failed is recorded; the
    /// re-run launches on-demand ([`crate::rerun`]). None: no job is re-run.
    pub reruns: Option<Arc<dyn RerunStore>>,
    /// The pace of GitHub registrations: a queued job is launched for only once its
    /// registration is due (see [`RegistrationPace`]), and a throttled registration gives
    /// its slot back and pauses the pace, so that the job waits in the queue, not on a
    /// launched instance. None: registrations are not paced.
    pub registration_pace: Option<Arc<RegistrationPace>>,
    /// How long a job over capacity waits before it is tried again.
    pub capacity_retry: Duration,
    /// Where retry waits, requeue delays and runner names draw their randomness.
    pub jitter: Arc<dyn Jitter>,
}

impl ScalerCapabilities {
    /// No optional capability: no metrics, breakers, re-runs or pace; the deployed
    /// capacity retry and the thread's RNG. For tests and models, which state what they
    /// turn on over it.
    pub fn none() -> ScalerCapabilities {
        ScalerCapabilities {
            metrics: Metrics::disabled(),
            spot_breakers: None,
            reruns: None,
            registration_pace: None,
            capacity_retry: CAPACITY_RETRY,
            jitter: Arc::new(ThreadJitter),
        }
    }
}

impl Scaler {
    /// The scaler of `ports` with `capabilities`.
    pub fn new(ports: ScalerPorts, capabilities: ScalerCapabilities) -> Scaler {
        Scaler {
            config: ports.config,
            store: ports.store,
            launcher: ports.launcher,
            forge: ports.forge,
            jit_store: ports.jit_store,
            queue: ports.queue,
            capacity_retry: capabilities.capacity_retry,
            pace: capabilities.registration_pace,
            jitter: capabilities.jitter,
            claim_turn: tokio::sync::Mutex::new(()),
            metrics: capabilities.metrics,
            breakers: capabilities.spot_breakers,
            reruns: capabilities.reruns,
        }
    }

    /// A scaler of the six ports with no optional capability
    /// ([`ScalerCapabilities::none`]), for tests.
    #[cfg(any(test, feature = "fakes"))]
    pub fn bare(
        config: Arc<Config>,
        store: Arc<dyn RunnerStore>,
        launcher: Arc<dyn Launcher>,
        forge: Arc<dyn Forge>,
        jit_store: Arc<dyn JitConfigStore>,
        queue: Arc<dyn JobQueue>,
    ) -> Scaler {
        let ports = ScalerPorts {
            config,
            store,
            launcher,
            forge,
            jit_store,
            queue,
        };
        Scaler::new(ports, ScalerCapabilities::none())
    }
}
