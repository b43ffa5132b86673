//! [`GitHubApp`] end to end against the [`Stub`](crate::stub::Stub) server: token
//! caching and refresh, installation and runner-group lookups, status mapping, retries
//! and call accounting.

use crate::harness::{jit_request, org, repo, runner, Harness, PRIVATE_KEY, START, TOKENS};
use crate::stub::Answer;
use crate::{GitHubApp, GitHubAppConfig, RetryPolicy};
use ephemera_core::ports::{
    Forge, ForgeError, ForgeJobState, HookDeliveries, RunnerRemoval, RunnerScope,
};
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

#[tokio::test]
async fn two_calls_share_one_installation_token() {
    let h = Harness::start(|_| runner(5)).await;
    for _ in 0..2 {
        let found = h.app.get_runner(&org(), 5).await.expect("runner");
        assert_eq!(
            found.map(|r| (r.id, r.online, r.busy)),
            Some((5, true, true))
        );
    }
    assert_eq!(h.stub.count("POST", TOKENS), 1);
    assert_eq!(h.count("access_token", "ok"), 1);
    assert_eq!(h.count("get_runner", "ok"), 2);
    assert_eq!(h.app.total_calls(), 3);
}

#[tokio::test]
async fn concurrent_calls_on_a_cold_cache_fetch_one_token() {
    let h = Harness::start(|_| runner(5)).await;
    let scope = org();
    let call = || h.app.get_runner(&scope, 5);
    let (a, b, c, d, e) = tokio::join!(call(), call(), call(), call(), call());
    for found in [a, b, c, d, e] {
        assert!(found.expect("runner").is_some());
    }
    assert_eq!(h.stub.count("POST", TOKENS), 1);
    assert_eq!(h.count("get_runner", "ok"), 5);
}

#[tokio::test]
async fn every_call_carries_github_headers_and_the_right_bearer() {
    let h = Harness::start(|_| runner(5)).await;
    h.app.get_runner(&org(), 5).await.expect("runner");
    let seen = h.stub.seen();
    let [token_call, runner_call] = seen.as_slice() else {
        panic!("two calls expected: {seen:?}")
    };
    for call in [token_call, runner_call] {
        assert_eq!(call.headers["accept"], "application/vnd.github+json");
        assert_eq!(call.headers["x-github-api-version"], "2022-11-28");
        assert_eq!(call.headers["user-agent"], "ephemera");
    }
    assert_eq!(token_call.bearer().split('.').count(), 3, "the App JWT");
    assert_eq!(runner_call.bearer(), "tok-1");
    assert_eq!(runner_call.path, "/orgs/acme/actions/runners/5");
}

#[tokio::test]
async fn token_is_replaced_five_minutes_before_it_expires() {
    let h = Harness::start(|_| runner(5)).await;
    h.app.get_runner(&org(), 5).await.expect("runner");
    h.advance(time::Duration::minutes(54));
    h.app.get_runner(&org(), 5).await.expect("runner");
    assert_eq!(h.stub.count("POST", TOKENS), 1);

    h.advance(time::Duration::minutes(1));
    h.app.get_runner(&org(), 5).await.expect("runner");
    assert_eq!(h.stub.count("POST", TOKENS), 2);
    assert_eq!(
        h.stub
            .seen()
            .last()
            .map(|s| s.bearer().to_owned())
            .as_deref(),
        Some("tok-2")
    );
}

#[tokio::test]
async fn refused_token_is_refreshed_once_and_the_call_retried() {
    let h = Harness::start(|seen| match seen.bearer() {
        "tok-1" => Answer::json(401, json!({"message": "Bad credentials"})),
        _ => runner(5),
    })
    .await;
    assert!(h.app.get_runner(&org(), 5).await.expect("runner").is_some());
    assert_eq!(h.stub.count("POST", TOKENS), 2);
    assert_eq!(h.count("get_runner", "unauthorized"), 1);
    assert_eq!(h.count("get_runner", "ok"), 1);
}

