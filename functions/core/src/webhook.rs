//! GitHub webhook verification and the few `workflow_job` fields ephemera reads.
//!
//! GitHub signs each delivery with HMAC-SHA256 over the raw body and sends it as
//! `X-Hub-Signature-256: sha256=<hex>`. We compare in constant time, against the current
//! secret and, during a rotation, the previous one.

use crate::message::{JobAttempt, JobConclusion};
pub use crate::model::GitHubTimes;
use hmac::{Hmac, Mac};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use sha2::Sha256;
use subtle::ConstantTimeEq;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// The secrets a delivery may be signed with.
#[derive(Clone)]
pub struct WebhookSecrets {
    pub current: SecretString,
    /// Accepted too while a rotation is under way.
    pub previous: Option<SecretString>,
}

/// Why a delivery was not accepted as coming from GitHub.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("missing X-Hub-Signature-256 header")]
    Missing,
    #[error("X-Hub-Signature-256 is not of the form sha256=<64 hex digits>")]
    Malformed,
    #[error("signature does not match")]
    Mismatch,
}

/// Checks `header` (the `X-Hub-Signature-256` value) against `body`.
pub fn verify_signature(
    secrets: &WebhookSecrets,
    header: Option<&str>,
    body: &[u8],
) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?;
    let hex_digest = header
        .strip_prefix("sha256=")
        .ok_or(SignatureError::Malformed)?;
    let mut given = [0u8; 32];
    hex::decode_to_slice(hex_digest, &mut given).map_err(|_| SignatureError::Malformed)?;
    let candidates = std::iter::once(&secrets.current).chain(secrets.previous.as_ref());
    // Check every candidate so the time taken does not tell which secret matched.
    let mut matched = false;
    for secret in candidates {
        let expected = sign(secret.expose_secret().as_bytes(), body);
        matched |= bool::from(expected.ct_eq(&given));
    }
    if matched {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

/// HMAC-SHA256 of `body` under `secret`.
pub fn sign(secret: &[u8], body: &[u8]) -> [u8; 32] {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any size");
    mac.update(body);
    mac.finalize().into_bytes().into()
}

/// The `X-Hub-Signature-256` header value for `body`.
pub fn signature_header(secret: &[u8], body: &[u8]) -> String {
    format!("sha256={}", hex::encode(sign(secret, body)))
}

/// The action of a `workflow_job` delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobAction {
    Queued,
    InProgress,
    Completed,
    Waiting,
    #[serde(other)]
    Other,
}

/// The fields of a `workflow_job` event that ephemera uses; everything else is skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowJobEvent {
    pub action: JobAction,
    pub job_id: u64,
    pub run_id: u64,
    pub labels: Vec<String>,
    pub runner_name: Option<String>,
    pub runner_id: Option<u64>,
    pub owner: String,
    pub repo: String,
    pub installation_id: Option<u64>,
    /// GitHub's times for the job: queued (`created_at`), started and completed, each
    /// read only from the action that sets it (a `queued` body repeats `created_at` as
    /// `started_at`).
    pub times: GitHubTimes,
    /// The job's `run_attempt`, and its `conclusion` once `completed`.
    pub attempt: JobAttempt,
}

#[derive(Deserialize)]
struct RawEvent {
    action: JobAction,
    workflow_job: RawJob,
    repository: RawRepository,
    installation: Option<RawInstallation>,
}

#[derive(Deserialize)]
struct RawJob {
    id: u64,
    run_id: u64,
    #[serde(default)]
    labels: Vec<String>,
    runner_name: Option<String>,
    runner_id: Option<u64>,
    created_at: Option<String>,
    started_at: Option<String>,
    completed_at: Option<String>,
    run_attempt: Option<u32>,
    conclusion: Option<JobConclusion>,
}

fn rfc3339(value: Option<&str>) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(value?, &Rfc3339).ok()
}

