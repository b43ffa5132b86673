//! Exclusive, expiring leases on a named piece of work: what makes "one reaper at a
//! time" hold by construction. EventBridge delivers a schedule at least once and retries
//! an asynchronous invocation that failed, so two reapers can start together; the one
//! that does not get the lease leaves at once. A holder that dies leaves a lease that
//! expires by itself.

use crate::ports::StoreError;
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::Mutex;
use time::OffsetDateTime;

/// Leases kept beside the records (an item of the table).
#[async_trait]
pub trait Leases: Send + Sync {
    /// Takes the lease `name` for `holder` until `until`, if nobody holds it or its
    /// holder's time is over at `now`. Conditional: of two callers at once, exactly one
    /// gets `true`.
    async fn acquire(
        &self,
        name: &str,
        holder: &str,
        until: OffsetDateTime,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError>;

    /// Gives the lease back if `holder` still holds it; idempotent, and never takes a
    /// lease someone else has taken since.
    async fn release(&self, name: &str, holder: &str) -> Result<(), StoreError>;
}

/// [`Leases`] in memory, for unit tests.
#[derive(Debug, Default)]
pub struct MemoryLeases {
    held: Mutex<HashMap<String, (String, OffsetDateTime)>>,
}

impl MemoryLeases {
    /// Who holds `name` now, if anyone.
    pub fn holder(&self, name: &str) -> Option<String> {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.get(name).map(|(holder, _)| holder.clone())
    }
}

#[async_trait]
impl Leases for MemoryLeases {
    async fn acquire(
        &self,
        name: &str,
        holder: &str,
        until: OffsetDateTime,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.get(name).is_some_and(|(_, expires)| *expires > now) {
            return Ok(false);
        }
        held.insert(name.to_owned(), (holder.to_owned(), until));
        Ok(true)
    }

    async fn release(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.get(name).is_some_and(|(h, _)| h == holder) {
            held.remove(name);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::Duration;

    #[tokio::test]
    async fn a_held_lease_is_refused_until_released_or_expired() {
        let leases = MemoryLeases::default();
        let now = OffsetDateTime::UNIX_EPOCH + Duration::days(1);
        let until = now + Duration::minutes(1);
        assert!(leases.acquire("reaper", "a", until, now).await.unwrap());
        assert!(!leases.acquire("reaper", "b", until, now).await.unwrap());
        // Only the holder gives it back.
        leases.release("reaper", "b").await.unwrap();
        assert_eq!(leases.holder("reaper").as_deref(), Some("a"));
        leases.release("reaper", "a").await.unwrap();
        assert!(leases.acquire("reaper", "b", until, now).await.unwrap());
        // A holder that died: its lease is over at `until`.
        assert!(leases.acquire("reaper", "c", until, until).await.unwrap());
    }
}
