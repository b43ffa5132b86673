use super::*;
use crate::handlers::test_support::{config, now};
use crate::memory::MemoryQueue;
use crate::webhook::signature_header;
use secrecy::SecretString;

const BODY: &[u8] = include_bytes!("../../fixtures/workflow_job_queued.json");

fn handler(queue: Arc<MemoryQueue>) -> WebhookHandler {
    handler_with(queue, WebhookCapabilities::none())
}

fn handler_with(queue: Arc<MemoryQueue>, capabilities: WebhookCapabilities) -> WebhookHandler {
    let secrets = WebhookSecrets {
        current: SecretString::from("current"),
        previous: Some(SecretString::from("previous")),
    };
    WebhookHandler::new(config(5), secrets, queue, capabilities)
}

async fn deliver(
    queue: &Arc<MemoryQueue>,
    event: &str,
    signature: Option<&str>,
    body: &[u8],
) -> u16 {
    let request = WebhookRequest {
        event: Some(event),
        delivery_id: Some("d-1"),
        signature,
        body,
    };
    handler(queue.clone()).handle(request, now()).await.status
}

#[tokio::test]
async fn signed_queued_job_is_routed_and_queued_once() {
    let queue = Arc::new(MemoryQueue::new());
    let signature = signature_header(b"current", BODY);
    assert_eq!(
        deliver(&queue, "workflow_job", Some(&signature), BODY).await,
        200
    );
    let sent = queue.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].kind, MessageKind::Queued);
    assert_eq!(sent[0].pool, "linux");
    assert_eq!(sent[0].job_id, 29679449);
    assert_eq!(sent[0].installation_id, Some(5));
    assert_eq!(sent[0].delivery_id, "d-1");
    // GitHub's queued time rides to the scaler, for the job's timeline.
    assert_eq!(
        sent[0].github.created_at,
        Some(time::macros::datetime!(2026-11-22 10:00:00 UTC))
    );
    assert_eq!(sent[0].github.started_at, None);
}

#[tokio::test]
async fn previous_secret_is_accepted() {
    let queue = Arc::new(MemoryQueue::new());
    let signature = signature_header(b"previous", BODY);
    assert_eq!(
        deliver(&queue, "workflow_job", Some(&signature), BODY).await,
        200
    );
    assert_eq!(queue.sent().len(), 1);
}

#[tokio::test]
async fn bad_signatures_are_refused_with_401_and_queue_nothing() {
    let queue = Arc::new(MemoryQueue::new());
    let mut changed = BODY.to_vec();
    changed[20] ^= 1;
    let good = signature_header(b"current", BODY);
    let cases: Vec<(Option<String>, &[u8])> = vec![
        (Some(signature_header(b"wrong", BODY)), BODY),
        (None, BODY),
        (
            Some("sha1=0123456789abcdef0123456789abcdef01234567".into()),
            BODY,
        ),
        (Some(format!("sha256={}", "xy".repeat(32))), BODY),
        (Some(good), &changed),
    ];
    for (signature, body) in cases {
        assert_eq!(
            deliver(&queue, "workflow_job", signature.as_deref(), body).await,
            401,
            "{signature:?}"
        );
    }
    assert!(queue.sent().is_empty());
}

#[tokio::test]
async fn other_events_and_actions_are_acknowledged_and_dropped() {
    let queue = Arc::new(MemoryQueue::new());
    let signature = signature_header(b"current", BODY);
    assert_eq!(deliver(&queue, "push", Some(&signature), BODY).await, 202);
    assert_eq!(deliver(&queue, "ping", Some(&signature), BODY).await, 200);
    let waiting = String::from_utf8_lossy(BODY).replacen("\"queued\"", "\"waiting\"", 1);
    let signature = signature_header(b"current", waiting.as_bytes());
    assert_eq!(
        deliver(&queue, "workflow_job", Some(&signature), waiting.as_bytes()).await,
        202
    );
    assert!(queue.sent().is_empty());
}

