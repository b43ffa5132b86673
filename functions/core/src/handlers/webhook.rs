//! The webhook handler: verify, parse, route, enqueue — and answer GitHub fast.
//!
//! It never touches EC2, and the table only to leave a trace of a job no pool takes
//! ([`crate::unrouted`]). Everything it does not understand it answers with 202 and
//! drops, so GitHub's delivery log stays green for events that are not for us.

use crate::config::Config;
use crate::handlers::error_chain;
use crate::message::{MessageKind, QueueMessage, VERSION};
use crate::metrics::{Dimension, Metric, Metrics};
use crate::names;
use crate::ports::JobQueue;
use crate::routing::route;
use crate::unrouted::{UnroutedJob, UnroutedJobs};
use crate::webhook::{
    parse_workflow_job, verify_signature, JobAction, WebhookSecrets, WorkflowJobEvent,
};
use std::sync::Arc;
use time::OffsetDateTime;
use tracing::{error, info, warn};

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
}

impl WebhookResponse {
    fn new(status: u16, message: impl Into<String>) -> WebhookResponse {
        WebhookResponse {
            status,
            message: message.into(),
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

impl WebhookHandler {
    pub fn new(
        config: Arc<Config>,
        secrets: WebhookSecrets,
        queue: Arc<dyn JobQueue>,
    ) -> WebhookHandler {
        WebhookHandler {
            config,
            secrets,
            queue,
            metrics: Metrics::disabled(),
            unrouted: None,
        }
    }

    /// Where jobs no pool takes are recorded for `ephemera jobs list --status unrouted`
    /// (nowhere by default: the log line and the metric only).
    pub fn with_unrouted(mut self, unrouted: Arc<dyn UnroutedJobs>) -> WebhookHandler {
        self.unrouted = Some(unrouted);
        self
    }

    /// Where `JobsQueued` is counted; flushed after every delivery.
    pub fn with_metrics(mut self, metrics: Metrics) -> WebhookHandler {
        self.metrics = metrics;
        self
    }

    /// Handles one delivery received at `now`.
    pub async fn handle(
        &self,
        request: WebhookRequest<'_>,
        now: OffsetDateTime,
    ) -> WebhookResponse {
        if let Err(err) = verify_signature(&self.secrets, request.signature, request.body) {
            info!(delivery_id = request.delivery_id, reason = %err, "webhook refused");
            return WebhookResponse::new(401, format!("invalid signature: {err}"));
        }
        match request.event {
            Some("workflow_job") => {}
            Some("ping") => return WebhookResponse::new(200, "pong"),
            Some(other) => return WebhookResponse::new(202, format!("event {other} ignored")),
            None => return WebhookResponse::new(400, "missing X-GitHub-Event header"),
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

    /// A `queued` job that no pool takes (a `runs-on` typo, a pool not configured): one
    /// log line with the job's labels and every pool's, and `JobsUnrouted` for its
    /// repository, and a record of it when a place for them is set (a failure to write
    /// it is logged; the delivery is answered all the same). A job without labels is for
    /// GitHub's hosted runners and is not counted.
    async fn unrouted(
        &self,
        request: WebhookRequest<'_>,
        event: &WorkflowJobEvent,
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
            pools = %pools.join("; "),
            "job unrouted: no pool has all of its labels (a pool takes a job when its labels \
             contain all of the job's; self-hosted is implied)"
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
        let Some(pool) = route(&self.config.pools, &event.labels) else {
            if kind == MessageKind::Queued && !event.labels.is_empty() {
                self.unrouted(request, &event, now).await;
            }
            let labels = event.labels.join(",");
            return Err(WebhookResponse::new(
                202,
                format!("no pool for labels [{labels}]"),
            ));
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
        })
    }
}

#[cfg(test)]
#[path = "webhook_tests.rs"]
mod tests;
