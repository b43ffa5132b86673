//! [`MemoryJitStore`]: where JIT configs wait for their instances, as a map.
//!
//! Keyed by instance id, as the DynamoDB item is keyed by the instance's ARN, so a test
//! can check that the config went to the instance launched for the runner and that the
//! reaper removed it. A put of an earlier registration than the one stored is refused, as
//! the DynamoDB adapter's conditional put refuses it. The instance's read leaves a
//! tombstone (the config gone, the read's time kept), as the bootstrap's `UpdateItem`
//! does, and the reaper's delete hands that time back.

use super::{lock, spend, InjectedFailure};
use crate::model::HostRunner;
use crate::ports::{JitConfig, JitConfigStore, JitStoreError, Tombstone};
use async_trait::async_trait;
use secrecy::SecretString;
use std::collections::BTreeMap;
use std::sync::Mutex;
use time::OffsetDateTime;

/// Construct with [`MemoryJitStore::new`]; read with [`get`](MemoryJitStore::get).
#[derive(Debug, Default)]
pub struct MemoryJitStore {
    state: Mutex<JitStoreState>,
}

/// One instance's item: its config until the instance reads it, then the read's time.
#[derive(Debug)]
struct Item {
    runner: String,
    runner_id: u64,
    config: Option<SecretString>,
    read_at: Option<OffsetDateTime>,
    /// What the host wrote of its runner with the read.
    host_runner: HostRunner,
    /// A stopped pool's `prepare` item: no config, never read.
    prepare: bool,
}

#[derive(Debug, Default)]
struct JitStoreState {
    /// instance id → its item
    stored: BTreeMap<String, Item>,
    failures: u32,
    puts: usize,
    deletes: usize,
}

impl MemoryJitStore {
    pub fn new() -> MemoryJitStore {
        MemoryJitStore::default()
    }

    /// The runner name and JIT config waiting for `instance_id` (none once read).
    pub fn get(&self, instance_id: &str) -> Option<(String, SecretString)> {
        let state = lock(&self.state);
        let item = state.stored.get(instance_id)?;
        Some((item.runner.clone(), item.config.clone()?))
    }

    /// The instance ids that have a JIT config waiting, sorted.
    pub fn instance_ids(&self) -> Vec<String> {
        let state = lock(&self.state);
        let waiting = state
            .stored
            .iter()
            .filter(|(_, item)| item.config.is_some());
        waiting.map(|(id, _)| id.clone()).collect()
    }

    /// The instance ids whose read of their config left a tombstone, sorted.
    pub fn tombstones(&self) -> Vec<String> {
        let state = lock(&self.state);
        let read = state
            .stored
            .iter()
            .filter(|(_, item)| item.config.is_none() && !item.prepare);
        read.map(|(id, _)| id.clone()).collect()
    }

    /// Whether `instance_id`'s item is a `prepare` item (no config in it).
    pub fn prepared(&self, instance_id: &str) -> bool {
        let state = lock(&self.state);
        state
            .stored
            .get(instance_id)
            .is_some_and(|item| item.prepare)
    }

    /// When `instance_id` read its config, if its tombstone is there.
    pub fn read_at(&self, instance_id: &str) -> Option<OffsetDateTime> {
        lock(&self.state).stored.get(instance_id)?.read_at
    }

    /// Reads the JIT config for `instance_id` and leaves a tombstone stamped `at`, as the
    /// runner's bootstrap script does on its instance (no call counted, no injected
    /// failure spent). `None` when no config waits (none stored, or already read).
    pub fn take(&self, instance_id: &str, at: OffsetDateTime) -> Option<(String, SecretString)> {
        self.take_reporting(instance_id, at, HostRunner::default())
    }

    /// [`take`](Self::take), the tombstone also naming the runner the host ran, as a
    /// bootstrap that reports it writes it.
    pub fn take_reporting(
        &self,
        instance_id: &str,
        at: OffsetDateTime,
        runner: HostRunner,
    ) -> Option<(String, SecretString)> {
        let mut state = lock(&self.state);
        let item = state.stored.get_mut(instance_id)?;
        let config = item.config.take()?;
        item.read_at = Some(at);
        item.host_runner = runner;
        Some((item.runner.clone(), config))
    }

    /// Makes the next `times` calls (`put` or `delete`) fail with
    /// [`JitStoreError::Transient`] and change nothing.
    pub fn fail_next(&self, times: u32) {
        lock(&self.state).failures = times;
    }

    /// Calls of `put` and of `delete`, failed ones included.
    pub fn calls(&self) -> (usize, usize) {
        let state = lock(&self.state);
        (state.puts, state.deletes)
    }
}

