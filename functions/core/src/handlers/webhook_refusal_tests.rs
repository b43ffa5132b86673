//! The webhook's refusals: each reason answered with its status, counted once in
//! `WebhookRejected` under its reason, and nothing queued; a genuine delivery still
//! passes and is not counted.

use super::*;
use crate::handlers::test_support::{config, now};
use crate::memory::MemoryQueue;
use crate::metrics::Captured;
use crate::screen::MAX_BODY_BYTES;
use crate::webhook::signature_header;
use secrecy::SecretString;

const BODY: &[u8] = include_bytes!("../../fixtures/workflow_job_queued.json");

fn counted_handler(queue: Arc<MemoryQueue>) -> (WebhookHandler, Captured) {
    let secrets = WebhookSecrets {
        current: SecretString::from("current"),
        previous: None,
    };
    let (metrics, captured) = Metrics::capture("eph");
    let capabilities = WebhookCapabilities {
        metrics,
        unrouted: None,
    };
    let handler = WebhookHandler::new(config(5), secrets, queue, capabilities);
    (handler, captured)
}

/// `WebhookRejected` by reason, summed over every document written.
fn rejected(captured: &Captured) -> Vec<(String, f64)> {
    let documents = captured.documents().expect("valid EMF");
    let mut counts: Vec<(String, f64)> = Vec::new();
    for document in &documents {
        let (Some(values), Some(reason)) = (
            document.values(Metric::WebhookRejected),
            document.dimension(Dimension::Reason),
        ) else {
            continue;
        };
        counts.push((reason.to_owned(), values.iter().sum()));
    }
    counts.sort_by(|a, b| a.0.cmp(&b.0));
    counts
}

fn request<'a>(
    event: Option<&'a str>,
    signature: Option<&'a str>,
    body: &'a [u8],
) -> WebhookRequest<'a> {
    WebhookRequest {
        event,
        delivery_id: Some("d-1"),
        signature,
        body,
    }
}

#[tokio::test]
async fn each_refusal_is_answered_with_its_status_counted_by_reason_and_queues_nothing() {
    let good = signature_header(b"current", BODY);
    let wrong = signature_header(b"wrong", BODY);
    let large = vec![b' '; MAX_BODY_BYTES as usize + 1];
    let cases: [(WebhookRequest, u16, Rejection); 7] = [
        (
            request(Some("workflow_job"), None, BODY),
            401,
            Rejection::NoSignature,
        ),
        (
            request(Some("workflow_job"), Some("sha1=00"), BODY),
            401,
            Rejection::BadSignature,
        ),
        (
            request(Some("workflow_job"), Some(&wrong), BODY),
            401,
            Rejection::BadSignature,
        ),
        (
            request(Some("workflow_job"), Some(&good), &large),
            413,
            Rejection::TooLarge,
        ),
        (
            request(Some("push"), Some(&good), BODY),
            202,
            Rejection::UnknownEvent,
        ),
        (
            request(Some("push"), None, BODY),
            202,
            Rejection::UnknownEvent,
        ),
        (
            request(None, Some(&good), BODY),
            400,
            Rejection::UnknownEvent,
        ),
    ];
    for (request, status, reason) in cases {
        let queue = Arc::new(MemoryQueue::new());
        let (handler, captured) = counted_handler(queue.clone());
        let response = handler.handle(request, now()).await;
        assert_eq!(
            (response.status, response.rejected),
            (status, Some(reason)),
            "{request:?}"
        );
        assert_eq!(
            rejected(&captured),
            [(reason.reason().to_owned(), 1.0)],
            "{request:?}"
        );
        assert!(queue.sent().is_empty(), "{request:?}");
    }
}

#[tokio::test]
async fn a_genuine_delivery_passes_and_is_not_counted_as_rejected() {
    let queue = Arc::new(MemoryQueue::new());
    let (handler, captured) = counted_handler(queue.clone());
    let good = signature_header(b"current", BODY);
    let genuine = request(Some("workflow_job"), Some(&good), BODY);
    assert!(handler.refusal(genuine).is_none());
    let response = handler.handle(genuine, now()).await;
    assert_eq!((response.status, response.rejected), (200, None));
    assert_eq!(queue.sent().len(), 1);
    assert!(rejected(&captured).is_empty(), "{:?}", captured.lines());
}

#[tokio::test]
async fn a_content_length_over_the_limit_is_refused_before_the_body_is_read() {
    let (handler, captured) = counted_handler(Arc::new(MemoryQueue::new()));
    let good = signature_header(b"current", BODY);
    let headers = Headers {
        event: Some("workflow_job"),
        signature: Some(&good),
        length: MAX_BODY_BYTES + 1,
    };
    let refused = handler.refusal_of(headers, Some("d-1")).expect("refused");
    assert_eq!(
        (refused.status, refused.rejected),
        (413, Some(Rejection::TooLarge))
    );
    assert_eq!(rejected(&captured), [("too_large".to_owned(), 1.0)]);
}
