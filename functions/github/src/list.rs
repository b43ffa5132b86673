//! Listing a scope's self-hosted runners, a page of 100 at a time.
//!
//! The reaper's orphan sweep and the CLI want every runner of an organization or a
//! repository. GitHub pages the list; this reads pages until one comes back short or
//! `total_count` is reached, and never more than [`MAX_PAGES`], so a misbehaving answer
//! cannot keep a Lambda invocation looping. A runner created or removed between two
//! page reads may be missed or seen twice: callers treat the list as a snapshot and
//! reconcile again on their next run.

use crate::client::GitHubApp;
use crate::forge::{scope_path, RunnerBody};
use crate::http::{Call, Endpoint};
use ephemera_core::ports::{ForgeError, ForgeRunner, RunnerScope};
use serde::Deserialize;
use tracing::{instrument, warn};

/// GitHub's largest page.
pub(crate) const RUNNERS_PER_PAGE: usize = 100;
/// 10,000 runners per scope; GitHub itself caps a scope far below that.
const MAX_PAGES: usize = 100;

const LIST_RUNNERS: Endpoint = Endpoint::new("list_runners", &[]);

#[derive(Deserialize)]
struct RunnerPage {
    total_count: usize,
    runners: Vec<RunnerBody>,
}

impl GitHubApp {
    /// The runner registered in `scope` under `name`: one call, with the list endpoint's
    /// `name` filter (whatever the number of runners in the scope).
    #[instrument(skip_all, fields(owner = %scope.owner, repo = ?scope.repo, runner = %name))]
    pub async fn find_runner(
        &self,
        scope: &RunnerScope,
        name: &str,
    ) -> Result<Option<ForgeRunner>, ForgeError> {
        let installation_id = self.installation_for(scope).await?;
        let path = format!(
            "{}/actions/runners?name={}&per_page={RUNNERS_PER_PAGE}",
            scope_path(scope),
            query_value(name)
        );
        let reply = self
            .as_installation(installation_id, &LIST_RUNNERS, &Call::get(path))
            .await?;
        let listed: RunnerPage = reply.json(&LIST_RUNNERS)?;
        Ok(listed
            .runners
            .into_iter()
            .map(ForgeRunner::from)
            .find(|r| r.name == name))
    }

    /// Every self-hosted runner registered in `scope` (an organization or a repository),
    /// read page by page; one call per 100 runners. Read-only, so safe to retry.
    #[instrument(skip_all, fields(owner = %scope.owner, repo = ?scope.repo))]
    pub async fn list_runners(&self, scope: &RunnerScope) -> Result<Vec<ForgeRunner>, ForgeError> {
        let installation_id = self.installation_for(scope).await?;
        let mut runners = Vec::new();
        for page in 1..=MAX_PAGES {
            let path = format!(
                "{}/actions/runners?per_page={RUNNERS_PER_PAGE}&page={page}",
                scope_path(scope)
            );
            let reply = self
                .as_installation(installation_id, &LIST_RUNNERS, &Call::get(path))
                .await?;
            let listed: RunnerPage = reply.json(&LIST_RUNNERS)?;
            let received = listed.runners.len();
            runners.extend(listed.runners.into_iter().map(ForgeRunner::from));
            if received < RUNNERS_PER_PAGE || runners.len() >= listed.total_count {
                return Ok(runners);
            }
        }
        warn!(
            pages = MAX_PAGES,
            listed = runners.len(),
            "runner list cut at the page limit"
        );
        Ok(runners)
    }
}

/// `value` percent-encoded for a query string (unreserved characters kept).
fn query_value(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::harness::{org, repo, Harness};
    use crate::stub::{Answer, Seen};
    use ephemera_core::ports::ForgeError;
    use serde_json::json;

    /// Answers list calls from `total` runners, paged as GitHub pages them.
    fn pages_of(total: u64) -> impl Fn(&Seen) -> Answer + Send + Sync + 'static {
        move |seen| {
            let query = seen.path.split_once('?').map_or("", |(_, q)| q);
            let param = |name: &str| {
                query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                    .and_then(|v| v.parse::<u64>().ok())
            };
            let per_page = param("per_page").unwrap_or(30);
            let page = param("page").unwrap_or(1);
            let first = (page - 1) * per_page + 1;
            let runners: Vec<_> = (first..=total.min(page * per_page))
                .map(|id| json!({"id": id, "name": format!("eph-{id}"), "os": "linux", "status": if id % 2 == 0 { "online" } else { "offline" }, "busy": false, "labels": []}))
                .collect();
            Answer::json(200, json!({"total_count": total, "runners": runners}))
        }
    }

    #[tokio::test]
    async fn runners_are_listed_a_hundred_a_page_until_a_short_page() {
        let h = Harness::start(pages_of(250)).await;
        let runners = h.app.list_runners(&org()).await.expect("listed");
        assert_eq!(runners.len(), 250);
        assert_eq!(
            (runners[0].id, runners[0].online, runners[249].id),
            (1, false, 250)
        );
        assert!(runners[1].online);
        let paths: Vec<String> = h
            .stub
            .seen()
            .into_iter()
            .filter(|s| s.method == "GET")
            .map(|s| s.path)
            .collect();
        assert_eq!(
            paths,
            [1, 2, 3].map(|p| format!("/orgs/acme/actions/runners?per_page=100&page={p}"))
        );
        assert_eq!(h.count("list_runners", "ok"), 3);
    }

    #[tokio::test]
    async fn a_full_last_page_ends_the_list_at_total_count() {
        let h = Harness::start(pages_of(200)).await;
        let runners = h.app.list_runners(&repo()).await.expect("listed");
        assert_eq!(runners.len(), 200);
        assert_eq!(h.count("list_runners", "ok"), 2);
        assert!(h
            .stub
            .seen()
            .iter()
            .any(|s| s.path.starts_with("/repos/acme/app/actions/runners?")));
    }

    #[tokio::test]
    async fn an_empty_scope_is_one_call() {
        let h = Harness::start(pages_of(0)).await;
        assert!(h.app.list_runners(&org()).await.expect("listed").is_empty());
        assert_eq!(h.count("list_runners", "ok"), 1);
    }

    #[tokio::test]
    async fn a_list_that_never_ends_stops_at_the_page_limit() {
        // A broken answer: full pages and a total that is never reached.
        let h = Harness::start(|_| {
            let runners: Vec<_> = (0..100)
                .map(|id| json!({"id": id, "name": "r", "os": "linux", "status": "online", "busy": false, "labels": []}))
                .collect();
            Answer::json(200, json!({"total_count": u32::MAX, "runners": runners}))
        })
        .await;
        let runners = h.app.list_runners(&org()).await.expect("listed");
        assert_eq!(runners.len(), 100 * super::MAX_PAGES);
        assert_eq!(h.count("list_runners", "ok"), super::MAX_PAGES as u64);
    }

    #[tokio::test]
    async fn a_refused_list_is_an_error_not_an_empty_list() {
        let h = Harness::start(|_| {
            Answer::json(
                403,
                json!({"message": "Resource not accessible by integration"}),
            )
        })
        .await;
        let error = h.app.list_runners(&org()).await.expect_err("refused");
        assert!(matches!(error, ForgeError::Rejected { status: 403, .. }));
    }
}
