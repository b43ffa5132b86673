//! The shared installation tokens of [`GitHubApp`]: taken from the deployment's
//! [`TokenShelf`] before one is minted, put on it once minted, withdrawn when GitHub
//! refuses one. Every failure of the shelf is logged and passed over: the process then
//! mints its own token, as it would without a shelf.

use super::TOKEN_REFRESH_MARGIN;
use crate::client::GitHubApp;
use ephemera_core::ports::{fingerprint_of, SharedToken};
use secrecy::{ExposeSecret, SecretString};
use time::OffsetDateTime;
use tracing::{debug, warn};

impl GitHubApp {
    /// The shelved token of the installation, if it is usable beyond the refresh margin
    /// and is not `refused`.
    pub(super) async fn shared_token(
        &self,
        installation_id: u64,
        refused: Option<&SecretString>,
    ) -> Option<SharedToken> {
        let shelf = self.shelf.as_ref()?;
        let shared = match shelf.read(self.app_id, installation_id).await {
            Ok(shared) => shared?,
            Err(err) => {
                warn!(installation_id, error = %err, "cannot read the shared installation token; minting one");
                return None;
            }
        };
        let expired = self.now() >= shared.expires_at - TOKEN_REFRESH_MARGIN;
        let was_refused =
            refused.is_some_and(|refused| refused.expose_secret() == shared.token.expose_secret());
        if expired || was_refused {
            debug!(
                installation_id,
                expired, was_refused, "shared installation token not used"
            );
            return None;
        }
        debug!(installation_id, expires_at = %shared.expires_at, "installation token taken from the shelf");
        Some(shared)
    }

    /// Puts a minted token on the shelf.
    pub(super) async fn shelve_shared(
        &self,
        installation_id: u64,
        token: &SecretString,
        expires_at: OffsetDateTime,
    ) {
        let Some(shelf) = &self.shelf else { return };
        let shared = SharedToken {
            token: token.clone(),
            expires_at,
        };
        if let Err(err) = shelf.shelve(self.app_id, installation_id, &shared).await {
            warn!(installation_id, error = %err, "cannot share the installation token");
        }
    }

    /// Takes a token GitHub refused off the shelf, unless another one replaced it.
    pub(super) async fn withdraw_shared(&self, installation_id: u64, refused: &SecretString) {
        let Some(shelf) = &self.shelf else { return };
        let fingerprint = fingerprint_of(refused);
        if let Err(err) = shelf
            .withdraw(self.app_id, installation_id, &fingerprint)
            .await
        {
            warn!(installation_id, error = %err, "cannot withdraw the refused installation token");
        }
    }
}
