//! The redelivery sweep: GitHub does not redeliver a failed webhook delivery by itself,
//! so a `queued` lost while the webhook endpoint was down or refusing would leave a job
//! that the table never saw, and that no other rule can find. Each run reads the App's
//! recent deliveries, newest first, back to where the last sweep stopped (at most
//! [`DELIVERY_LOOKBACK`] back, and [`PAGES_PER_RUN`] pages), and asks GitHub once to
//! redeliver each failed `workflow_job` delivery whose event no attempt has delivered,
//! at most [`REDELIVERIES_PER_RUN`] a run, and at most [`ATTEMPTS_PER_EVENT`] times for
//! one event. The webhook handles a repeated event idempotently.

use super::Reaper;
use crate::handlers::error_chain;
use crate::metrics::Metric;
use crate::ports::HookDelivery;
use std::collections::{HashMap, HashSet};
use std::time::Duration;
use time::OffsetDateTime;
use tokio::time::Instant;
use tracing::{info, warn};

/// How far back a sweep looks when it does not know where the last one stopped.
pub const DELIVERY_LOOKBACK: Duration = Duration::from_secs(60 * 60);
/// Pages of deliveries read per run at most (GitHub's largest page is 100).
pub const PAGES_PER_RUN: usize = 5;
/// Redeliveries asked per run at most.
pub const REDELIVERIES_PER_RUN: usize = 20;
/// Redeliveries asked for one event at most (its attempts may keep failing while the
/// endpoint is down).
pub const ATTEMPTS_PER_EVENT: u32 = 5;

/// Redeliveries remembered at most, before the oldest marks are dropped.
const MARKS_KEPT: usize = 10_000;

/// What the sweep remembers between runs.
#[derive(Debug, Default)]
pub(super) struct SweepMark {
    /// The newest delivery id the last sweep read: the next stops there.
    newest_seen: Option<u64>,
    /// Delivery ids already asked to be redelivered.
    asked: HashSet<u64>,
    /// Redeliveries asked per event (delivery guid).
    attempts: HashMap<String, u32>,
}

/// The failed `workflow_job` deliveries of `read` (newest first) whose event no attempt
/// in `read` delivered, oldest first, one per event (its newest failed attempt).
pub fn failed_deliveries(read: &[HookDelivery]) -> Vec<&HookDelivery> {
    let delivered: HashSet<&str> = read
        .iter()
        .filter(|d| d.delivered())
        .map(|d| d.guid.as_str())
        .collect();
    let mut seen = HashSet::new();
    let mut failed: Vec<&HookDelivery> = read
        .iter()
        .filter(|d| d.event == "workflow_job" && !d.delivered())
        .filter(|d| !delivered.contains(d.guid.as_str()))
        .filter(|d| seen.insert(d.guid.as_str()))
        .collect();
    failed.reverse();
    failed
}

impl Reaper {
    /// One sweep; returns how many redeliveries were asked.
    pub(super) async fn redeliver_failed(&self, now: OffsetDateTime, deadline: Instant) -> usize {
        let Some(deliveries) = self.deliveries.clone() else {
            return 0;
        };
        let stop_at = self.memory().sweep.newest_seen;
        let oldest = now - DELIVERY_LOOKBACK;
        let mut read = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..PAGES_PER_RUN {
            if Instant::now() >= deadline {
                break;
            }
            let page = match deliveries.list_deliveries(cursor.as_deref()).await {
                Ok(page) => page,
                Err(err) => {
                    warn!(error = %error_chain(&err), "cannot list webhook deliveries; next run retries");
                    return 0;
                }
            };
            let listed = page.deliveries.len();
            let fresh: Vec<HookDelivery> = page
                .deliveries
                .into_iter()
                .take_while(|d| stop_at.is_none_or(|id| d.id > id) && d.delivered_at >= oldest)
                .collect();
            let reached_last_sweep = fresh.len() < listed;
            read.extend(fresh);
            match page.next_cursor {
                Some(next) if !reached_last_sweep => cursor = Some(next),
                _ => break,
            }
        }
        if let Some(newest) = read.iter().map(|d| d.id).max() {
            self.memory().sweep.newest_seen = Some(newest.max(stop_at.unwrap_or(0)));
        }
        let mut asked = 0;
        for failed in failed_deliveries(&read) {
            if asked == REDELIVERIES_PER_RUN || Instant::now() >= deadline {
                break;
            }
            if !self.may_ask(failed) {
                continue;
            }
            match deliveries.redeliver(failed.id).await {
                Ok(()) => {
                    asked += 1;
                    self.metrics.record(Metric::Redeliveries, &[], 1.0);
                    info!(delivery_id = failed.id, guid = %failed.guid, action = ?failed.action, status_code = failed.status_code, "failed webhook delivery redelivered");
                }
                Err(err) => {
                    warn!(delivery_id = failed.id, error = %error_chain(&err), "cannot redeliver a failed webhook delivery");
                }
            }
        }
        asked
    }

    /// Marks the delivery as asked for; false if it was, or its event had its share.
    fn may_ask(&self, delivery: &HookDelivery) -> bool {
        let mut memory = self.memory();
        let mark = &mut memory.sweep;
        if mark.asked.len() > MARKS_KEPT {
            // Old marks only stop asks for deliveries long past the lookback.
            mark.asked.clear();
            mark.attempts.clear();
        }
        let attempts = mark.attempts.get(&delivery.guid).copied().unwrap_or(0);
        if attempts >= ATTEMPTS_PER_EVENT || !mark.asked.insert(delivery.id) {
            return false;
        }
        mark.attempts.insert(delivery.guid.clone(), attempts + 1);
        true
    }
}
