//! What one HTTP answer from GitHub means, decided from its status, headers and body
//! alone, so every case is tested without a server.
//!
//! GitHub signals rate limits three ways: 429, 403 with `x-ratelimit-remaining: 0`
//! (primary limit), and 403 with `retry-after` or a "secondary rate limit" message. All
//! of them are [`Outcome::Throttled`]; any other 403 is a refusal like other 4xx.

use reqwest::header::HeaderMap;
use serde::Deserialize;
use std::time::Duration;
use time::OffsetDateTime;

/// Error messages from GitHub are cut to this many characters.
const MAX_MESSAGE: usize = 300;

/// One REST endpoint: its name in the call accounting, and the error statuses that are
/// answers rather than failures there (with the outcome each is counted as).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Endpoint {
    pub name: &'static str,
    pub answers: &'static [(u16, &'static str)],
}

impl Endpoint {
    pub(crate) const fn new(name: &'static str, answers: &'static [(u16, &'static str)]) -> Self {
        Endpoint { name, answers }
    }

    fn answer(&self, status: u16) -> Option<&'static str> {
        self.answers
            .iter()
            .find(|(s, _)| *s == status)
            .map(|(_, label)| *label)
    }
}

/// The meaning of an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// 2xx.
    Success,
    /// A status the endpoint gives meaning to (404 on a read, 422 on a delete...).
    Answer {
        status: u16,
        label: &'static str,
    },
    /// 401: the token is expired or revoked.
    Unauthorized,
    Throttled {
        retry_after: Option<Duration>,
    },
    /// 5xx: GitHub had a problem; the same request may succeed later.
    Transient {
        status: u16,
        message: String,
    },
    /// Any other status: the request itself is wrong or not allowed.
    Rejected {
        status: u16,
        message: String,
    },
}

impl Outcome {
    /// The outcome name used in call accounting.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Outcome::Success => "ok",
            Outcome::Answer { label, .. } => label,
            Outcome::Unauthorized => "unauthorized",
            Outcome::Throttled { .. } => "throttled",
            Outcome::Transient { .. } => "transient",
            Outcome::Rejected { .. } => "rejected",
        }
    }
}

#[derive(Deserialize)]
struct ErrorBody {
    message: Option<String>,
}

/// Classifies an answer from `endpoint`. `now` turns `x-ratelimit-reset` into a wait.
pub(crate) fn classify(
    endpoint: &Endpoint,
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    now: OffsetDateTime,
) -> Outcome {
    if (200..300).contains(&status) {
        return Outcome::Success;
    }
    if status == 401 {
        return Outcome::Unauthorized;
    }
    let message = error_message(body);
    if status == 429 || (status == 403 && is_rate_limited(headers, &message)) {
        return Outcome::Throttled {
            retry_after: retry_after(headers, now),
        };
    }
    if status >= 500 {
        return Outcome::Transient { status, message };
    }
    if let Some(label) = endpoint.answer(status) {
        return Outcome::Answer { status, label };
    }
    Outcome::Rejected { status, message }
}

fn is_rate_limited(headers: &HeaderMap, message: &str) -> bool {
    header(headers, "x-ratelimit-remaining") == Some("0")
        || headers.contains_key("retry-after")
        || message.to_lowercase().contains("secondary rate limit")
}

/// `retry-after` seconds, else the wait until `x-ratelimit-reset`, else unknown.
fn retry_after(headers: &HeaderMap, now: OffsetDateTime) -> Option<Duration> {
    if let Some(seconds) = header(headers, "retry-after").and_then(|v| v.parse::<u64>().ok()) {
        return Some(Duration::from_secs(seconds));
    }
    let reset = header(headers, "x-ratelimit-reset")?.parse::<i64>().ok()?;
    let wait = reset.saturating_sub(now.unix_timestamp()).max(0);
    Some(Duration::from_secs(wait.unsigned_abs()))
}

/// `x-ratelimit-remaining`, for the logs.
pub(crate) fn rate_limit_remaining(headers: &HeaderMap) -> Option<u64> {
    header(headers, "x-ratelimit-remaining")?.parse().ok()
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name)?.to_str().ok().map(str::trim)
}

