//! The redelivery sweep: GitHub does not redeliver a failed webhook delivery by itself,
//! so a `queued` lost while the webhook endpoint was down or refusing would leave a job
//! that the table never saw, and that no other rule can find. Each run reads the App's
//! recent deliveries, newest first, back to where the last sweep stopped (while none has
//! read one, [`DELIVERY_LOOKBACK`] before the process's first sweep, so a list that
//! cannot be read for an hour loses nothing; never more than [`LONGEST_READ_BACK`]; and
//! [`PAGES_PER_RUN`] pages: what a run has no pages left for, the next runs read on from
//! where it stopped), and remembers the attempts of each `workflow_job` event whose
//! attempts all failed. What to do with such an event is decided from GitHub's own
//! record of its attempts ([`super::failed_events`]): asked for at once, then again,
//! spaced by [`retry_after`] from its last ask, while it keeps failing for passing
//! reasons (5xx, timeouts, throttles), for a lookback from its first ask; a 4xx asked
//! for again only [`REFUSED_ASKS`] times; then given up, logged and counted in
//! `RedeliveriesGivenUp`. Events asked for fewer times go first, so events that keep
//! failing never crowd a newer failure out of a run's [`REDELIVERIES_PER_RUN`] asks. A
//! process that starts afresh reads the whole lookback again: it finds what its
//! predecessor had not yet recovered, and reads the same asks and times back from the
//! list, so it neither asks beyond the bound nor reopens a window. The webhook handles
//! a repeated event idempotently.

use super::failed_events::{FailedEvent, GiveUp, Verdict, REFUSED_ASKS};
use super::Reaper;

#[path = "redeliver_read.rs"]
mod read;
use crate::handlers::error_chain;
use crate::metrics::{Dimension, Metric};
use crate::pace::RegistrationPace;
use crate::ports::{ForgeError, HookDeliveries, HookDelivery};
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;
use time::OffsetDateTime;
use tokio::time::Instant;
use tracing::{info, warn};

/// How far back a sweep looks when it does not know where the last one stopped, and how
/// long a failed event is asked for again.
pub const DELIVERY_LOOKBACK: Duration = Duration::from_secs(60 * 60);
/// How far back a sweep ever reads, however long the list could not be read.
pub const LONGEST_READ_BACK: Duration = Duration::from_secs(24 * 60 * 60);
/// Pages of deliveries read per run at most (GitHub's largest page is 100).
pub const PAGES_PER_RUN: usize = 5;
/// Redeliveries asked per run at most: a run a minute stays under GitHub's
/// [`CONTENT_CREATION_PER_MINUTE`], with room left for the re-runs' POSTs of the same
/// minute. A flood at the public URL throttles the webhook and, with it, genuine
/// deliveries: in the model (`bench-model`'s `flood` case, 2,000 refused requests a
/// second for 10 minutes during a 1,000-job burst, the webhook reserving 50) about 1,100
/// deliveries fail; GitHub lets an App ask for at most [`CONTENT_CREATION_PER_HOUR`] of
/// them in an hour, so a flood that long loses the rest to the lookback, whatever the
/// sweep does (a faster sweep would only meet GitHub's secondary limit).
pub const REDELIVERIES_PER_RUN: usize = 60;
/// GitHub's content-creation limits, which a redelivery (a POST that makes a delivery)
/// spends: "no more than 80 content-generating requests per minute and no more than 500
/// content-generating requests per hour" (docs.github.com, "Rate limits for the REST
/// API", "About secondary rate limits"). Past them GitHub answers 403 or 429 with a
/// `retry-after`. The sweep's pace ([`redelivery_pace`]) keeps under both.
pub const CONTENT_CREATION_PER_MINUTE: f64 = 80.0;
pub const CONTENT_CREATION_PER_HOUR: f64 = 500.0;
/// How long the sweep waits after a secondary limit that names no `retry-after`
/// (GitHub: "wait for at least one minute before retrying").
pub const SECONDARY_LIMIT_PAUSE: Duration = Duration::from_secs(60);

