//! The cheapest refusal: what a request's headers alone show is not a delivery ephemera
//! takes, refused before the body is read, parsed or hashed and before any AWS call.
//!
//! The webhook is a public URL (a Lambda function URL with `AuthType: NONE`, as GitHub
//! requires), so anyone who learns it can send it requests. Most of a flood carries no
//! signature, or one that is not even of GitHub's form, or an event ephemera never
//! takes; those cost a few comparisons here. Only a request that passes is worth an
//! HMAC over its body ([`crate::webhook::verify_signature`]).

/// The largest body taken. GitHub caps a delivery at 25 MB, but a `workflow_job`
/// delivery is a few to a few tens of KB (40 steps: 18 KB, `bench/webhook.json`), so a
/// megabyte leaves room for a job of thousands of steps while a flood of large bodies is
/// refused unread. <https://docs.github.com/en/webhooks/webhook-events-and-payloads#payload-cap>
pub const MAX_BODY_BYTES: u64 = 1024 * 1024;

/// The `X-GitHub-Event` values ephemera takes.
pub const EVENTS: [&str; 2] = ["workflow_job", "ping"];

/// Why a request was refused, the `Reason` of the `WebhookRejected` metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rejection {
    /// No `X-Hub-Signature-256` header.
    NoSignature,
    /// A signature not of the form `sha256=<64 hex digits>`, or one that does not match
    /// the body under the secrets (the only reason that costs an HMAC).
    BadSignature,
    /// A body (or a `Content-Length`) over [`MAX_BODY_BYTES`].
    TooLarge,
    /// No `X-GitHub-Event`, or an event not in [`EVENTS`].
    UnknownEvent,
}

impl Rejection {
    /// Every reason, for tests and documentation.
    pub const ALL: [Rejection; 4] = [
        Rejection::NoSignature,
        Rejection::BadSignature,
        Rejection::TooLarge,
        Rejection::UnknownEvent,
    ];

    /// The reason as the metric's `Reason` dimension spells it.
    pub fn reason(self) -> &'static str {
        match self {
            Rejection::NoSignature => "no_signature",
            Rejection::BadSignature => "bad_signature",
            Rejection::TooLarge => "too_large",
            Rejection::UnknownEvent => "unknown_event",
        }
    }
}

/// The headers the screen reads, and the body's length (the `Content-Length` before the
/// body is read, where there is one).
#[derive(Debug, Clone, Copy)]
pub struct Headers<'a> {
    /// `X-GitHub-Event`.
    pub event: Option<&'a str>,
    /// `X-Hub-Signature-256`.
    pub signature: Option<&'a str>,
    pub length: u64,
}

/// Refuses what the headers show is not for ephemera: too large first (nothing else of
/// such a request is worth reading), then the event, then the signature's form.
pub fn screen(headers: Headers<'_>) -> Result<(), Rejection> {
    if headers.length > MAX_BODY_BYTES {
        return Err(Rejection::TooLarge);
    }
    match headers.event {
        Some(event) if EVENTS.contains(&event) => {}
        _ => return Err(Rejection::UnknownEvent),
    }
    match headers.signature {
        None => Err(Rejection::NoSignature),
        Some(signature) if well_formed(signature) => Ok(()),
        Some(_) => Err(Rejection::BadSignature),
    }
}

/// `sha256=` and 64 hex digits, checked without allocating.
pub fn well_formed(signature: &str) -> bool {
    signature
        .strip_prefix("sha256=")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIGNATURE: &str =
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

    fn headers(event: Option<&'static str>, signature: Option<&'static str>) -> Headers<'static> {
        Headers {
            event,
            signature,
            length: 1_548,
        }
    }

    #[test]
    fn a_delivery_of_an_event_ephemera_takes_with_a_well_formed_signature_passes() {
        for event in EVENTS {
            let passing = Headers {
                event: Some(event),
                ..headers(None, Some(SIGNATURE))
            };
            assert_eq!(screen(passing), Ok(()), "{event}");
        }
        let upper = "sha256=757107EA0EB2509FC211221CCE984B8A37570B6D7586C22C46F4379C8B043E17";
        assert_eq!(screen(headers(Some("workflow_job"), Some(upper))), Ok(()));
        let at_the_limit = Headers {
            length: MAX_BODY_BYTES,
            ..headers(Some("workflow_job"), Some(SIGNATURE))
        };
        assert_eq!(screen(at_the_limit), Ok(()));
    }

    #[test]
    fn no_signature_is_refused_as_no_signature() {
        assert_eq!(
            screen(headers(Some("workflow_job"), None)),
            Err(Rejection::NoSignature)
        );
    }

    #[test]
    fn a_signature_not_of_githubs_form_is_refused_as_bad_signature() {
        let short = &SIGNATURE[..SIGNATURE.len() - 1];
        let long = format!("{SIGNATURE}0");
        let not_hex = format!("sha256={}", "g".repeat(64));
        let sha1 = "sha1=0123456789abcdef0123456789abcdef01234567";
        let bare = &SIGNATURE["sha256=".len()..];
        for signature in [short, &long, &not_hex, sha1, bare, "", "sha256="] {
            let request = Headers {
                signature: Some(signature),
                ..headers(Some("workflow_job"), None)
            };
            assert_eq!(screen(request), Err(Rejection::BadSignature), "{signature}");
        }
    }

    #[test]
    fn a_missing_or_foreign_event_is_refused_as_unknown_event() {
        for event in [None, Some("push"), Some(""), Some("Workflow_Job")] {
            assert_eq!(
                screen(headers(event, Some(SIGNATURE))),
                Err(Rejection::UnknownEvent),
                "{event:?}"
            );
        }
    }

    #[test]
    fn a_body_over_the_limit_is_refused_before_anything_else_is_looked_at() {
        let request = Headers {
            length: MAX_BODY_BYTES + 1,
            ..headers(None, None)
        };
        assert_eq!(screen(request), Err(Rejection::TooLarge));
    }

    #[test]
    fn every_reason_has_its_own_snake_case_name() {
        let mut names: Vec<&str> = Rejection::ALL.iter().map(|r| r.reason()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Rejection::ALL.len());
        assert!(names
            .iter()
            .all(|n| n.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')));
    }
}
