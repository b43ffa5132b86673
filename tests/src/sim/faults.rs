//! GitHub misbehaving, on purpose and reproducibly: server errors, a rate-limit window,
//! latency on the REST API, duplicated, lost and reordered webhook deliveries — and one
//! fault of the runner hosts: a hung host that never powers off.
//!
//! A test sets a [`SimFaults`] in its [`SimConfig`](super::SimConfig) or switches it
//! with [`SimHandle::set_faults`](super::SimHandle::set_faults). Every decision is a
//! pure function of the seed, the route (`METHOD /template`, or the webhook action) and
//! how many times that route was seen before, so the n-th call to a route meets the
//! same fate in every run with the same seed, however the calls to *different* routes
//! interleave. A failing test prints its seed; rerun it with that seed to reproduce.

use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

/// What to break, and how often.
#[derive(Debug, Clone, PartialEq)]
pub struct SimFaults {
    /// Seeds every decision.
    pub seed: u64,
    /// Share of REST answers (0.0 to 1.0) replaced by a 500, 502 or 503; the request
    /// is not applied, as when GitHub's front end fails.
    pub server_error_rate: f64,
    /// One window during which every REST call is refused as rate-limited.
    pub rate_limit: Option<RateLimitWindow>,
    /// Added to every REST answer.
    pub latency: Duration,
    /// Up to this much more, drawn per answer.
    pub latency_jitter: Duration,
    /// Share of webhook deliveries sent twice (same delivery id, as a redelivery).
    pub duplicate_webhooks: f64,
    /// Share of webhook deliveries never sent.
    pub lost_webhooks: f64,
    /// Share of webhook deliveries held back for `reorder_delay`, so later ones overtake.
    pub reordered_webhooks: f64,
    pub reorder_delay: Duration,
    /// Share of runner hosts that stay up when their runner exits (a hung host: the
    /// power-off never happens, the instance keeps running).
    pub hung_hosts: f64,
}

impl Default for SimFaults {
    /// No faults at all.
    fn default() -> Self {
        SimFaults {
            seed: 0,
            server_error_rate: 0.0,
            rate_limit: None,
            latency: Duration::ZERO,
            latency_jitter: Duration::ZERO,
            duplicate_webhooks: 0.0,
            lost_webhooks: 0.0,
            reordered_webhooks: 0.0,
            reorder_delay: Duration::from_millis(1500),
            hung_hosts: 0.0,
        }
    }
}

/// A stretch of time in which GitHub refuses every REST call as over its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitWindow {
    /// The window opens at this REST call (counted from the simulator's start, or from
    /// the last `set_faults`).
    pub after_calls: u64,
    pub duration: Duration,
    pub kind: RateLimitKind,
}

/// How GitHub says "slow down".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateLimitKind {
    /// 403, `x-ratelimit-remaining: 0` and `x-ratelimit-reset` (epoch seconds).
    Primary,
    /// 403 with `retry-after` and the "secondary rate limit" message.
    Secondary,
    /// 429 with `retry-after`.
    TooManyRequests,
}

/// What happens to one REST call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestFate {
    Serve,
    ServerError(u16),
    /// Refused until `until` (tokio time).
    RateLimited {
        kind: RateLimitKind,
        until: Instant,
    },
}

/// What happens to one webhook delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryFate {
    Send,
    Lose,
    Duplicate,
    Delay(Duration),
}

/// The faults in force and what they have seen so far.
#[derive(Debug, Default)]
pub struct FaultState {
    faults: SimFaults,
    seen: HashMap<String, u64>,
    rest_calls: u64,
    window_until: Option<Instant>,
}

impl FaultState {
    pub fn new(faults: SimFaults) -> FaultState {
        FaultState {
            faults,
            ..FaultState::default()
        }
    }

    /// Replaces the faults and starts counting afresh.
    pub fn replace(&mut self, faults: SimFaults) {
        *self = FaultState::new(faults);
    }

    /// The next draw in [0, 1) for `key`.
    fn draw(&mut self, key: &str) -> f64 {
        let n = self.seen.entry(key.to_owned()).or_default();
        *n += 1;
        unit(self.faults.seed, key, *n)
    }

    /// Decides one REST call to `route` (`METHOD /template`) at `now`; also returns the
    /// latency to add.
    pub fn rest(&mut self, route: &str, now: Instant) -> (RestFate, Duration) {
        self.rest_calls += 1;
        let f = &self.faults;
        let jitter = f
            .latency_jitter
            .mul_f64(unit(f.seed, "latency", self.rest_calls));
        let latency = f.latency + jitter;
        if let Some(window) = f.rate_limit {
            if self.window_until.is_none() && self.rest_calls >= window.after_calls.max(1) {
                self.window_until = Some(now + window.duration);
            }
            if let Some(until) = self.window_until.filter(|until| now < *until) {
                let kind = window.kind;
                return (RestFate::RateLimited { kind, until }, latency);
            }
        }
        let rate = self.faults.server_error_rate;
        let value = self.draw(route);
        if value < rate {
            // Which 5xx: the position of the draw inside the failing band.
            let status = [500, 502, 503][((value / rate) * 3.0) as usize % 3];
            return (RestFate::ServerError(status), latency);
        }
        (RestFate::Serve, latency)
    }

