//! Jobs meant for us that no pool takes (a `runs-on` typo, a pool not configured, a
//! sizing label the pool's policy refuses), kept where an operator can list them: the webhook writes one small record per such job, and `ephemera jobs
//! list --status unrouted` reads them back. The record is a trace, not a task: nothing
//! acts on it, it expires on its own, and failing to write it never fails a delivery.
//! The record is kept here; where it is kept is the port
//! [`UnroutedJobs`](crate::ports::UnroutedJobs).

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// How long an unrouted job's record is kept (DynamoDB's time-to-live deletes it then).
pub const UNROUTED_TTL: time::Duration = time::Duration::days(7);

/// A `queued` job that names our labels but that no pool takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnroutedJob {
    pub job_id: u64,
    pub run_id: u64,
    pub owner: String,
    pub repo: String,
    pub labels: Vec<String>,
    /// Why no pool takes it ([`crate::routing::Routing::Unrouted`]); empty in records
    /// written before reasons were kept.
    #[serde(default)]
    pub reason: String,
    pub installation_id: Option<u64>,
    /// `X-GitHub-Delivery` of the webhook that brought it.
    pub delivery_id: String,
    #[serde(with = "time::serde::rfc3339")]
    pub received_at: OffsetDateTime,
}
