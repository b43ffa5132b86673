//! Webhook handling throughput on one core: signature check, parse, route and the queue
//! message built, for `workflow_job` deliveries of the sizes GitHub sends; and the
//! refusals of a flood (`webhook_refused`), each with its CPU time as a share of a
//! genuine delivery's. The queue call itself is excluded (a queue that drops what it is
//! given). Run by `make bench`, which
//! reads the JSON this writes; `cargo bench -p ephemera-core --bench webhook` alone prints
//! it.

use async_trait::async_trait;
use ephemera_core::config::Config;
use ephemera_core::handlers::webhook::{WebhookHandler, WebhookRequest};
use ephemera_core::message::QueueMessage;
use ephemera_core::ports::{JobQueue, QueueError};
use ephemera_core::screen::MAX_BODY_BYTES;
use ephemera_core::webhook::{signature_header, WebhookSecrets};
use secrecy::SecretString;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SECRET: &str = "bench-webhook-secret";
const FIXTURE: &str = include_str!("../fixtures/workflow_job_queued.json");
/// Deliveries timed per payload (after a quarter as many untimed ones to warm up).
const EVENTS: usize = 20_000;
/// Under `cargo test --all-targets` (no `--bench` argument) a few, as a smoke test.
const EVENTS_SMOKE: usize = 50;

/// A queue that accepts everything and keeps nothing.
struct DropQueue;

#[async_trait]
impl JobQueue for DropQueue {
    async fn send(&self, _message: &QueueMessage) -> Result<(), QueueError> {
        Ok(())
    }

    async fn send_after(
        &self,
        _message: &QueueMessage,
        _delay: Duration,
    ) -> Result<(), QueueError> {
        Ok(())
    }
}

/// The `*_url` fields of GitHub's repository object, which make most of a delivery.
const REPOSITORY_URLS: &[&str] = &[
    "forks",
    "keys",
    "collaborators",
    "teams",
    "hooks",
    "issue_events",
    "events",
    "assignees",
    "branches",
    "tags",
    "blobs",
    "git_tags",
    "git_refs",
    "trees",
    "statuses",
    "languages",
    "stargazers",
    "contributors",
    "subscribers",
    "subscription",
    "commits",
    "git_commits",
    "comments",
    "issue_comment",
    "contents",
    "compare",
    "merges",
    "archive",
    "downloads",
    "issues",
    "pulls",
    "milestones",
    "notifications",
    "labels",
    "releases",
    "deployments",
];
const USER_URLS: &[&str] = &[
    "followers",
    "following",
    "gists",
    "starred",
    "subscriptions",
    "organizations",
    "repos",
    "events",
    "received_events",
];

fn user(login: &str, id: u64, kind: &str) -> Value {
    let mut user = json!({
        "login": login, "id": id, "node_id": "MDQ6VXNlcjIxMDMxMDY3",
        "avatar_url": format!("https://avatars.githubusercontent.com/u/{id}?v=4"),
        "gravatar_id": "", "url": format!("https://api.github.com/users/{login}"),
        "html_url": format!("https://github.com/{login}"), "type": kind, "site_admin": false,
    });
    for name in USER_URLS {
        user[format!("{name}_url")] = json!(format!("https://api.github.com/users/{login}/{name}"));
    }
    user
}

/// The fixture with the repository, organization and sender objects as GitHub sends
/// them, and `steps` steps (a `completed` delivery lists the job's steps).
fn delivery(action: &str, steps: usize) -> Vec<u8> {
    let mut body: Value = serde_json::from_str(FIXTURE).expect("fixture is JSON");
    let repo = &mut body["repository"];
    let base = "https://api.github.com/repos/octo-org/example-workflow";
    repo["owner"] = user("octo-org", 33_435_682, "Organization");
    repo["html_url"] = json!("https://github.com/octo-org/example-workflow");
    repo["description"] = json!("An example repository whose workflows run on ephemera");
    repo["url"] = json!(base);
    for name in REPOSITORY_URLS {
        repo[format!("{name}_url")] = json!(format!("{base}/{name}{{/id}}"));
    }
    for (key, value) in [
        ("created_at", json!("2024-05-14T10:00:00Z")),
        ("updated_at", json!("2026-11-01T10:00:00Z")),
        ("pushed_at", json!("2026-11-22T09:59:00Z")),
        (
            "git_url",
            json!("git://github.com/octo-org/example-workflow.git"),
        ),
        (
            "ssh_url",
            json!("git@github.com:octo-org/example-workflow.git"),
        ),
        (
            "clone_url",
            json!("https://github.com/octo-org/example-workflow.git"),
        ),
        ("size", json!(1_234)),
        ("stargazers_count", json!(12)),
        ("language", json!("Rust")),
        ("default_branch", json!("main")),
        ("visibility", json!("private")),
        ("topics", json!(["ci", "rust"])),
    ] {
        repo[key] = value;
    }
    body["organization"] = user("octo-org", 33_435_682, "Organization");
    body["sender"] = user("octocat", 21_031_067, "User");
    body["action"] = json!(action);
    let job = &mut body["workflow_job"];
    job["status"] = json!(action);
    job["steps"] = (0..steps)
        .map(|n| {
            json!({"name": format!("Run step number {n} of the build"), "status": "completed",
                   "conclusion": "success", "number": n + 1,
                   "started_at": "2026-11-22T10:01:00Z", "completed_at": "2026-11-22T10:01:30Z"})
        })
        .collect();
    if action != "queued" {
        job["runner_id"] = json!(17);
        job["runner_name"] = json!("eph-linux-x64-abc123");
    }
    serde_json::to_vec_pretty(&body).expect("serialisable")
}

