//! Test support: a [`GitHubApp`] wired to a [`Stub`] server, with a clock the test
//! moves, a stub that issues installation tokens, and the fixtures the tests share.

use crate::stub::{Answer, Seen, Stub};
use crate::{GitHubApp, GitHubAppConfig, RetryPolicy};
use ephemera_core::ports::{JitRequest, RunnerScope};
use secrecy::SecretString;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use time::macros::datetime;
use time::OffsetDateTime;

pub(crate) const PRIVATE_KEY: &str =
    include_str!("../../../tests/fixtures/github-app-test-key.pem");
pub(crate) const START: OffsetDateTime = datetime!(2025-01-01 12:00 UTC);
pub(crate) const TOKENS: &str = "/app/installations/7/access_tokens";

/// The app under test, with a clock the test moves.
pub(crate) struct Harness {
    pub app: GitHubApp,
    clock: Arc<Mutex<OffsetDateTime>>,
    pub stub: Stub,
}

impl Harness {
    pub(crate) async fn start(
        handler: impl Fn(&Seen) -> Answer + Send + Sync + 'static,
    ) -> Harness {
        let stub = Stub::start(with_tokens(handler)).await;
        let clock = Arc::new(Mutex::new(START));
        let now = clock.clone();
        let retry = RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(1),
            budget: Duration::from_secs(2),
        };
        let key = SecretString::from(PRIVATE_KEY.to_owned());
        let app = GitHubApp::new(
            GitHubAppConfig::new(format!("{}/", stub.url), 4242, key).with_retry(retry),
        )
        .expect("app")
        .with_clock(move || *now.lock().expect("clock"));
        Harness { app, clock, stub }
    }

    /// Another process's client of the same App and the same clock, on the same stub.
    pub(crate) fn another_app(&self) -> GitHubApp {
        let key = SecretString::from(PRIVATE_KEY.to_owned());
        let now = self.clock.clone();
        GitHubApp::new(GitHubAppConfig::new(
            format!("{}/", self.stub.url),
            4242,
            key,
        ))
        .expect("app")
        .with_clock(move || *now.lock().expect("clock"))
    }

    pub(crate) fn advance(&self, by: time::Duration) {
        *self.clock.lock().expect("clock") += by;
    }

    pub(crate) fn count(&self, endpoint: &str, outcome: &str) -> u64 {
        let calls = self.app.calls();
        let found = calls
            .iter()
            .find(|c| c.endpoint == endpoint && c.outcome == outcome);
        found.map_or(0, |c| c.count)
    }
}

/// Answers token requests with `tok-1`, `tok-2`... valid for an hour from [`START`].
fn with_tokens(
    handler: impl Fn(&Seen) -> Answer + Send + Sync + 'static,
) -> impl Fn(&Seen) -> Answer + Send + Sync + 'static {
    let issued = AtomicUsize::new(0);
    move |seen| {
        if seen.is("POST", TOKENS) {
            let n = issued.fetch_add(1, Ordering::SeqCst) + 1;
            Answer::json(
                201,
                json!({"token": format!("tok-{n}"), "expires_at": "2025-01-01T13:00:00Z"}),
            )
        } else {
            handler(seen)
        }
    }
}

pub(crate) fn org() -> RunnerScope {
    RunnerScope {
        installation_id: Some(7),
        owner: "acme".into(),
        repo: None,
    }
}

pub(crate) fn repo() -> RunnerScope {
    RunnerScope {
        repo: Some("app".into()),
        ..org()
    }
}

pub(crate) fn runner(id: u64) -> Answer {
    Answer::json(
        200,
        json!({"id": id, "name": "eph-linux-1", "os": "linux", "status": "online", "busy": true, "labels": []}),
    )
}

pub(crate) fn jit_request(name: &str, group: &str) -> JitRequest {
    JitRequest {
        name: name.into(),
        labels: vec!["self-hosted".into(), "linux".into()],
        runner_group: group.into(),
        work_folder: "_work".into(),
    }
}
