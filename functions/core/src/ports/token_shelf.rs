//! [`TokenShelf`]: installation tokens shared by every process of a deployment.
//!
//! GitHub issues an installation token for an hour, and each mint spends a call of the
//! App's `core` bucket. Cached per process only, every new Lambda execution environment
//! (and every CLI run) mints its own: at tens of concurrent environments the mints alone
//! are a visible share of the budget. The shelf keeps one token per App and
//! installation where every process of the deployment finds it (the runners table), so
//! a token is minted once and used until shortly before it expires.
//!
//! The shelf is an optimisation, never a dependency: a process that cannot read or write
//! it mints its own token, as it would without one.
//!
//! Fake: `memory::MemoryTokenShelf`. Adapter: `ephemera_aws::token_shelf::DynamoTokenShelf`.

use super::StoreError;
use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

/// An installation token and when GitHub said it expires.
#[derive(Clone)]
pub struct SharedToken {
    pub token: SecretString,
    pub expires_at: OffsetDateTime,
}

impl SharedToken {
    /// The token's SHA-256, hex: what a withdrawal names, so that a token another process
    /// shelved since is never withdrawn by mistake, and no condition carries the token.
    pub fn fingerprint(&self) -> String {
        fingerprint_of(&self.token)
    }
}

impl std::fmt::Debug for SharedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedToken")
            .field("token", &"[redacted]")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// The SHA-256 of `token`, hex.
pub fn fingerprint_of(token: &SecretString) -> String {
    hex::encode(Sha256::digest(token.expose_secret().as_bytes()))
}

/// Where the processes of a deployment share installation tokens.
#[async_trait]
pub trait TokenShelf: Send + Sync {
    /// The token shelved for the App's installation, whatever its expiry (the caller
    /// decides whether it is still usable).
    async fn read(
        &self,
        app_id: u64,
        installation_id: u64,
    ) -> Result<Option<SharedToken>, StoreError>;

    /// Shelves `token`, unless the shelf holds one that expires later (a process that
    /// minted at the same time): the later one stays.
    async fn shelve(
        &self,
        app_id: u64,
        installation_id: u64,
        token: &SharedToken,
    ) -> Result<(), StoreError>;

    /// Takes the token whose fingerprint is `fingerprint` off the shelf (GitHub refused
    /// it); a different token shelved since stays.
    async fn withdraw(
        &self,
        app_id: u64,
        installation_id: u64,
        fingerprint: &str,
    ) -> Result<(), StoreError>;
}
