//! The App's private key: parsed once, signing App JWTs, and replaced when GitHub
//! refuses it and the [`AppKeySource`] holds a new one.
//!
//! A rotated key: when GitHub answers 401 to a call made with the App JWT (the key was
//! replaced in the App's settings), a client given an [`AppKeySource`] reads the key
//! once more and, if it changed, retries that call once with the new key. A 401 with
//! the key it already has is returned as is; re-reads are at most every
//! [`KEY_REREAD_GAP`], so a revoked key does not turn every call into a secret read.

use crate::client::{lock, ConfigError};
use ephemera_core::ports::AppKeySource;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use time::{Duration, OffsetDateTime};
use tracing::{info, warn};

/// GitHub rejects an `iat` in its future; backdating absorbs clock drift.
const JWT_BACKDATE: Duration = Duration::seconds(60);
/// GitHub refuses JWTs that live longer than ten minutes.
const JWT_LIFETIME: Duration = Duration::minutes(9);

/// The shortest gap between two re-reads of the key after a 401.
pub const KEY_REREAD_GAP: std::time::Duration = std::time::Duration::from_secs(5);

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
    pub(crate) async fn renew(&self, seen: u64) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{DecodingKey, Validation};

    const PRIVATE_KEY: &str = include_str!("../../../../tests/fixtures/github-app-test-key.pem");
    const PUBLIC_KEY: &str = include_str!("../../../../tests/fixtures/github-app-test-key.pub.pem");
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
}
