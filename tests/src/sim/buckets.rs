//! GitHub's primary rate limits as GitHub keeps them: one hourly bucket per resource
//! (`core`, `actions_runner_registration`, …) and per credential (the App's JWT and each
//! installation token count apart), named in every answer's `x-ratelimit-resource`, and
//! listed by `GET /rate_limit`, which costs nothing.
//!
//! GitHub's documentation: "Rate limits for the REST API"
//! (<https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api>: 5,000
//! requests an hour for an installation, the `x-ratelimit-*` headers, a 403 or 429 with
//! `x-ratelimit-remaining: 0` when a bucket is spent) and "REST API endpoints for rate
//! limits" (<https://docs.github.com/rest/rate-limit/rate-limit>: the resources, and that
//! `GET /rate_limit` does not count). Which calls spend `actions_runner_registration`,
//! and its 10,000 an hour, GitHub does not document: they are the figures of
//! terraform-aws-github-runner's rate-limit guide (docs/rate-limits-and-tuning.md), checked
//! against GitHub's answers there: creating a registration, remove or JIT token.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// The bucket of everything not listed elsewhere.
pub const CORE: &str = "core";
/// The bucket of runner registrations (JIT configurations and registration tokens).
pub const REGISTRATION: &str = "actions_runner_registration";
/// GitHub's hourly limit of an installation (and of an App's JWT) in `core`.
pub const CORE_LIMIT: u64 = 5_000;
/// The hourly limit of `actions_runner_registration` (see the module's comment).
pub const REGISTRATION_LIMIT: u64 = 10_000;
const HOUR: Duration = Duration::from_secs(3600);

/// GitHub's hourly limit of unauthenticated requests, per source address ("Primary rate
/// limit for unauthenticated users",
/// https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api).
pub const ANONYMOUS_LIMIT: u64 = 60;
/// The credential of unauthenticated requests from `source`: their buckets are the
/// address's.
pub fn anonymous_credential(source: &str) -> String {
    format!("anonymous {source}")
}

/// The hourly limit of `credential`'s bucket of `resource`.
pub fn limit_for(credential: &str, resource: &str) -> u64 {
    if credential.starts_with("anonymous ") {
        ANONYMOUS_LIMIT
    } else {
        limit_of(resource)
    }
}

/// The hourly limit of `resource`'s bucket.
pub fn limit_of(resource: &str) -> u64 {
    if resource == REGISTRATION {
        REGISTRATION_LIMIT
    } else {
        CORE_LIMIT
    }
}

/// The bucket a call spends: `route` has its numeric segments as `{id}`.
pub fn resource_of(method: &str, route: &str) -> &'static str {
    let registers = route.ends_with("/actions/runners/generate-jitconfig")
        || route.ends_with("/actions/runners/registration-token")
        || route.ends_with("/actions/runners/remove-token");
    if method == "POST" && registers {
        REGISTRATION
    } else {
        CORE
    }
}

/// Whose budget a call spends: GitHub counts an App's JWT requests and each
/// installation's token requests apart.
pub fn credential_of(authorization: Option<&str>) -> String {
    let token = authorization
        .and_then(|value| value.split_once(' ').map(|(_, token)| token.trim()))
        .unwrap_or("");
    // A JWT is three base64url parts; installation tokens are `ghs_…`.
    if token.split('.').count() == 3 {
        "app".to_owned()
    } else {
        format!("token:{token}")
    }
}

/// The credential of App `app_id`'s installation `installation_id`: every token
/// issued to it spends the same buckets.
pub fn installation_credential(app_id: u64, installation_id: u64) -> String {
    format!("app {app_id} installation {installation_id}")
}

/// One bucket's state, as a response's headers and `GET /rate_limit` report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketState {
    pub limit: u64,
    pub used: u64,
    /// Unix seconds when the bucket refills.
    pub reset: u64,
}

impl BucketState {
    pub fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.used)
    }
}

