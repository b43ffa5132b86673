//! What stands between a REST request and its route: the faults in force (latency,
//! server errors, the rate-limit window), GitHub's primary buckets (`buckets.rs`: a spent
//! one refuses, and its `x-ratelimit-*` headers are on every answer), and the recorder that writes each exchange to a JSONL file for the
//! conformance check (`tests/conformance`).
//!
//! The `/_sim/*` control routes pass straight through: they are not GitHub's.

use super::buckets::{self, BucketState};
use super::faults::{RateLimitKind, RestFate};
use super::Shared;
use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use std::io::Write;
use std::sync::{Arc, Mutex};
use tokio::time::Instant;

/// Bodies above this are not read (the simulator's own answers are far smaller).
const MAX_BODY: usize = 4 << 20;
const RATE_LIMIT_DOCS: &str =
    "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api";

/// Where exchanges are written, one JSON object a line.
pub struct Recorder {
    file: Mutex<std::fs::File>,
}

impl Recorder {
    pub fn create(path: &std::path::Path) -> anyhow::Result<Recorder> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Recorder {
            file: Mutex::new(file),
        })
    }

    fn write(&self, exchange: &Value) {
        let mut line = exchange.to_string();
        line.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(error) = file.write_all(line.as_bytes()) {
            tracing::warn!(error = %error, "cannot record an exchange");
        }
    }
}

/// The middleware: decides the fault, serves (or not), adds headers, records.
pub async fn intercept(State(sim): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    // The control routes, and the release downloads (github.com's, not the API's: no
    // bucket, nothing to check against the API's description).
    if path.starts_with("/_sim/") || path.starts_with(super::releases::DOWNLOADS) {
        return next.run(request).await;
    }
    let source = request
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|info| info.0.ip().to_string());
    let method = request.method().to_string();
    let query = request.uri().query().map(str::to_owned);
    let route = route_of(&path);
    let (parts, body) = request.into_parts();
    let request_body = to_bytes(body, MAX_BODY).await.unwrap_or_default();

    let key = format!("{method} {route}");
    let resource = buckets::resource_of(&method, &route);
    let authorization = parts
        .headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok());
    let (credential, app_id) = match (authorization, &source) {
        (None, Some(source)) => (buckets::anonymous_credential(source), None),
        (None, None) => (buckets::anonymous_credential("unknown"), None),
        (Some(_), _) => sim.bucket_owner(authorization),
    };
    let anonymous = authorization.is_none();
    let decided = sim.faults().rest(&key, Instant::now());
    let (fate, latency) = decided;
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    // `GET /rate_limit` costs nothing; everything else spends its bucket, or is refused
    // when the bucket is spent.
    let spent = match fate {
        RestFate::Serve if path == "/rate_limit" => Ok(sim.buckets.peek(&credential, resource)),
        RestFate::Serve => sim.buckets.spend(&credential, resource),
        _ => Ok(sim.buckets.peek(&credential, resource)),
    };
    let bucket_was_spent = fate == RestFate::Serve && spent.is_err();
    let response = match (fate, spent) {
        (RestFate::Serve, Ok(bucket)) => {
            let request = Request::from_parts(parts, Body::from(request_body.clone()));
            let mut response = next.run(request).await;
            if response.status() == StatusCode::NOT_MODIFIED && !anonymous {
                // GitHub: a conditional request answered 304 with an Authorization
                // header does not count against the primary rate limit.
                sim.buckets.refund(&credential, resource);
                add_bucket_headers(
                    &mut response,
                    resource,
                    sim.buckets.peek(&credential, resource),
                );
            } else {
                add_bucket_headers(&mut response, resource, bucket);
            }
            response
        }
        (RestFate::Serve, Err(bucket)) if anonymous => {
            anonymous_spent(source.as_deref().unwrap_or("unknown"), resource, bucket)
        }
        (RestFate::Serve, Err(bucket)) => bucket_spent(resource, bucket),
        (RestFate::ServerError(status), Ok(bucket) | Err(bucket)) => {
            let mut response = server_error(status);
            add_bucket_headers(&mut response, resource, bucket);
            response
        }
        (RestFate::RateLimited { kind, until }, _) => rate_limited(kind, until, resource),
    };
    let fault = match fate {
        RestFate::ServerError(_) => json!("server_error"),
        RestFate::RateLimited { .. } => json!("rate_limit"),
        RestFate::Serve if bucket_was_spent => json!("bucket_spent"),
        RestFate::Serve => Value::Null,
    };
    if let Some(app_id) = app_id {
        let answered = format!("{key} {}", response.status().as_u16());
        let mut state = sim.lock();
        let calls = state.counters.app_calls.entry(app_id).or_default();
        *calls.entry(answered).or_default() += 1;
    }
    let Some(recorder) = &sim.recorder else {
        return response;
    };
    let (parts, body) = response.into_parts();
    let response_body = to_bytes(body, MAX_BODY).await.unwrap_or_default();
    recorder.write(&json!({
        "method": method,
        "path": path,
        "query": query,
        "route": route,
        "request_body": as_json(&request_body),
        "status": parts.status.as_u16(),
        "response_body": as_json(&response_body),
        "ratelimit_resource": parts
            .headers
            .get("x-ratelimit-resource")
            .and_then(|value| value.to_str().ok()),
        "fault": fault,
    }));
    Response::from_parts(parts, Body::from(response_body))
}

