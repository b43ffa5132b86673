//! A flood on the webhook's public URL: refused requests (unsigned,
//! malformed, oversized, unknown events) arriving at a steady rate for a while. Each one
//! the webhook serves holds one of its execution slots; past its reserved concurrency
//! Lambda throttles (429), genuine deliveries included. GitHub records a throttled
//! delivery as failed and does not send it again by itself: the reaper's redelivery
//! sweep asks for it, through [`GitHubDeliveries`], and the model delivers it again.

use crate::cloud::{Caller, Cloud};
use crate::github::{request, LIST_DELIVERIES, REDELIVER};
use crate::world::World;
use async_trait::async_trait;
use ephemera_core::memory::MemoryDeliveries;
use ephemera_core::ports::{DeliveryPage, ForgeError, HookDeliveries, HookDelivery};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// The execution slot a refused request holds: a tenth of a second. The refusal itself
/// takes 0.2 µs (bench/webhook.json, `webhook_refused`) and Lambda bills at least 1 ms,
/// but Lambda serves at most 10 requests a second per execution environment (Lambda
/// developer guide, "Understanding Lambda function scaling": a function's requests per
/// second are limited to 10 times its concurrency), so a request costs the webhook's
/// concurrency at least 100 ms of one slot, however fast it is refused.
pub const REFUSED_SLOT: Duration = Duration::from_millis(100);
/// How often the flood's requests are issued (its rate spread over these ticks).
const TICK: Duration = Duration::from_millis(10);

/// F refused requests a second for T, starting some time after the burst's first job.
#[derive(Debug, Clone)]
pub struct Flood {
    pub per_second: f64,
    pub lasting: Duration,
    pub starts_after: Duration,
    /// How long each served request holds its slot.
    pub slot: Duration,
}

impl Flood {
    /// The flood the model's cases start from: 2,000 refused requests a second for 10
    /// minutes, from the burst's start.
    pub fn standard() -> Flood {
        Flood {
            per_second: 2_000.0,
            lasting: Duration::from_secs(600),
            starts_after: Duration::ZERO,
            slot: REFUSED_SLOT,
        }
    }
}

/// What the flood and the webhook's guard measured.
#[derive(Debug, Default)]
pub struct FloodTally {
    /// Flood requests the webhook served (and refused), and those Lambda throttled.
    pub served: AtomicU64,
    pub throttled: AtomicU64,
    /// The event source's attempts to invoke the scaler on a waiting batch (one per
    /// 100 ms poll), and the reaper's scheduled runs, refused for want of a free
    /// execution in the account's unreserved concurrency.
    pub scaler_throttled: AtomicU64,
    pub reaper_throttled: AtomicU64,
    /// Redeliveries the sweep asked GitHub for.
    pub redeliveries: AtomicU64,
}

impl FloodTally {
    /// The tally as a row's JSON: the flood (when there is one) and every throttle.
    pub fn row(&self, flood: Option<&Flood>) -> Value {
        let get = |n: &AtomicU64| n.load(Ordering::Relaxed);
        json!({
            "flood": flood.map(|f| json!({
                "refused_per_second": f.per_second,
                "lasting_s": f.lasting.as_secs_f64(),
                "starts_after_s": f.starts_after.as_secs_f64(),
                "slot_ms": f.slot.as_secs_f64() * 1000.0,
                "served": get(&self.served),
                "throttled": get(&self.throttled),
            })),
            "scaler_throttled": get(&self.scaler_throttled),
            "reaper_throttled": get(&self.reaper_throttled),
            "redeliveries": get(&self.redeliveries),
        })
    }
}

