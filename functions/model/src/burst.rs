//! One burst: N jobs queued on GitHub at once, driven through ephemera's handlers (or the
//! peer's call pattern) on the model's Lambda: the webhook function per delivery, the
//! scaler per SQS batch (event source concurrency, account concurrency, timeout,
//! visibility, redrive), the reaper every minute. Ends when every job runs, or after
//! [`TIME_LIMIT`] of simulated time.

use crate::cloud::{Caller, Cloud, Tally};
use crate::flood::{flood, Flood, GitHubDeliveries};
use crate::peer::PeerScaler;
use crate::quotas::{Latencies, Quotas, Settings};
use crate::report::{bounds, Pattern, Timeline};
use crate::sqs::{SimQueue, Stored};
use crate::world::{Assignment, World};
use ephemera_core::config::Config;
use ephemera_core::handlers::reaper::{Reaper, ReaperCapabilities, ReaperPorts};
use ephemera_core::handlers::scaler::{
    fleet_request, BatchItem, Scaler, ScalerCapabilities, ScalerPorts,
};
use ephemera_core::pace::RegistrationPace;
use ephemera_core::ports::Market;
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// Simulated time after which a burst is given up.
pub const TIME_LIMIT: Duration = Duration::from_secs(6 * 3600);
const REAPER_EVERY: Duration = Duration::from_secs(60);
const REAPER_DEADLINE: Duration = Duration::from_secs(50);
const POLL: Duration = Duration::from_millis(100);

/// What to run.
#[derive(Debug, Clone)]
pub struct BurstSpec {
    pub jobs: u32,
    pub settings: Settings,
    pub quotas: Quotas,
    pub latencies: Latencies,
    pub pattern: Pattern,
    pub webhooks_per_second: f64,
    pub seed: u64,
    /// How GitHub hands jobs to runners (GitHub's own: the oldest queued job).
    pub assignment: Assignment,
    /// Refused requests on the webhook's URL during the burst, if any.
    pub flood: Option<Flood>,
}

/// What a burst measured: the JSON row of `bench/model.json`, and the raw tallies.
pub struct BurstOutcome {
    pub row: Value,
    pub calls: Tally,
    pub dead_lettered: usize,
    pub jobs_running: u32,
    pub world: Arc<World>,
}

/// Runs a burst on a fresh single-threaded runtime with paused time.
pub fn run(spec: &BurstSpec) -> BurstOutcome {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a tokio runtime");
    runtime.block_on(run_burst(spec))
}

fn config(jobs: u32) -> Arc<Config> {
    let text = format!(
        "deployment: eph\ngithub: {{ app_id: 1 }}\npools:\n  - name: linux\n    labels: [self-hosted, linux, x64]\n    max_runners: {jobs}\n    instance_types: [m7i.large]\n    launch_template: eph-runner\n"
    );
    Arc::new(Config::parse("model.yaml", &text).expect("the model's configuration is valid"))
}

