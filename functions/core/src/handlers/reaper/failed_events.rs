//! What the redelivery sweep decides for one failed `workflow_job` event, from GitHub's
//! own record of its attempts: ask for it now, wait, or give it up. Everything that
//! bounds the asks is read from the deliveries list (each attempt's `delivered_at`,
//! `status_code` and `redelivery`), so a process that starts afresh reads the same
//! count and the same window back and neither asks again nor reopens what its
//! predecessor had closed; what this process asked and GitHub has not listed yet is
//! added on top.
//!
//! GitHub's "Handling failed webhook deliveries"
//! (<https://docs.github.com/en/webhooks/using-webhooks/handling-failed-webhook-deliveries>)
//! says that GitHub does not redeliver by itself, that a script run on a schedule should
//! redeliver what failed, and that a delivery which fails repeatedly calls for
//! investigating its cause (each failed delivery gives its reason). The reason tells two
//! kinds apart: a 5xx, a timeout, no connection, a 408 or a 429 is the endpoint's
//! passing trouble, asked for again, spaced, for an hour; any other 4xx is the
//! endpoint's considered answer to this very request (401: its signature does not
//! match the stack's secret), which asking again does not change, so the same 4xx is
//! asked for only [`REFUSED_ASKS`] times, then given up and reported for someone to
//! investigate.

use super::redeliver::{retry_after, DELIVERY_LOOKBACK, LONGEST_RETRY};
use crate::ports::HookDelivery;
use std::collections::BTreeMap;
use std::time::Duration;
use time::OffsetDateTime;

/// Redeliveries asked at most for an event its newest attempts refused with one 4xx.
pub const REFUSED_ASKS: u32 = 3;

/// How far GitHub's `delivered_at` (whole seconds, its own clock) may lie before the
/// moment this process asked for the attempt.
const CLOCK_SLACK: Duration = Duration::from_secs(5);

/// One attempt at an event, as GitHub lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Attempt {
    status_code: u16,
    delivered_at: OffsetDateTime,
    redelivery: bool,
}

/// A `workflow_job` event whose every attempt read so far failed.
#[derive(Debug, Clone)]
pub(super) struct FailedEvent {
    /// Its attempts read, by delivery id.
    attempts: BTreeMap<u64, Attempt>,
    pub(super) action: Option<String>,
    /// Redeliveries this process asked, and when the first and the last were.
    own_asks: u32,
    first_own_ask: Option<OffsetDateTime>,
    last_own_ask: Option<OffsetDateTime>,
    /// Its wait was cut short once, a delivery having got through after its last ask.
    hurried: bool,
    /// Given up: never asked again; a delivered attempt still ends it.
    pub(super) given_up: bool,
}

/// Why an event is given up: the `Reason` of `RedeliveriesGivenUp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveUp {
    /// Refused [`REFUSED_ASKS`] times with 401: the webhook secrets disagree.
    Unauthorized,
    /// Refused [`REFUSED_ASKS`] times with another 4xx.
    Refused,
    /// Still failing (5xx, timeouts, throttles) a lookback after its first ask.
    WindowOver,
}

impl GiveUp {
    /// The metric's `Reason`.
    pub fn reason(self) -> &'static str {
        match self {
            GiveUp::Unauthorized => "unauthorized",
            GiveUp::Refused => "refused",
            GiveUp::WindowOver => "window_over",
        }
    }
}

/// What to do with an event now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    Ask,
    Wait,
    GiveUp(GiveUp),
}

/// Whether an answer is the endpoint refusing this request (a 4xx other than a timeout
/// or a throttle), rather than passing trouble.
pub fn refusal(status_code: u16) -> bool {
    (400..500).contains(&status_code) && status_code != 408 && status_code != 429
}

impl FailedEvent {
    pub(super) fn new(action: Option<String>) -> FailedEvent {
        FailedEvent {
            attempts: BTreeMap::new(),
            action,
            own_asks: 0,
            first_own_ask: None,
            last_own_ask: None,
            hurried: false,
            given_up: false,
        }
    }

    /// Adds a failed attempt read (again: an attempt is counted once).
    pub(super) fn add(&mut self, delivery: &HookDelivery) {
        self.attempts.insert(
            delivery.id,
            Attempt {
                status_code: delivery.status_code,
                delivered_at: delivery.delivered_at,
                redelivery: delivery.redelivery,
            },
        );
    }

    /// Notes a redelivery this process asked at `now`.
    pub(super) fn asked(&mut self, now: OffsetDateTime) {
        if self
            .last_ask()
            .is_some_and(|last| now < last + retry_after(self.asks()))
        {
            self.hurried = true;
        }
        self.own_asks += 1;
        self.first_own_ask.get_or_insert(now);
        self.last_own_ask = Some(now);
    }