/// Sends the flood's requests to the webhook, each holding a slot for `flood.slot`.
pub async fn flood(world: Arc<World>, flood: Flood) {
    tokio::time::sleep(flood.starts_after).await;
    let ticks = (flood.lasting.as_secs_f64() / TICK.as_secs_f64()).round() as u64;
    let per_tick = flood.per_second * TICK.as_secs_f64();
    let mut owed = 0.0;
    for _ in 0..ticks {
        owed += per_tick;
        let due = owed.floor();
        owed -= due;
        let mut held = Vec::new();
        for _ in 0..due as u64 {
            match world.webhook.clone().try_acquire_owned() {
                Ok(permit) => held.push(permit),
                Err(_) => {
                    world.flood.throttled.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        if !held.is_empty() {
            let served = held.len() as u64;
            world.flood.served.fetch_add(served, Ordering::Relaxed);
            let slot = flood.slot;
            tokio::spawn(async move {
                tokio::time::sleep(slot).await;
                drop(held);
            });
        }
        tokio::time::sleep(TICK).await;
    }
}

/// GitHub's record of the App's deliveries, on GitHub's limits: a redelivery asked for
/// is sent to the webhook again (by the burst, which reads `redeliver`).
pub struct GitHubDeliveries {
    pub inner: Arc<MemoryDeliveries>,
    pub cloud: Arc<Cloud>,
    pub redeliver: UnboundedSender<u64>,
    pub tally: Arc<FloodTally>,
}

#[async_trait]
impl HookDeliveries for GitHubDeliveries {
    async fn list_deliveries(&self, cursor: Option<&str>) -> Result<DeliveryPage, ForgeError> {
        request(&self.cloud, Caller::Reaper, LIST_DELIVERIES).await?;
        self.inner.list_deliveries(cursor).await
    }

    async fn redeliver(&self, id: u64) -> Result<(), ForgeError> {
        request(&self.cloud, Caller::Reaper, REDELIVER).await?;
        self.inner.redeliver(id).await?;
        self.tally.redeliveries.fetch_add(1, Ordering::Relaxed);
        // The burst has ended when nobody listens: nothing left to deliver.
        let _ = self.redeliver.send(id);
        Ok(())
    }
}

/// What GitHub's record of the deliveries says about a flooded burst, per action
/// (`queued`, `in_progress`): first attempts throttled, redeliveries asked, those asked
/// while the flood lasted and those throttled again, and when the last `queued` event got
/// through (seconds from the first delivery). The sweep's asks share GitHub's 500 an hour
/// whatever the action, so the asks an `in_progress` event takes are asks a `queued` one
/// waits for; an ask made while the flood lasts is spent, and is throttled again.
pub fn deliveries_report(deliveries: &[HookDelivery], flood: &Flood) -> Value {
    let Some(start) = deliveries.iter().map(|d| d.delivered_at).min() else {
        return json!({});
    };
    let since = |d: &HookDelivery| (d.delivered_at - start).as_seconds_f64();
    let flood_end = (flood.starts_after + flood.lasting).as_secs_f64();
    let mut by_action = serde_json::Map::new();
    for action in ["queued", "in_progress"] {
        let of: Vec<&HookDelivery> = deliveries
            .iter()
            .filter(|d| d.action.as_deref() == Some(action))
            .collect();
        let asks: Vec<&&HookDelivery> = of.iter().filter(|d| d.redelivery).collect();
        let count = |keep: &dyn Fn(&HookDelivery) -> bool| of.iter().filter(|d| keep(d)).count();
        by_action.insert(
            action.to_owned(),
            json!({
                "first_attempts_throttled": count(&|d| !d.redelivery && d.status_code == 429),
                "redeliveries": asks.len(),
                "redeliveries_during_flood": asks.iter().filter(|d| since(d) < flood_end).count(),
                "redeliveries_throttled": asks.iter().filter(|d| d.status_code == 429).count(),
            }),
        );
    }
    let last_queued = deliveries
        .iter()
        .filter(|d| d.action.as_deref() == Some("queued") && d.delivered())
        .map(since)
        .fold(0.0, f64::max);
    json!({
        "by_action": by_action,
        "last_queued_delivered_s": (last_queued * 10.0).round() / 10.0,
    })
}
