//! The App's webhook delivery log and its routes, as GitHub serves them to an App's JWT:
//! `GET /app/hook/deliveries` (newest first, `per_page` up to 100, `cursor` paging
//! through the `Link` header, `status=success|failure`), `GET /app/hook/deliveries/{id}`
//! and `POST /app/hook/deliveries/{id}/attempts` (202; sends that delivery again now,
//! as a new delivery with a new id, the same GUID and body, and `redelivery: true`).

use super::auth::ApiError;
use super::routes::Sim;
use super::state::SimState;
use super::{body, webhook};
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use time::OffsetDateTime;

/// One delivery attempt, as GitHub logs it.
#[derive(Debug, Clone, Serialize)]
pub struct Delivery {
    pub id: u64,
    pub guid: String,
    #[serde(with = "time::serde::rfc3339")]
    pub delivered_at: OffsetDateTime,
    pub redelivery: bool,
    /// Seconds.
    pub duration: f64,
    /// `OK`, `Invalid HTTP Response: 503`, `failed to connect` or `timed out`.
    pub status: String,
    pub status_code: u16,
    pub action: String,
    pub installation_id: u64,
    pub repository_id: u64,
    #[serde(skip)]
    pub url: String,
    #[serde(skip)]
    pub request_headers: Value,
    /// The body sent, kept for redelivery.
    #[serde(skip)]
    pub payload: String,
    #[serde(skip)]
    pub response_headers: Value,
    #[serde(skip)]
    pub response_payload: Option<String>,
}

impl Delivery {
    pub fn succeeded(&self) -> bool {
        (200..400).contains(&self.status_code)
    }
}

impl SimState {
    /// Logs a delivery attempt under a new id; returns it.
    pub fn record_delivery(&mut self, mut delivery: Delivery) -> u64 {
        delivery.id = self.next_delivery_id();
        let id = delivery.id;
        self.deliveries.insert(id, delivery);
        id
    }
}

/// GitHub's longest page.
const MAX_PER_PAGE: usize = 100;

fn item(d: &Delivery) -> Value {
    json!({
        "id": d.id,
        "guid": d.guid,
        "delivered_at": body::timestamp(d.delivered_at),
        "redelivery": d.redelivery,
        "duration": d.duration,
        "status": d.status,
        "status_code": d.status_code,
        "event": "workflow_job",
        "action": d.action,
        "installation_id": d.installation_id,
        "repository_id": d.repository_id,
        "throttled_at": null,
    })
}

fn full(d: &Delivery) -> Value {
    let mut value = item(d);
    let payload: Value = serde_json::from_str(&d.payload).unwrap_or(Value::Null);
    value["url"] = json!(d.url);
    value["request"] = json!({ "headers": d.request_headers, "payload": payload });
    value["response"] = json!({ "headers": d.response_headers, "payload": d.response_payload });
    value
}

fn invalid(field: &str) -> ApiError {
    ApiError::validation_failed(
        json!([{ "resource": "HookDelivery", "field": field, "code": "invalid" }]),
    )
}

/// `v1_<id>`, GitHub's cursor shape, naming the newest delivery of a page.
fn parse_cursor(cursor: &str) -> Result<u64, ApiError> {
    cursor
        .strip_prefix("v1_")
        .and_then(|id| id.parse().ok())
        .ok_or_else(|| invalid("cursor"))
}

