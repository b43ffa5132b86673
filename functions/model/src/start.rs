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

/// A draw of one stage: from its late part for its share of draws, else from its body.
fn draw_stage(stage: &Stage, rng: &mut StdRng) -> f64 {
    match stage.late {
        Some(late) if rng.random::<f64>() < late.share => draw(late.latency, rng),
        _ => draw(stage.latency, rng),
    }
}

/// One job's queued → started, in seconds.
pub fn one_start(stages: &[Stage], rng: &mut StdRng) -> f64 {
    let mut on = |track: Track| -> f64 {
        stages
            .iter()
            .filter(|stage| stage.track == track)
            .map(|stage| draw_stage(stage, rng))
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

/// The stage with the largest median: the one that costs the most, named where a goal
/// is missed.
pub fn costliest(stages: &[Stage]) -> Option<&Stage> {
    stages
        .iter()
        .max_by(|a, b| a.latency.median.cmp(&b.latency.median))
}

fn row(name: &str, stages: &[Stage], seed: u64, goal: Option<f64>) -> Value {
    let (p50, p99) = percentiles(stages, SAMPLES, seed);
    let costliest = costliest(stages);
    let costliest_median = costliest.map(|stage| stage.latency.median.as_secs_f64());
    let listed: Vec<Value> = stages
        .iter()
        .map(|stage| {
            json!({
                "stage": stage.name,
                "median_s": milli(stage.latency.median.as_secs_f64()),
                "p99_s": milli(stage.latency.p99.as_secs_f64()),
                "late": stage.late.map(|late| json!({
                    "share": late.share,
                    "median_s": milli(late.latency.median.as_secs_f64()),
                    "p99_s": milli(late.latency.p99.as_secs_f64()),
                })),
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
        "costliest_stage": costliest.map(|stage| stage.name),
        "costliest_stage_median_s": costliest_median.map(milli),
        // Whether that one stage's median is already past the goal: then no other stage
        // could be made fast enough to meet it.
        "costliest_stage_alone_misses_goal": goal.zip(costliest_median).map(|(goal, median)| median > goal),
        "stages": listed,
    })
}

/// GitHub's primary rate limit for unauthenticated REST requests, per originating address
/// (docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api: "The primary
/// rate limit for unauthenticated requests is 60 requests per hour", by originating IP).
pub const GITHUB_UNAUTHENTICATED_PER_HOUR: u32 = 60;

/// Of `boots` stock hosts that start within one hour behind one address (a NAT gateway's),
/// how many meet GitHub's unauthenticated limit when each makes `anonymous_calls` (the old
/// bootstrap read the release notes once, for the tarball's SHA-256; the bucket made it 0).
pub fn boots_refused_in_an_hour(boots: u32, anonymous_calls: u32) -> u32 {
    match anonymous_calls {
        0 => 0,
        calls => boots.saturating_sub(GITHUB_UNAUTHENTICATED_PER_HOUR / calls),
    }
}

/// The stock burst against GitHub's unauthenticated limit, before and with the bucket.
fn anonymous_limit(burst: u32) -> Value {
    json!({
        "unauthenticated_per_hour": GITHUB_UNAUTHENTICATED_PER_HOUR,
        "burst": burst,
        "refused_before_bucket": boots_refused_in_an_hour(burst, 1),
        "refused_with_bucket": boots_refused_in_an_hour(burst, 0),
        "source": "docs.github.com, Rate limits for the REST API: 60 unauthenticated requests an hour per originating IP address; hosts in private subnets share their NAT gateway's address",
    })
}

/// bench/model.json's `start_latency`: ephemera's host modes (a stale baked image among
/// them), the peer, and the stock burst against GitHub's unauthenticated limit.
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
        "stock_anonymous_limit": anonymous_limit(100),
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
    fn a_stale_image_without_the_bucket_starts_later_by_the_self_update() {
        let (baked, stale) = (p50(Host::Baked), p50(Host::BakedStaleSelfUpdate));
        let update = crate::stages::RUNNER_SELF_UPDATE
            .latency
            .median
            .as_secs_f64();
        // log-normal sums: the p50s part by about the stage's median, never by nothing
        assert!(stale - baked > update * 0.8, "{baked} {stale} {update}");
        assert!(stale - baked < update * 1.5, "{baked} {stale} {update}");
        let (_, baked_p99) = percentiles(&stages(Host::Baked, &Latencies::default()), 4_000, 7);
        let (_, stale_p99) = percentiles(
            &stages(Host::BakedStaleSelfUpdate, &Latencies::default()),
            4_000,
            7,
        );
        assert!(stale_p99 > baked_p99 + update, "{baked_p99} {stale_p99}");
    }

    #[test]
    fn only_a_stale_image_without_the_bucket_updates_after_assignment() {
        let updates = |host| {
            stages(host, &Latencies::default())
                .iter()
                .any(|stage| stage.name.contains("self-update"))
        };
        assert!(updates(Host::BakedStaleSelfUpdate));
        for host in [Host::Stock, Host::Baked, Host::BakedStale, Host::Warm] {
            assert!(!updates(host), "{host:?}");
        }
    }

    #[test]
    fn a_stale_image_swapping_from_the_bucket_pays_one_download_at_boot() {
        let boot = crate::host::boot_stages(Host::BakedStale);
        let fetches: Vec<_> = boot
            .iter()
            .filter(|stage| stage.name.contains("bucket"))
            .collect();
        assert_eq!(fetches.len(), 1, "{boot:?}");
        let (baked, swapped, updated) = (
            p50(Host::Baked),
            p50(Host::BakedStale),
            p50(Host::BakedStaleSelfUpdate),
        );
        assert!(
            baked < swapped && swapped < updated,
            "{baked} {swapped} {updated}"
        );
    }

    #[test]
    fn the_stock_host_takes_the_runner_from_the_bucket_not_github() {
        let stock = stages(Host::Stock, &Latencies::default());
        let download = stock
            .iter()
            .find(|stage| stage.name.contains("download"))
            .expect("a download stage");
        assert!(download.name.contains("bucket"), "{download:?}");
        assert!(download.source.text().contains("S3"), "{download:?}");
    }

    #[test]
    fn stock_boots_behind_one_address_meet_githubs_limit_only_without_the_bucket() {
        assert_eq!(boots_refused_in_an_hour(60, 1), 0);
        assert_eq!(boots_refused_in_an_hour(100, 1), 40);
        assert_eq!(boots_refused_in_an_hour(100, 2), 70);
        assert_eq!(boots_refused_in_an_hour(10_000, 0), 0);
        let limit = anonymous_limit(100);
        assert_eq!(limit["refused_before_bucket"], 40);
        assert_eq!(limit["refused_with_bucket"], 0);
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
