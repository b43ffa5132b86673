//! What the handler tests share: a configuration, fakes wired together, messages.

use crate::config::Config;
use crate::memory::{FakeFleet, FakeForge, MemoryJitStore, MemoryQueue, MemoryStore};
use crate::message::{MessageKind, QueueMessage, VERSION};
use std::sync::Arc;
use time::OffsetDateTime;

pub const POOL: &str = "linux";

pub fn config(max_runners: u32) -> Arc<Config> {
    config_with(max_runners, "")
}

/// The test configuration with `extra` lines added to the pool.
pub fn config_with(max_runners: u32, extra: &str) -> Arc<Config> {
    let text = format!(
        r#"
deployment: eph
github: {{ app_id: 1 }}
pools:
  - name: {POOL}
    labels: [self-hosted, linux, x64]
    max_runners: {max_runners}
    instance_types: [m7i.large]
    launch_template: eph-runner
{extra}"#
    );
    Arc::new(Config::parse("test.yaml", &text).expect("valid test config"))
}

pub fn now() -> OffsetDateTime {
    time::macros::datetime!(2026-11-22 10:00:00 UTC)
}

/// Fakes for every port, shared with the handler under test.
pub struct World {
    pub config: Arc<Config>,
    pub store: Arc<MemoryStore>,
    pub fleet: Arc<FakeFleet>,
    pub forge: Arc<FakeForge>,
    pub jit_store: Arc<MemoryJitStore>,
    pub queue: Arc<MemoryQueue>,
}

impl World {
    pub fn new(max_runners: u32) -> World {
        World {
            config: config(max_runners),
            store: Arc::new(MemoryStore::new()),
            fleet: Arc::new(FakeFleet::new()),
            forge: Arc::new(FakeForge::new()),
            jit_store: Arc::new(MemoryJitStore::new()),
            queue: Arc::new(MemoryQueue::new()),
        }
    }

    pub fn scaler(&self) -> Arc<crate::handlers::scaler::Scaler> {
        self.scaler_with(crate::handlers::scaler::ScalerCapabilities::none())
    }

    /// The scaler of these fakes with `capabilities`.
    pub fn scaler_with(
        &self,
        capabilities: crate::handlers::scaler::ScalerCapabilities,
    ) -> Arc<crate::handlers::scaler::Scaler> {
        let ports = crate::handlers::scaler::ScalerPorts {
            config: self.config.clone(),
            store: self.store.clone(),
            launcher: self.fleet.clone(),
            forge: self.forge.clone(),
            jit_store: self.jit_store.clone(),
            queue: self.queue.clone(),
        };
        Arc::new(crate::handlers::scaler::Scaler::new(ports, capabilities))
    }

    /// A runner the scaler launched for `job`: `running`, registered on GitHub, not yet
    /// online.
    pub async fn running_runner(&self, job: u64) -> crate::model::RunnerRecord {
        let handled = self
            .scaler()
            .handle(&message(MessageKind::Queued, job, None), now())
            .await
            .expect("up");
        let crate::handlers::scaler::Handled::RunnerUp(name) = handled else {
            panic!("no runner: {handled:?}")
        };
        self.store.runner(&name).expect("record")
    }

    pub fn reaper(&self) -> crate::handlers::reaper::Reaper {
        crate::handlers::reaper::Reaper::bare(
            self.config.clone(),
            self.store.clone(),
            self.fleet.clone(),
            self.forge.clone(),
            self.jit_store.clone(),
            self.queue.clone(),
        )
    }
}

pub fn message(kind: MessageKind, job_id: u64, runner_name: Option<&str>) -> QueueMessage {
    QueueMessage {
        v: VERSION,
        kind,
        delivery_id: format!("d-{job_id}"),
        job_id,
        run_id: 100 + job_id,
        pool: POOL.to_owned(),
        labels: vec!["self-hosted".into(), "linux".into(), "x64".into()],
        repo: "app".into(),
        owner: "octo-org".into(),
        installation_id: Some(5),
        runner_name: runner_name.map(str::to_owned),
        runner_id: None,
        received_at: now(),
        github: Default::default(),
        attempt: Default::default(),
    }
}

/// A job record as the scaler writes it for [`message`]'s `queued` (no runner yet).
pub fn job(job_id: u64) -> crate::model::JobRecord {
    let m = message(MessageKind::Queued, job_id, None);
    crate::model::JobRecord {
        job_id,
        status: crate::model::JobStatus::Queued,
        pool: m.pool,
        owner: m.owner,
        repo: m.repo,
        run_id: m.run_id,
        installation_id: m.installation_id,
        labels: m.labels,
        runner_name: None,
        launched_runner: None,
        received_at: m.received_at,
        updated_at: m.received_at,
        github: Default::default(),
        claimed_at: None,
    }
}
