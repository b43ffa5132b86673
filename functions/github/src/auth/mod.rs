//! Who the App is to GitHub: the App JWT, installation lookup, installation tokens.
//!
//! App-level endpoints take a short-lived RS256 JWT signed with the App's private key;
//! everything about runners and jobs takes an installation token, which GitHub issues
//! for an hour. Tokens are cached per installation and reused until five minutes before
//! they expire, so a burst of jobs costs one token request, not one per job. The calls
//! are made here, as the App ([`GitHubApp::send_as_app`]) or as an installation
//! ([`GitHubApp::as_installation`]); [`crate::http`] only sends them with the bearer it
//! is given.
//!
//! Tokens are also shared across the deployment's processes through a [`shelf`], when
//! one is wired: a process takes the shelved token before it mints one.
//!
//! A refused token: when GitHub answers 401 to a call made with an installation token
//! (revoked, or expired early), the token is dropped (here and from the shelf) and the
//! call made once more with a new one, never the refused one again.
//!
//! A rotated key is [`key`]'s: the App JWT's signing key, read again from its
//! [`AppKeySource`](ephemera_core::ports::AppKeySource) when GitHub refuses it.

mod key;
mod shelf;

pub use key::KEY_REREAD_GAP;
pub(crate) use key::{AppKey, KeySlot};

use crate::client::{lock, GitHubApp};
use crate::http::{Call, Endpoint, Reply};
use ephemera_core::ports::ForgeError;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use time::{Duration, OffsetDateTime};
use tracing::{debug, warn};

/// A cached token is replaced this long before it expires, so no call carries a token
/// that expires in flight.
pub(crate) const TOKEN_REFRESH_MARGIN: Duration = Duration::minutes(5);

const ACCESS_TOKEN: Endpoint = Endpoint::new("access_token", &[]);
const INSTALLATION: Endpoint = Endpoint::new("installation", &[]);

struct CachedToken {
    token: SecretString,
    expires_at: OffsetDateTime,
}

/// Installation tokens by installation id.
///
/// The map sits behind a plain mutex, never held across a request. Fetching is
/// single-flight per installation: the first task that misses takes that installation's
/// async lock and fetches; tasks that miss meanwhile wait on the lock and then find the
/// fresh token, so a burst of jobs on a cold function costs one token request.
#[derive(Default)]
pub(crate) struct TokenCache {
    tokens: Mutex<HashMap<u64, CachedToken>>,
    fetching: Mutex<HashMap<u64, Arc<tokio::sync::Mutex<()>>>>,
}

impl TokenCache {
    /// The cached token, unless it expires within the refresh margin.
    pub(crate) fn get(&self, installation_id: u64, now: OffsetDateTime) -> Option<SecretString> {
        lock(&self.tokens)
            .get(&installation_id)
            .filter(|cached| now < cached.expires_at - TOKEN_REFRESH_MARGIN)
            .map(|cached| cached.token.clone())
    }

    pub(crate) fn put(
        &self,
        installation_id: u64,
        token: SecretString,
        expires_at: OffsetDateTime,
    ) {
        lock(&self.tokens).insert(installation_id, CachedToken { token, expires_at });
    }

    /// The lock a task holds while it fetches this installation's token.
    fn fetch_lock(&self, installation_id: u64) -> Arc<tokio::sync::Mutex<()>> {
        lock(&self.fetching)
            .entry(installation_id)
            .or_default()
            .clone()
    }

    /// Forgets a token GitHub refused.
    pub(crate) fn forget(&self, installation_id: u64) {
        lock(&self.tokens).remove(&installation_id);
    }
}

#[derive(Deserialize)]
struct AccessToken {
    token: SecretString,
    #[serde(with = "time::serde::rfc3339")]
    expires_at: OffsetDateTime,
}

#[derive(Deserialize)]
struct Installation {
    id: u64,
}

impl GitHubApp {
    /// An App JWT and the generation of the key that signed it.
    fn app_jwt_of(&self) -> Result<(SecretString, u64), ForgeError> {
        let (key, generation) = self.key.current();
        // The key signed a JWT when it was parsed; failing now means the process is
        // broken, and GitHub could not have accepted the call anyway.
        let jwt = key.jwt(self.now()).map_err(|_| ForgeError::Unauthorized)?;
        Ok((jwt, generation))
    }

    /// Makes `call` with the App JWT; on a 401, reads the key again (if the client has
    /// a key source) and, when it changed, tries once more with the new key.
    pub(crate) async fn send_as_app(
        &self,
        endpoint: &Endpoint,
        call: &Call,
    ) -> Result<Reply, ForgeError> {
        let (jwt, generation) = self.app_jwt_of()?;
        match self.send(endpoint, call, &jwt).await {
            Err(ForgeError::Unauthorized) if self.key.renew(generation).await => {
                let (jwt, _) = self.app_jwt_of()?;
                self.send(endpoint, call, &jwt).await
            }
            other => other,
        }
    }

