//! The paging of `runners logs`, on a fake stream of pages.

use super::*;
use std::sync::Mutex;

/// Pages answered in turn; the tokens each call was given.
struct FakeStreams {
    pages: Mutex<Vec<Result<Page, StreamError>>>,
    asked: Mutex<Vec<Option<String>>>,
}

impl FakeStreams {
    fn new(pages: Vec<Result<Page, StreamError>>) -> FakeStreams {
        FakeStreams {
            pages: Mutex::new(pages.into_iter().rev().collect()),
            asked: Mutex::new(Vec::new()),
        }
    }

    fn asked(&self) -> Vec<Option<String>> {
        self.asked.lock().unwrap().clone()
    }
}

#[async_trait]
impl LogStreams for FakeStreams {
    async fn page(
        &self,
        _group: &str,
        _stream: &str,
        token: Option<&str>,
    ) -> Result<Page, StreamError> {
        self.asked.lock().unwrap().push(token.map(str::to_owned));
        self.pages.lock().unwrap().pop().unwrap_or_else(|| {
            Err(StreamError::Other(anyhow::anyhow!(
                "asked past the last page"
            )))
        })
    }

    async fn group_exists(&self, _group: &str) -> Result<bool, StreamError> {
        Ok(true)
    }
}

fn page(messages: &[&str], next: &str) -> Result<Page, StreamError> {
    Ok(Page {
        events: messages
            .iter()
            .enumerate()
            .map(|(i, m)| LogEvent {
                timestamp: i as i64,
                message: (*m).to_owned(),
            })
            .collect(),
        next_forward_token: Some(next.to_owned()),
    })
}

fn messages(read: &StreamRead) -> Vec<&str> {
    read.events.iter().map(|e| e.message.as_str()).collect()
}

#[tokio::test]
async fn pages_are_read_until_the_forward_token_repeats() {
    let streams = FakeStreams::new(vec![
        page(&["boot", "runner"], "f/1"),
        page(&[], "f/2"),
        page(&["worker"], "f/3"),
        page(&[], "f/3"),
    ]);
    let read = read_stream(&streams, "g", "i-1", MAX_PAGES).await.unwrap();
    assert!(read.complete);
    assert_eq!(messages(&read), ["boot", "runner", "worker"]);
    assert_eq!(
        streams.asked(),
        [
            None,
            Some("f/1".into()),
            Some("f/2".into()),
            Some("f/3".into())
        ]
    );
}

#[tokio::test]
async fn an_empty_page_with_a_new_token_is_not_the_end() {
    let streams = FakeStreams::new(vec![
        page(&[], "f/1"),
        page(&["late"], "f/2"),
        page(&[], "f/2"),
    ]);
    let read = read_stream(&streams, "g", "i-1", MAX_PAGES).await.unwrap();
    assert_eq!(messages(&read), ["late"]);
    assert!(read.complete);
}

#[tokio::test]
async fn reading_stops_after_the_page_limit_and_says_so() {
    let pages = (0..5).map(|i| page(&["line"], &format!("f/{i}"))).collect();
    let streams = FakeStreams::new(pages);
    let read = read_stream(&streams, "g", "i-1", 3).await.unwrap();
    assert!(!read.complete, "three pages read, the stream goes on");
    assert_eq!(read.events.len(), 3);
    assert_eq!(streams.asked().len(), 3);
}

#[tokio::test]
async fn a_missing_stream_is_its_own_error() {
    let streams = FakeStreams::new(vec![Err(StreamError::NotFound(
        "The specified log stream does not exist.".into(),
    ))]);
    let err = read_stream(&streams, "g", "i-1", MAX_PAGES)
        .await
        .unwrap_err();
    assert!(matches!(err, StreamError::NotFound(_)), "{err:?}");
}

#[test]
fn access_denied_names_the_group_and_the_permission_and_exits_1() {
    let failure = stream_failure(
        StreamError::AccessDenied("User: arn:aws:iam::1:user/op is not authorized".into()),
        "/ephemera/eph/runners",
    );
    assert_eq!(failure.code, FAILURE);
    let text = failure.error.to_string();
    assert!(
        text.contains("access denied reading log group /ephemera/eph/runners"),
        "{text}"
    );
    assert!(text.contains("logs:GetLogEvents"), "{text}");
}

fn missing(group_exists: Option<bool>, deleted: bool, emulator: Option<&str>) -> Failure {
    Missing {
        who: "runner eph-a",
        instance: "i-1",
        group: "/ephemera/eph/runners",
        group_exists,
        deleted,
        emulator,
    }
    .failure()
}

#[test]
fn a_missing_stream_is_no_logs_yet_and_exits_4() {
    let failure = missing(Some(true), false, None);
    assert_eq!(failure.code, NOT_FOUND);
    let text = failure.error.to_string();
    assert!(
        text.starts_with("no logs yet for runner eph-a: no stream i-1 in log group"),
        "{text}"
    );
    assert!(!text.contains("emulator"), "{text}");
}

#[test]
fn a_deleted_runner_without_a_stream_is_not_no_logs_yet() {
    let text = missing(Some(true), true, None).error.to_string();
    assert!(
        text.starts_with("no logs for runner eph-a: it was deleted, and its host shipped none"),
        "{text}"
    );
    assert!(!text.contains("yet"), "{text}");
}

#[test]
fn a_missing_group_is_said_to_be_the_group_and_not_the_stream() {
    let failure = missing(Some(false), false, Some("http://127.0.0.1:5000"));
    assert_eq!(failure.code, NOT_FOUND);
    let text = failure.error.to_string();
    assert!(
        text.starts_with("no log group /ephemera/eph/runners"),
        "{text}"
    );
    assert!(!text.contains("stream"), "{text}");
}

#[test]
fn on_an_emulator_the_simulated_hosts_are_said_to_ship_no_logs() {
    for deleted in [false, true] {
        let text = missing(Some(true), deleted, Some("http://127.0.0.1:5000"))
            .error
            .to_string();
        assert!(
            text.contains("On the emulator at http://127.0.0.1:5000 the instances are simulated"),
            "{text}"
        );
        assert!(text.contains("ship no logs"), "{text}");
    }
}

#[test]
fn json_times_are_rfc_3339_from_the_events_milliseconds() {
    let read = StreamRead {
        events: vec![LogEvent {
            timestamp: 1_764_129_600_123,
            message: "bootstrap.log: hello".into(),
        }],
        complete: true,
    };
    let view = json_view(Some("eph-a".into()), "i-1".into(), "g".into(), read);
    let json = serde_json::to_value(&view).unwrap();
    assert_eq!(json["events"][0]["shipped_at"], "2025-11-26T04:00:00.123Z");
    assert_eq!(json["runner"], "eph-a");
}
