//! ephemera's GitHub client against the simulator, on every endpoint it uses, in both
//! scopes — the scenario whose recorded exchanges `make conformance` checks against
//! GitHub's OpenAPI description — and the simulator's REST faults as the client meets
//! them.

use super::config;
use ephemera_core::ports::{
    Forge, ForgeError, ForgeJobState, JitRequest, RunnerRemoval, RunnerScope,
};
use ephemera_github::{GitHubApp, GitHubAppConfig, RetryPolicy};
use ephemera_tests::sim::{self, RateLimitKind, RateLimitWindow, SimFaults, SimHandle};
use secrecy::SecretString;
use std::time::{Duration, Instant};

pub(super) fn client(sim: &SimHandle) -> GitHubApp {
    let pem = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/github-app-test-key.pem"
    ))
    .expect("key fixture");
    let retry = RetryPolicy {
        max_attempts: 6,
        base_delay: Duration::from_millis(20),
        budget: Duration::from_secs(8),
    };
    GitHubApp::new(GitHubAppConfig::new(&sim.url, 4242, SecretString::from(pem)).with_retry(retry))
        .expect("client")
}

fn scope(repo: Option<&str>, installation_id: Option<u64>) -> RunnerScope {
    RunnerScope {
        installation_id,
        owner: "acme".into(),
        repo: repo.map(str::to_owned),
    }
}

fn jit(name: &str, group: &str) -> JitRequest {
    JitRequest {
        name: name.into(),
        labels: vec!["self-hosted".into(), "linux".into(), "x64".into()],
        runner_group: group.into(),
        work_folder: "_work".into(),
    }
}

#[tokio::test]
async fn the_client_speaks_every_endpoint_in_both_scopes() -> anyhow::Result<()> {
    let sim = sim::start(config("eph")).await?;
    let app = client(&sim);
    // Installation looked up by organization and by repository, then reused.
    let org = scope(None, None);
    let repo = scope(Some("app"), None);

    let org_runner = app
        .generate_jit_config(&org, &jit("eph-org-1", "Default"))
        .await?;
    let repo_runner = app
        .generate_jit_config(&repo, &jit("eph-repo-1", ""))
        .await?;
    let taken = app.generate_jit_config(&org, &jit("eph-org-1", "")).await;
    assert!(matches!(taken, Err(ForgeError::AlreadyExists(_))));
    let missing_group = app
        .generate_jit_config(&org, &jit("eph-org-2", "gpu"))
        .await;
    assert!(matches!(
        missing_group,
        Err(ForgeError::Rejected { status: 404, .. })
    ));

    let seen = app.get_runner(&org, org_runner.runner_id).await?;
    assert_eq!(seen.map(|r| (r.online, r.busy)), Some((false, false)));
    assert_eq!(app.get_runner(&repo, 999_999).await?, None);
    let listed = app.list_runners(&repo).await?;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name, "eph-repo-1");

    let job_id = sim.create_job("acme", "app", &["linux"], None).await?;
    let state = app.job_state(None, "acme", "app", job_id).await?;
    assert_eq!(state, Some(ForgeJobState::Queued));
    assert_eq!(app.job_state(Some(1), "acme", "app", 7).await?, None);

    sim.with_state(|s| {
        s.runners
            .get_mut(&org_runner.runner_id)
            .map(|r| r.busy = true)
    });
    let busy = app.remove_runner(&org, org_runner.runner_id).await?;
    assert_eq!(busy, RunnerRemoval::Busy);
    sim.with_state(|s| {
        s.runners
            .get_mut(&org_runner.runner_id)
            .map(|r| r.busy = false)
    });
    for (scope, id) in [(&org, org_runner.runner_id), (&repo, repo_runner.runner_id)] {
        assert_eq!(app.remove_runner(scope, id).await?, RunnerRemoval::Removed);
        assert_eq!(app.remove_runner(scope, id).await?, RunnerRemoval::NotFound);
    }
    let counted = sim.snapshot().counters.api_calls;
    assert_eq!(counted.get("GET /orgs/{org}/installation"), Some(&1));
    assert_eq!(
        counted.get("GET /repos/{owner}/{repo}/installation"),
        Some(&1)
    );
    Ok(())
}

#[tokio::test]
async fn runners_are_listed_across_pages_of_a_hundred() -> anyhow::Result<()> {
    let sim = sim::start(config("eph")).await?;
    let app = client(&sim);
    let org = scope(None, Some(1));
    for n in 0..130 {
        app.generate_jit_config(&org, &jit(&format!("eph-page-{n}"), ""))
            .await?;
    }
    let listed = app.list_runners(&org).await?;
    assert_eq!(listed.len(), 130);
    let counted = sim.snapshot().counters.api_calls;
    assert_eq!(counted.get("GET /orgs/{org}/actions/runners"), Some(&2));
    assert!(app
        .list_runners(&scope(Some("other"), Some(1)))
        .await?
        .is_empty());

    // One runner among 130 found by name in one call (the list's `name` filter).
    let found = app.find_runner(&org, "eph-page-117").await?;
    assert_eq!(found.map(|r| r.name), Some("eph-page-117".to_owned()));
    assert_eq!(app.find_runner(&org, "eph-page-1000").await?, None);
    let counted = sim.snapshot().counters.api_calls;
    assert_eq!(counted.get("GET /orgs/{org}/actions/runners"), Some(&4));
    Ok(())
}

