//! The deployment's scaler and reaper, each assembled in one place from its adapters:
//! the Lambda functions and `ephemera local` build theirs here, so a capability the deployment has
//! (the reaper lease, the registration pace, the breakers, the re-runs, the prices) is
//! on in both, or in neither. Each capability is a field of the handler's description
//! in `ephemera_core` ([`ScalerCapabilities`], [`ReaperCapabilities`]), which no
//! assembly can leave out.

use crate::DynamoRunnerStore;
use ephemera_core::config::Config;
use ephemera_core::handlers::reaper::{Pricing, Reaper, ReaperCapabilities, ReaperPorts, Reruns};
use ephemera_core::handlers::scaler::{
    Scaler, ScalerCapabilities, ScalerPorts, ThreadJitter, CAPACITY_RETRY,
};
use ephemera_core::metrics::Metrics;
use ephemera_core::pace::RegistrationPace;
use ephemera_core::ports::SpotBreakerStore;
use ephemera_core::ports::{Fleet, Forge, HookDeliveries, JitConfigStore, JobQueue, Launcher};
use ephemera_core::ports::{ImagePipelines, RunnerBucket, RunnerReleases};
use ephemera_core::ports::{RerunStore, WorkflowRuns};
use ephemera_core::releases::RunnerSync;
use std::sync::Arc;

/// The adapters of one deployment under one version of its configuration: what its
/// scaler and reaper are made of.
#[derive(Clone)]
pub struct Deployment {
    pub config: Arc<Config>,
    pub metrics: Metrics,
    /// The runner store, whose table also holds the reaper lease.
    pub store: Arc<DynamoRunnerStore>,
    pub fleet: Arc<dyn Fleet>,
    pub launcher: Arc<dyn Launcher>,
    pub jit_store: Arc<dyn JitConfigStore>,
    pub queue: Arc<dyn JobQueue>,
    pub spot_breakers: Arc<dyn SpotBreakerStore>,
    pub reruns: Arc<dyn RerunStore>,
    /// Where prices are cached and read from.
    pub pricing: Pricing,
    /// The runner bucket and the image pipelines, when the stack has a bucket
    /// (`EPHEMERA_RUNNER_BUCKET`): the reaper keeps the newest runner there.
    pub runner_copy: Option<RunnerCopy>,
}

/// Where the runner copy is kept, and what to start when it takes a new release.
#[derive(Clone)]
pub struct RunnerCopy {
    pub bucket: Arc<dyn RunnerBucket>,
    pub pipelines: Arc<dyn ImagePipelines>,
}

/// The GitHub App the webhook receives for: the reaper sweeps its deliveries, and asks
/// it for the re-runs (one App keeps a run's waiting and its ask together).
pub struct WebhookApp {
    pub deliveries: Arc<dyn HookDeliveries>,
    pub runs: Arc<dyn WorkflowRuns>,
    /// The runner's releases, read with this App's installation token.
    pub releases: Arc<dyn RunnerReleases>,
}

impl WebhookApp {
    /// `app`, which answers for all three.
    pub fn of<A: HookDeliveries + WorkflowRuns + RunnerReleases + 'static>(
        app: Arc<A>,
    ) -> WebhookApp {
        WebhookApp {
            deliveries: app.clone(),
            runs: app.clone(),
            releases: app,
        }
    }
}

impl Deployment {
    /// The scaler: registrations paced by `pace` (the Apps' allowances together; the
    /// forge spends each App's own), spot behind the breakers, interrupted jobs
    /// recorded for their re-run.
    pub fn scaler(&self, forge: Arc<dyn Forge>, pace: Arc<RegistrationPace>) -> Scaler {
        let ports = ScalerPorts {
            config: self.config.clone(),
            store: self.store.clone(),
            launcher: self.launcher.clone(),
            forge,
            jit_store: self.jit_store.clone(),
            queue: self.queue.clone(),
        };
        Scaler::new(
            ports,
            ScalerCapabilities {
                metrics: self.metrics.clone(),
                spot_breakers: Some(self.spot_breakers.clone()),
                reruns: Some(self.reruns.clone()),
                registration_pace: Some(pace),
                capacity_retry: CAPACITY_RETRY,
                jitter: Arc::new(ThreadJitter),
            },
        )
    }

    /// The reaper: one at a time (the lease in the table), sweeping `webhook_app`'s
    /// deliveries and asking it for the re-runs, counting spot interruptions in the
    /// breakers, pricing every deleted runner, keeping the runner copy (with the same
    /// App's token) when the deployment has a bucket.
    pub fn reaper(&self, forge: Arc<dyn Forge>, webhook_app: WebhookApp) -> Reaper {
        let ports = ReaperPorts {
            config: self.config.clone(),
            store: self.store.clone(),
            fleet: self.fleet.clone(),
            forge,
            jit_store: self.jit_store.clone(),
            queue: self.queue.clone(),
        };
        Reaper::new(
            ports,
            ReaperCapabilities {
                metrics: self.metrics.clone(),
                lease: Some(self.store.clone()),
                deliveries: Some(webhook_app.deliveries),
                reruns: Some(Reruns {
                    store: self.reruns.clone(),
                    runs: webhook_app.runs,
                }),
                spot_breakers: Some(self.spot_breakers.clone()),
                pricing: Some(self.pricing.clone()),
                runner_sync: self.runner_copy.as_ref().map(|copy| RunnerSync {
                    releases: webhook_app.releases,
                    bucket: copy.bucket.clone(),
                    pipelines: copy.pipelines.clone(),
                }),
            },
        )
    }
}
