//! Everything one burst runs on: the cloud, the in-memory fakes, the queue, GitHub's
//! queued jobs, the account's Lambda concurrency (the webhook's reserved share apart),
//! GitHub's record of its webhook deliveries, and the runner agent of each instance.

use crate::cloud::{Caller, Cloud};
use crate::flood::FloodTally;
use crate::github::MeteredForge;
use crate::metered::{
    FleetMeter, JitStoreMeter, MeteredFleet, MeteredJitStore, MeteredQueue, MeteredStore,
    QueueMeter, StoreMeter,
};
use crate::report::Timeline;
use crate::sqs::SimQueue;
use ephemera_core::config::Config;
use ephemera_core::handlers::webhook::{WebhookHandler, WebhookRequest};
use ephemera_core::memory::{
    FakeFleet, FakeForge, Intercept, MemoryDeliveries, MemoryJitStore, MemoryStore,
};
use ephemera_core::ports::{ForgeJobState, HookDelivery};
use ephemera_core::webhook::{signature_header, WebhookSecrets};
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::Semaphore;

const FIXTURE: &str = include_str!("../../core/fixtures/workflow_job_queued.json");
const WEBHOOK_SECRET: &str = "model-webhook-secret";
/// How often a booted instance looks for its JIT config, and how many times.
const BOOTSTRAP_POLL: Duration = Duration::from_secs(5);
const BOOTSTRAP_TRIES: u32 = 60;
/// A page of GitHub's deliveries list.
const DELIVERIES_PER_PAGE: usize = 100;

/// A `workflow_job` event GitHub sends: its job, and the runner when it is `in_progress`.
type Event = (u64, Option<(String, u64)>);

/// How GitHub hands queued jobs to runners that come online.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Assignment {
    /// The oldest queued job (GitHub's behaviour, and the simulator's): a runner often
    /// runs another runner's job, and the scaler hands the orphaned job over.
    #[default]
    Oldest,
    /// The job the runner was launched for while it is queued, else the oldest: every
    /// job takes the path without hand-overs (for counting that path's calls exactly).
    LaunchedFor,
}

/// The shared state of one burst.
pub struct World {
    pub config: Arc<Config>,
    pub cloud: Arc<Cloud>,
    pub store: Arc<MemoryStore>,
    pub fleet: Arc<FakeFleet>,
    pub forge: Arc<FakeForge>,
    pub jit_store: Arc<MemoryJitStore>,
    pub queue: Arc<SimQueue>,
    pub timeline: Arc<Timeline>,
    /// The account's unreserved concurrent Lambda executions (the scaler's and the
    /// reaper's).
    pub account: Arc<Semaphore>,
    /// The webhook's executions: its reserved concurrency, or the account's own
    /// semaphore when nothing is reserved.
    pub webhook: Arc<Semaphore>,
    /// GitHub's record of the App's deliveries, and the events they carried by guid.
    pub deliveries: Arc<MemoryDeliveries>,
    events: Mutex<HashMap<String, Event>>,
    next_delivery: AtomicU64,
    pub flood: Arc<FloodTally>,
    /// JIT configs travel through SSM (the peer) rather than DynamoDB.
    pub through_ssm: bool,
    /// How GitHub picks the job a runner that came online runs.
    pub assignment: Assignment,
    /// GitHub's queued jobs, oldest first.
    queued: Mutex<VecDeque<u64>>,
    pub taken: AtomicU32,
    pub webhooks_refused: AtomicU32,
    pub launched: UnboundedSender<String>,
}

