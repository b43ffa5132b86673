//! Who the App is to GitHub: the App JWT, installation lookup, installation tokens.
//!
//! App-level endpoints take a short-lived RS256 JWT signed with the App's private key;
//! everything about runners and jobs takes an installation token, which GitHub issues
//! for an hour. Tokens are cached per installation and reused until five minutes before
//! they expire, so a burst of jobs costs one token request, not one per job.
//!
//! A rotated key: when GitHub answers 401 to a call made with the App JWT (the key was
//! replaced in the App's settings), a client given an [`AppKeySource`] reads the key
//! once more and, if it changed, retries that call once with the new key. A 401 with
//! the key it already has is returned as is; re-reads are at most every
//! [`KEY_REREAD_GAP`], so a revoked key does not turn every call into a secret read.

use crate::client::{lock, ConfigError, GitHubApp};
use crate::http::{Call, Endpoint};
use ephemera_core::ports::ForgeError;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use time::{Duration, OffsetDateTime};
use tracing::{debug, info, warn};

/// GitHub rejects an `iat` in its future; backdating absorbs clock drift.
const JWT_BACKDATE: Duration = Duration::seconds(60);
/// GitHub refuses JWTs that live longer than ten minutes.
const JWT_LIFETIME: Duration = Duration::minutes(9);
/// A cached token is replaced this long before it expires, so no call carries a token
/// that expires in flight.
const TOKEN_REFRESH_MARGIN: Duration = Duration::minutes(5);

const ACCESS_TOKEN: Endpoint = Endpoint::new("access_token", &[]);
const INSTALLATION: Endpoint = Endpoint::new("installation", &[]);

/// The shortest gap between two re-reads of the key after a 401.
pub const KEY_REREAD_GAP: std::time::Duration = std::time::Duration::from_secs(5);

/// Where the App's private key is kept (a secret store), read again when GitHub
/// refuses the key in use.
#[async_trait::async_trait]
pub trait AppKeySource: Send + Sync {
    /// The key as it is there now, PEM.
    async fn current_key(&self) -> Result<SecretString, Box<dyn std::error::Error + Send + Sync>>;
    /// Where the key is kept, for the log.
    fn name(&self) -> String;
}

/// The App's identity and signing key.
pub(crate) struct AppKey {
    app_id: u64,
    key: EncodingKey,
    /// The PEM, to tell a re-read key from the one in use.
    pem: SecretString,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Claims {
    pub iat: i64,
    pub exp: i64,
    pub iss: String,
}

impl AppKey {
    /// Parses the PEM and signs one JWT, so a key `ring` cannot use fails here, at
    /// start-up, rather than on the first webhook.
    pub(crate) fn from_pem(app_id: u64, pem: &SecretString) -> Result<AppKey, ConfigError> {
        let key = EncodingKey::from_rsa_pem(pem.expose_secret().as_bytes())
            .map_err(ConfigError::PrivateKey)?;
        let app_key = AppKey {
            app_id,
            key,
            pem: pem.clone(),
        };
        app_key
            .jwt(OffsetDateTime::now_utc())
            .map_err(ConfigError::PrivateKey)?;
        Ok(app_key)
    }

    pub(crate) fn app_id(&self) -> u64 {
        self.app_id
    }

    /// An App JWT valid from a minute ago for nine minutes.
    pub(crate) fn jwt(
        &self,
        now: OffsetDateTime,
    ) -> Result<SecretString, jsonwebtoken::errors::Error> {
        let claims = Claims {
            iat: (now - JWT_BACKDATE).unix_timestamp(),
            exp: (now + JWT_LIFETIME).unix_timestamp(),
            iss: self.app_id.to_string(),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims, &self.key)
            .map(SecretString::from)
    }
}

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

/// The key in use and how many times it was replaced.
pub(crate) struct KeySlot {
    current: Mutex<(Arc<AppKey>, u64)>,
    source: Option<Arc<dyn AppKeySource>>,
    /// When the key was last read again; held while reading, so concurrent 401s cost
    /// one read.
    reread: tokio::sync::Mutex<Option<tokio::time::Instant>>,
}

impl KeySlot {
    pub(crate) fn new(key: AppKey) -> KeySlot {
        KeySlot {
            current: Mutex::new((Arc::new(key), 0)),
            source: None,
            reread: tokio::sync::Mutex::new(None),
        }
    }

    pub(crate) fn with_source(mut self, source: Arc<dyn AppKeySource>) -> KeySlot {
        self.source = Some(source);
        self
    }

