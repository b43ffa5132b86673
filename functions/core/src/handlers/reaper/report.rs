//! What one run of the reaper did, step by step: the Lambda function's answer (whole,
//! as JSON), and what the tests read.

/// What one run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReaperReport {
    /// Runners seen online for the first time.
    pub came_online: usize,
    pub deleted: usize,
    /// Deletions put off because the runner is running a job.
    pub busy: usize,
    /// Deletions put off after a provider error (backing off).
    pub backed_off: usize,
    /// Live records a reconciliation rule sent to `pending_delete`.
    pub sent_to_delete: usize,
    /// Instances and GitHub runners that no live record claimed, removed.
    pub orphans_reaped: usize,
    /// Queued jobs with no runner that were put back in the queue.
    pub requeued: usize,
    /// In-progress job items without a live runner that GitHub showed finished.
    pub jobs_settled: usize,
    /// Failed webhook deliveries GitHub was asked to redeliver.
    pub redelivered: usize,
    /// Pool counters set back to what the live records hold.
    pub counters_repaired: usize,
    /// Warm runners reserved and handed to the scaler to reach `min_idle`.
    pub warm_requested: usize,
    /// Stopped pool instances reserved and handed to the scaler to prepare, to reach
    /// each pool's `stopped`.
    pub stopped_requested: usize,
    /// Prices read from the providers' price lists (at most daily per type and market).
    pub prices_read: usize,
    /// Interrupted jobs GitHub was asked to re-run.
    pub reruns_asked: usize,
    /// The runner copy's step, when it ran (see [`crate::releases`]).
    pub runner_release: Option<crate::releases::SyncOutcome>,
    /// Work left for the next run because the deadline came.
    pub left_for_next_run: bool,
    /// Another run held the reaper lease, so this one did nothing.
    pub another_run_held_the_lease: bool,
}
