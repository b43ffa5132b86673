//! The webhook handler: screen, verify, parse, route, enqueue — and answer GitHub fast.
//!
//! What the headers alone refuse ([`crate::screen`]) is answered before the body is
//! hashed or read, and counted in `WebhookRejected` by reason, as a signature that does
//! not match is.
//! It never touches EC2, and the table only to leave a trace of a job no pool takes
//! ([`crate::unrouted`]). Everything it does not understand it answers with 202 and
//! drops, so GitHub's delivery log stays green for events that are not for us.

use crate::config::Config;
use crate::handlers::error_chain;
use crate::message::{MessageKind, QueueMessage, VERSION};
use crate::metrics::{Dimension, Metric, Metrics};
use crate::names;
use crate::ports::JobQueue;
use crate::ports::UnroutedJobs;
use crate::routing::{route_job, Routing};
use crate::screen::{screen, Headers, Rejection};
use crate::unrouted::UnroutedJob;
use crate::webhook::{
    parse_workflow_job, verify_signature, JobAction, WebhookSecrets, WorkflowJobEvent,
};
use std::sync::Arc;
use time::OffsetDateTime;
use tracing::{debug, error, info, warn};

/// The parts of an HTTP delivery the handler reads.
#[derive(Debug, Clone, Copy)]
pub struct WebhookRequest<'a> {
    /// `X-GitHub-Event`.
    pub event: Option<&'a str>,
    /// `X-GitHub-Delivery`.
    pub delivery_id: Option<&'a str>,
    /// `X-Hub-Signature-256`.
    pub signature: Option<&'a str>,
    pub body: &'a [u8],
}

/// The HTTP answer: a status and a JSON body `{"message": …}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookResponse {
    pub status: u16,
    pub message: String,
    /// Why the request was refused, if it was.
    pub rejected: Option<Rejection>,
}

impl WebhookResponse {
    fn new(status: u16, message: impl Into<String>) -> WebhookResponse {
        WebhookResponse {
            status,
            message: message.into(),
            rejected: None,
        }
    }

    /// The answer to a refused request: 401 for a signature missing or wrong, 413 for a
    /// body too large; an event ephemera does not take is acknowledged (202) so that
    /// GitHub's delivery log stays green for events sent to every App, and a request
    /// without any event is a 400.
    fn refused(rejection: Rejection, event: Option<&str>) -> WebhookResponse {
        let (status, message) = match (rejection, event) {
            (Rejection::NoSignature, _) => (401, "missing X-Hub-Signature-256 header"),
            (Rejection::BadSignature, _) => (401, "invalid signature"),
            (Rejection::TooLarge, _) => (413, "body too large"),
            (Rejection::UnknownEvent, Some(_)) => (202, "event ignored"),
            (Rejection::UnknownEvent, None) => (400, "missing X-GitHub-Event header"),
        };
        WebhookResponse {
            rejected: Some(rejection),
            ..WebhookResponse::new(status, message)
        }
    }

    /// The JSON body to send.
    pub fn body(&self) -> String {
        serde_json::json!({ "message": self.message }).to_string()
    }
}

/// Verifies deliveries and sends routed jobs to the queue.
pub struct WebhookHandler {
    config: Arc<Config>,
    secrets: WebhookSecrets,
    queue: Arc<dyn JobQueue>,
    metrics: Metrics,
    unrouted: Option<Arc<dyn UnroutedJobs>>,
}

/// What a webhook handler does besides verifying and enqueueing; each a field, so that
/// no assembly leaves one out unnoticed.
#[derive(Clone)]
pub struct WebhookCapabilities {
    /// Where `JobsQueued` is counted; flushed after every delivery.
    pub metrics: Metrics,
    /// Where jobs no pool takes are recorded for `ephemera jobs list --status
    /// unrouted`. None: the log line and the metric only.
    pub unrouted: Option<Arc<dyn UnroutedJobs>>,
}

impl WebhookCapabilities {
    /// No metrics, no record of unrouted jobs; for tests.
    pub fn none() -> WebhookCapabilities {
        WebhookCapabilities {
            metrics: Metrics::disabled(),
            unrouted: None,
        }
    }
}

