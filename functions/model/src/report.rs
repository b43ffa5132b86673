//! What a burst measured (the timeline of launches and registrations), and the bound
//! the binding quota alone allows: how long N jobs take if nothing but that quota
//! stood in the way.

use crate::quotas::Quotas;
use std::sync::{Mutex, MutexGuard, PoisonError};
use time::OffsetDateTime;
use tokio::time::Instant;

#[derive(Default)]
struct Marks {
    queued_to_launch: Vec<f64>,
    launched: u32,
    all_launched: Option<f64>,
    registered: u32,
    all_registered: Option<f64>,
}

/// When each job's launch was requested and its runner registered, in simulated seconds
/// since the burst began.
pub struct Timeline {
    jobs: u32,
    started: Instant,
    base: OffsetDateTime,
    marks: Mutex<Marks>,
}

impl Timeline {
    pub fn new(jobs: u32, base: OffsetDateTime) -> Timeline {
        Timeline {
            jobs,
            started: Instant::now(),
            base,
            marks: Mutex::new(Marks::default()),
        }
    }

    fn marks(&self) -> MutexGuard<'_, Marks> {
        self.marks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The wall-clock time of the simulation now.
    pub fn now(&self) -> OffsetDateTime {
        self.base + self.started.elapsed()
    }

    pub fn elapsed_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// An instance was recorded for the runner of a job queued at `queued_at`.
    pub fn launched(&self, queued_at: Option<OffsetDateTime>) {
        let now = self.now();
        let elapsed = self.elapsed_s();
        let mut marks = self.marks();
        if let Some(queued_at) = queued_at {
            marks
                .queued_to_launch
                .push((now - queued_at).as_seconds_f64());
        }
        marks.launched += 1;
        if marks.launched == self.jobs {
            marks.all_launched = Some(elapsed);
        }
    }

    /// A runner's JIT config was delivered.
    pub fn registered(&self) {
        let elapsed = self.elapsed_s();
        let mut marks = self.marks();
        marks.registered += 1;
        if marks.registered == self.jobs {
            marks.all_registered = Some(elapsed);
        }
    }

    pub fn registered_count(&self) -> u32 {
        self.marks().registered
    }

    /// (all launched, all registered, queued → launch p50, p99), in seconds.
    pub fn summary(&self) -> (Option<f64>, Option<f64>, Option<f64>, Option<f64>) {
        let marks = self.marks();
        let mut sorted = marks.queued_to_launch.clone();
        sorted.sort_by(f64::total_cmp);
        let pick = |p: f64| {
            (!sorted.is_empty()).then(|| sorted[((sorted.len() - 1) as f64 * p).round() as usize])
        };
        (
            marks.all_launched,
            marks.all_registered,
            pick(0.5),
            pick(0.99),
        )
    }
}

/// The call pattern a bound is computed for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    Ephemera,
    /// terraform-aws-github-runner: a queued check (GET) and an SSM write per job.
    Peer,
}

