//! [`UnroutedJobs`] in memory.

use crate::ports::StoreError;
use crate::ports::UnroutedJobs;
use crate::unrouted::UnroutedJob;
use async_trait::async_trait;
use std::sync::Mutex;

/// Unrouted jobs in memory, for tests.
#[derive(Debug, Default)]
pub struct MemoryUnroutedJobs {
    jobs: Mutex<Vec<UnroutedJob>>,
}

impl MemoryUnroutedJobs {
    pub fn new() -> MemoryUnroutedJobs {
        MemoryUnroutedJobs::default()
    }
}

#[async_trait]
impl UnroutedJobs for MemoryUnroutedJobs {
    async fn record_unrouted(&self, job: &UnroutedJob) -> Result<(), StoreError> {
        let mut jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        jobs.retain(|j| j.job_id != job.job_id);
        jobs.push(job.clone());
        Ok(())
    }

    async fn list_unrouted(&self) -> Result<Vec<UnroutedJob>, StoreError> {
        let mut jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner()).clone();
        jobs.sort_by_key(|j| (j.received_at, j.job_id));
        Ok(jobs)
    }
}