/// The pace of one process's redeliveries: GitHub's content-creation limits, the minute's
/// as a token bucket and the hour's as a sliding window (one reaper runs at a time, so
/// the whole allowance is its own). A process started afresh knows nothing of its
/// predecessor's hour; GitHub's secondary limit then pauses it (`retry-after`).
pub fn redelivery_pace() -> RegistrationPace {
    RegistrationPace::shared_within(CONTENT_CREATION_PER_MINUTE, CONTENT_CREATION_PER_HOUR, 1)
}
/// The wait after an event's first redelivery before it is asked again, if that failed.
pub const FIRST_RETRY: Duration = Duration::from_secs(10);
/// The longest wait between two asks for one event.
pub const LONGEST_RETRY: Duration = Duration::from_secs(5 * 60);

/// Failed events remembered at most, before the oldest are dropped.
const EVENTS_KEPT: usize = 10_000;

/// The wait after an event's `asks`-th redelivery before the next: [`FIRST_RETRY`],
/// doubling, at most [`LONGEST_RETRY`].
pub fn retry_after(asks: u32) -> Duration {
    FIRST_RETRY
        .saturating_mul(2u32.saturating_pow(asks.saturating_sub(1)))
        .min(LONGEST_RETRY)
}

/// Older deliveries a sweep ran out of pages before reading: the next runs go on from
/// `cursor` down to `down_to` (the mark of the sweep before), or to the lookback.
#[derive(Debug, Clone)]
struct Unread {
    cursor: String,
    down_to: Option<u64>,
}

/// Stretches of unread deliveries remembered at most, before the oldest are dropped.
const UNREAD_KEPT: usize = 100;

/// What the sweep remembers between runs.
#[derive(Debug, Default)]
pub(super) struct SweepMark {
    /// The newest delivery id the last sweep read: the next stops there.
    newest_seen: Option<u64>,
    /// When this process's first sweep ran: until one reads a delivery, the sweeps read
    /// back to a lookback before it.
    first_sweep: Option<OffsetDateTime>,
    /// Below it, what a sweep had no pages left to read, oldest stretch first.
    unread: Vec<Unread>,
    /// Failed events not yet delivered, by guid, given up ones included (so that they
    /// are neither asked for nor reported again).
    failed: BTreeMap<String, FailedEvent>,
    /// The newest delivery any event got through with.
    got_through: Option<OffsetDateTime>,
}

/// An event to ask for now.
pub(super) struct Due {
    guid: String,
    attempt: u64,
    status_code: u16,
    action: Option<String>,
    asks: u32,
}

/// An event given up in this run.
pub(super) struct GivenUp {
    guid: String,
    attempt: u64,
    status_code: u16,
    asks: u32,
    why: GiveUp,
    /// This process asked for it: its give-up is reported. One given up before a fresh
    /// process read it was reported by its predecessor (or lost with it), and is not
    /// counted twice.
    report: bool,
}

impl SweepMark {
    /// Folds in deliveries read (newest first): an event delivered by any attempt is
    /// done; the attempts of one not delivered are added to what is known of it.
    fn learn(&mut self, read: &[HookDelivery], now: OffsetDateTime) {
        let delivered: HashSet<&str> = read
            .iter()
            .filter(|d| d.delivered())
            .map(|d| d.guid.as_str())
            .collect();
        self.failed
            .retain(|guid, _| !delivered.contains(guid.as_str()));
        let failed = read
            .iter()
            .filter(|d| d.event == "workflow_job" && !d.delivered());
        for attempt in failed.filter(|d| !delivered.contains(d.guid.as_str())) {
            self.failed
                .entry(attempt.guid.clone())
                .or_insert_with(|| FailedEvent::new(attempt.action.clone()))
                .add(attempt);
        }
        let got_through = read
            .iter()
            .filter(|d| d.delivered())
            .map(|d| d.delivered_at);
        self.got_through = self.got_through.into_iter().chain(got_through).max();
        // Given up ones are kept while a sweep could read them again.
        self.failed.retain(|_, event| {
            event
                .newest()
                .is_some_and(|(_, _, at)| at >= now - LONGEST_READ_BACK)
        });
        if self.failed.len() > EVENTS_KEPT {
            let mut oldest: Vec<(Option<OffsetDateTime>, String)> = self
                .failed
                .iter()
                .map(|(guid, event)| (event.first_failed_at(), guid.clone()))
                .collect();
            oldest.sort();
            for (_, guid) in oldest.into_iter().take(self.failed.len() - EVENTS_KEPT) {
                self.failed.remove(&guid);
            }
        }
    }

