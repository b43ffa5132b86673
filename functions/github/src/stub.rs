//! A scripted stand-in for GitHub's API, for this crate's tests: an axum server on a
//! free local port that records every request and answers with what the test's
//! handler says. It stops when dropped.

use axum::body::{to_bytes, Body};
use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode};
use axum::Router;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A request as the stub received it.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub method: String,
    /// Path and query.
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Seen {
    pub(crate) fn is(&self, method: &str, path: &str) -> bool {
        self.method == method && self.path == path
    }

    pub(crate) fn bearer(&self) -> &str {
        self.headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("")
    }
}

/// What the stub answers.
pub(crate) struct Answer {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Option<Value>,
}

impl Answer {
    pub(crate) fn json(status: u16, body: Value) -> Answer {
        Answer {
            status,
            headers: Vec::new(),
            body: Some(body),
        }
    }

    pub(crate) fn empty(status: u16) -> Answer {
        Answer {
            status,
            headers: Vec::new(),
            body: None,
        }
    }

    pub(crate) fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Answer {
        self.headers.push((name, value.into()));
        self
    }
}

type Handler = Arc<dyn Fn(&Seen) -> Answer + Send + Sync>;

pub(crate) struct Stub {
    pub url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: JoinHandle<()>,
}

impl Stub {
    pub(crate) async fn start(handler: impl Fn(&Seen) -> Answer + Send + Sync + 'static) -> Stub {
        let handler: Handler = Arc::new(handler);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorder = seen.clone();
        let router = Router::new().fallback(move |request: Request| {
            let handler = handler.clone();
            let recorder = recorder.clone();
            async move { respond(request, &handler, &recorder).await }
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.expect("stub server");
        });
        Stub { url, seen, task }
    }

    /// Every request so far.
    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("stub log").clone()
    }

    /// How many requests had this method and path.
    pub(crate) fn count(&self, method: &str, path: &str) -> usize {
        self.seen().iter().filter(|s| s.is(method, path)).count()
    }
}

impl Drop for Stub {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn respond(
    request: Request,
    handler: &Handler,
    recorder: &Mutex<Vec<Seen>>,
) -> axum::http::Response<Body> {
    let (parts, body) = request.into_parts();
    let bytes = to_bytes(body, 1 << 20).await.unwrap_or_default();
    let seen = Seen {
        method: parts.method.to_string(),
        path: parts
            .uri
            .path_and_query()
            .map_or_else(String::new, |p| p.to_string()),
        headers: parts.headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    };
    let answer = handler(&seen);
    recorder.lock().expect("stub log").push(seen);

    let mut response = axum::http::Response::builder()
        .status(StatusCode::from_u16(answer.status).expect("status"));
    for (name, value) in &answer.headers {
        response = response.header(*name, value);
    }
    let body = match answer.body {
        Some(json) => {
            response = response.header("content-type", "application/json");
            Body::from(json.to_string())
        }
        None => Body::empty(),
    };
    response.body(body).expect("response")
}
