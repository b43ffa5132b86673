//! Signed `workflow_job` deliveries, sent the way GitHub sends them: once, no retries —
//! unless the faults in force lose one, send one twice (a redelivery, same delivery
//! id), or hold one back so a later delivery overtakes it.

use super::body;
use super::faults::DeliveryFate;
use super::state::SimJob;
use super::Shared;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// GitHub gives up on a delivery after 10 seconds.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);

/// The `workflow_job` payload for `action`.
pub fn payload(action: &str, job: &SimJob, installation_id: u64) -> Value {
    json!({
        "action": action,
        "workflow_job": body::job(job),
        "repository": {
            "id": job.run_id % 1_000_000,
            "name": job.repo,
            "full_name": format!("{}/{}", job.owner, job.repo),
            "private": true,
            "owner": { "login": job.owner, "type": "Organization" },
            "html_url": format!("https://github.com/{}/{}", job.owner, job.repo),
            "url": format!("{}/repos/{}/{}", body::API, job.owner, job.repo),
        },
        "organization": { "login": job.owner },
        "installation": { "id": installation_id },
        "sender": { "login": "octocat", "id": 1, "type": "User" },
    })
}

/// A random id shaped like GitHub's delivery GUIDs.
fn delivery_id() -> String {
    let b: [u8; 16] = rand::random();
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Sends one delivery as the faults decide, and counts what happened to it.
pub async fn deliver(shared: &Arc<Shared>, action: &str, job: &SimJob) {
    let id = delivery_id();
    let fate = shared.faults().delivery(action);
    match fate {
        DeliveryFate::Send => deliver_now(shared, &id, action, job).await,
        DeliveryFate::Lose => {
            tracing::info!(job_id = job.id, action, "webhook lost (injected)");
            shared.lock().counters.webhooks_lost += 1;
        }
        DeliveryFate::Duplicate => {
            shared.lock().counters.webhooks_duplicated += 1;
            deliver_now(shared, &id, action, job).await;
            deliver_now(shared, &id, action, job).await;
        }
        DeliveryFate::Delay(delay) => {
            shared.lock().counters.webhooks_delayed += 1;
            let (shared, action, job) = (shared.clone(), action.to_owned(), job.clone());
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                deliver_now(&shared, &id, &action, &job).await;
            });
        }
    }
}

/// Sends one delivery and counts it as sent (2xx) or failed (anything else, or no URL).
async fn deliver_now(shared: &Shared, id: &str, action: &str, job: &SimJob) {
    let url = shared.webhook_url.lock().expect("webhook url lock").clone();
    let ok = match url {
        Some(url) => send(shared, &url, id, action, job).await,
        None => false,
    };
    let mut state = shared.lock();
    if ok {
        state.counters.webhooks_sent += 1;
    } else {
        state.counters.webhooks_failed += 1;
    }
}

async fn send(shared: &Shared, url: &str, id: &str, action: &str, job: &SimJob) -> bool {
    let body = payload(action, job, shared.config.installation_id).to_string();
    let signature = ephemera_core::webhook::signature_header(
        shared.config.webhook_secret.as_bytes(),
        body.as_bytes(),
    );
    let result = shared
        .http
        .post(url)
        .header("X-GitHub-Event", "workflow_job")
        .header("X-GitHub-Delivery", id)
        .header("X-GitHub-Hook-ID", "1")
        .header("X-GitHub-Hook-Installation-Target-Type", "integration")
        .header("X-Hub-Signature-256", signature)
        .header("Content-Type", "application/json")
        .header("User-Agent", "GitHub-Hookshot/sim")
        .timeout(DELIVERY_TIMEOUT)
        .body(body)
        .send()
        .await;
    match result {
        Ok(response) if response.status().is_success() => true,
        Ok(response) => {
            tracing::warn!(job_id = job.id, action, status = %response.status(), "webhook refused");
            false
        }
        Err(error) => {
            tracing::warn!(job_id = job.id, action, error = %error, "webhook not delivered");
            false
        }
    }
}
