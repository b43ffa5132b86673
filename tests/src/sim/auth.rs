//! GitHub's two credentials, as the simulator checks them, and its error bodies.
//!
//! `/app/…` routes take an App JWT (RS256, signed with the App's private key); every other
//! API route takes an installation token the simulator issued and that has not expired.

use super::state::SimState;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::json;
use time::OffsetDateTime;

const DOCS: &str = "https://docs.github.com/rest";

/// GitHub's error answer: a status and `{"message", "documentation_url"}`, with the
/// `errors` of a validation failure.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub errors: Option<serde_json::Value>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            errors: None,
        }
    }

    /// 422 `Validation Failed` with GitHub's `errors` list (strings for the
    /// `validation-error-simple` routes, objects for `validation-error`).
    pub fn validation_failed(errors: serde_json::Value) -> ApiError {
        ApiError {
            errors: Some(errors),
            ..ApiError::unprocessable("Validation Failed")
        }
    }

    pub fn bad_credentials() -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "Bad credentials")
    }

    pub fn not_found() -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "Not Found")
    }

    pub fn unprocessable(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({ "message": self.message, "documentation_url": DOCS });
        if let Some(errors) = self.errors {
            body["errors"] = errors;
        }
        (self.status, Json(body)).into_response()
    }
}

/// Verifies App JWTs against the App's public keys (GitHub lets an App have several
/// private keys at once: a rotation adds the new one, then deletes the old one).
#[derive(Clone)]
pub struct AppVerifier {
    keys: Vec<DecodingKey>,
    app_id: u64,
}

#[derive(Deserialize)]
struct AppClaims {
    iss: serde_json::Value,
    exp: i64,
}

/// GitHub refuses App JWTs that expire more than 10 minutes ahead (a minute of leeway
/// here for clock drift between test processes).
const MAX_JWT_LIFETIME_SECS: i64 = 11 * 60;

impl AppVerifier {
    pub fn new(app_id: u64, public_key_pem: &str) -> anyhow::Result<AppVerifier> {
        AppVerifier::with_keys(app_id, &[public_key_pem])
    }

    /// A verifier accepting JWTs signed with any of `public_key_pems`.
    pub fn with_keys(app_id: u64, public_key_pems: &[&str]) -> anyhow::Result<AppVerifier> {
        let keys = public_key_pems
            .iter()
            .map(|pem| {
                DecodingKey::from_rsa_pem(pem.as_bytes())
                    .map_err(|e| anyhow::anyhow!("reading the App public key: {e}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(AppVerifier { keys, app_id })
    }

    /// Accepts a bearer JWT signed with the App key, issued by this App, not expired.
    pub fn verify(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let token = bearer(headers).ok_or_else(ApiError::bad_credentials)?;
        let mut validation = Validation::new(Algorithm::RS256);
        validation.leeway = 0;
        validation.set_required_spec_claims(&["exp", "iss"]);
        let claims = self
            .keys
            .iter()
            .find_map(|key| jsonwebtoken::decode::<AppClaims>(token, key, &validation).ok())
            .ok_or_else(ApiError::bad_credentials)?
            .claims;
        let issuer_matches = match &claims.iss {
            serde_json::Value::Number(n) => n.as_u64() == Some(self.app_id),
            serde_json::Value::String(s) => s.parse::<u64>().ok() == Some(self.app_id),
            _ => false,
        };
        if !issuer_matches {
            return Err(ApiError::bad_credentials());
        }
        if claims.exp - OffsetDateTime::now_utc().unix_timestamp() > MAX_JWT_LIFETIME_SECS {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "'Expiration time' claim ('exp') is too far in the future",
            ));
        }
        Ok(())
    }
}

/// Accepts an installation token this simulator issued that has not expired.
pub fn require_token(state: &SimState, headers: &HeaderMap) -> Result<u64, ApiError> {
    let token = bearer(headers).ok_or_else(ApiError::bad_credentials)?;
    match state.tokens.get(token) {
        Some(issued) if issued.expires_at > OffsetDateTime::now_utc() => Ok(issued.installation_id),
        _ => Err(ApiError::bad_credentials()),
    }
}

/// The credential of `Authorization: Bearer X` (or GitHub's older `token X`).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, credential) = value.split_once(' ')?;
    let known = scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("token");
    (known && !credential.trim().is_empty()).then(|| credential.trim())
}