    /// Whether the next host whose runner exits hangs instead of powering off.
    pub fn host_hangs(&mut self) -> bool {
        self.draw("host power-off") < self.faults.hung_hosts
    }

    /// Decides one delivery of `action`.
    pub fn delivery(&mut self, action: &str) -> DeliveryFate {
        let value = self.draw(&format!("webhook {action}"));
        let f = &self.faults;
        if value < f.lost_webhooks {
            DeliveryFate::Lose
        } else if value < f.lost_webhooks + f.duplicate_webhooks {
            DeliveryFate::Duplicate
        } else if value < f.lost_webhooks + f.duplicate_webhooks + f.reordered_webhooks {
            DeliveryFate::Delay(f.reorder_delay)
        } else {
            DeliveryFate::Send
        }
    }
}

/// A number in [0, 1) from the seed, a key and a counter: FNV-1a of the key, mixed with
/// SplitMix64 (both stable across platforms and Rust versions, unlike `DefaultHasher`).
fn unit(seed: u64, key: &str, n: u64) -> f64 {
    let fnv = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let mut z = seed ^ fnv ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for _ in 0..2 {
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
    }
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTE: &str = "POST /orgs/{org}/actions/runners/generate-jitconfig";

    fn fates(faults: SimFaults, calls: usize) -> Vec<RestFate> {
        let mut state = FaultState::new(faults);
        let now = Instant::now();
        (0..calls).map(|_| state.rest(ROUTE, now).0).collect()
    }

    #[test]
    fn the_same_seed_gives_the_same_faults_and_another_seed_others() {
        let faults = |seed| SimFaults {
            seed,
            server_error_rate: 0.2,
            ..SimFaults::default()
        };
        assert_eq!(fates(faults(7), 200), fates(faults(7), 200));
        assert_ne!(fates(faults(7), 200), fates(faults(8), 200));
    }

    #[test]
    fn server_errors_come_at_about_the_rate_asked_with_every_5xx() {
        let faults = SimFaults {
            seed: 42,
            server_error_rate: 0.2,
            ..SimFaults::default()
        };
        let all = fates(faults, 5000);
        let failed: Vec<u16> = all
            .iter()
            .filter_map(|f| match f {
                RestFate::ServerError(status) => Some(*status),
                _ => None,
            })
            .collect();
        assert!((850..1150).contains(&failed.len()), "{}", failed.len());
        for status in [500, 502, 503] {
            assert!(failed.contains(&status));
        }
        assert!(fates(SimFaults::default(), 500)
            .iter()
            .all(|f| *f == RestFate::Serve));
    }

    #[test]
    fn the_rate_limit_window_opens_at_its_call_and_closes_after_its_duration() {
        let window = RateLimitWindow {
            after_calls: 3,
            duration: Duration::from_secs(2),
            kind: RateLimitKind::Primary,
        };
        let mut state = FaultState::new(SimFaults {
            rate_limit: Some(window),
            ..SimFaults::default()
        });
        let t0 = Instant::now();
        assert_eq!(state.rest(ROUTE, t0).0, RestFate::Serve);
        assert_eq!(state.rest(ROUTE, t0).0, RestFate::Serve);
        let until = t0 + Duration::from_secs(2);
        let limited = RestFate::RateLimited {
            kind: RateLimitKind::Primary,
            until,
        };
        assert_eq!(state.rest(ROUTE, t0).0, limited);
        assert_eq!(state.rest(ROUTE, t0 + Duration::from_secs(1)).0, limited);
        assert_eq!(state.rest(ROUTE, until).0, RestFate::Serve);
        // One window only.
        assert_eq!(state.rest(ROUTE, until).0, RestFate::Serve);
    }

    #[test]
    fn deliveries_are_lost_duplicated_or_delayed_in_their_shares() {
        let mut state = FaultState::new(SimFaults {
            seed: 3,
            lost_webhooks: 0.1,
            duplicate_webhooks: 0.1,
            reordered_webhooks: 0.1,
            ..SimFaults::default()
        });
        let fates: Vec<DeliveryFate> = (0..3000).map(|_| state.delivery("queued")).collect();
        let count = |wanted: fn(&DeliveryFate) -> bool| fates.iter().filter(|f| wanted(f)).count();
        for share in [
            count(|f| *f == DeliveryFate::Lose),
            count(|f| *f == DeliveryFate::Duplicate),
            count(|f| matches!(f, DeliveryFate::Delay(_))),
        ] {
            assert!((220..380).contains(&share), "{share}");
        }
    }

    #[test]
    fn latency_stays_within_base_and_jitter() {
        let mut state = FaultState::new(SimFaults {
            latency: Duration::from_millis(10),
            latency_jitter: Duration::from_millis(5),
            ..SimFaults::default()
        });
        for _ in 0..100 {
            let (_, latency) = state.rest(ROUTE, Instant::now());
            assert!(latency >= Duration::from_millis(10) && latency <= Duration::from_millis(15));
        }
    }
}
