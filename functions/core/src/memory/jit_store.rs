//! [`MemoryJitStore`]: where JIT configs wait for their instances, as a map.
//!
//! Keyed by instance id, as the DynamoDB item is keyed by the instance's ARN, so a test
//! can check that the config went to the instance launched for the runner and that the
//! reaper removed it. A put of an earlier registration than the one stored is refused, as
//! the DynamoDB adapter's conditional put refuses it.

use super::{lock, spend, InjectedFailure};
use crate::ports::{JitConfig, JitConfigStore, JitStoreError};
use async_trait::async_trait;
use secrecy::SecretString;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Construct with [`MemoryJitStore::new`]; read with [`get`](MemoryJitStore::get).
#[derive(Debug, Default)]
pub struct MemoryJitStore {
    state: Mutex<JitStoreState>,
}

#[derive(Debug, Default)]
struct JitStoreState {
    /// instance id → (runner name, GitHub runner id, JIT config)
    stored: BTreeMap<String, (String, u64, SecretString)>,
    failures: u32,
    puts: usize,
    deletes: usize,
}

impl MemoryJitStore {
    pub fn new() -> MemoryJitStore {
        MemoryJitStore::default()
    }

    /// The runner name and JIT config stored for `instance_id`.
    pub fn get(&self, instance_id: &str) -> Option<(String, SecretString)> {
        let state = lock(&self.state);
        let (runner, _, config) = state.stored.get(instance_id)?;
        Some((runner.clone(), config.clone()))
    }

    /// The instance ids that have a JIT config waiting, sorted.
    pub fn instance_ids(&self) -> Vec<String> {
        lock(&self.state).stored.keys().cloned().collect()
    }

    /// Reads and removes the JIT config for `instance_id`, as the runner's bootstrap script
    /// does on its instance (no call counted, no injected failure spent).
    pub fn take(&self, instance_id: &str) -> Option<(String, SecretString)> {
        let (runner, _, config) = lock(&self.state).stored.remove(instance_id)?;
        Some((runner, config))
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
        if let Some((_, stored, _)) = state.stored.get(instance_id) {
            if *stored > jit.runner_id {
                return Err(JitStoreError::Superseded { stored: *stored });
            }
        }
        let value = (runner_name.to_owned(), jit.runner_id, jit.encoded.clone());
        state.stored.insert(instance_id.to_owned(), value);
        Ok(())
    }

    async fn delete(&self, instance_id: &str) -> Result<(), JitStoreError> {
        let mut state = lock(&self.state);
        state.deletes += 1;
        if spend(&mut state.failures) {
            return Err(JitStoreError::Transient(Box::new(InjectedFailure(
                "delete JIT config",
            ))));
        }
        state.stored.remove(instance_id);
        Ok(())
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
        store.delete("i-1").await.expect("delete");
        store.delete("i-1").await.expect("already gone is deleted");
        assert!(store.instance_ids().is_empty());
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
