//! The three parts `ephemera local` runs: the webhook listener, the queue drain into
//! the scaler, and the reaper on a timer; and the signal that stops them. Each part
//! takes its handler from a [`watch`] channel at every request, batch or run, so a
//! configuration that changed (`ephemera local --stack` follows the stack's parameter)
//! reaches it without a restart, and nothing in flight is cut off.

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use ephemera_aws::SqsJobQueue;
use ephemera_core::handlers::reaper::Reaper;
use ephemera_core::handlers::scaler::{BatchItem, Scaler};
use ephemera_core::handlers::webhook::{WebhookHandler, WebhookRequest, WebhookResponse};
use ephemera_core::screen::{Headers, Rejection, MAX_BODY_BYTES};
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::sync::watch;
use tracing::{error, warn};

/// The webhook listener's routes: `POST /webhook`, always with `handler`.
pub fn webhook_router(handler: Arc<WebhookHandler>) -> axum::Router {
    webhook_router_following(fixed(handler))
}

/// The webhook listener's routes: `POST /webhook`, each request with the handler
/// `handlers` holds when it arrives.
pub fn webhook_router_following(handlers: watch::Receiver<Arc<WebhookHandler>>) -> axum::Router {
    axum::Router::new()
        .route("/webhook", post(webhook))
        .with_state(handlers)
}

/// A channel that always holds `value` (its sender dropped: the last value stays).
fn fixed<T>(value: T) -> watch::Receiver<T> {
    watch::channel(value).1
}

/// `POST /webhook`: the headers screened before the body is read (a `Content-Length`
/// over the limit refuses it unread), then the body, read up to the limit, handled.
async fn webhook(
    State(handlers): State<watch::Receiver<Arc<WebhookHandler>>>,
    request: Request,
) -> Response {
    let handler = handlers.borrow().clone();
    let (parts, body) = request.into_parts();
    let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
    let headers = Headers {
        event: header("x-github-event"),
        signature: header("x-hub-signature-256"),
        length: header("content-length")
            .and_then(|length| length.parse().ok())
            .unwrap_or(0),
    };
    let delivery_id = header("x-github-delivery");
    if let Some(refused) = handler.refusal_of(headers, delivery_id) {
        return answer(refused);
    }
    // Without a Content-Length (chunked), the limit stops the read; a body that fails
    // to arrive whole is refused as too large, its likeliest cause.
    let body = match axum::body::to_bytes(body, MAX_BODY_BYTES as usize).await {
        Ok(body) => body,
        Err(_) => return answer(handler.reject(Rejection::TooLarge, headers.event)),
    };
    let request = WebhookRequest {
        event: headers.event,
        delivery_id,
        signature: headers.signature,
        body: &body,
    };
    answer(handler.handle(request, OffsetDateTime::now_utc()).await)
}

fn answer(response: WebhookResponse) -> Response {
    let status = StatusCode::from_u16(response.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = response.body();
    (status, [("content-type", "application/json")], body).into_response()
}

/// Long-polls the queue and hands each batch to the scaler; only messages that were
/// handled are deleted, the rest come back after the visibility timeout (and end in the
/// DLQ after the queue's maxReceiveCount).
pub async fn drain_queue(scaler: Arc<Scaler>, queue: Arc<SqsJobQueue>) -> anyhow::Result<()> {
    drain_queue_following(fixed(scaler), queue).await
}

/// [`drain_queue`], each batch handed to the scaler `scalers` holds when it arrives.
pub async fn drain_queue_following(
    scalers: watch::Receiver<Arc<Scaler>>,
    queue: Arc<SqsJobQueue>,
) -> anyhow::Result<()> {
    loop {
        let messages = match queue.receive(10, 2).await {
            Ok(messages) => messages,
            Err(err) => {
                warn!(error = %ephemera_core::handlers::error_chain(&err), "queue receive failed");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if messages.is_empty() {
            continue;
        }
        let items = messages
            .iter()
            .map(|m| BatchItem {
                message_id: m.message_id.clone(),
                body: m.body.clone(),
            })
            .collect();
        let scaler = scalers.borrow().clone();
        let failed = scaler.handle_batch(items, OffsetDateTime::now_utc()).await;
        for message in messages.iter().filter(|m| failed.contains(&m.message_id)) {
            // Retried after a short backoff rather than the queue's full visibility
            // timeout; the queue's maxReceiveCount still dead-letters a poison message.
            let delay = Duration::from_secs(u64::from(message.receive_count.clamp(1, 30)));
            if let Err(err) = queue.retry_after(&message.receipt_handle, delay).await {
                warn!(message_id = %message.message_id, error = %ephemera_core::handlers::error_chain(&err), "could not shorten the retry delay");
            }
        }
        for message in messages.iter().filter(|m| !failed.contains(&m.message_id)) {
            if let Err(err) = queue.delete(&message.receipt_handle).await {
                warn!(message_id = %message.message_id, error = %ephemera_core::handlers::error_chain(&err), "delete failed; the message will come back");
            }
        }
    }
}

/// Runs the reaper every `interval`, one run after the other.
pub async fn reap_every(reaper: Arc<Reaper>, interval: Duration) -> anyhow::Result<()> {
    reap_every_following(fixed(reaper), interval).await
}

/// [`reap_every`], each run by the reaper `reapers` holds when it starts.
pub async fn reap_every_following(
    reapers: watch::Receiver<Arc<Reaper>>,
    interval: Duration,
) -> anyhow::Result<()> {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        // Runs follow one another (a slow run delays the next), so a run may take its
        // time; the deadline only bounds one run, as the Lambda's timeout does.
        let deadline = tokio::time::Instant::now() + interval.max(Duration::from_secs(30));
        let reaper = reapers.borrow().clone();
        match reaper.run(OffsetDateTime::now_utc(), deadline).await {
            Ok(report) => tracing::debug!(?report, "reaper run"),
            Err(err) => {
                error!(error = %ephemera_core::handlers::error_chain(&err), "reaper run failed")
            }
        }
    }
}

/// Ctrl-C, or SIGTERM where there are signals.
pub(super) async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