#[tokio::test]
async fn server_errors_are_retried_through_and_seeded_alike() -> anyhow::Result<()> {
    let faults = SimFaults {
        seed: 11,
        server_error_rate: 0.3,
        ..SimFaults::default()
    };
    let mut outcomes = Vec::new();
    for _ in 0..2 {
        let mut config = config("eph");
        config.faults = faults.clone();
        let sim = sim::start(config).await?;
        let app = client(&sim);
        let org = scope(None, Some(1));
        for n in 0..20 {
            app.generate_jit_config(&org, &jit(&format!("eph-5xx-{n}"), ""))
                .await?;
        }
        assert_eq!(
            sim.snapshot().runners.len(),
            20,
            "no failed call was applied"
        );
        outcomes.push(app.calls());
    }
    assert!(outcomes[0].iter().any(|c| c.outcome == "transient"));
    assert_eq!(outcomes[0], outcomes[1], "the same seed, the same faults");
    Ok(())
}

#[tokio::test]
async fn every_kind_of_rate_limit_is_waited_out() -> anyhow::Result<()> {
    for kind in [
        RateLimitKind::Primary,
        RateLimitKind::Secondary,
        RateLimitKind::TooManyRequests,
    ] {
        let mut config = config("eph");
        config.faults = SimFaults {
            rate_limit: Some(RateLimitWindow {
                after_calls: 2,
                duration: Duration::from_millis(1500),
                kind,
            }),
            ..SimFaults::default()
        };
        let sim = sim::start(config).await?;
        let app = client(&sim);
        let org = scope(None, Some(1));
        let started = Instant::now();
        app.generate_jit_config(&org, &jit("eph-limited", ""))
            .await?;
        assert!(started.elapsed() >= Duration::from_secs(1), "{kind:?}");
        let throttled = app
            .calls()
            .iter()
            .find(|c| c.outcome == "throttled")
            .map(|c| c.count);
        assert_eq!(
            throttled,
            Some(1),
            "{kind:?}: one refusal, then a wait: {:?}",
            app.calls()
        );
    }
    Ok(())
}

#[tokio::test]
async fn each_of_githubs_buckets_is_kept_and_spent_apart() -> anyhow::Result<()> {
    use ephemera_tests::sim::buckets::{CORE, CORE_LIMIT, REGISTRATION, REGISTRATION_LIMIT};
    let sim = sim::start(config("eph")).await?;
    let app = client(&sim);
    let org = scope(None, Some(1));
    app.generate_jit_config(&org, &jit("eph-bucket-1", ""))
        .await?;
    app.list_runners(&org).await?;
    // One registration from actions_runner_registration, one list from core: each
    // answer names its bucket, and the client keeps both.
    let kept = app.rate_buckets();
    assert_eq!(
        kept.get(REGISTRATION).map(|b| (b.limit, b.remaining)),
        Some((REGISTRATION_LIMIT, REGISTRATION_LIMIT - 1)),
        "{kept:?}"
    );
    assert_eq!(
        kept.get(CORE).map(|b| (b.limit, b.remaining)),
        Some((CORE_LIMIT, CORE_LIMIT - 1)),
        "{kept:?}"
    );
    // GET /rate_limit lists the same, and costs nothing.
    let listed = app.installation_rate_limits(1).await?;
    assert_eq!(listed.get(CORE).map(|b| b.remaining), Some(CORE_LIMIT - 1));
    assert_eq!(
        listed.get(REGISTRATION).map(|b| b.remaining),
        Some(REGISTRATION_LIMIT - 1)
    );
    assert_eq!(
        app.installation_rate_limits(1)
            .await?
            .get(CORE)
            .map(|b| b.remaining),
        Some(CORE_LIMIT - 1)
    );

    // The registration bucket spent: registrations are refused as GitHub's primary
    // limit (a 403 with none left, until the hour ends), and core calls carry on.
    sim.exhaust_bucket(REGISTRATION);
    let refused = app
        .generate_jit_config(&org, &jit("eph-bucket-2", ""))
        .await;
    assert!(
        matches!(refused, Err(ForgeError::Throttled { retry_after: Some(wait) }) if wait > Duration::from_secs(8)),
        "{refused:?}"
    );
    assert_eq!(
        app.rate_buckets().get(REGISTRATION).map(|b| b.remaining),
        Some(0)
    );
    assert_eq!(app.list_runners(&org).await?.len(), 1);
    assert_eq!(
        app.rate_buckets().get(CORE).map(|b| b.remaining),
        Some(CORE_LIMIT - 2)
    );
    Ok(())
}

#[tokio::test]
async fn latency_is_added_to_every_answer() -> anyhow::Result<()> {
    let mut config = config("eph");
    config.faults = SimFaults {
        latency: Duration::from_millis(150),
        ..SimFaults::default()
    };
    let sim = sim::start(config).await?;
    let app = client(&sim);
    let started = Instant::now();
    app.get_runner(&scope(None, Some(1)), 1).await?;
    // Two calls: the token and the runner.
    assert!(started.elapsed() >= Duration::from_millis(300));
    sim.set_faults(SimFaults::default());
    let started = Instant::now();
    app.get_runner(&scope(None, Some(1)), 1).await?;
    assert!(started.elapsed() < Duration::from_millis(150));
    Ok(())
}
