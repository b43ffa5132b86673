//! The App's webhook delivery log as GitHub serves it: a failed delivery stays failed
//! (no automatic redelivery), is listed (newest first, paged by cursor through the Link
//! header, filtered by status) and shown in full to the App's JWT, and is sent again on
//! request with the same GUID and body under a new delivery id.

use super::{app_jwt, config, installation_token, APP_ID};
use axum::body::Bytes;
use axum::http::HeaderMap;
use ephemera_tests::sim::{self, SimHandle};
use reqwest::StatusCode;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::{sleep, Instant};

/// A webhook endpoint that answers 503 while `refusing`, 202 otherwise, and keeps the
/// (GUID, body) of every request it saw.
#[derive(Clone, Default)]
struct Endpoint {
    refusing: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<(String, Bytes)>>>,
}

impl Endpoint {
    async fn start() -> anyhow::Result<(Endpoint, String)> {
        let endpoint = Endpoint::default();
        let kept = endpoint.clone();
        let app = axum::Router::new().route(
            "/webhook",
            axum::routing::post(move |headers: HeaderMap, body: Bytes| async move {
                let guid = headers["x-github-delivery"].to_str().unwrap().to_owned();
                kept.seen.lock().unwrap().push((guid, body));
                if kept.refusing.load(Ordering::SeqCst) {
                    axum::http::StatusCode::SERVICE_UNAVAILABLE
                } else {
                    axum::http::StatusCode::ACCEPTED
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/webhook", listener.local_addr()?);
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok((endpoint, url))
    }

    fn seen(&self) -> Vec<(String, Bytes)> {
        self.seen.lock().unwrap().clone()
    }
}

/// GETs or POSTs an App route with the App's JWT; returns status, Link header and body.
async fn app_call(
    sim: &SimHandle,
    method: reqwest::Method,
    path: &str,
) -> anyhow::Result<(StatusCode, Option<String>, Value)> {
    let url = if path.starts_with("http") {
        path.to_owned()
    } else {
        format!("{}{path}", sim.url)
    };
    let response = reqwest::Client::new()
        .request(method, url)
        .bearer_auth(app_jwt(APP_ID))
        .send()
        .await?;
    let status = response.status();
    let link = response
        .headers()
        .get("link")
        .map(|l| l.to_str().unwrap().to_owned());
    let text = response.text().await?;
    Ok((
        status,
        link,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    ))
}

/// The URL of a Link header's `rel="next"`.
fn next_url(link: &str) -> Option<String> {
    link.split(',')
        .find(|part| part.contains("rel=\"next\""))
        .and_then(|part| Some(part.split(['<', '>']).nth(1)?.to_owned()))
}

async fn wait_for_log(sim: &SimHandle, count: usize) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while sim.snapshot().deliveries.len() < count {
        anyhow::ensure!(
            Instant::now() < deadline,
            "fewer than {count} deliveries logged"
        );
        sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

#[tokio::test]
async fn a_failed_delivery_is_listed_and_redelivered_only_on_request() -> anyhow::Result<()> {
    let (endpoint, url) = Endpoint::start().await?;
    let mut config = config("eph");
    config.webhook_url = Some(url);
    let sim = sim::start(config).await?;
    endpoint.refusing.store(true, Ordering::SeqCst);
    let refused_job = sim.create_job("acme", "app", &["linux"], None).await?;
    endpoint.refusing.store(false, Ordering::SeqCst);
    sim.create_job("acme", "app", &["linux"], None).await?;
    sim.create_job("acme", "app", &["linux"], None).await?;
    wait_for_log(&sim, 3).await?;
    // GitHub does not retry: the refused delivery was attempted once.
    sleep(Duration::from_millis(300)).await;
    assert_eq!(endpoint.seen().len(), 3);

    // Newest first, a page of one at a time, through the Link header's cursor.
    let mut pages = Vec::new();
    let mut next = Some("/app/hook/deliveries?per_page=1".to_owned());
    while let Some(url) = next.take() {
        let (status, link, page) = app_call(&sim, reqwest::Method::GET, &url).await?;
        assert_eq!(status, StatusCode::OK);
        pages.push(page.as_array().cloned().unwrap_or_default());
        next = link.as_deref().and_then(next_url);
        anyhow::ensure!(pages.len() <= 3, "the Link header never ends");
    }
    assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [1, 1, 1]);
    let oldest = &pages[2][0];
    let ids: Vec<u64> = pages.iter().map(|p| p[0]["id"].as_u64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");
    assert_eq!(oldest["status"], "Invalid HTTP Response: 503");
    assert_eq!(
        (oldest["status_code"].clone(), oldest["redelivery"].clone()),
        (Value::from(503), Value::from(false))
    );
    assert_eq!(
        (oldest["event"].as_str(), oldest["action"].as_str()),
        (Some("workflow_job"), Some("queued"))
    );
    let failed = app_call(
        &sim,
        reqwest::Method::GET,
        "/app/hook/deliveries?status=failure",
    )
    .await?
    .2;
    assert_eq!(failed.as_array().map(Vec::len), Some(1));

    // The full delivery: what was sent and what came back.
    let failed_id = oldest["id"].as_u64().unwrap();
    let path = format!("/app/hook/deliveries/{failed_id}");
    let (status, _, full) = app_call(&sim, reqwest::Method::GET, &path).await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        full["request"]["payload"]["workflow_job"]["id"],
        refused_job
    );
    assert_eq!(
        full["request"]["headers"]["X-GitHub-Delivery"],
        oldest["guid"]
    );

    // Redelivered on request: same GUID and body, a new id, marked as a redelivery.
    let attempts = format!("/app/hook/deliveries/{failed_id}/attempts");
    let (status, _, _) = app_call(&sim, reqwest::Method::POST, &attempts).await?;
    assert_eq!(status, StatusCode::ACCEPTED);
    wait_for_log(&sim, 4).await?;
    let (_, _, newest) = app_call(
        &sim,
        reqwest::Method::GET,
        "/app/hook/deliveries?per_page=1",
    )
    .await?;
    let again = &newest[0];
    assert_eq!(again["guid"], oldest["guid"]);
    assert_ne!(again["id"], oldest["id"]);
    assert_eq!(
        (again["redelivery"].clone(), again["status"].clone()),
        (Value::from(true), Value::from("OK"))
    );
    let seen = endpoint.seen();
    assert_eq!(seen.len(), 4);
    assert_eq!(
        seen[3], seen[0],
        "the redelivery carries the first attempt's GUID and body"
    );
    Ok(())
}

#[tokio::test]
async fn delivery_routes_take_only_the_apps_jwt_and_known_ids() -> anyhow::Result<()> {
    let sim = sim::start(config("eph")).await?;
    let token = installation_token(&sim).await?;
    let client = reqwest::Client::new();
    let list = format!("{}/app/hook/deliveries", sim.url);
    let with_token = client.get(&list).bearer_auth(&token).send().await?;
    assert_eq!(with_token.status(), StatusCode::UNAUTHORIZED);
    let (status, link, empty) =
        app_call(&sim, reqwest::Method::GET, "/app/hook/deliveries").await?;
    assert_eq!(
        (status, link, empty),
        (StatusCode::OK, None, Value::Array(vec![]))
    );
    let (status, _, _) = app_call(&sim, reqwest::Method::GET, "/app/hook/deliveries/42").await?;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = app_call(
        &sim,
        reqwest::Method::POST,
        "/app/hook/deliveries/42/attempts",
    )
    .await?;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, body) = app_call(
        &sim,
        reqwest::Method::GET,
        "/app/hook/deliveries?cursor=nope",
    )
    .await?;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["errors"][0]["field"], "cursor");
    Ok(())
}

/// GitHub's content-creation limit ("About secondary rate limits": 80 content-generating
/// requests a minute, 500 an hour): the 81st redelivery asked within a minute is refused
/// with 403, the secondary rate limit's message and a `retry-after`, and counted.
#[tokio::test]
async fn the_81st_redelivery_in_a_minute_meets_the_secondary_rate_limit() -> anyhow::Result<()> {
    let (_endpoint, url) = Endpoint::start().await?;
    let mut config = config("eph");
    config.webhook_url = Some(url);
    let sim = sim::start(config).await?;
    sim.create_job("acme", "app", &["linux"], None).await?;
    wait_for_log(&sim, 1).await?;
    let id = sim.snapshot().deliveries.keys().next().copied().unwrap();
    let attempts = format!("{}/app/hook/deliveries/{id}/attempts", sim.url);
    let client = reqwest::Client::new();
    for ask in 1..=80 {
        let response = client
            .post(&attempts)
            .bearer_auth(app_jwt(APP_ID))
            .send()
            .await?;
        assert_eq!(response.status(), StatusCode::ACCEPTED, "ask {ask}");
    }
    let refused = client
        .post(&attempts)
        .bearer_auth(app_jwt(APP_ID))
        .send()
        .await?;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let wait: u64 = refused.headers()["retry-after"].to_str()?.parse()?;
    assert!((1..=60).contains(&wait), "retry-after {wait}");
    let body: Value = refused.json().await?;
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("secondary rate limit")),
        "{body}"
    );
    assert_eq!(sim.snapshot().counters.redeliveries_throttled, 1);
    Ok(())
}