#[tokio::test]
async fn token_refused_twice_is_unauthorized() {
    let h = Harness::start(|_| Answer::json(401, json!({"message": "Bad credentials"}))).await;
    let result = h.app.remove_runner(&org(), 5).await;
    assert!(matches!(result, Err(ForgeError::Unauthorized)));
    assert_eq!(h.count("delete_runner", "unauthorized"), 2);
}

#[tokio::test]
async fn delete_maps_204_to_removed_404_to_not_found_and_422_to_busy() {
    let h = Harness::start(|seen| match seen.path.rsplit('/').next() {
        Some("1") => Answer::empty(204),
        Some("2") => Answer::json(404, json!({"message": "Not Found"})),
        _ => Answer::json(
            422,
            json!({"message": "Bad request - Runner is still running a job"}),
        ),
    })
    .await;
    let scope = repo();
    assert_eq!(
        h.app.remove_runner(&scope, 1).await.ok(),
        Some(RunnerRemoval::Removed)
    );
    assert_eq!(
        h.app.remove_runner(&scope, 2).await.ok(),
        Some(RunnerRemoval::NotFound)
    );
    assert_eq!(
        h.app.remove_runner(&scope, 3).await.ok(),
        Some(RunnerRemoval::Busy)
    );
    assert!(h
        .stub
        .seen()
        .iter()
        .any(|s| s.is("DELETE", "/repos/acme/app/actions/runners/3")));
    for outcome in ["ok", "not_found", "busy"] {
        assert_eq!(h.count("delete_runner", outcome), 1, "{outcome}");
    }
}

