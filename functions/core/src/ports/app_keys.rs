//! [`AppKeySource`]: where the App's private key is kept, read again when GitHub
//! refuses the key in use.
//!
//! No in-memory fake: the GitHub client's tests give it a source that rotates. Adapter:
//! `ephemera_aws::secrets::AppKeySecret` (Secrets Manager).

use super::Cause;
use async_trait::async_trait;
use secrecy::SecretString;

/// Why the App's private key could not be read again.
#[derive(Debug, thiserror::Error)]
pub enum AppKeyError {
    /// The store could not be read; its own error says why.
    #[error("{0}")]
    Unreadable(Cause),
    /// The store holds something that is not a PEM private key (a new stack's
    /// placeholder). `place` names it, as [`AppKeySource::name`] does.
    #[error("{place} does not hold a PEM private key")]
    NotAKey { place: String },
}

/// Where the App's private key is kept (a secret store), read again when GitHub
/// refuses the key in use. The GitHub client takes one; the mains wire the store.
#[async_trait]
pub trait AppKeySource: Send + Sync {
    /// The key as it is there now, PEM. Read-only; every call reads the store.
    async fn current_key(&self) -> Result<SecretString, AppKeyError>;
    /// Where the key is kept, for the log.
    fn name(&self) -> String;
}
