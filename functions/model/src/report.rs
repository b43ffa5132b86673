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
pub fn bounds(jobs: u32, batch: usize, quotas: &Quotas, pattern: Pattern) -> Vec<(String, f64)> {
    let n = f64::from(jobs);
    let bucket = |cost: f64, spec: crate::bucket::BucketSpec| {
        ((cost - spec.capacity) / spec.per_second).max(0.0)
    };
    let jit_points = |jobs: f64| bucket(jobs * 5.0, quotas.github_points);
    let calls_per_job = match pattern {
        Pattern::Ephemera => 1.0,
        Pattern::Peer => 2.0,
    };
    let per_window = f64::from(quotas.github_hourly) / calls_per_job;
    let windows = (n / per_window).ceil().max(1.0);
    let hourly = if windows > 1.0 {
        3600.0 * (windows - 1.0) + jit_points(n - per_window * (windows - 1.0))
    } else {
        0.0
    };
    let batches = (n / batch as f64).ceil();
    let mut all = vec![
        (
            "GitHub points per minute (generate-jitconfig)".to_owned(),
            jit_points(n),
        ),
        ("GitHub installation hourly budget".to_owned(), hourly),
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
    all.sort_by(|a, b| b.1.total_cmp(&a.1));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_points_bind_a_thousand_jobs_and_the_hourly_budget_ten_thousand() {
        let quotas = Quotas::default();
        let thousand = bounds(1_000, 10, &quotas, Pattern::Ephemera);
        assert_eq!(
            thousand[0].0,
            "GitHub points per minute (generate-jitconfig)"
        );
        assert!((thousand[0].1 - 4_100.0 / 15.0).abs() < 1e-9);
        let ten_thousand = bounds(10_000, 10, &quotas, Pattern::Ephemera);
        assert_eq!(ten_thousand[0].0, "GitHub installation hourly budget");
        assert!((ten_thousand[0].1 - (3_600.0 + 24_100.0 / 15.0)).abs() < 1e-9);
    }
}
