//! One call to GitHub's REST API: headers, retries, and the counting and logging of
//! every HTTP request.
//!
//! [`GitHubApp::send`] makes a call with the bearer it is given (the App JWT or an
//! installation token) and retries it per the [`RetryPolicy`](crate::RetryPolicy). Which
//! bearer, and what to do when GitHub refuses it, is [`crate::auth`]'s business: this
//! layer only sends.

use crate::client::GitHubApp;
use crate::outcome::{classify, rate_limit_remaining, Outcome};
use ephemera_core::metrics::{Dimension, Metric};
use ephemera_core::ports::ForgeError;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT};
use reqwest::Method;
use secrecy::{ExposeSecret, SecretString};
use serde::de::DeserializeOwned;
use tracing::debug;

pub(crate) use crate::outcome::Endpoint;

/// Headers sent on every call (`User-Agent` is set on the client).
pub(crate) fn default_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        ACCEPT,
        HeaderValue::from_static("application/vnd.github+json"),
    );
    headers.insert(
        HeaderName::from_static("x-github-api-version"),
        HeaderValue::from_static("2022-11-28"),
    );
    headers
}

/// A request, kept so it can be sent again.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    method: Method,
    /// The path below the API base URL, with its query.
    path: String,
    body: Option<serde_json::Value>,
    /// `If-None-Match`: a conditional read, answered 304 when the ETag still holds.
    if_none_match: Option<String>,
}

impl Call {
    pub(crate) fn get(path: String) -> Call {
        Call {
            method: Method::GET,
            path,
            body: None,
            if_none_match: None,
        }
    }

    pub(crate) fn post(path: String) -> Call {
        Call {
            method: Method::POST,
            path,
            body: None,
            if_none_match: None,
        }
    }

    pub(crate) fn delete(path: String) -> Call {
        Call {
            method: Method::DELETE,
            path,
            body: None,
            if_none_match: None,
        }
    }

    /// Asks only for a newer answer than the one `etag` names.
    pub(crate) fn if_none_match(mut self, etag: Option<&str>) -> Call {
        self.if_none_match = etag.map(str::to_owned);
        self
    }

    pub(crate) fn with_json(mut self, body: serde_json::Value) -> Call {
        self.body = Some(body);
        self
    }
}

/// A successful answer, or one the endpoint gives meaning to.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: u16,
    /// The `Link` header, where a paged answer says where the next page is.
    pub link: Option<String>,
    /// The `ETag` header, for a conditional read next time.
    pub etag: Option<String>,
    body: Vec<u8>,
}

impl Reply {
    /// Decodes the body. A body that does not parse is reported by position only: the
    /// decoder's own message could quote a secret from the body.
    pub(crate) fn json<T: DeserializeOwned>(&self, endpoint: &Endpoint) -> Result<T, ForgeError> {
        serde_json::from_slice(&self.body).map_err(|error| {
            ForgeError::Transient(Box::new(HttpError::Body {
                endpoint: endpoint.name,
                line: error.line(),
                column: error.column(),
            }))
        })
    }
}

/// Why a call failed, as the cause of [`ForgeError::Transient`].
#[derive(Debug, thiserror::Error)]
pub(crate) enum HttpError {
    #[error("{endpoint}: GitHub answered {status}: {message}")]
    Status {
        endpoint: &'static str,
        status: u16,
        message: String,
    },
    #[error("{endpoint}: request failed")]
    Request {
        endpoint: &'static str,
        #[source]
        source: reqwest::Error,
    },
    #[error("{endpoint}: unexpected response body (line {line}, column {column})")]
    Body {
        endpoint: &'static str,
        line: usize,
        column: usize,
    },
}

impl GitHubApp {
    /// Makes `call` with `bearer`, retrying throttling and transient failures.
    pub(crate) async fn send(
        &self,
        endpoint: &Endpoint,
        call: &Call,
        bearer: &SecretString,
    ) -> Result<Reply, ForgeError> {
        self.retry
            .run(|| self.attempt(endpoint, call, bearer))
            .await
    }

    fn count(&self, endpoint: &'static str, outcome: &'static str) {
        self.accounting.count(endpoint, outcome);
        self.metrics.record(
            Metric::GitHubCalls,
            &[
                (Dimension::Endpoint, endpoint),
                (Dimension::Outcome, outcome),
            ],
            1.0,
        );
    }

    /// One HTTP request, counted and logged.
    async fn attempt(
        &self,
        endpoint: &Endpoint,
        call: &Call,
        bearer: &SecretString,
    ) -> Result<Reply, ForgeError> {
        let url = format!("{}{}", self.api_url, call.path);
        let mut request = self
            .http
            .request(call.method.clone(), url)
            .bearer_auth(bearer.expose_secret());
        if let Some(body) = &call.body {
            request = request.json(body);
        }
        if let Some(etag) = &call.if_none_match {
            request = request.header(reqwest::header::IF_NONE_MATCH, etag);
        }
        let (status, headers, body) = match exchange(request).await {
            Ok(answer) => answer,
            Err(source) => {
                self.count(endpoint.name, "transient");
                debug!(endpoint = endpoint.name, error = %source, "GitHub request failed");
                let cause = HttpError::Request {
                    endpoint: endpoint.name,
                    source,
                };
                return Err(ForgeError::Transient(Box::new(cause)));
            }
        };
        let outcome = classify(endpoint, status, &headers, &body, self.now());
        self.count(endpoint.name, outcome.label());
        // The installation's buckets only: the App's JWT (token mints, the deliveries
        // list, doctor's questions) spends a budget of its own, in buckets of the same
        // names. A JWT has three dot-separated parts; installation tokens have none.
        let as_installation = !bearer.expose_secret().contains('.');
        if let Some((resource, bucket)) =
            crate::rate::bucket_of(&headers).filter(|_| as_installation)
        {
            // By App as well: each App of a deployment has buckets of its own.
            let app = self.app_id.to_string();
            self.metrics.record(
                Metric::GitHubRateLimitRemaining,
                &[(Dimension::App, &app), (Dimension::Resource, &resource)],
                bucket.remaining as f64,
            );
            self.note_bucket(resource, bucket);
        }
        debug!(
            endpoint = endpoint.name,
            status,
            rate_limit_remaining = rate_limit_remaining(&headers),
            outcome = outcome.label(),
            "GitHub answered"
        );
        match outcome {
            Outcome::Success | Outcome::Answer { .. } => Ok(Reply {
                status,
                link: headers
                    .get(reqwest::header::LINK)
                    .and_then(|value| value.to_str().ok())
                    .map(str::to_owned),
                etag: headers
                    .get(reqwest::header::ETAG)
                    .and_then(|value| value.to_str().ok())
                    .map(str::to_owned),
                body,
            }),
            Outcome::Unauthorized => Err(ForgeError::Unauthorized),
            Outcome::Throttled { retry_after } => Err(ForgeError::Throttled { retry_after }),
            Outcome::Transient { status, message } => {
                let cause = HttpError::Status {
                    endpoint: endpoint.name,
                    status,
                    message,
                };
                Err(ForgeError::Transient(Box::new(cause)))
            }
            Outcome::Rejected { status, message } => Err(ForgeError::Rejected { status, message }),
        }
    }
}

/// Sends the request and reads the whole answer.
async fn exchange(
    request: reqwest::RequestBuilder,
) -> Result<(u16, HeaderMap, Vec<u8>), reqwest::Error> {
    let response = request.send().await?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.bytes().await?;
    Ok((status, headers, body.to_vec()))
}
