//! The webhook handler over any delivery: any body, any headers, signed or not. It
//! answers with one of its documented statuses and never panics; only a correctly
//! signed `workflow_job` for a configured pool is queued, as one message.

use super::{corpus, mutated, settings};
use ephemera_core::config::Config;
use ephemera_core::handlers::webhook::{WebhookHandler, WebhookRequest};
use ephemera_core::memory::MemoryQueue;
use ephemera_core::screen::Rejection;
use ephemera_core::webhook::{signature_header, WebhookSecrets};
use ephemera_core::OffsetDateTime;
use proptest::prelude::*;
use secrecy::SecretString;
use std::sync::Arc;

const CONFIG: &str = "deployment: eph\ngithub:\n  app_id: 1\npools:\n  - name: linux-x64\n    \
                      labels: [linux, x64]\n    max_runners: 5\n    instance_types: [t3.micro]\n    \
                      ami: ami-1\n  - name: gpu\n    labels: [linux, x64, gpu]\n    max_runners: 1\n    \
                      instance_types: [g5.xlarge]\n    ami: ami-1\n";
const SECRET: &[u8] = b"fuzz-secret";

/// A delivery as the HTTP layer hands it over.
#[derive(Debug, Clone)]
struct Delivery {
    event: Option<String>,
    delivery_id: Option<String>,
    /// Sign the body with the right secret, or send this header as it is.
    signature: Result<(), Option<String>>,
    body: Vec<u8>,
}

/// Delivers `delivery` and checks the answer against what was queued.
fn deliver(runtime: &tokio::runtime::Runtime, delivery: &Delivery) {
    let config = Arc::new(Config::parse("fuzz.yaml", CONFIG).expect("fuzz config"));
    let queue = Arc::new(MemoryQueue::new());
    let secrets = WebhookSecrets {
        current: SecretString::from(String::from_utf8_lossy(SECRET).into_owned()),
        previous: None,
    };
    let handler = WebhookHandler::new(
        config.clone(),
        secrets,
        queue.clone(),
        ephemera_core::handlers::webhook::WebhookCapabilities::none(),
    );
    let signature = match &delivery.signature {
        Ok(()) => Some(signature_header(SECRET, &delivery.body)),
        Err(header) => header.clone(),
    };
    let request = WebhookRequest {
        event: delivery.event.as_deref(),
        delivery_id: delivery.delivery_id.as_deref(),
        signature: signature.as_deref(),
        body: &delivery.body,
    };
    let response = runtime.block_on(handler.handle(request, OffsetDateTime::UNIX_EPOCH));
    let sent = queue.sent();
    assert!(
        [200, 202, 400, 401, 413].contains(&response.status),
        "{response:?}"
    );
    assert!(serde_json::from_str::<serde_json::Value>(&response.body()).is_ok());
    let signed = signature.as_deref() == Some(signature_header(SECRET, &delivery.body).as_str());
    if !signed {
        // Refused: for its signature (401), or, before the signature is looked at, for an
        // event ephemera does not take or a body over the limit.
        let refused_unread = matches!(
            response.rejected,
            Some(Rejection::UnknownEvent | Rejection::TooLarge)
        );
        assert!(
            response.status == 401 || refused_unread,
            "unsigned: {response:?}"
        );
        assert!(response.rejected.is_some(), "unsigned: {response:?}");
    }
    if response.status == 200 && delivery.event.as_deref() == Some("workflow_job") {
        assert_eq!(sent.len(), 1, "{response:?}");
        assert!(config.pool(&sent[0].pool).is_some(), "{:?}", sent[0]);
    } else {
        assert!(sent.is_empty(), "{response:?} queued {sent:?}");
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
}

#[test]
fn every_corpus_delivery_is_answered() {
    let runtime = runtime();
    for (_, body) in corpus("webhook") {
        for event in ["workflow_job", "ping", "push"] {
            deliver(
                &runtime,
                &Delivery {
                    event: Some(event.to_owned()),
                    delivery_id: Some("d-1".to_owned()),
                    signature: Ok(()),
                    body: body.clone(),
                },
            );
        }
    }
}

fn header() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        Just(Some(String::new())),
        "[ -~]{0,80}".prop_map(Some)
    ]
}

fn event() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        4 => Just(Some("workflow_job".to_owned())),
        1 => header(),
        1 => Just(Some("ping".to_owned())),
    ]
}

fn signature() -> impl Strategy<Value = Result<(), Option<String>>> {
    prop_oneof![
        4 => Just(Ok(())),
        1 => header().prop_map(Err),
        1 => "sha256=[0-9a-f]{64}".prop_map(|s| Err(Some(s))),
    ]
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => mutated("webhook"),
        1 => proptest::collection::vec(any::<u8>(), 0..300),
    ]
}

proptest! {
    #![proptest_config(settings("tests/fuzz/regressions/webhook.txt"))]

    #[test]
    fn any_delivery_is_answered_and_only_routed_jobs_are_queued(
        event in event(),
        delivery_id in header(),
        signature in signature(),
        body in body(),
    ) {
        deliver(&runtime(), &Delivery { event, delivery_id, signature, body });
    }
}
