//! The [`HookDeliveries`] port on GitHub's REST API: the App's webhook deliveries, listed
//! and redelivered with the App JWT (they are the App's, not an installation's).
//!
//! `GET /app/hook/deliveries` answers newest first, at most 100 a page, and pages by an
//! opaque `cursor` named in the `Link` header's `rel="next"` URL;
//! `POST /app/hook/deliveries/{delivery_id}/attempts` asks for one more attempt (202).

use crate::client::GitHubApp;
use crate::http::{Call, Endpoint};
use async_trait::async_trait;
use ephemera_core::ports::{DeliveryPage, ForgeError, HookDeliveries, HookDelivery};
use serde::Deserialize;
use time::OffsetDateTime;
use tracing::instrument;

/// GitHub's largest page of deliveries.
const DELIVERIES_PER_PAGE: usize = 100;

const LIST_DELIVERIES: Endpoint = Endpoint::new("list_deliveries", &[]);
const REDELIVER: Endpoint = Endpoint::new("redeliver", &[]);

#[derive(Deserialize)]
struct DeliveryBody {
    id: u64,
    guid: String,
    #[serde(with = "time::serde::rfc3339")]
    delivered_at: OffsetDateTime,
    redelivery: bool,
    status_code: u16,
    event: String,
    action: Option<String>,
}

impl From<DeliveryBody> for HookDelivery {
    fn from(body: DeliveryBody) -> HookDelivery {
        HookDelivery {
            id: body.id,
            guid: body.guid,
            event: body.event,
            action: body.action,
            status_code: body.status_code,
            delivered_at: body.delivered_at,
            redelivery: body.redelivery,
        }
    }
}

/// The `cursor` of the `rel="next"` link of a `Link` header, if there is one.
pub(crate) fn next_cursor(link: &str) -> Option<String> {
    link.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        if !params.split(';').any(|p| p.trim() == "rel=\"next\"") {
            return None;
        }
        let url = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        let (_, query) = url.split_once('?')?;
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix("cursor="))
            .filter(|cursor| !cursor.is_empty())
            .map(str::to_owned)
    })
}

#[async_trait]
impl HookDeliveries for GitHubApp {
    #[instrument(skip_all, fields(cursor = ?cursor))]
    async fn list_deliveries(&self, cursor: Option<&str>) -> Result<DeliveryPage, ForgeError> {
        let mut path = format!("/app/hook/deliveries?per_page={DELIVERIES_PER_PAGE}");
        if let Some(cursor) = cursor {
            path.push_str("&cursor=");
            path.push_str(&urlencode(cursor));
        }
        let reply = self.send_as_app(&LIST_DELIVERIES, &Call::get(path)).await?;
        let listed: Vec<DeliveryBody> = reply.json(&LIST_DELIVERIES)?;
        Ok(DeliveryPage {
            deliveries: listed.into_iter().map(HookDelivery::from).collect(),
            next_cursor: reply.link.as_deref().and_then(next_cursor),
        })
    }

    #[instrument(skip_all, fields(delivery_id = id))]
    async fn redeliver(&self, id: u64) -> Result<(), ForgeError> {
        let call = Call::post(format!("/app/hook/deliveries/{id}/attempts"));
        self.send_as_app(&REDELIVER, &call).await?;
        Ok(())
    }
}

/// Percent-encodes what a cursor may hold beyond URL-safe characters.
fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::Harness;
    use crate::stub::Answer;
    use serde_json::json;

    #[test]
    fn the_next_cursor_is_read_from_the_link_header() {
        let link = r#"<https://api.github.com/app/hook/deliveries?per_page=100&cursor=v1_12>; rel="next", <https://api.github.com/app/hook/deliveries?per_page=100>; rel="first""#;
        assert_eq!(next_cursor(link).as_deref(), Some("v1_12"));
        let last = r#"<https://api.github.com/app/hook/deliveries?per_page=100>; rel="first""#;
        assert_eq!(next_cursor(last), None);
        assert_eq!(urlencode("v1_1+2"), "v1_1%2B2");
    }

    #[tokio::test]
    async fn deliveries_are_listed_with_the_app_jwt_and_redelivered() {
        let h = Harness::start(|seen| {
            if seen.method == "POST" {
                return Answer::json(202, json!({}));
            }
            Answer::json(
                200,
                json!([{"id": 7, "guid": "g-7", "delivered_at": "2026-11-23T10:00:00Z",
                        "redelivery": false, "duration": 0.1, "status": "Service Unavailable",
                        "status_code": 503, "event": "workflow_job", "action": "queued",
                        "installation_id": 5, "repository_id": 9}]),
            )
        })
        .await;
        let page = h.app.list_deliveries(None).await.expect("listed");
        assert_eq!(page.deliveries.len(), 1);
        let failed = &page.deliveries[0];
        assert_eq!((failed.id, failed.status_code), (7, 503));
        assert!(!failed.delivered());
        h.app.redeliver(7).await.expect("redelivered");
        let seen = h.stub.seen();
        let jwt_bearer = seen.iter().all(|s| {
            s.headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("Bearer eyJ"))
        });
        assert!(jwt_bearer, "the App's own routes take the App JWT");
        let paths: Vec<(String, String)> = h
            .stub
            .seen()
            .into_iter()
            .map(|s| (s.method, s.path))
            .collect();
        assert!(paths.contains(&(
            "GET".to_owned(),
            "/app/hook/deliveries?per_page=100".to_owned()
        )));
        assert!(paths.contains(&(
            "POST".to_owned(),
            "/app/hook/deliveries/7/attempts".to_owned()
        )));
        assert_eq!(h.count("redeliver", "ok"), 1);
    }
}