#[async_trait]
impl JitConfigStore for MemoryJitStore {
    async fn put(
        &self,
        instance_id: &str,
        runner_name: &str,
        jit: &JitConfig,
    ) -> Result<(), JitStoreError> {
        let mut state = lock(&self.state);
        state.puts += 1;
        if spend(&mut state.failures) {
            return Err(JitStoreError::Transient(Box::new(InjectedFailure(
                "put JIT config",
            ))));
        }
        if let Some(item) = state.stored.get(instance_id) {
            if item.runner_id > jit.runner_id {
                return Err(JitStoreError::Superseded {
                    stored: item.runner_id,
                });
            }
        }
        let item = Item {
            runner: runner_name.to_owned(),
            runner_id: jit.runner_id,
            config: Some(jit.encoded.clone()),
            read_at: None,
            host_runner: HostRunner::default(),
            prepare: false,
        };
        state.stored.insert(instance_id.to_owned(), item);
        Ok(())
    }

    async fn put_prepare(&self, instance_id: &str, runner_name: &str) -> Result<(), JitStoreError> {
        let mut state = lock(&self.state);
        state.puts += 1;
        if spend(&mut state.failures) {
            return Err(JitStoreError::Transient(Box::new(InjectedFailure(
                "put prepare item",
            ))));
        }
        // Only where nothing is stored: a config put meanwhile is never replaced.
        state
            .stored
            .entry(instance_id.to_owned())
            .or_insert_with(|| Item {
                runner: runner_name.to_owned(),
                runner_id: 0,
                config: None,
                read_at: None,
                host_runner: HostRunner::default(),
                prepare: true,
            });
        Ok(())
    }

    async fn delete(&self, instance_id: &str) -> Result<Tombstone, JitStoreError> {
        let mut state = lock(&self.state);
        state.deletes += 1;
        if spend(&mut state.failures) {
            return Err(JitStoreError::Transient(Box::new(InjectedFailure(
                "delete JIT config",
            ))));
        }
        // The adapter asks the old item back only of a tombstone: a config is never read.
        let removed = state.stored.remove(instance_id);
        let tombstone = removed.filter(|item| item.config.is_none());
        Ok(tombstone.map_or_else(Tombstone::default, |item| Tombstone {
            read_at: item.read_at,
            runner: item.host_runner,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    fn jit(runner_id: u64, encoded: &str) -> JitConfig {
        JitConfig {
            runner_id,
            encoded: SecretString::from(encoded),
        }
    }

    #[tokio::test]
    async fn a_later_registration_replaces_and_delete_of_an_absent_config_succeeds() {
        let store = MemoryJitStore::new();
        store.put("i-1", "r", &jit(1, "one")).await.expect("put");
        store.put("i-1", "r", &jit(1, "one")).await.expect("again");
        store.put("i-1", "r", &jit(2, "two")).await.expect("put");
        let (runner, config) = store.get("i-1").expect("stored");
        assert_eq!((runner.as_str(), config.expose_secret()), ("r", "two"));
        assert_eq!(
            store.delete("i-1").await.expect("delete"),
            Tombstone::default(),
            "never read"
        );
        let gone = store.delete("i-1").await.expect("already gone is deleted");
        assert_eq!(gone, Tombstone::default());
        assert!(store.instance_ids().is_empty());
    }

    #[tokio::test]
    async fn the_read_leaves_a_tombstone_whose_time_the_delete_returns() {
        let store = MemoryJitStore::new();
        let at = time::macros::datetime!(2026-11-22 10:00:07 UTC);
        store.put("i-1", "r", &jit(1, "one")).await.expect("put");
        let (runner, config) = store.take("i-1", at).expect("waiting");
        assert_eq!((runner.as_str(), config.expose_secret()), ("r", "one"));
        assert!(store.take("i-1", at).is_none(), "read once");
        assert!(store.get("i-1").is_none(), "no config left");
        assert!(store.instance_ids().is_empty(), "no config waits");
        assert_eq!(store.tombstones(), ["i-1"], "the tombstone stays");
        assert_eq!(store.read_at("i-1"), Some(at));
        assert_eq!(store.delete("i-1").await.expect("delete").read_at, Some(at));
        assert!(store.tombstones().is_empty());
    }

    #[tokio::test]
    async fn the_tombstone_hands_back_the_runner_the_host_reported() {
        let store = MemoryJitStore::new();
        let at = time::macros::datetime!(2026-11-22 10:00:07 UTC);
        let ran = HostRunner {
            runner_version: Some("2.337.0".into()),
            runner_image_version: Some("2.336.0".into()),
            runner_swap_ms: Some(4_200),
        };
        store.put("i-1", "r", &jit(1, "one")).await.expect("put");
        store
            .take_reporting("i-1", at, ran.clone())
            .expect("waiting");
        let tombstone = store.delete("i-1").await.expect("delete");
        assert_eq!(tombstone.read_at, Some(at));
        assert_eq!(tombstone.runner, ran);
    }

    #[tokio::test]
    async fn an_earlier_registration_does_not_clobber_a_later_one() {
        let store = MemoryJitStore::new();
        store.put("i-1", "r", &jit(7, "seven")).await.expect("put");
        let late = store.put("i-1", "r", &jit(6, "six")).await;
        assert!(matches!(late, Err(JitStoreError::Superseded { stored: 7 })));
        let (_, config) = store.get("i-1").expect("stored");
        assert_eq!(config.expose_secret(), "seven");
    }
}
