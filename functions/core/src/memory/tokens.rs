//! [`MemoryTokenShelf`]: the shared installation-token shelf in memory, keeping the
//! DynamoDB adapter's conditions (a later expiry stays; a withdrawal names its token).

use crate::ports::{fingerprint_of, SharedToken, StoreError, TokenShelf};
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Tokens by (App, installation), with a count of every call.
#[derive(Default)]
pub struct MemoryTokenShelf {
    tokens: Mutex<HashMap<(u64, u64), SharedToken>>,
    calls: Mutex<ShelfCalls>,
    failing: AtomicBool,
}

/// How often each method was called.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShelfCalls {
    pub reads: u32,
    pub shelves: u32,
    pub withdrawals: u32,
    /// Calls answered with an error (see [`MemoryTokenShelf::fail_every_call`]).
    pub failed: u32,
}

impl MemoryTokenShelf {
    /// An empty shelf.
    pub fn new() -> MemoryTokenShelf {
        MemoryTokenShelf::default()
    }

    /// What is shelved for the App's installation.
    pub fn shelved(&self, app_id: u64, installation_id: u64) -> Option<SharedToken> {
        lock(&self.tokens).get(&(app_id, installation_id)).cloned()
    }

    /// The calls so far.
    pub fn calls(&self) -> ShelfCalls {
        *lock(&self.calls)
    }

    /// From now on every call fails, as a table that refuses the process would.
    pub fn fail_every_call(&self) {
        self.failing.store(true, Ordering::SeqCst);
    }

    /// Counts a call; an error when the shelf was told to fail.
    fn count(&self, pick: impl FnOnce(&mut ShelfCalls) -> &mut u32) -> Result<(), StoreError> {
        let mut calls = lock(&self.calls);
        *pick(&mut calls) += 1;
        if self.failing.load(Ordering::SeqCst) {
            calls.failed += 1;
            return Err(StoreError::Transient("the shelf is failing".into()));
        }
        Ok(())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[async_trait]
impl TokenShelf for MemoryTokenShelf {
    async fn read(
        &self,
        app_id: u64,
        installation_id: u64,
    ) -> Result<Option<SharedToken>, StoreError> {
        self.count(|c| &mut c.reads)?;
        Ok(self.shelved(app_id, installation_id))
    }

    async fn shelve(
        &self,
        app_id: u64,
        installation_id: u64,
        token: &SharedToken,
    ) -> Result<(), StoreError> {
        self.count(|c| &mut c.shelves)?;
        let mut tokens = lock(&self.tokens);
        let key = (app_id, installation_id);
        if tokens
            .get(&key)
            .is_none_or(|held| held.expires_at < token.expires_at)
        {
            tokens.insert(key, token.clone());
        }
        Ok(())
    }

    async fn withdraw(
        &self,
        app_id: u64,
        installation_id: u64,
        fingerprint: &str,
    ) -> Result<(), StoreError> {
        self.count(|c| &mut c.withdrawals)?;
        let mut tokens = lock(&self.tokens);
        let key = (app_id, installation_id);
        if tokens
            .get(&key)
            .is_some_and(|held| fingerprint_of(&held.token) == fingerprint)
        {
            tokens.remove(&key);
        }
        Ok(())
    }
}
