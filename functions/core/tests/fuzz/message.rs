//! The queue message decoder over any body: a message, or an error that sends the body
//! to the DLQ, never a panic; and every message the webhook or reaper writes reads back
//! as itself.

use super::{corpus, mutated, settings};
use ephemera_core::message::{MessageKind, QueueMessage, VERSION};
use ephemera_core::OffsetDateTime;
use proptest::prelude::*;

#[test]
fn every_corpus_body_decodes_or_is_refused() {
    for (name, bytes) in corpus("message") {
        let body = String::from_utf8(bytes).unwrap_or_else(|_| panic!("{name}: not UTF-8"));
        if let Ok(message) = QueueMessage::decode(&body) {
            assert_eq!(message.v, VERSION, "{name}");
            assert_eq!(QueueMessage::decode(&message.encode()).ok(), Some(message));
        }
    }
}

fn message() -> impl Strategy<Value = QueueMessage> {
    let kind = prop::sample::select(vec![
        MessageKind::Queued,
        MessageKind::InProgress,
        MessageKind::Completed,
        MessageKind::Warm,
    ]);
    // Any instant the time crate can write as RFC 3339 (years 0000 to 9999).
    let at = (-62_167_219_200i64..253_402_300_799, 0u32..1_000_000_000).prop_map(|(s, n)| {
        OffsetDateTime::from_unix_timestamp(s).expect("in range")
            + time::Duration::nanoseconds(n.into())
    });
    (
        kind,
        ".{0,20}",
        any::<u64>(),
        any::<u64>(),
        (".{0,20}", proptest::collection::vec(".{0,10}", 0..4)),
        (".{0,20}", ".{0,20}", any::<Option<u64>>()),
        (proptest::option::of(".{0,20}"), any::<Option<u64>>(), at),
    )
        .prop_map(
            |(
                kind,
                delivery_id,
                job_id,
                run_id,
                (pool, labels),
                (repo, owner, installation_id),
                (runner_name, runner_id, received_at),
            )| {
                QueueMessage {
                    v: VERSION,
                    kind,
                    delivery_id,
                    job_id,
                    run_id,
                    pool,
                    labels,
                    repo,
                    owner,
                    installation_id,
                    runner_name,
                    runner_id,
                    received_at: received_at
                        .min(OffsetDateTime::from_unix_timestamp(253_402_300_799).expect("9999")),
                    github: Default::default(),
                    attempt: Default::default(),
                }
            },
        )
}

proptest! {
    #![proptest_config(settings("tests/fuzz/regressions/message.txt"))]

    #[test]
    fn any_body_decodes_or_is_refused(body in "(?s).{0,300}") {
        let _ = QueueMessage::decode(&body);
    }

    #[test]
    fn mutated_messages_decode_or_are_refused(bytes in mutated("message")) {
        if let Ok(message) = QueueMessage::decode(&String::from_utf8_lossy(&bytes)) {
            prop_assert_eq!(message.v, VERSION);
        }
    }

    #[test]
    fn every_message_reads_back_as_itself(message in message()) {
        let body = message.encode();
        prop_assert_eq!(QueueMessage::decode(&body).ok(), Some(message));
    }
}