/// The time each quota alone allows for `jobs` jobs, the longest first: (quota, s).
/// GitHub's limits are each App's: with `apps` Apps, each registers its share of the
/// jobs (AWS's quotas are the account's, whatever the number of Apps).
pub fn bounds(
    jobs: u32,
    batch: usize,
    quotas: &Quotas,
    pattern: Pattern,
    apps: u32,
) -> Vec<(String, f64)> {
    let n = f64::from(jobs);
    let per_app = n / f64::from(apps.max(1));
    let bucket = |cost: f64, spec: crate::bucket::BucketSpec| {
        ((cost - spec.capacity) / spec.per_second).max(0.0)
    };
    let jit_points = |jobs: f64| bucket(jobs * 5.0, quotas.github_points);
    // `calls_per_job` calls a job in a bucket of `per_hour`: whole hours for the windows
    // before the last, then the last window's rest at the points' pace.
    let hourly = |per_hour: u32, calls_per_job: f64| {
        if calls_per_job == 0.0 {
            return 0.0;
        }
        let per_window = f64::from(per_hour) / calls_per_job;
        let windows = (per_app / per_window).ceil().max(1.0);
        if windows > 1.0 {
            3600.0 * (windows - 1.0) + jit_points(per_app - per_window * (windows - 1.0))
        } else {
            0.0
        }
    };
    // ephemera spends no core call per job (the installation token is minted with the
    // App's JWT, once an hour); the peer checks each job (GET) in core.
    let core_per_job = match pattern {
        Pattern::Ephemera => 0.0,
        Pattern::Peer => 1.0,
    };
    let batches = (n / batch as f64).ceil();
    let mut all = vec![
        (
            "GitHub points per minute (generate-jitconfig)".to_owned(),
            jit_points(per_app),
        ),
        (
            "GitHub actions_runner_registration hourly budget".to_owned(),
            hourly(quotas.github_registration_hourly, 1.0),
        ),
        (
            "GitHub core hourly budget".to_owned(),
            hourly(quotas.github_core_hourly, core_per_job),
        ),
        (
            "EC2 instances launched (resource bucket)".to_owned(),
            bucket(n, quotas.ec2_launch_resource),
        ),
        (
            "EC2 CreateFleet requests".to_owned(),
            bucket(batches, quotas.ec2_create_fleet),
        ),
        (
            "DynamoDB pool item partition".to_owned(),
            ((2.0 * n - quotas.dynamodb_partition_wcu) / quotas.dynamodb_partition_wcu).max(0.0),
        ),
    ];
    if pattern == Pattern::Peer {
        all.push(("SSM PutParameter".to_owned(), bucket(n, quotas.ssm_put)));
    }
    if let Some(limit) = quotas.github_content_creation {
        let per_minute = bucket(per_app, limit.per_minute);
        all.push((
            "GitHub content creation (80 a minute)".to_owned(),
            per_minute,
        ));
        // Whole hours of 500, then the last hour's rest at 80 a minute.
        let per_hour = f64::from(limit.per_hour);
        let windows = (per_app / per_hour).ceil().max(1.0);
        let last = per_app - per_hour * (windows - 1.0);
        let hours = if windows > 1.0 {
            3600.0 * (windows - 1.0) + bucket(last, limit.per_minute)
        } else {
            0.0
        };
        all.push(("GitHub content creation (500 an hour)".to_owned(), hours));
    }
    all.sort_by(|a, b| b.1.total_cmp(&a.1));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_points_bind_a_thousand_jobs_and_ten_thousand() {
        let quotas = Quotas::default();
        let thousand = bounds(1_000, 10, &quotas, Pattern::Ephemera, 1);
        assert_eq!(
            thousand[0].0,
            "GitHub points per minute (generate-jitconfig)"
        );
        assert!((thousand[0].1 - 4_100.0 / 15.0).abs() < 1e-9);
        // 10,000 registrations fit the registration bucket's hour, and their points
        // take 3,273 s; EC2's launch bucket (1,000, 2 a second) takes longer.
        let ten_thousand = bounds(10_000, 10, &quotas, Pattern::Ephemera, 1);
        assert_eq!(
            ten_thousand[0].0,
            "EC2 instances launched (resource bucket)"
        );
        assert!((ten_thousand[0].1 - 9_000.0 / 2.0).abs() < 1e-9);
        let points = ten_thousand
            .iter()
            .find(|(name, _)| name == "GitHub points per minute (generate-jitconfig)");
        assert!((points.unwrap().1 - 49_100.0 / 15.0).abs() < 1e-9);
        let registration = ten_thousand
            .iter()
            .find(|(name, _)| name == "GitHub actions_runner_registration hourly budget");
        assert_eq!(registration.map(|(_, s)| *s), Some(0.0));
    }

    #[test]
    fn past_its_hour_the_registration_bucket_binds() {
        let quotas = Quotas::default();
        let twenty_thousand = bounds(20_000, 10, &quotas, Pattern::Ephemera, 1);
        let registration = twenty_thousand
            .iter()
            .find(|(name, _)| name == "GitHub actions_runner_registration hourly budget");
        assert!((registration.unwrap().1 - (3_600.0 + 49_100.0 / 15.0)).abs() < 1e-9);
    }

    #[test]
    fn the_peer_spends_core_per_job_and_ephemera_does_not() {
        let quotas = Quotas::default();
        let core = |pattern| {
            bounds(10_000, 10, &quotas, pattern, 1)
                .into_iter()
                .find(|(name, _)| name == "GitHub core hourly budget")
                .map(|(_, s)| s)
        };
        assert_eq!(core(Pattern::Ephemera), Some(0.0));
        assert!((core(Pattern::Peer).unwrap() - (3_600.0 + 24_100.0 / 15.0)).abs() < 1e-9);
    }

    #[test]
    fn two_apps_halve_githubs_bounds_and_not_ec2s() {
        let quotas = Quotas::default();
        let bound = |apps, quota: &str| {
            bounds(10_000, 10, &quotas, Pattern::Ephemera, apps)
                .into_iter()
                .find(|(name, _)| name == quota)
                .map(|(_, s)| s)
        };
        let points = "GitHub points per minute (generate-jitconfig)";
        assert!((bound(2, points).unwrap() - 24_100.0 / 15.0).abs() < 1e-9);
        let ec2 = "EC2 instances launched (resource bucket)";
        assert_eq!(bound(2, ec2), bound(1, ec2));
        assert_eq!(
            bounds(10_000, 10, &quotas, Pattern::Ephemera, 2)[0].0,
            ec2,
            "EC2's launch bucket binds two Apps' burst"
        );
    }

    #[test]
    fn the_content_creation_limit_when_applied_binds_at_500_an_hour() {
        let quotas = Quotas {
            github_content_creation: Some(crate::quotas::ContentCreation::documented()),
            ..Quotas::default()
        };
        let thousand = bounds(1_000, 10, &quotas, Pattern::Ephemera, 1);
        assert_eq!(thousand[0].0, "GitHub content creation (500 an hour)");
        // One hour for the first 500, then the rest at 80 a minute.
        assert!(
            (thousand[0].1 - (3_600.0 + 420.0 * 60.0 / 80.0)).abs() < 1e-9,
            "{thousand:?}"
        );
    }
}