    /// Makes `call` as the installation, refreshing its token once if GitHub refuses it.
    pub(crate) async fn as_installation(
        &self,
        installation_id: u64,
        endpoint: &Endpoint,
        call: &Call,
    ) -> Result<Reply, ForgeError> {
        let token = self.installation_token(installation_id, None).await?;
        match self.send(endpoint, call, &token).await {
            Err(ForgeError::Unauthorized) => {
                warn!(
                    installation_id,
                    endpoint = endpoint.name,
                    "token refused; fetching a new one"
                );
                self.tokens.forget(installation_id);
                self.withdraw_shared(installation_id, &token).await;
                let token = self
                    .installation_token(installation_id, Some(&token))
                    .await?;
                self.send(endpoint, call, &token).await
            }
            other => other,
        }
    }

    /// A usable token for the installation, never `refused`: cached in this process,
    /// else shared by another process of the deployment ([`shelf`]), else minted (and
    /// then cached and shared).
    pub(crate) async fn installation_token(
        &self,
        installation_id: u64,
        refused: Option<&SecretString>,
    ) -> Result<SecretString, ForgeError> {
        let usable = |token: &SecretString| {
            refused.is_none_or(|refused| refused.expose_secret() != token.expose_secret())
        };
        if let Some(token) = self.tokens.get(installation_id, self.now()).filter(usable) {
            return Ok(token);
        }
        let fetch_lock = self.tokens.fetch_lock(installation_id);
        let _fetching = fetch_lock.lock().await;
        // Another task may have fetched it while this one waited.
        if let Some(token) = self.tokens.get(installation_id, self.now()).filter(usable) {
            return Ok(token);
        }
        if let Some(shared) = self.shared_token(installation_id, refused).await {
            self.tokens
                .put(installation_id, shared.token.clone(), shared.expires_at);
            return Ok(shared.token);
        }
        let call = Call::post(format!(
            "/app/installations/{installation_id}/access_tokens"
        ));
        let reply = match self.send_as_app(&ACCESS_TOKEN, &call).await {
            // GitHub knows no such installation of this App: it was uninstalled (or the
            // id is wrong). Retrying cannot help; say so instead of "Not Found".
            Err(ForgeError::Rejected { status: 404, .. }) => {
                return Err(ForgeError::Rejected {
                    status: 404,
                    message: format!(
                        "the GitHub App is not installed there (GitHub knows no installation \
                         {installation_id} of it); its runners can be removed without GitHub: \
                         ephemera runners delete NAME --force --no-github"
                    ),
                });
            }
            other => other?,
        };
        let fresh: AccessToken = reply.json(&ACCESS_TOKEN)?;
        debug!(installation_id, expires_at = %fresh.expires_at, "installation token issued");
        self.tokens
            .put(installation_id, fresh.token.clone(), fresh.expires_at);
        self.shelve_shared(installation_id, &fresh.token, fresh.expires_at)
            .await;
        Ok(fresh.token)
    }

    /// The installation that covers `owner` (and `repo`): `known` if given, else looked
    /// up once with the App JWT and remembered.
    pub(crate) async fn installation_id(
        &self,
        known: Option<u64>,
        owner: &str,
        repo: Option<&str>,
    ) -> Result<u64, ForgeError> {
        if let Some(id) = known {
            return Ok(id);
        }
        let key = (owner.to_lowercase(), repo.map(str::to_lowercase));
        if let Some(&id) = lock(&self.installations).get(&key) {
            return Ok(id);
        }
        let path = match repo {
            Some(repo) => format!("/repos/{owner}/{repo}/installation"),
            None => format!("/orgs/{owner}/installation"),
        };
        let reply = match self.send_as_app(&INSTALLATION, &Call::get(path)).await {
            Err(ForgeError::Rejected { status: 404, .. }) => {
                let target = repo.map_or_else(|| owner.to_owned(), |r| format!("{owner}/{r}"));
                return Err(ForgeError::Rejected {
                    status: 404,
                    message: format!("the GitHub App is not installed on {target}"),
                });
            }
            other => other?,
        };
        let installation: Installation = reply.json(&INSTALLATION)?;
        lock(&self.installations).insert(key, installation.id);
        Ok(installation.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn secret(text: &str) -> SecretString {
        SecretString::from(text.to_owned())
    }

    #[test]
    fn cached_token_is_reused_until_five_minutes_before_expiry() {
        let cache = TokenCache::default();
        let expires = datetime!(2025-01-01 13:00 UTC);
        cache.put(7, secret("tok"), expires);

        assert!(cache.get(7, datetime!(2025-01-01 12:54:59 UTC)).is_some());
        assert!(cache.get(7, datetime!(2025-01-01 12:55 UTC)).is_none());
        assert!(cache.get(8, datetime!(2025-01-01 12:00 UTC)).is_none());

        cache.forget(7);
        assert!(cache.get(7, datetime!(2025-01-01 12:00 UTC)).is_none());
    }
}