pub(crate) async fn list(
    State(sim): Sim,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    sim.lock().hit("GET /app/hook/deliveries");
    if let Err(error) = sim.verifier().verify(&headers) {
        return error.into_response();
    }
    let per_page = query
        .get("per_page")
        .and_then(|p| p.parse::<usize>().ok())
        .unwrap_or(30)
        .clamp(1, MAX_PER_PAGE);
    let status = query.get("status").map(String::as_str);
    if status.is_some_and(|s| s != "success" && s != "failure") {
        return invalid("status").into_response();
    }
    let from = match query.get("cursor").map(|c| parse_cursor(c)).transpose() {
        Ok(from) => from.unwrap_or(u64::MAX),
        Err(error) => return error.into_response(),
    };
    let state = sim.lock();
    let mut matching = state
        .deliveries
        .range(..=from)
        .rev()
        .map(|(_, d)| d)
        .filter(|d| match status {
            Some("success") => d.succeeded(),
            Some(_) => !d.succeeded(),
            None => true,
        });
    let page: Vec<Value> = matching.by_ref().take(per_page).map(item).collect();
    let next = matching.next().map(|d| d.id);
    drop(state);
    let mut response = Json(Value::Array(page)).into_response();
    if let Some(next) = next {
        let filter = status.map(|s| format!("&status={s}")).unwrap_or_default();
        let link = format!(
            "<{}/app/hook/deliveries?per_page={per_page}&cursor=v1_{next}{filter}>; rel=\"next\"",
            sim.url
        );
        if let Ok(value) = link.parse() {
            response.headers_mut().insert(header::LINK, value);
        }
    }
    response
}

fn find(sim: &Sim, id: &str, headers: &HeaderMap) -> Result<Delivery, ApiError> {
    sim.verifier().verify(headers)?;
    id.parse::<u64>()
        .ok()
        .and_then(|id| sim.lock().deliveries.get(&id).cloned())
        .ok_or_else(ApiError::not_found)
}

pub(crate) async fn get(sim: Sim, Path(id): Path<String>, headers: HeaderMap) -> Response {
    sim.lock().hit("GET /app/hook/deliveries/{delivery_id}");
    match find(&sim, &id, &headers) {
        Ok(delivery) => Json(full(&delivery)).into_response(),
        Err(error) => error.into_response(),
    }
}

/// GitHub's content-creation limits, which a redelivery (a POST that makes a delivery)
/// spends: "no more than 80 content-generating requests per minute and no more than 500
/// content-generating requests per hour" ("Rate limits for the REST API", "About
/// secondary rate limits"); past them, a 403 with the secondary rate limit's message and
/// a `retry-after`.
pub const CONTENT_CREATION_PER_MINUTE: usize = 80;
pub const CONTENT_CREATION_PER_HOUR: usize = 500;

/// When the next redelivery may be asked, if one asked now would pass a limit; else
/// notes it.
fn content_creation_wait(state: &mut SimState) -> Option<tokio::time::Instant> {
    use std::time::Duration;
    let now = tokio::time::Instant::now();
    let asks = &mut state.redelivery_asks;
    while asks
        .front()
        .is_some_and(|at| now.saturating_duration_since(*at) >= Duration::from_secs(3600))
    {
        asks.pop_front();
    }
    let minute = now.checked_sub(Duration::from_secs(60));
    let in_minute = asks
        .iter()
        .filter(|at| minute.is_none_or(|m| **at > m))
        .count();
    if asks.len() >= CONTENT_CREATION_PER_HOUR {
        return asks.front().map(|first| *first + Duration::from_secs(3600));
    }
    if in_minute >= CONTENT_CREATION_PER_MINUTE {
        let oldest = asks
            .iter()
            .rev()
            .nth(CONTENT_CREATION_PER_MINUTE - 1)
            .copied();
        return oldest.map(|at| at + Duration::from_secs(60));
    }
    asks.push_back(now);
    None
}

pub(crate) async fn redeliver(sim: Sim, Path(id): Path<String>, headers: HeaderMap) -> Response {
    sim.lock()
        .hit("POST /app/hook/deliveries/{delivery_id}/attempts");
    if find(&sim, &id, &headers).is_ok() {
        let mut state = sim.lock();
        if let Some(until) = content_creation_wait(&mut state) {
            state.counters.redeliveries_throttled += 1;
            return super::intercept::rate_limited(
                super::faults::RateLimitKind::Secondary,
                until,
                "core",
            );
        }
    }
    match find(&sim, &id, &headers) {
        Ok(delivery) if webhook::redeliver(&sim.0, delivery.id) => {
            (StatusCode::ACCEPTED, Json(json!({}))).into_response()
        }
        Ok(_) => ApiError::not_found().into_response(),
        Err(error) => error.into_response(),
    }
}