#[tokio::test]
async fn jobs_no_pool_takes_and_runners_not_ours_are_dropped() {
    let queue = Arc::new(MemoryQueue::new());
    let windows = String::from_utf8_lossy(BODY).replace("\"x64\"", "\"windows\"");
    let signature = signature_header(b"current", windows.as_bytes());
    assert_eq!(
        deliver(&queue, "workflow_job", Some(&signature), windows.as_bytes()).await,
        202
    );
    let foreign = String::from_utf8_lossy(BODY)
        .replacen("\"queued\"", "\"completed\"", 1)
        .replace(
            "\"runner_name\": null",
            "\"runner_name\": \"someone-elses-runner\"",
        );
    let signature = signature_header(b"current", foreign.as_bytes());
    assert_eq!(
        deliver(&queue, "workflow_job", Some(&signature), foreign.as_bytes()).await,
        202
    );
    assert!(queue.sent().is_empty());
}

#[tokio::test]
async fn unreadable_body_is_400_and_queue_failure_is_503() {
    let queue = Arc::new(MemoryQueue::new());
    let garbage = b"{\"action\": \"queued\"}";
    let signature = signature_header(b"current", garbage);
    assert_eq!(
        deliver(&queue, "workflow_job", Some(&signature), garbage).await,
        400
    );
    queue.fail_sends(true);
    let signature = signature_header(b"current", BODY);
    assert_eq!(
        deliver(&queue, "workflow_job", Some(&signature), BODY).await,
        503
    );
    assert!(queue.sent().is_empty());
}

#[tokio::test]
async fn a_queued_job_no_pool_takes_is_counted_by_repository() {
    let queue = Arc::new(MemoryQueue::new());
    let (metrics, captured) = Metrics::capture("eph");
    let capabilities = WebhookCapabilities {
        metrics,
        unrouted: None,
    };
    let handler = handler_with(queue.clone(), capabilities);
    let typo = String::from_utf8_lossy(BODY).replace("\"linux\"", "\"linx\"");
    let signature = signature_header(b"current", typo.as_bytes());
    let request = WebhookRequest {
        event: Some("workflow_job"),
        delivery_id: Some("d-typo"),
        signature: Some(&signature),
        body: typo.as_bytes(),
    };
    let response = handler.handle(request, now()).await;
    assert_eq!(response.status, 202);
    assert!(
        response.message.contains("[self-hosted,linx,x64]"),
        "{response:?}"
    );
    assert!(queue.sent().is_empty());
    let documents = captured.documents().expect("valid EMF");
    let unrouted: Vec<_> = documents
        .iter()
        .filter_map(|d| {
            Some((
                d.values(Metric::JobsUnrouted)?,
                d.dimension(Dimension::Repository)?,
            ))
        })
        .collect();
    assert_eq!(unrouted, [(&[1.0][..], "octo-org/example-workflow")]);
}

#[tokio::test]
async fn a_queued_job_no_pool_takes_is_recorded_for_the_operator() {
    use crate::memory::MemoryUnroutedJobs;
    use crate::ports::UnroutedJobs;
    let queue = Arc::new(MemoryQueue::new());
    let unrouted = Arc::new(MemoryUnroutedJobs::new());
    let capabilities = WebhookCapabilities {
        metrics: Metrics::disabled(),
        unrouted: Some(unrouted.clone()),
    };
    let handler = handler_with(queue.clone(), capabilities);
    let typo = String::from_utf8_lossy(BODY).replace("\"linux\"", "\"linx\"");
    let signature = signature_header(b"current", typo.as_bytes());
    let request = WebhookRequest {
        event: Some("workflow_job"),
        delivery_id: Some("d-typo"),
        signature: Some(&signature),
        body: typo.as_bytes(),
    };
    assert_eq!(handler.handle(request, now()).await.status, 202);
    // A routed job leaves no such record.
    let signature = signature_header(b"current", BODY);
    let routed = WebhookRequest {
        signature: Some(&signature),
        body: BODY,
        ..request
    };
    assert_eq!(handler.handle(routed, now()).await.status, 200);
    let recorded = unrouted.list_unrouted().await.expect("listed");
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    let job = &recorded[0];
    assert_eq!(job.job_id, 29679449);
    assert_eq!(job.labels, ["self-hosted", "linx", "x64"]);
    assert_eq!(
        (job.owner.as_str(), job.repo.as_str()),
        ("octo-org", "example-workflow")
    );
    assert_eq!(job.delivery_id, "d-typo");
    assert_eq!(job.received_at, now());
}
