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
/// jobs (the organization's registrations and AWS's quotas are shared, whatever the
/// number of Apps). `core_per_job` is the `core` calls a job costs (a burst's measured
/// count: job lookups, runner reads and deletions; the peer's queued check).
pub fn bounds(
    jobs: u32,
    batch: usize,
    quotas: &Quotas,
    pattern: Pattern,
    apps: u32,
    core_per_job: f64,
) -> Vec<(String, f64)> {
    let n = f64::from(jobs);
    let per_app = n / f64::from(apps.max(1));
    let bucket = |cost: f64, spec: crate::bucket::BucketSpec| {
        ((cost - spec.capacity) / spec.per_second).max(0.0)
    };
    let jit_points = |jobs: f64| bucket(jobs * 5.0, quotas.github_points);
    // A job a registration in a bucket of `per_hour`: whole hours for the windows before
    // the last, then the last window's rest at the points' pace.
    let registration_hours = {
        let per_window = f64::from(quotas.github_registration_hourly);
        let windows = (per_app / per_window).ceil().max(1.0);
        if windows > 1.0 {
            3600.0 * (windows - 1.0) + jit_points(per_app - per_window * (windows - 1.0))
        } else {
            0.0
        }
    };
    // `core`: the calls past each hour's 5,000 wait for the window's reset, then go at a
    // GET's points (1 each) of the endpoint's 900 a minute.
    let core_hours = {
        let calls = per_app * core_per_job;
        let per_window = f64::from(quotas.github_core_hourly);
        let windows = (calls / per_window).ceil().max(1.0);
        if windows > 1.0 {
            3600.0 * (windows - 1.0)
                + bucket(calls - per_window * (windows - 1.0), quotas.github_points)
        } else {
            0.0
        }
    };
    let mut all = vec![
        (
            "GitHub points per minute (generate-jitconfig)".to_owned(),
            jit_points(per_app),
        ),
        (
            "GitHub actions_runner_registration hourly budget".to_owned(),
            registration_hours,
        ),
        ("GitHub core hourly budget".to_owned(), core_hours),
    ];
    if let Some(org) = quotas.github_org_registrations {
        all.push((
            "GitHub runner registrations per organization (1,500 per 5 minutes)".to_owned(),
            bucket(n, org),
        ));
    }
    let batches = (n / batch as f64).ceil();
    all.extend([
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
    ]);
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
        let thousand = bounds(1_000, 10, &quotas, Pattern::Ephemera, 1, 0.0);
        assert_eq!(
            thousand[0].0,
            "GitHub points per minute (generate-jitconfig)"
        );
        assert!((thousand[0].1 - 4_100.0 / 15.0).abs() < 1e-9);
        // 10,000 registrations fit the registration bucket's hour, and their points
        // take 3,273 s; EC2's launch bucket (1,000, 2 a second) takes longer.
        let ten_thousand = bounds(10_000, 10, &quotas, Pattern::Ephemera, 1, 0.0);
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
        let twenty_thousand = bounds(20_000, 10, &quotas, Pattern::Ephemera, 1, 0.0);
        let registration = twenty_thousand
            .iter()
            .find(|(name, _)| name == "GitHub actions_runner_registration hourly budget");
        assert!((registration.unwrap().1 - (3_600.0 + 49_100.0 / 15.0)).abs() < 1e-9);
    }

    #[test]
    fn core_binds_from_its_hour_once_the_calls_pass_5000() {
        let quotas = Quotas::default();
        let core = |per_job| {
            bounds(10_000, 10, &quotas, Pattern::Ephemera, 1, per_job)
                .into_iter()
                .find(|(name, _)| name == "GitHub core hourly budget")
                .map(|(_, s)| s)
        };
        assert_eq!(core(0.0), Some(0.0));
        assert_eq!(core(0.5), Some(0.0), "5,000 calls fit the first hour");
        // 9,470 calls: 5,000 in the first hour, the rest after its reset at a GET's
        // point each (900 at once, then 15 a second).
        assert!((core(0.947).unwrap() - (3_600.0 + 3_570.0 / 15.0)).abs() < 1e-6);
    }

    #[test]
    fn the_organizations_registrations_cap_what_more_apps_add() {
        // EC2's launch bucket lifted, so that GitHub's limits are what binds.
        let quotas = Quotas {
            ec2_launch_resource: crate::bucket::BucketSpec {
                capacity: 10_000.0,
                per_second: 20.0,
            },
            ..Quotas::default()
        };
        let binding = |apps| bounds(10_000, 10, &quotas, Pattern::Ephemera, apps, 0.0)[0].clone();
        assert_eq!(
            binding(1).0,
            "GitHub points per minute (generate-jitconfig)"
        );
        let org = "GitHub runner registrations per organization (1,500 per 5 minutes)";
        // 8,500 past the first 1,500, at 5 a second: 1,700 s, where two Apps' points
        // alone would allow 1,606.7 s and three Apps' 1,051.1 s.
        assert_eq!(binding(2), (org.to_owned(), 1_700.0));
        assert_eq!(binding(3), (org.to_owned(), 1_700.0));
    }

    #[test]
    fn two_apps_halve_githubs_bounds_and_not_ec2s() {
        let quotas = Quotas::default();
        let bound = |apps, quota: &str| {
            bounds(10_000, 10, &quotas, Pattern::Ephemera, apps, 0.0)
                .into_iter()
                .find(|(name, _)| name == quota)
                .map(|(_, s)| s)
        };
        let points = "GitHub points per minute (generate-jitconfig)";
        assert!((bound(2, points).unwrap() - 24_100.0 / 15.0).abs() < 1e-9);
        let ec2 = "EC2 instances launched (resource bucket)";
        assert_eq!(bound(2, ec2), bound(1, ec2));
        assert_eq!(
            bounds(10_000, 10, &quotas, Pattern::Ephemera, 2, 0.0)[0].0,
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
        let thousand = bounds(1_000, 10, &quotas, Pattern::Ephemera, 1, 0.0);
        assert_eq!(thousand[0].0, "GitHub content creation (500 an hour)");
        // One hour for the first 500, then the rest at 80 a minute.
        assert!(
            (thousand[0].1 - (3_600.0 + 420.0 * 60.0 / 80.0)).abs() < 1e-9,
            "{thousand:?}"
        );
    }
}
