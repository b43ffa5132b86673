//! `slot_drift`, slot counter drift: each pool's counter should equal the slots its live
//! records hold. The records come from the status index, which lags and is read one
//! status at a time, while the scaler claims concurrently; so a difference is repaired
//! only when the counter has not changed for [`COUNTER_SETTLE`], the same difference
//! (same counter, same change time, same count) was seen in the previous run too, and
//! the write is conditional on the counter still being exactly what was read.

use super::decide::{self, COUNTER_SETTLE};
use super::{Reaper, Snapshot};
use crate::ports::StoreError;
use time::OffsetDateTime;
use tracing::warn;

impl Reaper {
    /// Repairs the drifted counters that have settled; returns how many were repaired.
    pub(super) async fn repair_counters(
        &self,
        snapshot: &Snapshot,
        now: OffsetDateTime,
    ) -> Result<usize, StoreError> {
        if !snapshot.complete {
            return Ok(0);
        }
        let mut repaired = 0;
        for (pool, held) in decide::slots_held(&self.config, &snapshot.runners) {
            let counter = self.store.pool_counter(&pool).await?;
            let settled = counter
                .updated_at
                .is_none_or(|at| now - at >= COUNTER_SETTLE);
            if counter.slots_used == held || !settled {
                self.memory().drift.remove(&pool);
                continue;
            }
            let sighting = (counter.clone(), held);
            let seen_before = self.memory().drift.get(&pool) == Some(&sighting);
            if !seen_before {
                self.memory().drift.insert(pool, sighting);
                continue;
            }
            if self
                .store
                .repair_pool_counter(&pool, &counter, held, now)
                .await?
            {
                warn!(rule = "slot_drift", %pool, counter = counter.slots_used, live = held, "pool counter drifted; repaired");
                repaired += 1;
            }
            self.memory().drift.remove(&pool);
        }
        Ok(repaired)
    }
}
