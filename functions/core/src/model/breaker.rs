//! A pool's spot circuit breaker as the table keeps it; what it decides is
//! [`crate::breaker`]'s.

use std::collections::BTreeMap;
use time::OffsetDateTime;

/// A pool's recent interruptions and whether spot is paused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpotBreakerState {
    /// When each interrupted instance was reported, by instance id.
    pub interrupted: BTreeMap<String, OffsetDateTime>,
    /// Spot launches wait until then.
    pub paused_until: Option<OffsetDateTime>,
}