/// Calls spent per (credential, resource): (hour since start, calls in it).
type Spent = BTreeMap<(String, &'static str), (u64, u64)>;

/// The buckets of every credential, in hours counted from the simulator's start.
pub struct Buckets {
    started: Instant,
    /// (credential, resource) → (hour since start, calls in it).
    used: Mutex<Spent>,
    /// Resources spent for every credential until the hour ends ([`Buckets::exhaust_all`]).
    spent_for_all: Mutex<BTreeMap<&'static str, u64>>,
}

impl Buckets {
    pub fn new(started: Instant) -> Buckets {
        Buckets {
            started,
            used: Mutex::new(BTreeMap::new()),
            spent_for_all: Mutex::new(BTreeMap::new()),
        }
    }

    fn hour_and_reset(&self) -> (u64, u64) {
        let elapsed = self.started.elapsed().as_secs();
        let left_in_hour = HOUR.as_secs() - elapsed % HOUR.as_secs();
        let now = time::OffsetDateTime::now_utc().unix_timestamp().max(0) as u64;
        (elapsed / HOUR.as_secs(), now + left_in_hour)
    }

    /// The bucket without spending from it.
    pub fn peek(&self, credential: &str, resource: &'static str) -> BucketState {
        let (hour, reset) = self.hour_and_reset();
        let used = if self.spent_for_all(resource, hour) {
            limit_for(credential, resource)
        } else {
            let used = self.used.lock().unwrap_or_else(|e| e.into_inner());
            match used.get(&(credential.to_owned(), resource)) {
                Some((at, count)) if *at == hour => *count,
                _ => 0,
            }
        };
        BucketState {
            limit: limit_for(credential, resource),
            used,
            reset,
        }
    }

    /// Gives back one call: GitHub does not count a conditional request answered 304
    /// (made with an `Authorization` header) against the primary rate limit.
    pub fn refund(&self, credential: &str, resource: &'static str) {
        let (hour, _) = self.hour_and_reset();
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, count)) = used.get_mut(&(credential.to_owned(), resource)) {
            if *at == hour {
                *count = count.saturating_sub(1);
            }
        }
    }

    /// Spends one call, or answers `Err` with the spent bucket when none is left.
    pub fn spend(
        &self,
        credential: &str,
        resource: &'static str,
    ) -> Result<BucketState, BucketState> {
        let (hour, reset) = self.hour_and_reset();
        let limit = limit_for(credential, resource);
        if self.spent_for_all(resource, hour) {
            return Err(BucketState {
                limit,
                used: limit,
                reset,
            });
        }
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let entry = used
            .entry((credential.to_owned(), resource))
            .or_insert((hour, 0));
        if entry.0 != hour {
            *entry = (hour, 0);
        }
        if entry.1 >= limit {
            return Err(BucketState {
                limit,
                used: entry.1,
                reset,
            });
        }
        entry.1 += 1;
        Ok(BucketState {
            limit,
            used: entry.1,
            reset,
        })
    }

    /// Uses up `resource` for every credential until the hour ends.
    pub fn exhaust_all(&self, resource: &'static str) {
        let (hour, _) = self.hour_and_reset();
        self.spent_for_all
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(resource, hour);
    }

    fn spent_for_all(&self, resource: &'static str, hour: u64) -> bool {
        self.spent_for_all
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(resource)
            == Some(&hour)
    }

    /// Uses up `resource` for `credential` until the hour ends (tests of exhaustion).
    pub fn exhaust(&self, credential: &str, resource: &'static str) {
        let (hour, _) = self.hour_and_reset();
        let limit = limit_for(credential, resource);
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        used.insert((credential.to_owned(), resource), (hour, limit));
    }

    /// The body of `GET /rate_limit` for `credential` (GitHub's `rate-limit-overview`).
    pub fn overview(&self, credential: &str) -> serde_json::Value {
        let state = |resource| {
            let bucket = self.peek(credential, resource);
            serde_json::json!({
                "limit": bucket.limit,
                "used": bucket.used,
                "remaining": bucket.remaining(),
                "reset": bucket.reset,
            })
        };
        let core = state(CORE);
        serde_json::json!({
            "resources": {
                "core": core,
                "actions_runner_registration": state(REGISTRATION),
                // Not used by ephemera; reported full, as GitHub reports them.
                "search": { "limit": 30, "used": 0, "remaining": 30, "reset": self.hour_and_reset().1 },
                "graphql": { "limit": 5000, "used": 0, "remaining": 5000, "reset": self.hour_and_reset().1 },
            },
            "rate": core,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registrations_spend_their_own_bucket_and_everything_else_core() {
        let post = |route| resource_of("POST", route);
        assert_eq!(
            post("/orgs/acme/actions/runners/generate-jitconfig"),
            REGISTRATION
        );
        assert_eq!(
            post("/repos/o/r/actions/runners/registration-token"),
            REGISTRATION
        );
        assert_eq!(post("/app/installations/{id}/access_tokens"), CORE);
        assert_eq!(resource_of("GET", "/orgs/acme/actions/runners"), CORE);
        assert_eq!(
            resource_of("DELETE", "/orgs/acme/actions/runners/{id}"),
            CORE
        );
    }

    #[test]
    fn jwts_and_installation_tokens_count_apart() {
        assert_eq!(credential_of(Some("Bearer aaa.bbb.ccc")), "app");
        assert_eq!(credential_of(Some("token ghs_x")), "token:ghs_x");
        assert_ne!(
            credential_of(Some("Bearer ghs_x")),
            credential_of(Some("Bearer ghs_y"))
        );
    }

    #[tokio::test]
    async fn a_spent_bucket_refuses_and_leaves_the_others_alone() {
        let buckets = Buckets::new(Instant::now());
        buckets.exhaust("token:a", REGISTRATION);
        let refused = buckets.spend("token:a", REGISTRATION).unwrap_err();
        assert_eq!(refused.remaining(), 0);
        assert_eq!(buckets.spend("token:a", CORE).map(|b| b.used), Ok(1));
        assert_eq!(
            buckets.spend("token:b", REGISTRATION).map(|b| b.used),
            Ok(1)
        );
        assert_eq!(buckets.peek("token:a", CORE).remaining(), CORE_LIMIT - 1);
    }
}
