//! `github.rate_limit`: what is left of the installation's GitHub budgets, bucket by
//! bucket, from `GET /rate_limit` (free of charge; the installation token it needs costs
//! one call of the App's own budget). `core` pays for token mints, job lookups and runner
//! lists; `actions_runner_registration` for the JIT configurations, one per runner. A
//! budget nearly spent is a warning: jobs wait until it refills, nothing is broken.

use super::super::ports::GitHubPort;
use super::super::report::Check;
use ephemera_github::RateBucket;
use std::collections::BTreeMap;
use time::OffsetDateTime;

const CHECK: &str = "github.rate_limit";
/// The buckets ephemera spends, in the order they are reported.
const SPENT_BY_EPHEMERA: [&str; 2] = ["core", "actions_runner_registration"];
/// Below this share left, a bucket is reported as nearly spent.
const LOW_SHARE: f64 = 0.10;

/// The installation's budgets, judged; `account` is where it is installed.
pub(super) async fn rate_limit_check(
    github: &dyn GitHubPort,
    installation_id: u64,
    account: &str,
    now: OffsetDateTime,
) -> Check {
    match github.rate_limits(installation_id).await {
        Ok(buckets) => judge(&buckets, now),
        Err(err) => Check::warn(
            CHECK,
            format!("GET /rate_limit: {err}"),
            "check that GitHub is reachable and try again",
        ),
    }
    .on(account.to_owned())
}

/// The verdict on an installation's buckets at `now`.
pub fn judge(buckets: &BTreeMap<String, RateBucket>, now: OffsetDateTime) -> Check {
    let mut parts = Vec::new();
    let mut low = Vec::new();
    for name in SPENT_BY_EPHEMERA {
        let Some(bucket) = buckets.get(name) else {
            continue;
        };
        parts.push(format!(
            "{name} {} of {} left",
            bucket.remaining, bucket.limit
        ));
        if (bucket.remaining as f64) < bucket.limit as f64 * LOW_SHARE {
            let minutes = (bucket.reset - now.unix_timestamp())
                .max(0)
                .unsigned_abs()
                .div_ceil(60);
            low.push(format!("{name} refills in {minutes} min"));
        }
    }
    if parts.is_empty() {
        return Check::warn(
            CHECK,
            "GET /rate_limit listed neither core nor actions_runner_registration",
            "check the API URL: it should be GitHub's REST API (https://api.github.com)",
        );
    }
    let message = parts.join(", ");
    if low.is_empty() {
        return Check::pass(CHECK, message);
    }
    Check::warn(
        CHECK,
        format!("{message}: nearly spent"),
        format!(
            "{}; until then jobs wait in the queue (none is lost). The budget is the \
             installation's, shared with every other user of this App there",
            low.join(", ")
        ),
    )
}
