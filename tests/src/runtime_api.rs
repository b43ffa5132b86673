//! A Lambda runtime API of the project's own, on a loopback port, for one function
//! process: the test hands it events, the function takes them with
//! `GET …/invocation/next` and answers with `POST …/invocation/{id}/response` (or
//! `…/error`), as under Lambda. Also builds the events Lambda would: a Function URL
//! request for the webhook, an SQS batch for the scaler, a schedule for the reaper.

use anyhow::{bail, Context};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, Mutex};

/// The trace header of an invocation not given one.
pub const DEFAULT_TRACE_ID: &str =
    "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0";

/// An event, its request id and its trace header.
type Queued = (String, Value, String);

/// The function's time for each invocation, as its deadline header says.
const INVOCATION_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone)]
struct Shared {
    events: Arc<Mutex<mpsc::UnboundedReceiver<Queued>>>,
    answers: mpsc::UnboundedSender<(String, Result<Value, String>)>,
}

/// The runtime API of one function process.
pub struct RuntimeApi {
    /// `host:port`, for `AWS_LAMBDA_RUNTIME_API`.
    pub address: String,
    events: mpsc::UnboundedSender<Queued>,
    answers: mpsc::UnboundedReceiver<(String, Result<Value, String>)>,
    next_id: u64,
    task: tokio::task::JoinHandle<()>,
}

impl RuntimeApi {
    pub async fn start() -> anyhow::Result<RuntimeApi> {
        let (events, events_rx) = mpsc::unbounded_channel();
        let (answers_tx, answers) = mpsc::unbounded_channel();
        let shared = Shared {
            events: Arc::new(Mutex::new(events_rx)),
            answers: answers_tx,
        };
        let router = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route(
                "/2018-06-01/runtime/invocation/{id}/response",
                post(respond),
            )
            .route("/2018-06-01/runtime/invocation/{id}/error", post(fail))
            .route("/2018-06-01/runtime/init/error", post(init_failed))
            .with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?.to_string();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(RuntimeApi {
            address,
            events,
            answers,
            next_id: 0,
            task,
        })
    }

    /// Hands `event` to the function and waits (at most `limit`) for its answer.
    pub async fn invoke(&mut self, event: Value, limit: Duration) -> anyhow::Result<Value> {
        self.invoke_traced(event, DEFAULT_TRACE_ID, limit).await
    }

    /// [`RuntimeApi::invoke`] with `trace` as the invocation's trace header (Lambda's
    /// `Lambda-Runtime-Trace-Id`, which the function's SDK forwards on its requests).
    pub async fn invoke_traced(
        &mut self,
        event: Value,
        trace: &str,
        limit: Duration,
    ) -> anyhow::Result<Value> {
        self.next_id += 1;
        let id = format!("req-{}", self.next_id);
        self.events
            .send((id.clone(), event, trace.to_owned()))
            .context("runtime API stopped")?;
        let (answered, answer) = tokio::time::timeout(limit, self.answers.recv())
            .await
            .with_context(|| format!("no answer to {id} within {limit:?}"))?
            .context("runtime API stopped")?;
        if answered != id {
            bail!("answer for {answered}, expected {id}");
        }
        answer.map_err(|error| anyhow::anyhow!("invocation {id} failed: {error}"))
    }
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn next(State(shared): State<Shared>) -> (HeaderMap, String) {
    let received = shared.events.lock().await.recv().await;
    let Some((id, event, trace)) = received else {
        // The test is over; the function waits for ever.
        std::future::pending::<()>().await;
        unreachable!()
    };
    let deadline = SystemTime::now() + INVOCATION_TIMEOUT;
    let deadline_ms = deadline
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let mut headers = HeaderMap::new();
    let mut set = |name: &'static str, value: String| {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    };
    set("lambda-runtime-aws-request-id", id);
    set("lambda-runtime-deadline-ms", deadline_ms.to_string());
    set(
        "lambda-runtime-invoked-function-arn",
        "arn:aws:lambda:us-east-1:123456789012:function:test".to_owned(),
    );
    set("lambda-runtime-trace-id", trace);
    (headers, event.to_string())
}

async fn respond(
    State(shared): State<Shared>,
    Path(id): Path<String>,
    body: String,
) -> &'static str {
    let answer = serde_json::from_str(&body).map_err(|_| body);
    let _ = shared.answers.send((id, answer));
    "{}"
}

async fn fail(State(shared): State<Shared>, Path(id): Path<String>, body: String) -> &'static str {
    let _ = shared.answers.send((id, Err(body)));
    "{}"
}

async fn init_failed(State(shared): State<Shared>, body: String) -> &'static str {
    let _ = shared.answers.send(("init".to_owned(), Err(body)));
    "{}"
}

/// A Function URL request (payload format 2.0) carrying a webhook delivery.
pub fn function_url_event(headers: &[(&str, &str)], body: &str) -> Value {
    let headers: serde_json::Map<String, Value> = headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), Value::String((*v).to_owned())))
        .collect();
    json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/",
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {
            "accountId": "anonymous",
            "apiId": "test",
            "domainName": "test.lambda-url.us-east-1.on.aws",
            "domainPrefix": "test",
            "http": {
                "method": "POST",
                "path": "/",
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": "GitHub-Hookshot/test"
            },
            "requestId": "test",
            "routeKey": "$default",
            "stage": "$default",
            "time": "01/Jan/2026:00:00:00 +0000",
            "timeEpoch": 0
        },
        "body": body,
        "isBase64Encoded": false
    })
}

/// The status and body of a Function URL answer.
pub fn function_url_answer(answer: &Value) -> (u16, String) {
    let status = answer["statusCode"].as_u64().unwrap_or(0) as u16;
    let body = answer["body"].as_str().unwrap_or_default().to_owned();
    (status, body)
}

/// An SQS batch as the event source mapping hands it over: (message id, receipt handle,
/// body) each.
pub fn sqs_event(messages: &[(String, String, String)]) -> Value {
    let records: Vec<Value> = messages
        .iter()
        .map(|(id, receipt, body)| {
            json!({
                "messageId": id,
                "receiptHandle": receipt,
                "body": body,
                "attributes": { "ApproximateReceiveCount": "1" },
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:eph-jobs",
                "awsRegion": "us-east-1"
            })
        })
        .collect();
    json!({ "Records": records })
}