impl WebhookHandler {
    /// The one assembly of a webhook handler.
    pub fn new(
        config: Arc<Config>,
        secrets: WebhookSecrets,
        queue: Arc<dyn JobQueue>,
        capabilities: WebhookCapabilities,
    ) -> WebhookHandler {
        WebhookHandler {
            config,
            secrets,
            queue,
            metrics: capabilities.metrics,
            unrouted: capabilities.unrouted,
        }
    }

    /// The answer to a request its headers (and its length) refuse, counted; `None` for
    /// one worth verifying. It reads no body and makes no call, so the Lambda function
    /// asks it before anything else, and [`WebhookHandler::handle`] asks it first too.
    pub fn refusal(&self, request: WebhookRequest<'_>) -> Option<WebhookResponse> {
        let headers = Headers {
            event: request.event,
            signature: request.signature,
            length: request.body.len() as u64,
        };
        self.refusal_of(headers, request.delivery_id)
    }

    /// [`WebhookHandler::refusal`] from the headers alone, before the body is read (its
    /// length from `Content-Length`), for a server that reads the body itself.
    pub fn refusal_of(
        &self,
        headers: Headers<'_>,
        delivery_id: Option<&str>,
    ) -> Option<WebhookResponse> {
        let rejection = screen(headers).err()?;
        // Debug only: under a flood an info line per request would cost more than the
        // refusal; the metric counts them.
        debug!(delivery_id, reason = rejection.reason(), "webhook refused");
        Some(self.reject(rejection, headers.event))
    }

    /// Counts a refusal and answers it.
    pub fn reject(&self, rejection: Rejection, event: Option<&str>) -> WebhookResponse {
        self.metrics.record(
            Metric::WebhookRejected,
            &[(Dimension::Reason, rejection.reason())],
            1.0,
        );
        self.metrics.flush();
        WebhookResponse::refused(rejection, event)
    }

    /// Handles one delivery received at `now`.
    pub async fn handle(
        &self,
        request: WebhookRequest<'_>,
        now: OffsetDateTime,
    ) -> WebhookResponse {
        if let Some(refused) = self.refusal(request) {
            return refused;
        }
        if let Err(err) = verify_signature(&self.secrets, request.signature, request.body) {
            // A wrong signature of the right form: an attack, or a secret that differs
            // from GitHub's (the alarm on this reason says which to look for).
            info!(delivery_id = request.delivery_id, reason = %err, "webhook refused");
            return self.reject(Rejection::BadSignature, request.event);
        }
        if request.event == Some("ping") {
            return WebhookResponse::new(200, "pong");
        }
        let message = match self.message_for(request, now).await {
            Ok(message) => message,
            Err(response) => return response,
        };
        match self.queue.send(&message).await {
            Ok(()) => {
                if message.kind == MessageKind::Queued {
                    self.metrics.record(
                        Metric::JobsQueued,
                        &[(Dimension::Pool, message.pool.as_str())],
                        1.0,
                    );
                    self.metrics.flush();
                }
                info!(
                    delivery_id = %message.delivery_id,
                    job_id = message.job_id,
                    pool = %message.pool,
                    kind = ?message.kind,
                    "job event queued"
                );
                WebhookResponse::new(200, format!("queued for pool {}", message.pool))
            }
            Err(err) => {
                error!(job_id = message.job_id, error = %error_chain(&err), "queue send failed");
                WebhookResponse::new(503, "could not queue the job; redeliver later")
            }
        }
    }

