//! Signed `workflow_job` deliveries, sent the way GitHub sends them: once, never retried
//! by GitHub itself ("GitHub does not automatically redeliver failed deliveries"), each
//! attempt recorded in the App's delivery log ([`super::deliveries`]) with its outcome,
//! and sent again only when someone asks (`POST /app/hook/deliveries/{id}/attempts`).
//! The faults in force may lose a delivery (logged as failed), send one twice (same
//! GUID), or hold one back so a later delivery overtakes it.

use super::body;
use super::deliveries::Delivery;
use super::faults::DeliveryFate;
use super::state::SimJob;
use super::Shared;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;

/// GitHub gives up on a delivery after 10 seconds.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);

/// The `workflow_job` payload for `action`.
pub fn payload(action: &str, job: &SimJob, installation_id: u64) -> Value {
    json!({
        "action": action,
        "workflow_job": body::job(job),
        "repository": {
            "id": repository_id(job),
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

fn repository_id(job: &SimJob) -> u64 {
    job.run_id % 1_000_000
}

/// A random id shaped like GitHub's delivery GUIDs.
fn guid() -> String {
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

/// One event to deliver: its GUID and body stay the same across redeliveries.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub guid: String,
    pub action: String,
    pub body: String,
    pub repository_id: u64,
    pub redelivery: bool,
}

/// Sends the `action` delivery of a job, as the faults decide.
pub async fn deliver(shared: &Arc<Shared>, action: &str, job: &SimJob) {
    let outgoing = Outgoing {
        guid: guid(),
        action: action.to_owned(),
        body: payload(action, job, shared.config.installation_id).to_string(),
        repository_id: repository_id(job),
        redelivery: false,
    };
    send_with_faults(shared, outgoing).await;
}

/// Sends a recorded delivery again, now, with its GUID and body; `false` when there is
/// no such delivery.
pub fn redeliver(shared: &Arc<Shared>, delivery_id: u64) -> bool {
    let Some(original) = shared.lock().deliveries.get(&delivery_id).cloned() else {
        return false;
    };
    let outgoing = Outgoing {
        guid: original.guid,
        action: original.action,
        body: original.payload,
        repository_id: original.repository_id,
        redelivery: true,
    };
    let shared = shared.clone();
    tokio::spawn(async move { send_with_faults(&shared, outgoing).await });
    true
}

/// The status the endpoint answers every delivery of the outgoing's repository with,
/// if the test made it refuse them ([`super::SimHandle::refuse_deliveries`]).
fn refused(shared: &Shared, outgoing: &Outgoing) -> Option<u16> {
    let body: Value = serde_json::from_str(&outgoing.body).ok()?;
    let repo = body["repository"]["name"].as_str()?;
    let refused = shared.refused_repos.lock().expect("refused repos lock");
    refused.get(repo).copied()
}

async fn send_with_faults(shared: &Arc<Shared>, outgoing: Outgoing) {
    if let Some(status) = refused(shared, &outgoing) {
        tracing::warn!(guid = %outgoing.guid, status, "webhook refused (injected)");
        shared.lock().counters.webhooks_failed += 1;
        let started = OffsetDateTime::now_utc();
        let outcome = Outcome::failed(&format!("Invalid HTTP Response: {status}"), status);
        record(shared, &outgoing, started, Duration::ZERO, outcome, None);
        return;
    }
    let fate = shared.faults().delivery(&outgoing.action);
    match fate {
        DeliveryFate::Send => deliver_now(shared, &outgoing).await,
        DeliveryFate::Lose => {
            tracing::info!(guid = %outgoing.guid, action = %outgoing.action, "webhook lost (injected)");
            shared.lock().counters.webhooks_lost += 1;
            let started = OffsetDateTime::now_utc();
            let outcome = Outcome::failed("failed to connect", 502);
            record(shared, &outgoing, started, Duration::ZERO, outcome, None);
        }
        DeliveryFate::Duplicate => {
            shared.lock().counters.webhooks_duplicated += 1;
            deliver_now(shared, &outgoing).await;
            let again = Outgoing {
                redelivery: true,
                ..outgoing
            };
            deliver_now(shared, &again).await;
        }
        DeliveryFate::Delay(delay) => {
            shared.lock().counters.webhooks_delayed += 1;
            let shared = shared.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                deliver_now(&shared, &outgoing).await;
            });
        }
    }
}

/// What the receiver answered, as GitHub's delivery log words it.
struct Outcome {
    status: String,
    status_code: u16,
    headers: Value,
    payload: Option<String>,
}

impl Outcome {
    fn failed(status: &str, status_code: u16) -> Outcome {
        Outcome {
            status: status.to_owned(),
            status_code,
            headers: Value::Null,
            payload: None,
        }
    }
}

/// Sends one delivery, counts it as sent (2xx) or failed, and logs it.
async fn deliver_now(shared: &Shared, outgoing: &Outgoing) {
    let url = shared.webhook_url.lock().expect("webhook url lock").clone();
    let started = OffsetDateTime::now_utc();
    let clock = tokio::time::Instant::now();
    let outcome = match &url {
        Some(url) => send(shared, url, outgoing).await,
        None => Outcome::failed("failed to connect", 502),
    };
    let ok = (200..300).contains(&outcome.status_code);
    {
        let mut state = shared.lock();
        if ok {
            state.counters.webhooks_sent += 1;
        } else {
            state.counters.webhooks_failed += 1;
        }
    }
    record(
        shared,
        outgoing,
        started,
        clock.elapsed(),
        outcome,
        url.as_deref(),
    );
}

/// The headers GitHub sends with an App's delivery.
fn request_headers(shared: &Shared, outgoing: &Outgoing) -> Vec<(&'static str, String)> {
    let signature = ephemera_core::webhook::signature_header(
        shared.config.webhook_secret.as_bytes(),
        outgoing.body.as_bytes(),
    );
    vec![
        ("Accept", "*/*".to_owned()),
        ("Content-Type", "application/json".to_owned()),
        ("User-Agent", "GitHub-Hookshot/sim".to_owned()),
        ("X-GitHub-Delivery", outgoing.guid.clone()),
        ("X-GitHub-Event", "workflow_job".to_owned()),
        ("X-GitHub-Hook-ID", "1".to_owned()),
        (
            "X-GitHub-Hook-Installation-Target-ID",
            shared.config.app_id.to_string(),
        ),
        (
            "X-GitHub-Hook-Installation-Target-Type",
            "integration".to_owned(),
        ),
        ("X-Hub-Signature-256", signature),
    ]
}

async fn send(shared: &Shared, url: &str, outgoing: &Outgoing) -> Outcome {
    let mut request = shared.http.post(url).timeout(DELIVERY_TIMEOUT);
    for (name, value) in request_headers(shared, outgoing) {
        request = request.header(name, value);
    }
    let (guid, action) = (&outgoing.guid, &outgoing.action);
    match request.body(outgoing.body.clone()).send().await {
        Ok(response) => {
            let code = response.status().as_u16();
            let headers: serde_json::Map<String, Value> = response
                .headers()
                .iter()
                .filter_map(|(k, v)| Some((k.to_string(), json!(v.to_str().ok()?))))
                .collect();
            let payload = response.text().await.unwrap_or_default();
            let status = if (200..300).contains(&code) {
                "OK".to_owned()
            } else {
                tracing::warn!(guid, action, status = code, "webhook refused");
                format!("Invalid HTTP Response: {code}")
            };
            Outcome {
                status,
                status_code: code,
                headers: Value::Object(headers),
                payload: Some(payload),
            }
        }
        Err(error) if error.is_timeout() => {
            tracing::warn!(guid, action, "webhook timed out");
            Outcome::failed("timed out", 504)
        }
        Err(error) => {
            tracing::warn!(guid, action, error = %error, "webhook not delivered");
            Outcome::failed("failed to connect", 502)
        }
    }
}

/// Adds the attempt to the App's delivery log.
fn record(
    shared: &Shared,
    outgoing: &Outgoing,
    delivered_at: OffsetDateTime,
    took: Duration,
    outcome: Outcome,
    url: Option<&str>,
) {
    let headers: serde_json::Map<String, Value> = request_headers(shared, outgoing)
        .into_iter()
        .map(|(k, v)| (k.to_owned(), json!(v)))
        .collect();
    let delivery = Delivery {
        id: 0,
        guid: outgoing.guid.clone(),
        delivered_at,
        redelivery: outgoing.redelivery,
        duration: (took.as_secs_f64() * 100.0).round() / 100.0,
        status: outcome.status,
        status_code: outcome.status_code,
        action: outgoing.action.clone(),
        installation_id: shared.config.installation_id,
        repository_id: outgoing.repository_id,
        url: url.unwrap_or_default().to_owned(),
        request_headers: Value::Object(headers),
        payload: outgoing.body.clone(),
        response_headers: outcome.headers,
        response_payload: outcome.payload,
    };
    shared.lock().record_delivery(delivery);
}
