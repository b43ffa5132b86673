//! One reaper at a time: a run first takes the `reaper` lease (see [`crate::ports::Leases`])
//! until its deadline and a margin, and gives it back at its end. A run that finds the
//! lease held does nothing and says so; so does a retried or doubly delivered schedule.

use super::{Reaper, ReaperReport};
use crate::ports::Leases;
use crate::ports::StoreError;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::time::Instant;
use tracing::{info, warn};

/// The lease's name.
pub const REAPER_LEASE: &str = "reaper";
/// How long a lease outlives its run's deadline: a run past its deadline finishes only
/// the step in hand, and a holder that died frees the lease this long after.
pub const LEASE_MARGIN: Duration = Duration::from_secs(60);

impl Reaper {
    /// Runs [`Reaper::run_unleased`] if this run gets the lease; otherwise returns a
    /// report saying another run holds it.
    pub(super) async fn run_leased(
        &self,
        leases: &dyn Leases,
        now: OffsetDateTime,
        deadline: Instant,
    ) -> Result<ReaperReport, StoreError> {
        let holder = format!("{:016x}", rand::random::<u64>());
        let left = deadline.saturating_duration_since(Instant::now());
        let until = now + left + LEASE_MARGIN;
        if !leases.acquire(REAPER_LEASE, &holder, until, now).await? {
            info!("another reaper run holds the lease; this one does nothing");
            return Ok(ReaperReport {
                another_run_held_the_lease: true,
                ..ReaperReport::default()
            });
        }
        let result = self.run_unleased(now, deadline).await;
        if let Err(err) = leases.release(REAPER_LEASE, &holder).await {
            warn!(error = %crate::handlers::error_chain(&err), "cannot give the reaper lease back; it expires by itself");
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryLeases;
    use crate::memory::*;
    use std::sync::Arc;

    fn reaper() -> Reaper {
        let config = crate::config::Config::parse(
            "test",
            "deployment: eph\ngithub:\n  app_id: 1\npools:\n  - name: linux\n    labels: [linux]\n    max_runners: 2\n    instance_types: [t3.micro]\n    launch_template: lt\n",
        )
        .expect("test config");
        Reaper::bare(
            Arc::new(config),
            Arc::new(MemoryStore::default()),
            Arc::new(FakeFleet::default()),
            Arc::new(FakeForge::default()),
            Arc::new(MemoryJitStore::default()),
            Arc::new(MemoryQueue::default()),
        )
    }

    #[tokio::test]
    async fn a_second_run_while_the_first_holds_the_lease_does_nothing() {
        let leases = Arc::new(MemoryLeases::default());
        let now = OffsetDateTime::now_utc();
        let deadline = Instant::now() + Duration::from_secs(30);
        let until = now + Duration::from_secs(90);
        assert!(leases
            .acquire(REAPER_LEASE, "first", until, now)
            .await
            .unwrap());
        let second = reaper().with_lease(leases.clone());
        let report = second.run(now, deadline).await.unwrap();
        assert!(report.another_run_held_the_lease);
        assert_eq!(leases.holder(REAPER_LEASE).as_deref(), Some("first"));
    }

    #[tokio::test]
    async fn a_run_gives_the_lease_back_at_its_end() {
        let leases = Arc::new(MemoryLeases::default());
        let reaper = reaper().with_lease(leases.clone());
        let now = OffsetDateTime::now_utc();
        let deadline = Instant::now() + Duration::from_secs(30);
        let report = reaper.run(now, deadline).await.unwrap();
        assert!(!report.another_run_held_the_lease);
        assert_eq!(leases.holder(REAPER_LEASE), None);
        let again = reaper.run(now, deadline).await.unwrap();
        assert!(!again.another_run_held_the_lease);
    }
}