    /// A `queued` job meant for us that no pool takes (a `runs-on` typo, a pool not
    /// configured, a size the policy refuses): one log line with the job's labels, the
    /// reason and every pool's labels, and `JobsUnrouted` for its repository, and a
    /// record of it when a place for them is set (a failure to write it is logged; the
    /// delivery is answered all the same). A hosted job never comes here.
    async fn unrouted(
        &self,
        request: WebhookRequest<'_>,
        event: &WorkflowJobEvent,
        reason: &str,
        now: OffsetDateTime,
    ) {
        let pools: Vec<String> = self
            .config
            .pools
            .iter()
            .map(|pool| format!("{} [{}]", pool.name, pool.labels.join(",")))
            .collect();
        let repository = format!("{}/{}", event.owner, event.repo);
        warn!(
            delivery_id = request.delivery_id,
            job_id = event.job_id,
            repository = %repository,
            job_labels = %format!("[{}]", event.labels.join(",")),
            reason,
            pools = %pools.join("; "),
            "job unrouted: no pool takes it (a pool takes a job when its labels contain all \
             of the job's, self-hosted implied, and its sizing policy allows the job's sizing \
             labels)"
        );
        self.metrics.record(
            Metric::JobsUnrouted,
            &[(Dimension::Repository, repository.as_str())],
            1.0,
        );
        self.metrics.flush();
        if let Some(unrouted) = &self.unrouted {
            let job = UnroutedJob {
                job_id: event.job_id,
                run_id: event.run_id,
                owner: event.owner.clone(),
                repo: event.repo.clone(),
                labels: event.labels.clone(),
                reason: reason.to_owned(),
                installation_id: event.installation_id,
                delivery_id: request.delivery_id.unwrap_or("unknown").to_owned(),
                received_at: now,
            };
            if let Err(err) = unrouted.record_unrouted(&job).await {
                warn!(job_id = event.job_id, error = %error_chain(&err), "unrouted job not recorded");
            }
        }
    }

    /// The queue message for a `workflow_job` delivery, or the answer that drops it.
    async fn message_for(
        &self,
        request: WebhookRequest<'_>,
        now: OffsetDateTime,
    ) -> Result<QueueMessage, WebhookResponse> {
        let event = parse_workflow_job(request.body).map_err(|err| {
            info!(delivery_id = request.delivery_id, error = %err, "unreadable workflow_job");
            WebhookResponse::new(400, err.to_string())
        })?;
        let kind = match event.action {
            JobAction::Queued => MessageKind::Queued,
            JobAction::InProgress => MessageKind::InProgress,
            JobAction::Completed => MessageKind::Completed,
            JobAction::Waiting | JobAction::Other => {
                return Err(WebhookResponse::new(202, "action ignored"))
            }
        };
        if let Some(runner) = &event.runner_name {
            if kind != MessageKind::Queued && !names::is_ours(&self.config.deployment, runner) {
                return Err(WebhookResponse::new(
                    202,
                    format!("runner {runner} is not ours"),
                ));
            }
        }
        let labels = event.labels.join(",");
        let pool = match route_job(&self.config.pools, &event.labels) {
            Routing::Routed { pool, .. } => pool,
            Routing::Unrouted { reason } => {
                if kind == MessageKind::Queued {
                    self.unrouted(request, &event, &reason, now).await;
                }
                let message = format!("no pool for labels [{labels}]: {reason}");
                return Err(WebhookResponse::new(202, message));
            }
            Routing::NotOurs => {
                // A hosted job (`ubuntu-latest`): every one the organization runs comes
                // here, so it costs no write, no metric and no line above debug.
                debug!(job_id = event.job_id, labels = %labels, "job not for self-hosted runners");
                let message = format!("labels [{labels}] are not for self-hosted runners");
                return Err(WebhookResponse::new(202, message));
            }
        };
        Ok(QueueMessage {
            v: VERSION,
            kind,
            delivery_id: request.delivery_id.unwrap_or("unknown").to_owned(),
            job_id: event.job_id,
            run_id: event.run_id,
            pool: pool.name.clone(),
            labels: event.labels,
            repo: event.repo,
            owner: event.owner,
            installation_id: event.installation_id,
            runner_name: event.runner_name,
            runner_id: event.runner_id,
            received_at: now,
            github: event.times,
            attempt: event.attempt,
        })
    }
}

#[cfg(test)]
#[path = "webhook_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "webhook_refusal_tests.rs"]
mod refusal_tests;

#[cfg(test)]
#[path = "webhook_unrouted_tests.rs"]
mod unrouted_tests;