/// The `message` of a GitHub error body, cut short; empty if there is none.
fn error_message(body: &[u8]) -> String {
    let message = serde_json::from_slice::<ErrorBody>(body)
        .ok()
        .and_then(|b| b.message)
        .unwrap_or_default();
    message.chars().take(MAX_MESSAGE).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;
    use time::macros::datetime;

    const DELETE: Endpoint = Endpoint::new("delete_runner", &[(404, "not_found"), (422, "busy")]);
    const NOW: OffsetDateTime = datetime!(2025-01-01 12:00 UTC);

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).expect("header value"));
        }
        map
    }

    fn outcome(status: u16, pairs: &[(&'static str, &str)], body: &str) -> Outcome {
        classify(&DELETE, status, &headers(pairs), body.as_bytes(), NOW)
    }

    #[test]
    fn any_2xx_is_success() {
        for status in [200, 201, 204] {
            assert_eq!(outcome(status, &[], ""), Outcome::Success);
        }
    }

    #[test]
    fn statuses_the_endpoint_gives_meaning_to_are_answers() {
        assert_eq!(outcome(404, &[], "{}").label(), "not_found");
        assert_eq!(outcome(422, &[], "{}").label(), "busy");
    }

    #[test]
    fn unauthorized_is_its_own_outcome() {
        assert_eq!(
            outcome(401, &[], r#"{"message":"Bad credentials"}"#),
            Outcome::Unauthorized
        );
    }

    #[test]
    fn exhausted_primary_limit_waits_until_reset() {
        let reset = (NOW.unix_timestamp() + 42).to_string();
        let got = outcome(
            403,
            &[
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", &reset),
            ],
            "{}",
        );
        assert_eq!(
            got,
            Outcome::Throttled {
                retry_after: Some(Duration::from_secs(42))
            }
        );
    }

    #[test]
    fn retry_after_header_wins_over_reset() {
        let got = outcome(
            403,
            &[("retry-after", "7"), ("x-ratelimit-reset", "99999999999")],
            "{}",
        );
        assert_eq!(
            got,
            Outcome::Throttled {
                retry_after: Some(Duration::from_secs(7))
            }
        );
    }

    #[test]
    fn secondary_rate_limit_message_is_throttling_without_known_wait() {
        let body = r#"{"message":"You have exceeded a secondary rate limit. Please wait."}"#;
        assert_eq!(
            outcome(403, &[], body),
            Outcome::Throttled { retry_after: None }
        );
    }

    #[test]
    fn too_many_requests_is_always_throttling() {
        assert_eq!(
            outcome(429, &[], ""),
            Outcome::Throttled { retry_after: None }
        );
        let past = (NOW.unix_timestamp() - 5).to_string();
        let got = outcome(429, &[("x-ratelimit-reset", &past)], "");
        assert_eq!(
            got,
            Outcome::Throttled {
                retry_after: Some(Duration::ZERO)
            }
        );
    }

    #[test]
    fn plain_forbidden_is_rejected_with_github_message() {
        let got = outcome(
            403,
            &[("x-ratelimit-remaining", "4999")],
            r#"{"message":"Resource not accessible by integration"}"#,
        );
        assert_eq!(
            got,
            Outcome::Rejected {
                status: 403,
                message: "Resource not accessible by integration".into()
            }
        );
    }

    #[test]
    fn server_errors_are_transient() {
        for status in [500, 502, 503, 504] {
            assert_eq!(outcome(status, &[], "oops").label(), "transient");
        }
    }

    #[test]
    fn other_client_errors_are_rejected() {
        assert_eq!(
            outcome(400, &[], "not json"),
            Outcome::Rejected {
                status: 400,
                message: String::new()
            }
        );
        assert_eq!(outcome(409, &[], "{}").label(), "rejected");
        let long = format!(r#"{{"message":"{}"}}"#, "x".repeat(1000));
        match outcome(400, &[], &long) {
            Outcome::Rejected { message, .. } => assert_eq!(message.len(), MAX_MESSAGE),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn remaining_rate_limit_is_read_for_logs() {
        assert_eq!(
            rate_limit_remaining(&headers(&[("x-ratelimit-remaining", "4321")])),
            Some(4321)
        );
        assert_eq!(rate_limit_remaining(&HeaderMap::new()), None);
    }
}