impl RawJob {
    fn times(&self, action: JobAction) -> GitHubTimes {
        let started = matches!(action, JobAction::InProgress | JobAction::Completed);
        GitHubTimes {
            created_at: rfc3339(self.created_at.as_deref()),
            started_at: rfc3339(self.started_at.as_deref().filter(|_| started)),
            completed_at: rfc3339(
                self.completed_at
                    .as_deref()
                    .filter(|_| action == JobAction::Completed),
            ),
        }
    }
}

#[derive(Deserialize)]
struct RawRepository {
    name: String,
    owner: RawOwner,
}

#[derive(Deserialize)]
struct RawOwner {
    login: String,
}

#[derive(Deserialize)]
struct RawInstallation {
    id: u64,
}

/// A `workflow_job` body that lacks what we need.
#[derive(Debug, thiserror::Error)]
#[error("not a workflow_job event: {0}")]
pub struct ParseError(#[from] serde_json::Error);

/// Reads a `workflow_job` delivery body.
pub fn parse_workflow_job(body: &[u8]) -> Result<WorkflowJobEvent, ParseError> {
    let raw: RawEvent = serde_json::from_slice(body)?;
    let times = raw.workflow_job.times(raw.action);
    Ok(WorkflowJobEvent {
        action: raw.action,
        job_id: raw.workflow_job.id,
        run_id: raw.workflow_job.run_id,
        labels: raw.workflow_job.labels,
        // GitHub sends "" as well as null for "no runner yet".
        runner_name: raw.workflow_job.runner_name.filter(|n| !n.is_empty()),
        runner_id: raw.workflow_job.runner_id.filter(|id| *id != 0),
        owner: raw.repository.owner.login,
        repo: raw.repository.name,
        installation_id: raw.installation.map(|i| i.id),
        times,
        attempt: JobAttempt {
            run_attempt: raw.workflow_job.run_attempt.unwrap_or(1),
            conclusion: raw
                .workflow_job
                .conclusion
                .filter(|_| raw.action == JobAction::Completed),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets(current: &str, previous: Option<&str>) -> WebhookSecrets {
        WebhookSecrets {
            current: SecretString::from(current),
            previous: previous.map(SecretString::from),
        }
    }

    /// GitHub's documented example ("Validating webhook deliveries").
    #[test]
    fn github_documented_test_vector() {
        let header = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        let s = secrets("It's a Secret to Everybody", None);
        assert_eq!(verify_signature(&s, Some(header), b"Hello, World!"), Ok(()));
        assert_eq!(
            signature_header(b"It's a Secret to Everybody", b"Hello, World!"),
            header
        );
    }

    #[test]
    fn wrong_secret_missing_header_sha1_and_bad_hex_are_refused() {
        let body = br#"{"a":1}"#;
        let good = signature_header(b"right", body);
        let s = secrets("right", None);
        let wrong = secrets("wrong", None);
        assert_eq!(
            verify_signature(&wrong, Some(&good), body),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify_signature(&s, None, body),
            Err(SignatureError::Missing)
        );
        let sha1 = "sha1=0123456789abcdef0123456789abcdef01234567";
        assert_eq!(
            verify_signature(&s, Some(sha1), body),
            Err(SignatureError::Malformed)
        );
        let bad_hex = format!("sha256={}", "zz".repeat(32));
        assert_eq!(
            verify_signature(&s, Some(&bad_hex), body),
            Err(SignatureError::Malformed)
        );
        let short = &good[..good.len() - 2];
        assert_eq!(
            verify_signature(&s, Some(short), body),
            Err(SignatureError::Malformed)
        );
    }

    #[test]
    fn one_changed_byte_is_refused() {
        let body = br#"{"action":"queued"}"#.to_vec();
        let header = signature_header(b"k", &body);
        let mut changed = body.clone();
        changed[3] ^= 1;
        let s = secrets("k", None);
        assert_eq!(
            verify_signature(&s, Some(&header), &changed),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn previous_secret_is_accepted_during_rotation() {
        let body = b"payload";
        let header = signature_header(b"old", body);
        assert_eq!(
            verify_signature(&secrets("new", Some("old")), Some(&header), body),
            Ok(())
        );
        assert!(verify_signature(&secrets("new", None), Some(&header), body).is_err());
    }

    #[test]
    fn parses_the_fields_we_need_and_ignores_the_rest() {
        let body = include_bytes!("../fixtures/workflow_job_queued.json");
        let event = parse_workflow_job(body).expect("parses");
        assert_eq!(event.action, JobAction::Queued);
        assert_eq!(event.job_id, 29679449);
        assert_eq!(event.run_id, 10500186573);
        assert_eq!(event.labels, ["self-hosted", "linux", "x64"]);
        assert_eq!(event.runner_name, None);
        assert_eq!(event.owner, "octo-org");
        assert_eq!(event.repo, "example-workflow");
        assert_eq!(event.installation_id, Some(5));
        // A queued body repeats `created_at` as `started_at`: only `in_progress` sets it.
        assert_eq!(
            event.times,
            GitHubTimes {
                created_at: Some(time::macros::datetime!(2026-11-22 10:00:00 UTC)),
                started_at: None,
                completed_at: None,
            }
        );
    }

    #[test]
    fn started_and_completed_times_are_read_from_the_actions_that_set_them() {
        let body = |action: &str| {
            format!(
                r#"{{"action":"{action}","workflow_job":{{"id":1,"run_id":2,"labels":[],
                "created_at":"2026-11-22T10:00:00Z","started_at":"2026-11-22T10:00:30Z",
                "completed_at":"2026-11-22T10:05:00Z"}},
                "repository":{{"name":"r","owner":{{"login":"o"}}}}}}"#
            )
        };
        let times = |action| {
            parse_workflow_job(body(action).as_bytes())
                .expect("parses")
                .times
        };
        let started = time::macros::datetime!(2026-11-22 10:00:30 UTC);
        assert_eq!(times("in_progress").started_at, Some(started));
        assert_eq!(times("in_progress").completed_at, None);
        assert_eq!(times("completed").started_at, Some(started));
        assert_eq!(
            times("completed").completed_at,
            Some(time::macros::datetime!(2026-11-22 10:05:00 UTC))
        );
    }

    #[test]
    fn a_time_that_is_not_rfc3339_is_left_out_and_the_job_still_parses() {
        let body = br#"{"action":"queued","workflow_job":{"id":1,"run_id":2,"labels":[],
            "created_at":"yesterday"},"repository":{"name":"r","owner":{"login":"o"}}}"#;
        let event = parse_workflow_job(body).expect("parses");
        assert_eq!(event.times, GitHubTimes::default());
    }

    #[test]
    fn the_run_attempt_is_read_and_the_conclusion_only_from_completed() {
        let body = |action: &str, conclusion: &str| {
            format!(
                r#"{{"action":"{action}","workflow_job":{{"id":1,"run_id":2,"labels":[],
                "run_attempt":2,"conclusion":{conclusion}}},
                "repository":{{"name":"r","owner":{{"login":"o"}}}}}}"#
            )
        };
        let attempt = |action, conclusion| {
            parse_workflow_job(body(action, conclusion).as_bytes())
                .expect("parses")
                .attempt
        };
        let failed = attempt("completed", r#""failure""#);
        assert_eq!(failed.run_attempt, 2);
        assert!(failed.failed());
        assert!(attempt("completed", r#""cancelled""#).failed());
        assert!(!attempt("completed", r#""success""#).failed());
        assert_eq!(
            attempt("completed", r#""timed_out""#).conclusion,
            Some(JobConclusion::Other)
        );
        assert_eq!(attempt("in_progress", "null").conclusion, None);
        let first = br#"{"action":"queued","workflow_job":{"id":1,"run_id":2,"labels":[]},
            "repository":{"name":"r","owner":{"login":"o"}}}"#;
        assert_eq!(
            parse_workflow_job(first).expect("parses").attempt,
            JobAttempt::default()
        );
    }

    #[test]
    fn unknown_actions_parse_as_other() {
        let body = br#"{"action":"something_new","workflow_job":{"id":1,"run_id":2,"labels":[]},
            "repository":{"name":"r","owner":{"login":"o"}}}"#;
        assert_eq!(
            parse_workflow_job(body).expect("parses").action,
            JobAction::Other
        );
    }
}
