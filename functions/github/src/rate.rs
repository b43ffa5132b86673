//! GitHub's primary rate limits, bucket by bucket, as GitHub keeps them: every answer
//! names the bucket it spent in `x-ratelimit-resource` (`core`, or
//! `actions_runner_registration` for runner registrations) with that bucket's
//! `x-ratelimit-limit`, `-remaining` and `-reset`; `GET /rate_limit` lists them all and
//! does not count against any
//! (<https://docs.github.com/rest/rate-limit/rate-limit>,
//! <https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api>).
//! The client keeps the last state GitHub reported of each of the installation's
//! buckets it spent (the App's JWT has a budget of its own, not kept).

use crate::client::GitHubApp;
use crate::http::{Call, Endpoint};
use ephemera_core::ports::ForgeError;
use reqwest::header::HeaderMap;
use serde::Deserialize;
use std::collections::BTreeMap;

const RATE_LIMIT: Endpoint = Endpoint::new("rate_limit", &[]);

/// One bucket as GitHub last reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct RateBucket {
    pub limit: u64,
    pub remaining: u64,
    /// Unix seconds when the bucket refills.
    pub reset: i64,
}

/// The bucket an answer's headers report: its resource name and state; `None` when the
/// answer carries no complete set (GitHub omits them on some errors).
pub(crate) fn bucket_of(headers: &HeaderMap) -> Option<(String, RateBucket)> {
    let header = |name: &str| headers.get(name)?.to_str().ok().map(str::trim);
    let resource = header("x-ratelimit-resource")?;
    let bucket = RateBucket {
        limit: header("x-ratelimit-limit")?.parse().ok()?,
        remaining: header("x-ratelimit-remaining")?.parse().ok()?,
        reset: header("x-ratelimit-reset")?.parse().ok()?,
    };
    Some((resource.to_owned(), bucket))
}

#[derive(Deserialize)]
struct Overview {
    resources: BTreeMap<String, RateBucket>,
}

impl GitHubApp {
    /// The last state GitHub reported of each installation bucket this client spent
    /// from, by resource (`core`, `actions_runner_registration`); the newest answer
    /// wins (one installation per deployment).
    pub fn rate_buckets(&self) -> BTreeMap<String, RateBucket> {
        self.buckets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn note_bucket(&self, resource: String, bucket: RateBucket) {
        self.buckets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(resource, bucket);
    }

    /// Every bucket of the installation, from `GET /rate_limit` (free of charge; the
    /// installation token it needs is cached, or minted once with the App's JWT).
    pub async fn installation_rate_limits(
        &self,
        installation_id: u64,
    ) -> Result<BTreeMap<String, RateBucket>, ForgeError> {
        let reply = self
            .as_installation(
                installation_id,
                &RATE_LIMIT,
                &Call::get("/rate_limit".to_owned()),
            )
            .await?;
        Ok(reply.json::<Overview>(&RATE_LIMIT)?.resources)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn an_answer_names_its_bucket() {
        let got = bucket_of(&headers(&[
            ("x-ratelimit-resource", "actions_runner_registration"),
            ("x-ratelimit-limit", "10000"),
            ("x-ratelimit-remaining", "9990"),
            ("x-ratelimit-reset", "1764110000"),
        ]));
        assert_eq!(
            got,
            Some((
                "actions_runner_registration".to_owned(),
                RateBucket {
                    limit: 10_000,
                    remaining: 9_990,
                    reset: 1_764_110_000
                }
            ))
        );
    }

    #[test]
    fn an_incomplete_set_names_none() {
        assert_eq!(bucket_of(&headers(&[("x-ratelimit-remaining", "0")])), None);
        assert_eq!(
            bucket_of(&headers(&[
                ("x-ratelimit-resource", "core"),
                ("x-ratelimit-limit", "5000"),
                ("x-ratelimit-remaining", "x"),
                ("x-ratelimit-reset", "1"),
            ])),
            None
        );
    }
}