    /// The key in use and its generation.
    pub(crate) fn current(&self) -> (Arc<AppKey>, u64) {
        let current = lock(&self.current);
        (current.0.clone(), current.1)
    }

    /// After GitHub refused a JWT signed with generation `seen`: whether a newer key is
    /// in use now (replaced by another task, or read again here).
    async fn renew(&self, seen: u64) -> bool {
        let Some(source) = &self.source else {
            return false;
        };
        let mut last = self.reread.lock().await;
        let (in_use, generation) = self.current();
        if generation != seen {
            return true;
        }
        if last.is_some_and(|at| at.elapsed() < KEY_REREAD_GAP) {
            return false;
        }
        *last = Some(tokio::time::Instant::now());
        let name = source.name();
        let pem = match source.current_key().await {
            Ok(pem) => pem,
            Err(error) => {
                warn!(source = %name, error = %error, "GitHub refused the App key and it cannot be read again");
                return false;
            }
        };
        if pem.expose_secret().trim() == in_use.pem.expose_secret().trim() {
            warn!(source = %name, "GitHub refused the App key, and {name} still holds that key; put the App's current private key there");
            return false;
        }
        match AppKey::from_pem(in_use.app_id, &pem) {
            Ok(key) => {
                *lock(&self.current) = (Arc::new(key), generation + 1);
                info!(source = %name, "GitHub refused the App key; read a new one from {name}, retrying with it");
                true
            }
            Err(error) => {
                warn!(source = %name, error = %error, "GitHub refused the App key, and the key now in {name} is not usable");
                false
            }
        }
    }
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
    ) -> Result<crate::http::Reply, ForgeError> {
        let (jwt, generation) = self.app_jwt_of()?;
        match self.send(endpoint, call, &jwt).await {
            Err(ForgeError::Unauthorized) if self.key.renew(generation).await => {
                let (jwt, _) = self.app_jwt_of()?;
                self.send(endpoint, call, &jwt).await
            }
            other => other,
        }
    }

    /// A usable token for the installation: cached, or fetched and cached.
    pub(crate) async fn installation_token(
        &self,
        installation_id: u64,
    ) -> Result<SecretString, ForgeError> {
        if let Some(token) = self.tokens.get(installation_id, self.now()) {
            return Ok(token);
        }
        let fetch_lock = self.tokens.fetch_lock(installation_id);
        let _fetching = fetch_lock.lock().await;
        // Another task may have fetched it while this one waited.
        if let Some(token) = self.tokens.get(installation_id, self.now()) {
            return Ok(token);
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
    use jsonwebtoken::{DecodingKey, Validation};
    use time::macros::datetime;

    const PRIVATE_KEY: &str = include_str!("../../../tests/fixtures/github-app-test-key.pem");
    const PUBLIC_KEY: &str = include_str!("../../../tests/fixtures/github-app-test-key.pub.pem");
    /// A P-256 key: valid PEM, valid PKCS#8, not RSA.
    const EC_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQggTmBmjEXHmKELqNl
MHmTwI9n0pJp4EC4njgg+fhDTf6hRANCAAQjGTTYzoFK8SkdyJBbrhUlLp/tAJK4
eYCK5XUf0IAz8F9jwgA2z+VhlinB9HOT2MImiQekjCOxEVF/iV2yi0VV
-----END PRIVATE KEY-----
";

    fn secret(text: &str) -> SecretString {
        SecretString::from(text.to_owned())
    }

    #[test]
    fn jwt_is_rs256_backdated_a_minute_and_lives_under_ten_minutes() {
        let key = AppKey::from_pem(4242, &secret(PRIVATE_KEY)).expect("test key");
        let now = OffsetDateTime::now_utc();
        let jwt = key.jwt(now).expect("signed");

        let decoding = DecodingKey::from_rsa_pem(PUBLIC_KEY.as_bytes()).expect("public key");
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_issuer(&["4242"]);
        let claims = jsonwebtoken::decode::<Claims>(jwt.expose_secret(), &decoding, &validation)
            .expect("valid JWT")
            .claims;

        assert_eq!(claims.iss, "4242");
        assert_eq!(claims.iat, now.unix_timestamp() - 60);
        assert!(claims.exp > now.unix_timestamp());
        assert!(claims.exp - claims.iat <= 600);
    }

    #[test]
    fn keys_that_are_not_rsa_private_keys_are_refused_at_start() {
        for pem in [EC_KEY, PUBLIC_KEY, "not a key at all"] {
            assert!(matches!(
                AppKey::from_pem(1, &secret(pem)),
                Err(ConfigError::PrivateKey(_))
            ));
        }
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