#[tokio::test]
async fn runner_group_is_resolved_by_name_once_per_organization() {
    let h = Harness::start(|seen| {
        if seen.path.starts_with("/orgs/acme/actions/runner-groups") {
            Answer::json(200, json!({"total_count": 2, "runner_groups": [
                {"id": 1, "name": "Default", "visibility": "all"},
                {"id": 42, "name": "gpu", "visibility": "selected"}]}))
        } else if seen.body["runner_group_id"] == 42 {
            Answer::json(201, json!({"runner": {"id": 900, "name": seen.body["name"]}, "encoded_jit_config": "c2VjcmV0"}))
        } else {
            Answer::json(400, json!({"message": "wrong group"}))
        }
    })
    .await;
    for name in ["eph-gpu-1", "eph-gpu-2"] {
        let jit = h
            .app
            .generate_jit_config(&org(), &jit_request(name, "gpu"))
            .await
            .expect("jit");
        assert_eq!(
            (jit.runner_id, jit.encoded.expose_secret()),
            (900, "c2VjcmV0")
        );
    }
    assert_eq!(h.count("runner_groups", "ok"), 1);
    assert_eq!(h.count("generate_jitconfig", "ok"), 2);
    let request = h
        .stub
        .seen()
        .into_iter()
        .find(|s| s.path.ends_with("generate-jitconfig"));
    let body = request.map(|s| s.body).unwrap_or_default();
    assert_eq!(body["labels"], json!(["self-hosted", "linux"]));
    assert_eq!(body["work_folder"], "_work");

    match h
        .app
        .generate_jit_config(&org(), &jit_request("eph-x-1", "missing"))
        .await
    {
        Err(ForgeError::Rejected { message, .. }) => assert!(message.contains("\"missing\"")),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn repository_runners_use_the_default_group_and_conflicts_are_already_exists() {
    let h = Harness::start(|seen| match seen.body["runner_group_id"].as_u64() {
        Some(1) => Answer::json(409, json!({"message": "Already exists"})),
        _ => Answer::json(400, json!({"message": "wrong group"})),
    })
    .await;
    let result = h
        .app
        .generate_jit_config(&repo(), &jit_request("eph-1", "gpu"))
        .await;
    assert!(matches!(result, Err(ForgeError::AlreadyExists(name)) if name == "eph-1"));
    assert_eq!(h.count("runner_groups", "ok"), 0);
    assert_eq!(h.count("generate_jitconfig", "already_exists"), 1);
}

#[tokio::test]
async fn unknown_installation_is_looked_up_once() {
    let h = Harness::start(|seen| match seen.path.as_str() {
        "/orgs/acme/installation" | "/repos/acme/app/installation" => {
            Answer::json(200, json!({"id": 7, "account": {"login": "acme"}}))
        }
        "/repos/acme/app/actions/jobs/11" => {
            Answer::json(200, json!({"id": 11, "status": "in_progress"}))
        }
        "/repos/acme/app/actions/jobs/12" => Answer::json(404, json!({"message": "Not Found"})),
        _ => runner(5),
    })
    .await;
    let scope = RunnerScope {
        installation_id: None,
        ..org()
    };
    for _ in 0..2 {
        h.app.get_runner(&scope, 5).await.expect("runner");
    }
    assert_eq!(h.stub.count("GET", "/orgs/acme/installation"), 1);
    assert!(h
        .stub
        .seen()
        .iter()
        .all(|s| !s.is("GET", "/orgs/acme/installation") || s.bearer().contains('.')));

    let state = h.app.job_state(None, "acme", "app", 11).await.expect("job");
    assert_eq!(state, Some(ForgeJobState::InProgress));
    assert_eq!(
        h.app.job_state(None, "acme", "app", 12).await.expect("job"),
        None
    );
    assert_eq!(h.stub.count("GET", "/repos/acme/app/installation"), 1);
    assert_eq!(h.count("installation", "ok"), 2);
}

#[tokio::test]
async fn app_not_installed_is_rejected_with_the_owner_named() {
    let h = Harness::start(|_| Answer::json(404, json!({"message": "Not Found"}))).await;
    let scope = RunnerScope {
        installation_id: None,
        ..org()
    };
    match h.app.get_runner(&scope, 5).await {
        Err(ForgeError::Rejected {
            status: 404,
            message,
        }) => assert!(message.contains("acme")),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn an_installation_github_does_not_know_says_the_app_is_not_installed() {
    let h = Harness::start(|_| Answer::json(404, json!({"message": "Not Found"}))).await;
    let scope = RunnerScope {
        installation_id: Some(8),
        ..org()
    };
    match h.app.remove_runner(&scope, 5).await {
        Err(ForgeError::Rejected {
            status: 404,
            message,
        }) => {
            assert!(message.contains("not installed"), "{message}");
            assert!(message.contains("installation 8"), "{message}");
            assert!(message.contains("--force --no-github"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn unknown_runner_reads_as_none() {
    let h = Harness::start(|_| Answer::json(404, json!({"message": "Not Found"}))).await;
    assert_eq!(h.app.get_runner(&org(), 5).await.expect("read"), None);
    assert_eq!(h.count("get_runner", "not_found"), 1);
}

#[tokio::test]
async fn server_errors_are_retried_until_attempts_run_out() {
    let failures = AtomicUsize::new(0);
    let h = Harness::start(move |seen| {
        match (seen.path.as_str(), failures.fetch_add(1, Ordering::SeqCst)) {
            ("/orgs/acme/actions/runners/5", 0) => {
                Answer::json(502, json!({"message": "Bad gateway"}))
            }
            ("/orgs/acme/actions/runners/5", _) => runner(5),
            _ => Answer::json(503, json!({})),
        }
    })
    .await;
    assert!(h
        .app
        .get_runner(&org(), 5)
        .await
        .expect("retried")
        .is_some());
    assert_eq!(
        (
            h.count("get_runner", "transient"),
            h.count("get_runner", "ok")
        ),
        (1, 1)
    );

    let result = h.app.remove_runner(&org(), 6).await;
    assert!(matches!(result, Err(ForgeError::Transient(_))));
    assert_eq!(h.count("delete_runner", "transient"), 4);
}

#[tokio::test]
async fn exhausted_rate_limit_is_throttled_with_the_wait_until_reset() {
    let reset = (START + time::Duration::hours(1))
        .unix_timestamp()
        .to_string();
    let h = Harness::start(move |_| {
        Answer::json(403, json!({"message": "API rate limit exceeded"}))
            .with_header("x-ratelimit-remaining", "0")
            .with_header("x-ratelimit-reset", reset.clone())
    })
    .await;
    let result = h.app.get_runner(&org(), 5).await;
    assert!(
        matches!(result, Err(ForgeError::Throttled { retry_after: Some(wait) }) if wait == Duration::from_secs(3600))
    );
    assert_eq!(
        h.count("get_runner", "throttled"),
        1,
        "an hour-long wait is not slept"
    );
}

#[tokio::test]
async fn unreachable_github_is_transient() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", closed.local_addr().expect("address"));
    drop(closed);
    let retry = RetryPolicy {
        max_attempts: 2,
        base_delay: Duration::from_millis(1),
        budget: Duration::from_secs(2),
    };
    let key = SecretString::from(PRIVATE_KEY.to_owned());
    let app = GitHubApp::new(GitHubAppConfig::new(url, 1, key).with_retry(retry)).expect("app");
    let result = app.remove_runner(&org(), 5).await;
    assert!(matches!(result, Err(ForgeError::Transient(_))));
    assert_eq!(
        app.calls().first().map(|c| (c.endpoint, c.outcome)),
        Some(("access_token", "transient"))
    );
}

/// A key source handing out `pem`, counting its reads.
struct Rotated {
    pem: &'static str,
    reads: std::sync::Arc<AtomicUsize>,
}

#[async_trait::async_trait]
impl ephemera_core::ports::AppKeySource for Rotated {
    async fn current_key(&self) -> Result<SecretString, ephemera_core::ports::AppKeyError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        Ok(SecretString::from(self.pem.to_owned()))
    }

    fn name(&self) -> String {
        "secret app-key".into()
    }
}

const SECOND_KEY: &str = include_str!("../../../tests/fixtures/github-app-test-key-2.pem");
const SECOND_PUBLIC_KEY: &str =
    include_str!("../../../tests/fixtures/github-app-test-key-2.pub.pem");

/// A stub that accepts only App JWTs signed with the second key.
async fn rotated_github(source_pem: &'static str) -> (Harness, std::sync::Arc<AtomicUsize>) {
    let h = Harness::start(|seen| {
        let decoding =
            jsonwebtoken::DecodingKey::from_rsa_pem(SECOND_PUBLIC_KEY.as_bytes()).expect("key");
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
        validation.validate_exp = false;
        validation.set_required_spec_claims::<&str>(&[]);
        match jsonwebtoken::decode::<serde_json::Value>(seen.bearer(), &decoding, &validation) {
            Ok(_) => Answer::json(200, json!([])),
            Err(_) => Answer::json(401, json!({"message": "Bad credentials"})),
        }
    })
    .await;
    let reads = std::sync::Arc::new(AtomicUsize::new(0));
    let source = Rotated {
        pem: source_pem,
        reads: reads.clone(),
    };
    let mut h = h;
    h.app = h.app.with_key_source(std::sync::Arc::new(source));
    (h, reads)
}

#[tokio::test]
async fn a_refused_app_key_is_read_again_and_the_call_retried_with_the_new_one() {
    let (h, reads) = rotated_github(SECOND_KEY).await;
    let page = h.app.list_deliveries(None).await.expect("listed");
    assert!(page.deliveries.is_empty());
    assert_eq!(reads.load(Ordering::SeqCst), 1);
    assert_eq!(h.count("list_deliveries", "unauthorized"), 1);
    assert_eq!(h.count("list_deliveries", "ok"), 1);
    // The new key stays in use: no more reads, no more refusals.
    h.app.list_deliveries(None).await.expect("listed");
    assert_eq!(reads.load(Ordering::SeqCst), 1);
    assert_eq!(h.count("list_deliveries", "unauthorized"), 1);
}

#[tokio::test]
async fn a_refused_app_key_that_did_not_change_is_read_once_and_not_retried() {
    let (h, reads) = rotated_github(PRIVATE_KEY).await;
    let result = h.app.list_deliveries(None).await;
    assert!(matches!(result, Err(ForgeError::Unauthorized)));
    assert_eq!(reads.load(Ordering::SeqCst), 1);
    assert_eq!(h.count("list_deliveries", "unauthorized"), 1);
    // A second refusal within the gap does not read the secret again.
    let result = h.app.list_deliveries(None).await;
    assert!(matches!(result, Err(ForgeError::Unauthorized)));
    assert_eq!(reads.load(Ordering::SeqCst), 1);
}
