//! What a reaper is made of, in one description: the ports it cannot work without
//! ([`ReaperPorts`]) and every optional capability as a field ([`ReaperCapabilities`]).
//! [`Reaper::new`] is the one place a reaper is put together; an assembly that leaves a
//! capability out does not compile, and one that turns it off writes `None` where it is
//! read.

use super::{Pricing, Reaper, Reruns};
use crate::config::Config;
use crate::metrics::Metrics;
use crate::ports::Leases;
use crate::ports::SpotBreakerStore;
use crate::ports::{Fleet, Forge, HookDeliveries, JitConfigStore, JobQueue, RunnerStore};
use crate::releases::RunnerSync;
use std::sync::Arc;

/// The ports every reaper calls.
#[derive(Clone)]
pub struct ReaperPorts {
    pub config: Arc<Config>,
    pub store: Arc<dyn RunnerStore>,
    pub fleet: Arc<dyn Fleet>,
    pub forge: Arc<dyn Forge>,
    pub jit_store: Arc<dyn JitConfigStore>,
    pub queue: Arc<dyn JobQueue>,
}

/// What a reaper does besides deleting and reconciling; `None` turns a capability off.
#[derive(Clone)]
pub struct ReaperCapabilities {
    /// Where deletions, deferrals, orphans, re-queued jobs and the runners-by-status
    /// gauge are recorded; flushed at the end of every run.
    pub metrics: Metrics,
    /// The reaper lease: a run works only while it holds it, so one reaper works at a
    /// time ([`Leases`](crate::ports::Leases)). None: every run works, for a reaper that is alone.
    pub lease: Option<Arc<dyn Leases>>,
    /// The App's webhook deliveries, swept every run for the failed `workflow_job`
    /// ones to redeliver (see [`super::redeliver`]). None: no sweep.
    pub deliveries: Option<Arc<dyn HookDeliveries>>,
    /// The wanted re-runs of interrupted jobs and GitHub's runs, asked once a run
    /// completed ([`crate::rerun`]). None: no job is re-run.
    pub reruns: Option<Reruns>,
    /// Where spot interruptions are counted per pool, opening a pool's spot circuit
    /// breaker when they spike ([`crate::breaker`]). None: no breaker.
    pub spot_breakers: Option<Arc<dyn SpotBreakerStore>>,
    /// Where prices are cached and read, to price every deleted runner's instance
    /// (see [`super::prices`]). None: jobs are not priced.
    pub pricing: Option<Pricing>,
    /// The runner copy in the deployment's bucket, kept at GitHub's newest release and
    /// checked at most hourly ([`crate::releases`]). None: no runner copy.
    pub runner_sync: Option<RunnerSync>,
}

impl ReaperCapabilities {
    /// No optional capability: no metrics, lease, sweep, re-runs, breakers or prices.
    /// For tests and models, which state what they turn on over it.
    pub fn none() -> ReaperCapabilities {
        ReaperCapabilities {
            metrics: Metrics::disabled(),
            lease: None,
            deliveries: None,
            reruns: None,
            spot_breakers: None,
            pricing: None,
            runner_sync: None,
        }
    }
}

impl Reaper {
    /// The reaper of `ports` with `capabilities`.
    pub fn new(ports: ReaperPorts, capabilities: ReaperCapabilities) -> Reaper {
        Reaper {
            config: ports.config,
            store: ports.store,
            fleet: ports.fleet,
            forge: ports.forge,
            jit_store: ports.jit_store,
            queue: ports.queue,
            deliveries: capabilities.deliveries,
            metrics: capabilities.metrics,
            memory: Arc::default(),
            redelivery_pace: Arc::new(super::redeliver::redelivery_pace()),
            lease: capabilities.lease,
            breakers: capabilities.spot_breakers,
            pricing: capabilities.pricing,
            reruns: capabilities.reruns,
            runner_sync: capabilities.runner_sync,
        }
    }

    /// A reaper of the six ports with no optional capability
    /// ([`ReaperCapabilities::none`]), for tests.
    #[cfg(any(test, feature = "fakes"))]
    pub fn bare(
        config: Arc<Config>,
        store: Arc<dyn RunnerStore>,
        fleet: Arc<dyn Fleet>,
        forge: Arc<dyn Forge>,
        jit_store: Arc<dyn JitConfigStore>,
        queue: Arc<dyn JobQueue>,
    ) -> Reaper {
        let ports = ReaperPorts {
            config,
            store,
            fleet,
            forge,
            jit_store,
            queue,
        };
        Reaper::new(ports, ReaperCapabilities::none())
    }
}

/// For tests: one capability turned on over a reaper already put together.
#[cfg(any(test, feature = "fakes"))]
impl Reaper {
    pub fn with_spot_breakers(mut self, breakers: Arc<dyn SpotBreakerStore>) -> Reaper {
        self.breakers = Some(breakers);
        self
    }

    pub fn with_reruns(mut self, reruns: Reruns) -> Reaper {
        self.reruns = Some(reruns);
        self
    }

    pub fn with_deliveries(mut self, deliveries: Arc<dyn HookDeliveries>) -> Reaper {
        self.deliveries = Some(deliveries);
        self
    }

    pub fn with_metrics(mut self, metrics: Metrics) -> Reaper {
        self.metrics = metrics;
        self
    }

    pub fn with_pricing(
        mut self,
        book: Arc<dyn crate::ports::PriceBook>,
        list: Arc<dyn crate::ports::PriceList>,
    ) -> Reaper {
        self.pricing = Some(Pricing { book, list });
        self
    }

    pub fn with_runner_sync(mut self, sync: RunnerSync) -> Reaper {
        self.runner_sync = Some(sync);
        self
    }

    pub fn with_lease(mut self, leases: Arc<dyn Leases>) -> Reaper {
        self.lease = Some(leases);
        self
    }
}