/// The path with its numeric segments (runner, job, installation ids) as `{id}`, so
/// the n-th call to a route is the same call in every run.
fn route_of(path: &str) -> String {
    path.split('/')
        .map(|segment| {
            if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
                "{id}"
            } else {
                segment
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The body as JSON; an empty body is `null`, anything else that is not JSON a string.
fn as_json(bytes: &[u8]) -> Value {
    if bytes.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

fn server_error(status: u16) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body =
        json!({ "message": "Server Error", "documentation_url": "https://docs.github.com/rest" });
    (status, Json(body)).into_response()
}

/// Whole seconds until `until`, rounded up so a client that waits them is never early.
fn seconds_until(until: Instant) -> u64 {
    let left = until.saturating_duration_since(Instant::now());
    left.as_secs() + u64::from(left.subsec_nanos() > 0)
}

pub(super) fn rate_limited(
    kind: RateLimitKind,
    until: Instant,
    resource: &'static str,
) -> Response {
    let wait = seconds_until(until);
    let mut response = match kind {
        RateLimitKind::Primary => {
            let body = json!({ "message": "API rate limit exceeded for installation ID 1.", "documentation_url": RATE_LIMIT_DOCS });
            (StatusCode::FORBIDDEN, Json(body)).into_response()
        }
        RateLimitKind::Secondary | RateLimitKind::TooManyRequests => {
            let status = if kind == RateLimitKind::Secondary {
                StatusCode::FORBIDDEN
            } else {
                StatusCode::TOO_MANY_REQUESTS
            };
            let body = json!({ "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.", "documentation_url": RATE_LIMIT_DOCS });
            (status, Json(body)).into_response()
        }
    };
    let headers = response.headers_mut();
    let reset = time::OffsetDateTime::now_utc().unix_timestamp() as u64 + wait;
    if kind == RateLimitKind::Primary {
        let limit = buckets::limit_of(resource);
        let bucket = BucketState {
            limit,
            used: limit,
            reset,
        };
        insert_bucket_headers(headers, resource, bucket);
    } else {
        headers.insert("retry-after", HeaderValue::from(wait));
    }
    response
}

/// A spent bucket's answer: GitHub's primary rate limit, a 403 with the bucket's
/// headers and `x-ratelimit-remaining: 0`.
fn bucket_spent(resource: &'static str, bucket: BucketState) -> Response {
    let body = json!({ "message": "API rate limit exceeded for installation ID 1.", "documentation_url": RATE_LIMIT_DOCS });
    let mut response = (StatusCode::FORBIDDEN, Json(body)).into_response();
    add_bucket_headers(&mut response, resource, bucket);
    response
}

/// An address's 60 unauthenticated requests spent: GitHub's 403, its message naming the
/// address, with the bucket's headers
/// (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api).
fn anonymous_spent(source: &str, resource: &'static str, bucket: BucketState) -> Response {
    let message = format!(
        "API rate limit exceeded for {source}. (But here's the good news: Authenticated \
         requests get a higher rate limit. Check out the documentation for more details.)"
    );
    let body = json!({ "message": message, "documentation_url": RATE_LIMIT_DOCS });
    let mut response = (StatusCode::FORBIDDEN, Json(body)).into_response();
    add_bucket_headers(&mut response, resource, bucket);
    response
}

fn add_bucket_headers(response: &mut Response, resource: &'static str, bucket: BucketState) {
    insert_bucket_headers(response.headers_mut(), resource, bucket);
}

/// GitHub's `x-ratelimit-*` headers of the bucket the call spent.
fn insert_bucket_headers(
    headers: &mut axum::http::HeaderMap,
    resource: &'static str,
    bucket: BucketState,
) {
    headers.insert("x-ratelimit-limit", HeaderValue::from(bucket.limit));
    headers.insert(
        "x-ratelimit-remaining",
        HeaderValue::from(bucket.remaining()),
    );
    headers.insert("x-ratelimit-used", HeaderValue::from(bucket.used));
    headers.insert("x-ratelimit-reset", HeaderValue::from(bucket.reset));
    headers.insert("x-ratelimit-resource", HeaderValue::from_static(resource));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_segments_become_ids_in_route_keys() {
        assert_eq!(
            route_of("/orgs/acme/actions/runners/17"),
            "/orgs/acme/actions/runners/{id}"
        );
        assert_eq!(
            route_of("/app/installations/1/access_tokens"),
            "/app/installations/{id}/access_tokens"
        );
        assert_eq!(
            route_of("/orgs/acme2/installation"),
            "/orgs/acme2/installation"
        );
    }

    #[test]
    fn bodies_are_recorded_as_json_null_or_text() {
        assert_eq!(as_json(b""), Value::Null);
        assert_eq!(as_json(br#"{"a":1}"#), json!({"a": 1}));
        assert_eq!(as_json(b"oops"), json!("oops"));
    }
}
