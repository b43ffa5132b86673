//! The GitHub simulator on its own: credentials, runner and job routes, signed webhooks;
//! its runner agent against moto is in [`agent`].

mod agent;
mod client;
mod deliveries;
mod prepare_host;
mod registration;
mod runs;
mod webhook_faults;

use anyhow::{bail, Context};
use axum::body::Bytes;
use axum::http::HeaderMap;
use ephemera_core::webhook::{parse_workflow_job, signature_header, JobAction};
use ephemera_tests::sim::{self, SimConfig, SimHandle};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::{sleep, Instant};

pub(super) const APP_ID: u64 = 4242;
const SECRET: &str = "sim-webhook-secret";
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures");

pub(super) fn config(deployment: &str) -> SimConfig {
    let pem = std::fs::read_to_string(format!("{FIXTURES}/github-app-test-key.pub.pem"))
        .expect("public key fixture");
    SimConfig::new(APP_ID, pem, SECRET, deployment)
}

pub(super) fn app_jwt(iss: u64) -> String {
    let pem = std::fs::read(format!("{FIXTURES}/github-app-test-key.pem")).expect("key fixture");
    let key = EncodingKey::from_rsa_pem(&pem).expect("RSA key");
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let claims = json!({ "iat": now - 60, "exp": now + 540, "iss": iss.to_string() });
    jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims, &key).expect("signing")
}

pub(super) async fn installation_token(sim: &SimHandle) -> anyhow::Result<String> {
    let url = format!("{}/app/installations/1/access_tokens", sim.url);
    let response = reqwest::Client::new()
        .post(url)
        .bearer_auth(app_jwt(APP_ID))
        .send()
        .await?;
    if response.status() != StatusCode::CREATED {
        bail!("token request answered {}", response.status());
    }
    let body: Value = response.json().await?;
    Ok(body["token"].as_str().context("token")?.to_owned())
}