impl World {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: Arc<Config>,
        cloud: Arc<Cloud>,
        queue: Arc<SimQueue>,
        timeline: Arc<Timeline>,
        through_ssm: bool,
        launched: UnboundedSender<String>,
        assignment: Assignment,
        webhook_reserved: Option<u32>,
    ) -> World {
        let total = cloud.quotas.lambda_account_concurrency;
        let (account, webhook) = match webhook_reserved {
            Some(reserved) => (
                Arc::new(Semaphore::new(total.saturating_sub(reserved) as usize)),
                Arc::new(Semaphore::new(reserved as usize)),
            ),
            None => {
                let account = Arc::new(Semaphore::new(total as usize));
                (account.clone(), account)
            }
        };
        World {
            config,
            cloud,
            store: Arc::new(MemoryStore::new()),
            fleet: Arc::new(FakeFleet::new()),
            forge: Arc::new(FakeForge::new()),
            jit_store: Arc::new(MemoryJitStore::new()),
            queue,
            timeline,
            account,
            webhook,
            deliveries: Arc::new(MemoryDeliveries::new(DELIVERIES_PER_PAGE)),
            events: Mutex::new(HashMap::new()),
            next_delivery: AtomicU64::new(1),
            flood: Arc::new(FloodTally::default()),
            through_ssm,
            assignment,
            queued: Mutex::new(VecDeque::new()),
            taken: AtomicU32::new(0),
            webhooks_refused: AtomicU32::new(0),
            launched,
        }
    }

    pub fn store_for(&self, caller: Caller) -> Arc<MeteredStore> {
        let meter = StoreMeter {
            cloud: self.cloud.clone(),
            caller,
            timeline: self.timeline.clone(),
        };
        Intercept::new(self.store.clone(), &Arc::new(meter))
    }

    pub fn fleet_for(&self, caller: Caller) -> Arc<MeteredFleet> {
        let meter = FleetMeter {
            fleet: self.fleet.clone(),
            cloud: self.cloud.clone(),
            caller,
            timeline: self.timeline.clone(),
            launched: self.launched.clone(),
        };
        Intercept::new(self.fleet.clone(), &Arc::new(meter))
    }

    pub fn forge_for(&self, caller: Caller) -> Arc<MeteredForge> {
        self.forge_as(caller, 0)
    }

    /// GitHub as App `app` (its own buckets).
    pub fn forge_as(&self, caller: Caller, app: usize) -> Arc<MeteredForge> {
        Arc::new(MeteredForge {
            inner: self.forge.clone(),
            cloud: self.cloud.clone(),
            caller,
            app,
        })
    }

    pub fn jit_store_for(&self, caller: Caller) -> Arc<MeteredJitStore> {
        let meter = JitStoreMeter {
            cloud: self.cloud.clone(),
            caller,
            through_ssm: self.through_ssm,
        };
        Intercept::new(self.jit_store.clone(), &Arc::new(meter))
    }

    pub fn queue_for(&self, caller: Caller) -> Arc<MeteredQueue> {
        let meter = QueueMeter {
            cloud: self.cloud.clone(),
            caller,
        };
        Intercept::new(self.queue.clone(), &Arc::new(meter))
    }

    /// GitHub queues job `job_id`.
    pub fn queue_job(&self, job_id: u64) {
        self.forge.set_job_state(job_id, ForgeJobState::Queued);
        self.queued
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(job_id);
    }

    /// GitHub hands a runner that came online a queued job (every job here has the
    /// pool's labels), as [`Assignment`] says: the oldest, or the one `own` it was
    /// launched for while that is queued.
    fn take_job(&self, own: Option<u64>) -> Option<u64> {
        let mut queued = self.queued.lock().unwrap_or_else(PoisonError::into_inner);
        let at = match self.assignment {
            Assignment::Oldest => 0,
            Assignment::LaunchedFor => own
                .and_then(|own| queued.iter().position(|&job| job == own))
                .unwrap_or(0),
        };
        let job = queued.remove(at)?;
        drop(queued);
        self.forge.set_job_state(job, ForgeJobState::InProgress);
        self.taken.fetch_add(1, Ordering::Relaxed);
        Some(job)
    }

    /// GitHub sends a `workflow_job` event (`queued`, or `in_progress` with its runner)
    /// to the webhook function.
    pub async fn deliver(
        &self,
        handler: &WebhookHandler,
        job_id: u64,
        runner: Option<(&str, u64)>,
    ) {
        let action = if runner.is_some() {
            "in_progress"
        } else {
            "queued"
        };
        let guid = format!("{action}-{job_id}");
        let runner = runner.map(|(name, id)| (name.to_owned(), id));
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(guid.clone(), (job_id, runner.clone()));
        self.attempt(handler, &guid, (job_id, runner), false).await;
    }

    /// GitHub sends delivery `id`'s event again, as the redelivery sweep asked.
    pub async fn redeliver(&self, handler: &WebhookHandler, id: u64) {
        let Some(delivery) = self.deliveries.delivery(id) else {
            return;
        };
        let event = self
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&delivery.guid)
            .cloned();
        if let Some(event) = event {
            self.attempt(handler, &delivery.guid, event, true).await;
        }
    }

    /// One attempt at an event: throttled (429) when the webhook has no execution free,
    /// which GitHub records as a failed delivery; the answer is recorded either way.
    async fn attempt(&self, handler: &WebhookHandler, guid: &str, event: Event, again: bool) {
        let (job_id, runner) = event;
        let action = if runner.is_some() {
            "in_progress"
        } else {
            "queued"
        };
        let status = match self.webhook.try_acquire() {
            Err(_) => {
                self.webhooks_refused.fetch_add(1, Ordering::Relaxed);
                429
            }
            Ok(_permit) => {
                self.cloud.wait(self.cloud.latencies.lambda_invoke).await;
                let mut body: serde_json::Value =
                    serde_json::from_str(FIXTURE).expect("fixture is JSON");
                body["action"] = json!(action);
                body["workflow_job"]["status"] = json!(action);
                body["workflow_job"]["id"] = json!(job_id);
                if let Some((name, id)) = &runner {
                    body["workflow_job"]["runner_name"] = json!(name);
                    body["workflow_job"]["runner_id"] = json!(id);
                }
                let body = body.to_string().into_bytes();
                let signature = signature_header(WEBHOOK_SECRET.as_bytes(), &body);
                let request = WebhookRequest {
                    event: Some("workflow_job"),
                    delivery_id: Some(guid),
                    signature: Some(&signature),
                    body: &body,
                };
                handler.handle(request, self.timeline.now()).await.status
            }
        };
        self.deliveries.record(HookDelivery {
            id: self.next_delivery.fetch_add(1, Ordering::Relaxed),
            guid: guid.to_owned(),
            event: "workflow_job".to_owned(),
            action: Some(action.to_owned()),
            status_code: status,
            delivered_at: self.timeline.now(),
            redelivery: again,
        });
    }

    pub fn webhook_handler(&self) -> WebhookHandler {
        let secrets = WebhookSecrets {
            current: SecretString::from(WEBHOOK_SECRET),
            previous: None,
        };
        WebhookHandler::new(
            self.config.clone(),
            secrets,
            self.queue_for(Caller::Webhook),
            ephemera_core::handlers::webhook::WebhookCapabilities::none(),
        )
    }

    /// The runner agent of one instance: boots, reads its JIT config (and removes it,
    /// stamping the read) as the bootstrap script does, comes online and takes the oldest queued job; GitHub then
    /// sends `in_progress` (which the peer's webhook drops).
    pub async fn agent(self: Arc<Self>, instance_id: String, handler: Arc<WebhookHandler>) {
        tokio::time::sleep(self.cloud.draw(self.cloud.latencies.instance_boot)).await;
        let (service, read, delete) = if self.through_ssm {
            ("SSM", "GetParameter", "DeleteParameter")
        } else {
            ("DynamoDB", "GetItem", "UpdateItem")
        };
        for _ in 0..BOOTSTRAP_TRIES {
            self.cloud.count(Caller::Instance, service, read);
            self.cloud.wait(self.cloud.latencies.dynamodb).await;
            let Some((runner_name, config)) =
                self.jit_store.take(&instance_id, self.timeline.now())
            else {
                tokio::time::sleep(BOOTSTRAP_POLL).await;
                continue;
            };
            self.cloud.count(Caller::Instance, service, delete);
            let runner_id: u64 = config
                .expose_secret()
                .split(':')
                .nth(1)
                .and_then(|id| id.parse().ok())
                .unwrap_or_default();
            self.forge.set_online(runner_id, true);
            let own = self.store.runner(&runner_name).and_then(|r| r.job_id);
            if let Some(job) = self.take_job(own) {
                self.forge.set_busy(runner_id, true);
                if !self.through_ssm {
                    self.deliver(&handler, job, Some((&runner_name, runner_id)))
                        .await;
                }
            }
            return;
        }
    }
}
