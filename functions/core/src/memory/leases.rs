//! [`Leases`] in memory: one map of held leases behind a mutex, each acquire conditional
//! as the table's is.

use crate::ports::Leases;
use crate::ports::StoreError;
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::Mutex;
use time::OffsetDateTime;

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