    /// The events to ask for now, those asked the fewest times first (a new failure
    /// before one asked for again), then the oldest failure first; and those given up
    /// now, marked so.
    fn due(&mut self, now: OffsetDateTime) -> (Vec<Due>, Vec<GivenUp>) {
        let (mut due, mut given_up) = (Vec::new(), Vec::new());
        for (guid, event) in &mut self.failed {
            let Some((attempt, status_code, _)) = event.newest() else {
                continue;
            };
            match event.verdict(now, self.got_through) {
                Verdict::Wait => {}
                Verdict::Ask => due.push((
                    event.first_failed_at(),
                    Due {
                        guid: guid.clone(),
                        attempt,
                        status_code,
                        action: event.action.clone(),
                        asks: event.asks(),
                    },
                )),
                Verdict::GiveUp(why) => {
                    event.given_up = true;
                    given_up.push(GivenUp {
                        guid: guid.clone(),
                        attempt,
                        status_code,
                        asks: event.asks(),
                        why,
                        report: event.asked_here(),
                    });
                }
            }
        }
        due.sort_by_key(|(first_failed_at, due)| (due.asks, *first_failed_at));
        (due.into_iter().map(|(_, due)| due).collect(), given_up)
    }

    /// Notes that the event was asked for at `now`.
    fn asked(&mut self, guid: &str, now: OffsetDateTime) {
        if let Some(event) = self.failed.get_mut(guid) {
            event.asked(now);
        }
    }
}

impl Reaper {
    /// One sweep; returns how many redeliveries were asked.
    pub(super) async fn redeliver_failed(&self, now: OffsetDateTime, deadline: Instant) -> usize {
        let Some(deliveries) = self.deliveries.clone() else {
            return 0;
        };
        // Events already known are asked for even when the list cannot be read.
        let read = self
            .read_new_deliveries(now, deadline)
            .await
            .unwrap_or_default();
        let (due, given_up) = {
            let mut memory = self.memory();
            memory.sweep.learn(&read, now);
            memory.sweep.due(now)
        };
        for event in given_up {
            self.report_given_up(&event);
        }
        let mut asked = 0;
        let waiting = due.len();
        for event in due {
            if asked == REDELIVERIES_PER_RUN || Instant::now() >= deadline {
                break;
            }
            if let Err(wait) = self.redelivery_pace.take(Duration::ZERO) {
                info!(asked, left = waiting - asked, wait_s = wait.as_secs(), "redeliveries paced to GitHub's content-creation limits; the rest wait for the next runs");
                break;
            }
            let Due { guid, attempt, .. } = &event;
            match deliveries.redeliver(*attempt).await {
                Ok(()) => {
                    asked += 1;
                    self.memory().sweep.asked(guid, now);
                    self.metrics.record(Metric::Redeliveries, &[], 1.0);
                    info!(delivery_id = attempt, %guid, action = ?event.action, status_code = event.status_code, ask = event.asks + 1, "failed webhook delivery redelivered");
                }
                Err(ForgeError::Throttled { retry_after }) => {
                    // A secondary limit: the allowance is spent (a predecessor's asks, or
                    // other content created in the hour); no ask before GitHub's wait.
                    let pause = retry_after.unwrap_or(SECONDARY_LIMIT_PAUSE);
                    self.redelivery_pace.pause(pause);
                    warn!(delivery_id = attempt, %guid, pause_s = pause.as_secs(), "GitHub throttled a redelivery; the sweep pauses");
                    break;
                }
                Err(err) => {
                    // Asked again at the next run.
                    warn!(delivery_id = attempt, %guid, error = %error_chain(&err), "cannot redeliver a failed webhook delivery");
                }
            }
        }
        asked
    }

    /// Logs and counts an event given up; one a predecessor gave up is only noted.
    fn report_given_up(&self, event: &GivenUp) {
        let GivenUp {
            guid,
            attempt,
            status_code,
            asks,
            why,
            report,
        } = event;
        let reason = why.reason();
        if !report {
            info!(delivery_id = attempt, %guid, status_code, asks, reason, "failed webhook delivery given up before this process read it");
            return;
        }
        self.metrics.record(
            Metric::RedeliveriesGivenUp,
            &[(Dimension::Reason, reason)],
            1.0,
        );
        warn!(delivery_id = attempt, %guid, status_code, asks, reason, refused_asks_at_most = REFUSED_ASKS, "failed webhook delivery given up: redeliver it by hand once the cause is fixed");
    }
}