    /// Its newest attempt read: the one GitHub is asked to send again.
    pub(super) fn newest(&self) -> Option<(u64, u16, OffsetDateTime)> {
        let (id, attempt) = self.attempts.last_key_value()?;
        Some((*id, attempt.status_code, attempt.delivered_at))
    }

    /// When its earliest attempt read was: the oldest are dropped first when too many.
    pub(super) fn first_failed_at(&self) -> Option<OffsetDateTime> {
        self.attempts.values().map(|a| a.delivered_at).min()
    }

    /// Redeliveries asked so far: those GitHub lists, or this process's own if more
    /// (one asked moments ago is not listed yet).
    pub(super) fn asks(&self) -> u32 {
        let listed = self.attempts.values().filter(|a| a.redelivery).count();
        u32::try_from(listed).unwrap_or(u32::MAX).max(self.own_asks)
    }

    pub(super) fn asked_here(&self) -> bool {
        self.own_asks > 0
    }

    fn listed_asks(&self) -> impl Iterator<Item = OffsetDateTime> + '_ {
        self.attempts
            .values()
            .filter(|a| a.redelivery)
            .map(|a| a.delivered_at)
    }

    /// The first ask, GitHub's record or this process's: the window starts there (not
    /// at the first attempt: a list unreadable for most of an hour still leaves the
    /// event its hour of asks).
    fn first_ask(&self) -> Option<OffsetDateTime> {
        self.listed_asks().chain(self.first_own_ask).min()
    }

    fn last_ask(&self) -> Option<OffsetDateTime> {
        self.listed_asks().chain(self.last_own_ask).max()
    }

    /// Redeliveries GitHub lists as answered with `status_code`, among its newest
    /// attempts that all answered it.
    fn refused_asks(&self, status_code: u16) -> u32 {
        let same = self
            .attempts
            .values()
            .rev()
            .take_while(|a| a.status_code == status_code)
            .filter(|a| a.redelivery)
            .count();
        u32::try_from(same).unwrap_or(u32::MAX)
    }

    /// Whether an ask of this process is not listed yet: GitHub lists a redelivery
    /// within seconds, so one not listed after the longest wait is not waited for.
    /// GitHub's times are whole seconds and its clock is not ours: the listed asks are
    /// counted from a little before this process's first.
    fn pending(&self, now: OffsetDateTime) -> bool {
        let (Some(first), Some(last)) = (self.first_own_ask, self.last_own_ask) else {
            return false;
        };
        let listed = self
            .listed_asks()
            .filter(|at| *at >= first - CLOCK_SLACK)
            .count();
        u32::try_from(listed).unwrap_or(u32::MAX) < self.own_asks && now < last + LONGEST_RETRY
    }

    /// What to do now. `got_through` is the newest delivery any event got through with.
    pub(super) fn verdict(
        &self,
        now: OffsetDateTime,
        got_through: Option<OffsetDateTime>,
    ) -> Verdict {
        let Some((_, status_code, _)) = self.newest() else {
            return Verdict::Wait;
        };
        if self.given_up {
            return Verdict::Wait;
        }
        let refused = refusal(status_code);
        let give_up = match status_code {
            401 => GiveUp::Unauthorized,
            _ if refused => GiveUp::Refused,
            _ => GiveUp::WindowOver,
        };
        // Only its redeliveries were read: its first attempt lies on a page not read yet,
        // or before the read-back (more than a lookback ago), and how often and since
        // when it was asked for is not known. A process that starts afresh does not
        // guess those low: it is not asked for until its first attempt is read.
        if !self.attempts.values().any(|a| !a.redelivery) {
            return Verdict::Wait;
        }
        if refused {
            return self.refused_verdict(status_code, give_up, now);
        }
        if self
            .first_ask()
            .is_some_and(|first| now >= first + DELIVERY_LOOKBACK)
        {
            return Verdict::GiveUp(give_up);
        }
        let Some(last) = self.last_ask() else {
            return Verdict::Ask;
        };
        if now >= last + retry_after(self.asks()) {
            return Verdict::Ask;
        }
        // A delivery got through after its last ask: the endpoint is back, so the event
        // need not wait out its spacing; once only, so that an event failing on its own
        // while others get through keeps its own spacing.
        if !self.hurried && got_through.is_some_and(|at| at > last) {
            return Verdict::Ask;
        }
        Verdict::Wait
    }

    fn refused_verdict(&self, status_code: u16, give_up: GiveUp, now: OffsetDateTime) -> Verdict {
        if self.refused_asks(status_code) >= REFUSED_ASKS {
            return Verdict::GiveUp(give_up);
        }
        if self.pending(now) {
            return Verdict::Wait;
        }
        match self.last_ask() {
            Some(last) if now < last + retry_after(self.asks()) => Verdict::Wait,
            _ => Verdict::Ask,
        }
    }
}
