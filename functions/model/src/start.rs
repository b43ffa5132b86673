//! A job's start latency, queued → started, for each host mode and the peer: each
//! stage of [`crate::host`] drawn from its distribution and composed as the flow runs
//! them (the JIT config is registered while the instance boots, and the instance reads it
//! once both are done), many times over, for p50 and p99. The result is
//! bench/model.json's `start_latency`.

use crate::host::{peer_stages, stages, Host, Stage, Track};
use crate::quotas::{Latencies, Latency};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

/// Jobs drawn per mode.
pub const SAMPLES: usize = 20_000;

/// A draw from `latency`: log-normal through its median and p99, as
/// [`crate::cloud::Cloud::draw`] draws the burst's calls.
fn draw(latency: Latency, rng: &mut StdRng) -> f64 {
    let median = latency.median.as_secs_f64();
    if median <= 0.0 {
        return 0.0;
    }
    let sigma = (latency.p99.as_secs_f64() / median).max(1.0).ln() / 2.326;
    let u1: f64 = rng.random_range(f64::EPSILON..1.0);
    let u2: f64 = rng.random();
    let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
    median * (sigma * z).exp()
}

/// One job's queued → started, in seconds.
pub fn one_start(stages: &[Stage], rng: &mut StdRng) -> f64 {
    let mut on = |track: Track| -> f64 {
        stages
            .iter()
            .filter(|stage| stage.track == track)
            .map(|stage| draw(stage.latency, rng))
            .sum()
    };
    let control = on(Track::Control);
    let registration = on(Track::Registration);
    let boot = on(Track::Boot);
    let online = on(Track::Online);
    let assignment = on(Track::Assignment);
    control + registration.max(boot) + online + assignment
}

/// (p50, p99) of queued → started over `samples` jobs, in seconds.
pub fn percentiles(stages: &[Stage], samples: usize, seed: u64) -> (f64, f64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut all: Vec<f64> = (0..samples.max(1))
        .map(|_| one_start(stages, &mut rng))
        .collect();
    all.sort_by(f64::total_cmp);
    let pick = |p: f64| all[((all.len() - 1) as f64 * p).round() as usize];
    (pick(0.5), pick(0.99))
}

fn tenth(seconds: f64) -> f64 {
    (seconds * 10.0).round() / 10.0
}

fn milli(seconds: f64) -> f64 {
    (seconds * 1_000.0).round() / 1_000.0
}

fn row(name: &str, stages: &[Stage], seed: u64, goal: Option<f64>) -> Value {
    let (p50, p99) = percentiles(stages, SAMPLES, seed);
    let listed: Vec<Value> = stages
        .iter()
        .map(|stage| {
            json!({
                "stage": stage.name,
                "median_s": milli(stage.latency.median.as_secs_f64()),
                "p99_s": milli(stage.latency.p99.as_secs_f64()),
                "source": stage.source.text(),
            })
        })
        .collect();
    json!({
        "host": name,
        "p50_s": tenth(p50),
        "p99_s": tenth(p99),
        "goal_p50_s": goal,
        "goal_met": goal.map(|goal| p50 <= goal),
        "stages": listed,
    })
}

/// bench/model.json's `start_latency`: ephemera's three host modes and the peer.
pub fn start_latency(seed: u64) -> Value {
    let latencies = Latencies::default();
    let modes: Vec<Value> = Host::ALL
        .iter()
        .map(|&host| {
            let goal = host.goal_p50().map(|goal| goal.as_secs_f64());
            row(host.name(), &stages(host, &latencies), seed, goal)
        })
        .collect();
    json!({
        "samples": SAMPLES,
        "seed": seed,
        "modes": modes,
        "peer": {
            "terraform-aws-github-runner": row("stock (its defaults)", &peer_stages(&latencies), seed, None),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p50(host: Host) -> f64 {
        percentiles(&stages(host, &Latencies::default()), 4_000, 7).0
    }

    #[test]
    fn a_baked_host_never_installs_or_downloads_at_boot() {
        let names: Vec<&str> = stages(Host::Baked, &Latencies::default())
            .iter()
            .map(|stage| stage.name)
            .collect();
        assert!(
            names
                .iter()
                .all(|name| !name.contains("install") && !name.contains("download")),
            "{names:?}"
        );
        let stock = stages(Host::Stock, &Latencies::default());
        assert!(stock.iter().any(|stage| stage.name.contains("install")));
        assert!(stock.iter().any(|stage| stage.name.contains("download")));
    }

    #[test]
    fn a_warm_runner_only_waits_for_github_to_assign_the_job() {
        let warm = stages(Host::Warm, &Latencies::default());
        assert!(
            warm.iter().all(|stage| stage.track == Track::Assignment),
            "{warm:?}"
        );
    }

    #[test]
    fn stock_starts_later_than_baked_and_baked_later_than_warm() {
        let (stock, baked, warm) = (p50(Host::Stock), p50(Host::Baked), p50(Host::Warm));
        assert!(stock > baked && baked > warm, "{stock} {baked} {warm}");
    }

    #[test]
    fn the_peer_waits_at_least_its_webhook_delay() {
        let (p50, _) = percentiles(&peer_stages(&Latencies::default()), 1_000, 3);
        let (stock, _) = percentiles(&stages(Host::Stock, &Latencies::default()), 1_000, 3);
        assert!(p50 > 30.0 && p50 > stock, "{p50} {stock}");
    }

    #[test]
    fn a_seed_gives_the_same_figures_and_another_seed_others() {
        let stock = stages(Host::Stock, &Latencies::default());
        assert_eq!(percentiles(&stock, 500, 11), percentiles(&stock, 500, 11));
        assert_ne!(percentiles(&stock, 500, 11), percentiles(&stock, 500, 12));
    }

    #[test]
    fn the_instance_reads_its_config_once_both_boot_and_registration_are_done() {
        let slow_registration = Latency {
            median: std::time::Duration::from_secs(100),
            p99: std::time::Duration::from_secs(100),
        };
        let mut slow = stages(Host::Baked, &Latencies::default());
        for stage in &mut slow {
            if stage.track == Track::Registration {
                stage.latency = slow_registration;
            }
        }
        let (p50, _) = percentiles(&slow, 200, 5);
        assert!(p50 > 100.0 * 2.0, "{p50}");
    }

    #[test]
    fn the_bursts_instances_boot_as_the_stock_host_does() {
        let boot = Latencies::default().instance_boot;
        assert_eq!(boot.median, crate::host::boot_latency(Host::Stock).median);
        assert!(crate::host::boot_latency(Host::Baked).median < boot.median);
    }

    #[test]
    fn every_stage_names_its_source_or_why_it_is_assumed() {
        let latencies = Latencies::default();
        let all = Host::ALL
            .iter()
            .flat_map(|&host| stages(host, &latencies))
            .chain(peer_stages(&latencies));
        for stage in all {
            assert!(stage.source.text().len() > 20, "{stage:?}");
        }
    }
}