async fn run_burst(spec: &BurstSpec) -> BurstOutcome {
    let base = time::macros::datetime!(2026-11-23 10:00:00 UTC);
    let cloud = Arc::new(Cloud::new(spec.quotas.clone(), spec.latencies, spec.seed));
    let settings = &spec.settings;
    let queue = Arc::new(SimQueue::new(settings.visibility, settings.max_receives));
    let timeline = Arc::new(Timeline::new(spec.jobs, base));
    let (launched_tx, mut launched_rx) = tokio::sync::mpsc::unbounded_channel();
    let peer = spec.pattern == Pattern::Peer;
    let world = Arc::new(World::new(
        config(spec.jobs),
        cloud.clone(),
        queue.clone(),
        timeline.clone(),
        peer,
        launched_tx,
        spec.assignment,
        spec.settings.webhook_reserved_concurrency,
    ));
    let handler = Arc::new(world.webhook_handler());
    let mut tasks = tokio::task::JoinSet::new();
    {
        let (world, handler) = (world.clone(), handler.clone());
        tasks.spawn(async move {
            while let Some(instance) = launched_rx.recv().await {
                tokio::spawn(world.clone().agent(instance, handler.clone()));
            }
        });
    }
    {
        let (world, handler, jobs, rate) = (
            world.clone(),
            handler.clone(),
            spec.jobs,
            spec.webhooks_per_second,
        );
        tasks.spawn(async move {
            for job in 1..=u64::from(jobs) {
                world.queue_job(job);
                let (world, handler) = (world.clone(), handler.clone());
                tokio::spawn(async move { world.deliver(&handler, job, None).await });
                tokio::time::sleep(Duration::from_secs_f64(1.0 / rate)).await;
            }
        });
    }
    let in_flight = Arc::new(AtomicU32::new(0));
    let timeouts = Arc::new(AtomicU32::new(0));
    tasks.spawn(event_source(
        world.clone(),
        spec.clone(),
        in_flight.clone(),
        timeouts.clone(),
    ));
    if let Some(flooding) = spec.flood.clone() {
        tasks.spawn(flood(world.clone(), flooding));
    }
    if !peer {
        let (redeliver_tx, mut redeliver_rx) = tokio::sync::mpsc::unbounded_channel();
        let (github, handler) = (world.clone(), handler.clone());
        tasks.spawn(async move {
            while let Some(id) = redeliver_rx.recv().await {
                let (world, handler) = (github.clone(), handler.clone());
                tokio::spawn(async move { world.redeliver(&handler, id).await });
            }
        });
        tasks.spawn(reaper_schedule(world.clone(), redeliver_tx));
    }
    let started = Instant::now();
    while started.elapsed() < TIME_LIMIT {
        tokio::time::sleep(Duration::from_secs(1)).await;
        // Every job runs and the queue is drained; or every job that does not run has
        // been dead-lettered once. A job GitHub refuses every runner for (past the
        // runner group's cap: no job finishes in a burst, so no place frees) goes to the
        // DLQ, and the reaper sends it again while GitHub holds it queued, without end.
        let taken = world.taken.load(Ordering::Relaxed) as usize;
        let jobs = spec.jobs as usize;
        let drained = taken >= jobs && queue.waiting() == 0;
        let refused = taken < jobs && taken + queue.dead_lettered_jobs() >= jobs;
        if (drained || refused) && in_flight.load(Ordering::Relaxed) == 0 {
            break;
        }
    }
    tasks.abort_all();
    outcome(spec, &world, timeouts.load(Ordering::Relaxed))
}