fn config() -> Arc<Config> {
    let text = r#"
deployment: eph
github: { app_id: 1 }
pools:
  - name: gpu
    labels: [self-hosted, linux, x64, gpu]
    max_runners: 5
    instance_types: [g5.xlarge]
    launch_template: eph-gpu
  - name: linux-x64
    labels: [self-hosted, linux, x64]
    max_runners: 50
    instance_types: [m7i.large]
    launch_template: eph-runner
"#;
    Arc::new(Config::parse("bench.yaml", text).expect("valid bench config"))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank]
}

/// Microseconds, to a tenth.
fn micros(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1e7).round() / 10.0
}

/// One kind of request timed: its headers, its body and the status it must get.
struct Case<'a> {
    name: &'a str,
    event: &'a str,
    signature: Option<&'a str>,
    body: &'a [u8],
    status: u16,
}

/// Times `events` requests of `case` (after a quarter as many untimed); its JSON row and
/// its mean time per request in microseconds.
fn time(
    runtime: &tokio::runtime::Runtime,
    handler: &WebhookHandler,
    case: &Case,
    events: usize,
) -> (Value, f64) {
    let run = |count: usize| -> (Vec<Duration>, Duration) {
        let started = Instant::now();
        let mut each = Vec::with_capacity(count);
        runtime.block_on(async {
            for _ in 0..count {
                let one = Instant::now();
                let request = WebhookRequest {
                    event: Some(case.event),
                    delivery_id: Some("bench"),
                    signature: case.signature,
                    body: case.body,
                };
                let response = handler
                    .handle(request, time::OffsetDateTime::now_utc())
                    .await;
                assert_eq!(response.status, case.status, "{}", response.body());
                each.push(one.elapsed());
            }
        });
        (each, started.elapsed())
    };
    run(events / 4);
    let (mut each, total) = run(events);
    each.sort();
    let per_second = events as f64 / total.as_secs_f64();
    let row = json!({
        "payload": case.name,
        "bytes": case.body.len(),
        "events": events,
        "events_per_second": per_second.round(),
        "p50_us": micros(percentile(&each, 0.50)),
        "p99_us": micros(percentile(&each, 0.99)),
    });
    (row, 1e6 / per_second)
}

fn main() {
    let events = if std::env::args().any(|arg| arg == "--bench") {
        EVENTS
    } else {
        EVENTS_SMOKE
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let secrets = WebhookSecrets {
        current: SecretString::from(SECRET),
        previous: None,
    };
    let handler = WebhookHandler::new(
        config(),
        secrets,
        Arc::new(DropQueue),
        ephemera_core::handlers::webhook::WebhookCapabilities::none(),
    );
    let payloads = [
        ("queued, minimal fields", FIXTURE.as_bytes().to_vec()),
        ("queued, as GitHub sends it", delivery("queued", 0)),
        (
            "in_progress, as GitHub sends it",
            delivery("in_progress", 0),
        ),
        ("completed, 40 steps", delivery("completed", 40)),
    ];
    let mut results = Vec::new();
    let mut genuine_us = Vec::new();
    for (name, body) in &payloads {
        let signature = signature_header(SECRET.as_bytes(), body);
        let case = Case {
            name,
            event: "workflow_job",
            signature: Some(&signature),
            body,
            status: 200,
        };
        let (row, mean_us) = time(&runtime, &handler, &case, events);
        results.push(row);
        genuine_us.push((*name, mean_us));
    }
    let out = json!({
        "webhook": results,
        "webhook_refused": refusals(&runtime, &handler, events, &genuine_us),
    });
    let text = serde_json::to_string_pretty(&out).expect("serialisable");
    match std::env::var("EPHEMERA_BENCH_WEBHOOK_OUT") {
        Ok(path) if !path.is_empty() => {
            std::fs::write(&path, text + "\n").unwrap_or_else(|err| panic!("writing {path}: {err}"))
        }
        _ => println!("{text}"),
    }
}

/// The refusals of a flood, each with its CPU time as a share of a genuine delivery's
/// (`queued, as GitHub sends it`, the size a flood would copy): refusals per second on
/// one core. The four the headers decide must cost under a tenth; a signature of the
/// right form that does not match costs its HMAC over the body, and is shown for that.
fn refusals(
    runtime: &tokio::runtime::Runtime,
    handler: &WebhookHandler,
    events: usize,
    genuine_us: &[(&str, f64)],
) -> Vec<Value> {
    let body = delivery("queued", 0);
    let genuine = genuine_us
        .iter()
        .find(|(name, _)| *name == "queued, as GitHub sends it")
        .map_or(f64::NAN, |(_, us)| *us);
    let signature = signature_header(SECRET.as_bytes(), &body);
    let wrong = signature_header(b"not the secret", &body);
    let over = vec![b' '; MAX_BODY_BYTES as usize + 1];
    let cases = [
        ("no signature", "workflow_job", None, &body[..], 401),
        (
            "signature not sha256=<64 hex>",
            "workflow_job",
            Some("sha1=00"),
            &body,
            401,
        ),
        (
            "event not taken (push)",
            "push",
            Some(signature.as_str()),
            &body,
            202,
        ),
        (
            "over the size limit",
            "workflow_job",
            Some(&signature),
            &over,
            413,
        ),
        (
            "signature does not match",
            "workflow_job",
            Some(&wrong),
            &body,
            401,
        ),
    ];
    let mut rows = Vec::new();
    for (name, event, signature, body, status) in cases {
        let case = Case {
            name,
            event,
            signature,
            body,
            status,
        };
        let (mut row, mean_us) = time(runtime, handler, &case, events);
        row["share_of_genuine"] = json!((mean_us / genuine * 1000.0).round() / 1000.0);
        rows.push(row);
    }
    rows
}