/// Calls the simulator with an installation token; returns status and JSON body.
pub(super) async fn call(
    sim: &SimHandle,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<(StatusCode, Value)> {
    let mut request = reqwest::Client::new()
        .request(method, format!("{}{path}", sim.url))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await?;
    let status = response.status();
    let text = response.text().await?;
    Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
}

pub(super) async fn register(sim: &SimHandle, token: &str, name: &str) -> anyhow::Result<Value> {
    register_with(sim, token, name, &["linux", "x64"]).await
}

/// Registers a JIT runner with these labels; returns GitHub's answer.
pub(super) async fn register_with(
    sim: &SimHandle,
    token: &str,
    name: &str,
    labels: &[&str],
) -> anyhow::Result<Value> {
    let body =
        json!({ "name": name, "runner_group_id": 1, "labels": labels, "work_folder": "_work" });
    let path = "/orgs/acme/actions/runners/generate-jitconfig";
    let (status, answer) = call(sim, token, reqwest::Method::POST, path, Some(body)).await?;
    if status != StatusCode::CREATED {
        bail!("generate-jitconfig answered {status}: {answer}");
    }
    Ok(answer)
}

/// A webhook receiver on loopback that keeps every delivery.
#[derive(Clone, Default)]
pub(super) struct Receiver {
    deliveries: Arc<Mutex<Vec<(HeaderMap, Bytes)>>>,
}

impl Receiver {
    async fn start() -> anyhow::Result<(Receiver, String)> {
        let receiver = Receiver::default();
        let kept = receiver.clone();
        let app = axum::Router::new().route(
            "/webhook",
            axum::routing::post(move |headers: HeaderMap, body: Bytes| async move {
                kept.deliveries.lock().unwrap().push((headers, body));
                axum::http::StatusCode::ACCEPTED
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/webhook", listener.local_addr()?);
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok((receiver, url))
    }

    /// Checks every delivery's headers and signature; returns (action, job, conclusion).
    fn events(&self) -> Vec<(JobAction, u64, Value)> {
        let deliveries = self.deliveries.lock().unwrap();
        deliveries
            .iter()
            .map(|(headers, body)| {
                assert_eq!(headers["x-github-event"], "workflow_job");
                assert_eq!(headers["content-type"], "application/json");
                assert!(headers.contains_key("x-github-delivery"));
                let signature = signature_header(SECRET.as_bytes(), body);
                assert_eq!(headers["x-hub-signature-256"], signature.as_str());
                let event = parse_workflow_job(body).expect("a workflow_job body");
                let raw: Value = serde_json::from_slice(body).unwrap();
                (
                    event.action,
                    event.job_id,
                    raw["workflow_job"]["conclusion"].clone(),
                )
            })
            .collect()
    }

    /// The `X-GitHub-Delivery` of every delivery, in arrival order.
    fn delivery_ids(&self) -> Vec<String> {
        let deliveries = self.deliveries.lock().unwrap();
        deliveries
            .iter()
            .map(|(headers, _)| headers["x-github-delivery"].to_str().unwrap().to_owned())
            .collect()
    }

    async fn wait_for(&self, count: usize, limit: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + limit;
        while self.deliveries.lock().unwrap().len() < count {
            if Instant::now() > deadline {
                bail!("fewer than {count} deliveries within {limit:?}");
            }
            sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }
}

#[tokio::test]
async fn app_jwt_buys_a_token_and_bad_credentials_get_401() -> anyhow::Result<()> {
    let sim = sim::start(config("eph")).await?;
    let token = installation_token(&sim).await?;
    assert!(token.starts_with("ghs_"));
    let client = reqwest::Client::new();
    let tokens_url = format!("{}/app/installations/1/access_tokens", sim.url);

    let mut forged = app_jwt(APP_ID);
    let last = if forged.ends_with('A') { "B" } else { "A" };
    forged.replace_range(forged.len() - 1.., last);
    let answer = client.post(&tokens_url).bearer_auth(forged).send().await?;
    assert_eq!(answer.status(), StatusCode::UNAUTHORIZED);
    let body: Value = answer.json().await?;
    assert_eq!(body["message"], "Bad credentials");
    assert_eq!(body["documentation_url"], "https://docs.github.com/rest");

    let other_app = client
        .post(&tokens_url)
        .bearer_auth(app_jwt(7))
        .send()
        .await?;
    assert_eq!(other_app.status(), StatusCode::UNAUTHORIZED);
    let unknown = format!("{}/app/installations/99/access_tokens", sim.url);
    let answer = client
        .post(unknown)
        .bearer_auth(app_jwt(APP_ID))
        .send()
        .await?;
    assert_eq!(answer.status(), StatusCode::NOT_FOUND);

    let runners = format!("{}/orgs/acme/actions/runners", sim.url);
    assert_eq!(
        client.get(&runners).send().await?.status(),
        StatusCode::UNAUTHORIZED
    );
    let with_jwt = client
        .get(&runners)
        .bearer_auth(app_jwt(APP_ID))
        .send()
        .await?;
    assert_eq!(with_jwt.status(), StatusCode::UNAUTHORIZED);
    let (status, body) = call(
        &sim,
        &token,
        reqwest::Method::GET,
        "/orgs/acme/actions/runners",
        None,
    )
    .await?;
    assert_eq!(
        (status, body["total_count"].clone()),
        (StatusCode::OK, json!(0))
    );
    let installation = client.get(format!("{}/orgs/acme/installation", sim.url));
    let body: Value = installation
        .bearer_auth(app_jwt(APP_ID))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(
        (body["id"].clone(), body["account"]["login"].clone()),
        (json!(1), json!("acme"))
    );
    Ok(())
}

#[tokio::test]
async fn jit_runner_is_listed_offline_and_a_taken_name_conflicts() -> anyhow::Result<()> {
    let sim = sim::start(config("eph")).await?;
    let token = installation_token(&sim).await?;
    let answer = register(&sim, &token, "eph-linux-1").await?;
    let runner = &answer["runner"];
    assert_eq!(
        (runner["status"].clone(), runner["busy"].clone()),
        (json!("offline"), json!(false))
    );
    assert_eq!(runner["labels"][0]["name"], "linux");
    assert!(answer["encoded_jit_config"]
        .as_str()
        .is_some_and(|c| !c.is_empty()));

    let get = format!("/orgs/acme/actions/runners/{}", runner["id"]);
    let (status, listed) = call(&sim, &token, reqwest::Method::GET, &get, None).await?;
    assert_eq!(
        (status, listed["name"].clone()),
        (StatusCode::OK, json!("eph-linux-1"))
    );
    let (_, list) = call(
        &sim,
        &token,
        reqwest::Method::GET,
        "/orgs/acme/actions/runners?per_page=100",
        None,
    )
    .await?;
    assert_eq!(list["total_count"], 1);
    assert_eq!(list["runners"][0]["status"], "offline");

    let path = "/orgs/acme/actions/runners/generate-jitconfig";
    let again = json!({ "name": "eph-linux-1", "runner_group_id": 1, "labels": ["linux"] });
    let (status, body) = call(&sim, &token, reqwest::Method::POST, path, Some(again)).await?;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(body["message"]
        .as_str()
        .unwrap()
        .starts_with("Already exists"));
    let (_, groups) = call(
        &sim,
        &token,
        reqwest::Method::GET,
        "/orgs/acme/actions/runner-groups",
        None,
    )
    .await?;
    assert_eq!(groups["runner_groups"][0]["name"], "Default");
    Ok(())
}

#[tokio::test]
async fn jit_request_without_labels_is_unprocessable() -> anyhow::Result<()> {
    // A deliberately invalid request: kept out of the conformance recording.
    let mut config = config("eph");
    config.record_dir = None;
    let sim = sim::start(config).await?;
    let token = installation_token(&sim).await?;
    let path = "/orgs/acme/actions/runners/generate-jitconfig";
    let no_labels = json!({ "name": "eph-linux-2", "runner_group_id": 1 });
    let (status, _) = call(&sim, &token, reqwest::Method::POST, path, Some(no_labels)).await?;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    Ok(())
}

#[tokio::test]
async fn idle_runner_deletes_once_and_busy_runner_is_refused() -> anyhow::Result<()> {
    let sim = sim::start(config("eph")).await?;
    let token = installation_token(&sim).await?;
    let idle = register(&sim, &token, "eph-linux-idle").await?;
    let path = format!("/orgs/acme/actions/runners/{}", idle["runner"]["id"]);
    let (status, _) = call(&sim, &token, reqwest::Method::DELETE, &path, None).await?;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = call(&sim, &token, reqwest::Method::DELETE, &path, None).await?;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let busy = register(&sim, &token, "eph-linux-busy").await?;
    let id = busy["runner"]["id"].as_u64().context("runner id")?;
    sim.with_state(|state| state.runners.get_mut(&id).map(|r| r.busy = true));
    let path = format!("/orgs/acme/actions/runners/{id}");
    let (status, body) = call(&sim, &token, reqwest::Method::DELETE, &path, None).await?;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(body["message"]
        .as_str()
        .unwrap()
        .contains("is still running a job"));
    assert!(sim.snapshot().runners.contains_key(&id));
    Ok(())
}

#[tokio::test]
async fn created_job_is_served_and_announced_with_a_signed_queued_webhook() -> anyhow::Result<()> {
    let (receiver, url) = Receiver::start().await?;
    let sim = sim::start(config("eph")).await?;
    sim.set_webhook_url(url);
    let job_id = sim
        .create_job("acme", "app", &["self-hosted", "linux"], None)
        .await?;
    receiver.wait_for(1, Duration::from_secs(5)).await?;
    assert_eq!(
        receiver.events(),
        vec![(JobAction::Queued, job_id, Value::Null)]
    );

    let token = installation_token(&sim).await?;
    let path = format!("/repos/acme/app/actions/jobs/{job_id}");
    let (status, job) = call(&sim, &token, reqwest::Method::GET, &path, None).await?;
    assert_eq!(
        (status, job["status"].clone()),
        (StatusCode::OK, json!("queued"))
    );
    assert_eq!(job["labels"], json!(["self-hosted", "linux"]));
    let (status, _) = call(
        &sim,
        &token,
        reqwest::Method::GET,
        "/repos/acme/app/actions/jobs/1",
        None,
    )
    .await?;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(sim.snapshot().counters.webhooks_sent, 1);
    Ok(())
}