/// The SQS event source: receives batches while it may run more invocations (its
/// maximum concurrency, its ramp of +300 a minute, the account's free executions).
async fn event_source(
    world: Arc<World>,
    spec: BurstSpec,
    in_flight: Arc<AtomicU32>,
    timeouts: Arc<AtomicU32>,
) {
    let settings = spec.settings.clone();
    let quotas = &world.cloud.quotas;
    let containers = Arc::new(Mutex::new(scaler_containers(&world, &spec)));
    let peer = Arc::new(peer_scaler(&world));
    let started = Instant::now();
    loop {
        let ramp = quotas.esm_initial as f64
            + quotas.esm_added_per_minute as f64 * started.elapsed().as_secs_f64() / 60.0;
        let allowed = settings.scaler_max_concurrency.min(ramp as u32);
        while in_flight.load(Ordering::Relaxed) < allowed && world.queue.visible() > 0 {
            let Ok(permit) = world.account.clone().try_acquire_owned() else {
                world.flood.scaler_throttled.fetch_add(1, Ordering::Relaxed);
                break;
            };
            let batch = world.queue.receive(settings.batch_size);
            if batch.is_empty() {
                break;
            }
            in_flight.fetch_add(1, Ordering::Relaxed);
            let (world, containers, peer, in_flight, timeouts, pattern) = (
                world.clone(),
                containers.clone(),
                peer.clone(),
                in_flight.clone(),
                timeouts.clone(),
                spec.pattern,
            );
            let timeout = settings.scaler_timeout;
            tokio::spawn(async move {
                world.cloud.wait(world.cloud.latencies.lambda_invoke).await;
                let ids: Vec<String> = batch.iter().map(|m| m.id.clone()).collect();
                let handled = if pattern == Pattern::Peer {
                    tokio::time::timeout(timeout, peer.handle_batch(batch)).await
                } else {
                    // The environment idle longest takes the batch (assumed: Lambda does
                    // not say which idle environment an invocation goes to).
                    let scaler = containers
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .pop_front();
                    let scaler = scaler.expect("a container per concurrent invocation");
                    let result =
                        tokio::time::timeout(timeout, invoke(&scaler, batch, &world)).await;
                    containers
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push_back(scaler);
                    result
                };
                match handled {
                    Ok(failed) => {
                        let done: Vec<String> =
                            ids.into_iter().filter(|id| !failed.contains(id)).collect();
                        world.queue.delete(&done);
                    }
                    Err(_) => {
                        timeouts.fetch_add(1, Ordering::Relaxed);
                    }
                }
                in_flight.fetch_sub(1, Ordering::Relaxed);
                drop(permit);
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

async fn invoke(scaler: &Arc<Scaler>, batch: Vec<Stored>, world: &World) -> Vec<String> {
    let items = batch
        .into_iter()
        .map(|stored| BatchItem {
            message_id: stored.id,
            body: stored.message.encode(),
        })
        .collect();
    scaler.handle_batch(items, world.timeline.now()).await
}

/// One scaler per execution environment the event source may keep busy at once, the
/// environments spread over the GitHub Apps in turn (each App's calls on its own
/// buckets), each with its share of its App's registration pace.
fn scaler_containers(world: &World, spec: &BurstSpec) -> VecDeque<Arc<Scaler>> {
    let settings = &spec.settings;
    let apps = settings.github_apps.max(1);
    let concurrency = settings.scaler_max_concurrency;
    (0..concurrency)
        .map(|container| {
            let app = container % apps;
            // The environments that share this App's allowance.
            let sharing = (concurrency - app).div_ceil(apps);
            let ports = ScalerPorts {
                config: world.config.clone(),
                store: world.store_for(Caller::Scaler),
                launcher: world.fleet_for(Caller::Scaler),
                forge: world.forge_as(Caller::Scaler, app as usize),
                jit_store: world.jit_store_for(Caller::Scaler),
                queue: world.queue_for(Caller::Scaler),
            };
            let registration_pace = settings.registrations_per_minute.map(|per_minute| {
                Arc::new(RegistrationPace::shared_within(
                    per_minute,
                    f64::from(spec.quotas.github_registration_hourly),
                    sharing,
                ))
            });
            // The deployment's scaler in what the model measures (the pace, the
            // jitter); breakers and re-runs play no part in a burst.
            let capabilities = ScalerCapabilities {
                registration_pace,
                jitter: world.cloud.jitter(),
                ..ScalerCapabilities::none()
            };
            Arc::new(Scaler::new(ports, capabilities))
        })
        .collect()
}

fn peer_scaler(world: &World) -> PeerScaler {
    let pool = &world.config.pools[0];
    PeerScaler {
        cloud: world.cloud.clone(),
        forge: world.forge.clone(),
        fleet: world.fleet_for(Caller::Scaler),
        jit_store: world.jit_store_for(Caller::Scaler),
        timeline: world.timeline.clone(),
        // The peer asks for its batch the way ephemera does (count set per batch).
        request: fleet_request(&world.config.deployment, pool, 0, Market::OnDemand),
    }
}

/// The reaper on its one-minute schedule, one long-lived execution environment, with
/// the redelivery sweep over GitHub's deliveries (a redelivery asked goes to `redeliver`).
/// A run that finds no execution free in the account is throttled, and skipped.
async fn reaper_schedule(world: Arc<World>, redeliver: tokio::sync::mpsc::UnboundedSender<u64>) {
    let deliveries = GitHubDeliveries {
        inner: world.deliveries.clone(),
        cloud: world.cloud.clone(),
        redeliver,
        tally: world.flood.clone(),
    };
    let ports = ReaperPorts {
        config: world.config.clone(),
        store: world.store_for(Caller::Reaper),
        fleet: world.fleet_for(Caller::Reaper),
        forge: world.forge_for(Caller::Reaper),
        jit_store: world.jit_store_for(Caller::Reaper),
        queue: world.queue_for(Caller::Reaper),
    };
    // One long-lived reaper, so no lease to take; the sweep is what a flood tests.
    let capabilities = ReaperCapabilities {
        deliveries: Some(Arc::new(deliveries)),
        ..ReaperCapabilities::none()
    };
    let reaper = Reaper::new(ports, capabilities);
    loop {
        tokio::time::sleep(REAPER_EVERY).await;
        let Ok(_permit) = world.account.try_acquire() else {
            world.flood.reaper_throttled.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let deadline = Instant::now() + REAPER_DEADLINE;
        let _ =
            tokio::time::timeout(REAPER_EVERY, reaper.run(world.timeline.now(), deadline)).await;
    }
}

fn outcome(spec: &BurstSpec, world: &Arc<World>, timeouts: u32) -> BurstOutcome {
    let (launched, registered, p50, p99) = world.timeline.summary();
    let calls = world.cloud.calls();
    let jobs = f64::from(spec.jobs);
    let mut per_job: BTreeMap<&str, BTreeMap<&str, f64>> = BTreeMap::new();
    let mut reaper: BTreeMap<&str, BTreeMap<&str, u64>> = BTreeMap::new();
    for ((caller, service, operation), count) in &calls {
        match caller {
            Caller::Webhook | Caller::Scaler => {
                *per_job
                    .entry(service)
                    .or_default()
                    .entry(operation)
                    .or_default() += *count as f64 / jobs;
            }
            Caller::Reaper => {
                *reaper
                    .entry(service)
                    .or_default()
                    .entry(operation)
                    .or_default() += count
            }
            Caller::Instance => {}
        }
    }
    for operations in per_job.values_mut() {
        for value in operations.values_mut() {
            *value = (*value * 1000.0).round() / 1000.0;
        }
    }
    // What a job cost of `core`: the calls that spent its hours (a call GitHub refused
    // spent none), the reaper's among them.
    let core_per_job = world.cloud.core_spent() as f64 / jobs;
    let limits = bounds(
        spec.jobs,
        spec.settings.batch_size,
        &spec.quotas,
        spec.pattern,
        spec.settings.github_apps,
        core_per_job,
    );
    let (binding, bound) = limits.first().cloned().unwrap_or_default();
    let round = |v: Option<f64>| v.map(|v| (v * 10.0).round() / 10.0);
    let dead_lettered = world.queue.dead_lettered();
    let jobs_running = world.taken.load(Ordering::Relaxed);
    let settings = &spec.settings;
    let row = json!({
        "jobs": spec.jobs,
        "settings": settings.name,
        "all_launch_requested_s": round(launched),
        "all_registered_s": round(registered),
        "queued_to_launch_p50_s": round(p50),
        "queued_to_launch_p99_s": round(p99),
        "binding_limit": binding,
        "limit_bound_s": round(Some(bound)),
        "dead_lettered": dead_lettered,
        "dead_lettered_jobs": world.queue.dead_lettered_jobs(),
        "simulated_s": (world.timeline.elapsed_s() * 10.0).round() / 10.0,
        "jobs_running": jobs_running,
        "throttled": world.cloud.throttles(),
        "transaction_conflicts": world.cloud.conflicts(),
        "webhooks_refused": world.webhooks_refused.load(Ordering::Relaxed),
        "scaler_timeouts": timeouts,
        "calls_per_job": per_job,
        "reaper_calls": reaper,
        "scaler_max_concurrency": settings.scaler_max_concurrency,
        "batch_size": settings.batch_size,
        "registrations_per_minute": settings.registrations_per_minute,
        "github_apps": settings.github_apps,
        "github_content_creation_applied": spec.quotas.github_content_creation.is_some(),
        "webhook_reserved_concurrency": settings.webhook_reserved_concurrency,
        "lambda_throttles": world.flood.row(spec.flood.as_ref()),
        "github_refusals": world.cloud.github_refusals(),
        "registrations_refused": world.cloud.github_refusals().get("runner_group_full").copied().unwrap_or(0),
        "runner_group_cap": spec.quotas.github_runners_per_group,
        "runners_in_group": world.cloud.group_runners(),
        "core_calls_per_job": (core_per_job * 1000.0).round() / 1000.0,
        "github_org_registrations_applied": spec.quotas.github_org_registrations.is_some(),
        "ec2_launch_resource": { "capacity": spec.quotas.ec2_launch_resource.capacity, "per_second": spec.quotas.ec2_launch_resource.per_second },
        "other_bounds": limits.iter().skip(1).map(|(n, s)| json!({"quota": n, "bound_s": (s * 10.0).round() / 10.0})).collect::<Vec<_>>(),
    });
    BurstOutcome {
        row,
        calls,
        dead_lettered,
        jobs_running,
        world: world.clone(),
    }
}
