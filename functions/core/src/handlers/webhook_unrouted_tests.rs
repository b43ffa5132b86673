//! Unrouted means ours: a hosted job leaves no trace, and a sized job the policy
//! refuses is recorded with the reason.

use super::*;
use crate::handlers::test_support::{config_with, now};
use crate::memory::MemoryQueue;
use crate::memory::MemoryUnroutedJobs;
use crate::metrics::Captured;
use crate::webhook::signature_header;
use secrecy::SecretString;

const BODY: &str = include_str!("../../fixtures/workflow_job_queued.json");

struct Harness {
    handler: WebhookHandler,
    queue: Arc<MemoryQueue>,
    unrouted: Arc<MemoryUnroutedJobs>,
    captured: Captured,
}

fn harness() -> Harness {
    let secrets = WebhookSecrets {
        current: SecretString::from("current"),
        previous: None,
    };
    let config = config_with(
        5,
        "    sizing: { accept: true, max_vcpus_per_runner: 16 }\n",
    );
    let queue = Arc::new(MemoryQueue::new());
    let unrouted = Arc::new(MemoryUnroutedJobs::new());
    let (metrics, captured) = Metrics::capture("eph");
    let capabilities = WebhookCapabilities {
        metrics,
        unrouted: Some(unrouted.clone()),
    };
    let handler = WebhookHandler::new(config, secrets, queue.clone(), capabilities);
    Harness {
        handler,
        queue,
        unrouted,
        captured,
    }
}

/// Delivers the queued fixture with `labels` instead of its own.
async fn deliver(h: &Harness, labels: &str) -> WebhookResponse {
    let body = BODY.replace(r#"["self-hosted", "linux", "x64"]"#, labels);
    assert_ne!(body, BODY, "the fixture's labels were replaced");
    let signature = signature_header(b"current", body.as_bytes());
    let request = WebhookRequest {
        event: Some("workflow_job"),
        delivery_id: Some("d-1"),
        signature: Some(&signature),
        body: body.as_bytes(),
    };
    h.handler.handle(request, now()).await
}

fn unrouted_counted(h: &Harness) -> usize {
    let documents = h.captured.documents().expect("valid EMF");
    documents
        .iter()
        .filter(|d| d.values(Metric::JobsUnrouted).is_some())
        .count()
}

#[tokio::test]
async fn a_hosted_job_leaves_no_record_and_no_metric() {
    let h = harness();
    for labels in [r#"["ubuntu-latest"]"#, r#"["windows-2022", "x86"]"#, "[]"] {
        let response = deliver(&h, labels).await;
        assert_eq!(response.status, 202, "{labels}");
    }
    assert!(h.queue.sent().is_empty());
    let recorded = h.unrouted.list_unrouted().await.expect("listed");
    assert!(recorded.is_empty(), "{recorded:?}");
    assert_eq!(unrouted_counted(&h), 0);
}

#[tokio::test]
async fn a_job_naming_a_pools_label_that_no_pool_takes_is_still_unrouted() {
    let h = harness();
    let response = deliver(&h, r#"["ubuntu-latest", "x64"]"#).await;
    assert_eq!(response.status, 202);
    let recorded = h.unrouted.list_unrouted().await.expect("listed");
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(recorded[0].reason, crate::routing::NO_POOL_HAS_ALL);
    assert_eq!(unrouted_counted(&h), 1);
}

#[tokio::test]
async fn a_sized_job_over_the_policy_is_recorded_with_the_reason() {
    let h = harness();
    let response = deliver(&h, r#"["self-hosted", "linux", "ephemera.cpu=64"]"#).await;
    assert_eq!(response.status, 202);
    assert!(response.message.contains("ephemera.cpu=64"), "{response:?}");
    assert!(h.queue.sent().is_empty());
    let recorded = h.unrouted.list_unrouted().await.expect("listed");
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    let reason = &recorded[0].reason;
    assert!(
        reason.contains("ephemera.cpu=64") && reason.contains("limit of 16"),
        "{reason}"
    );
    assert_eq!(unrouted_counted(&h), 1);
}

#[tokio::test]
async fn a_sized_job_the_policy_allows_is_queued_for_the_pool() {
    let h = harness();
    let labels = r#"["self-hosted", "linux", "ephemera.cpu=8", "ephemera.ram=32"]"#;
    assert_eq!(deliver(&h, labels).await.status, 200);
    let sent = h.queue.sent();
    assert_eq!(sent.len(), 1);
    assert!(sent[0].labels.contains(&"ephemera.cpu=8".to_owned()));
    assert!(h.unrouted.list_unrouted().await.expect("listed").is_empty());
}
