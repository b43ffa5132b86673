//! The queue message between the webhook and the scaler, version 1.
//!
//! The webhook answers GitHub fast and leaves the work to the scaler through SQS; this is
//! all that crosses. A message of another version fails loudly (and so reaches the DLQ)
//! instead of being guessed at.
//!
//! The reaper sends one more kind, `warm`: launch the job-less runner `runner_name`, whose
//! record (and pool slot) it has written already. The scaler owns every launch, so a warm
//! runner is made by exactly the code, and with exactly the retries, of a job's runner.

use crate::model::GitHubTimes;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// The only version this build reads and writes.
pub const VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageKind {
    Queued,
    InProgress,
    Completed,
    /// From the reaper: create the warm runner `runner_name` (no job: `job_id` and
    /// `run_id` are 0, `repo` is empty).
    Warm,
}

/// One job event, routed to a pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueMessage {
    pub v: u32,
    pub kind: MessageKind,
    pub delivery_id: String,
    pub job_id: u64,
    pub run_id: u64,
    pub pool: String,
    pub labels: Vec<String>,
    pub repo: String,
    pub owner: String,
    pub installation_id: Option<u64>,
    pub runner_name: Option<String>,
    pub runner_id: Option<u64>,
    #[serde(with = "time::serde::rfc3339")]
    pub received_at: OffsetDateTime,
    /// GitHub's times for the job, as far as the body said (fields `created_at`,
    /// `started_at`, `completed_at`, each absent when unknown: a message without them,
    /// from a webhook of an earlier build, reads as knowing none).
    #[serde(default, flatten)]
    pub github: GitHubTimes,
    /// Which attempt of its workflow run the job belongs to, and how it ended (fields
    /// `run_attempt` and `conclusion`; a message of an earlier build reads as a first
    /// attempt of unknown end).
    #[serde(default, flatten)]
    pub attempt: JobAttempt,
}

/// How a finished job ended (GitHub's `conclusion`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobConclusion {
    Success,
    Failure,
    Cancelled,
    /// skipped, neutral, timed_out, action_required...
    #[serde(other)]
    Other,
}

/// A job's workflow-run attempt and, once completed, its conclusion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobAttempt {
    /// 1 for a run's first attempt; each re-run counts one more.
    #[serde(default = "first_attempt")]
    pub run_attempt: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conclusion: Option<JobConclusion>,
}

fn first_attempt() -> u32 {
    1
}

impl Default for JobAttempt {
    fn default() -> JobAttempt {
        JobAttempt {
            run_attempt: first_attempt(),
            conclusion: None,
        }
    }
}

impl JobAttempt {
    /// Whether the job ended failed or cancelled: what an interruption makes of it.
    pub fn failed(&self) -> bool {
        matches!(
            self.conclusion,
            Some(JobConclusion::Failure | JobConclusion::Cancelled)
        )
    }
}

/// A queue body that this build cannot act on.
#[derive(Debug, thiserror::Error)]
pub enum MessageError {
    #[error("message version {0} is not supported (this build reads version {VERSION})")]
    UnsupportedVersion(u32),
    #[error("message body is not a version {VERSION} message: {0}")]
    Malformed(#[from] serde_json::Error),
}

#[derive(Deserialize)]
struct Envelope {
    v: u32,
}

impl QueueMessage {
    /// Reads a body, refusing any version but [`VERSION`].
    pub fn decode(body: &str) -> Result<QueueMessage, MessageError> {
        let envelope: Envelope = serde_json::from_str(body)?;
        if envelope.v != VERSION {
            return Err(MessageError::UnsupportedVersion(envelope.v));
        }
        Ok(serde_json::from_str(body)?)
    }

    pub fn encode(&self) -> String {
        serde_json::to_string(self).expect("a message always serializes")
    }

    /// A `queued` message rebuilt from the job's record, for a job that has to be looked
    /// at again (its runner took another job, or its message was lost); `why` goes into
    /// the delivery id, so logs tell it from GitHub's deliveries.
    pub fn queued_again(job: &crate::model::JobRecord, why: &str) -> QueueMessage {
        QueueMessage {
            v: VERSION,
            kind: MessageKind::Queued,
            delivery_id: format!("ephemera-{why}-{}", job.job_id),
            job_id: job.job_id,
            run_id: job.run_id,
            pool: job.pool.clone(),
            labels: job.labels.clone(),
            repo: job.repo.clone(),
            owner: job.owner.clone(),
            installation_id: job.installation_id,
            runner_name: None,
            runner_id: None,
            received_at: job.received_at,
            github: job.github,
            attempt: JobAttempt::default(),
        }
    }
}

impl QueueMessage {
    /// Whether this is a `queued` message ephemera rebuilt from a job's record
    /// ([`QueueMessage::queued_again`]), for any reason: it knows no run attempt.
    pub fn rebuilt(&self) -> bool {
        self.kind == MessageKind::Queued && self.delivery_id.starts_with("ephemera-")
    }

    /// Whether this is a `queued` message ephemera sent again itself, for reason `why`.
    pub fn queued_again_by(&self, why: &str) -> bool {
        self.kind == MessageKind::Queued
            && self
                .delivery_id
                .strip_prefix("ephemera-")
                .and_then(|rest| rest.strip_prefix(why))
                .is_some_and(|rest| rest.starts_with('-'))
    }

    /// A `warm` message for a runner record the reaper has just reserved.
    pub fn warm(runner: &crate::model::RunnerRecord) -> QueueMessage {
        QueueMessage {
            v: VERSION,
            kind: MessageKind::Warm,
            delivery_id: format!("ephemera-warm-{}", runner.name),
            job_id: 0,
            run_id: 0,
            pool: runner.pool.clone(),
            labels: runner.labels.clone(),
            repo: String::new(),
            owner: runner.owner.clone(),
            installation_id: runner.installation_id,
            runner_name: Some(runner.name.clone()),
            runner_id: None,
            received_at: runner.created_at,
            github: GitHubTimes::default(),
            attempt: JobAttempt::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> QueueMessage {
        QueueMessage {
            v: VERSION,
            kind: MessageKind::Queued,
            delivery_id: "d-1".into(),
            job_id: 7,
            run_id: 8,
            pool: "linux".into(),
            labels: vec!["self-hosted".into(), "linux".into()],
            repo: "r".into(),
            owner: "o".into(),
            installation_id: Some(5),
            runner_name: None,
            runner_id: None,
            received_at: time::macros::datetime!(2026-11-22 10:00:00 UTC),
            github: GitHubTimes {
                created_at: Some(time::macros::datetime!(2026-11-22 09:59:58 UTC)),
                ..GitHubTimes::default()
            },
            attempt: JobAttempt::default(),
        }
    }

    #[test]
    fn round_trips_with_the_documented_field_names() {
        let body = sample().encode();
        let value: serde_json::Value = serde_json::from_str(&body).expect("json");
        for field in [
            "v",
            "kind",
            "delivery_id",
            "job_id",
            "run_id",
            "pool",
            "labels",
            "repo",
            "owner",
            "installation_id",
            "runner_name",
            "runner_id",
            "received_at",
            "created_at",
            "run_attempt",
        ] {
            assert!(value.get(field).is_some(), "missing {field}");
        }
        assert_eq!(value["kind"], "queued");
        assert_eq!(QueueMessage::decode(&body).expect("decodes"), sample());
    }

    #[test]
    fn a_message_of_an_earlier_build_reads_as_a_first_attempt_of_unknown_end() {
        let mut value: serde_json::Value = serde_json::from_str(&sample().encode()).expect("json");
        value.as_object_mut().expect("object").remove("run_attempt");
        let message = QueueMessage::decode(&value.to_string()).expect("decodes");
        assert_eq!(message.attempt, JobAttempt::default());
        let completed = QueueMessage {
            attempt: JobAttempt {
                run_attempt: 3,
                conclusion: Some(JobConclusion::Cancelled),
            },
            ..sample()
        };
        let body = completed.encode();
        assert!(body.contains(r#""conclusion":"cancelled""#), "{body}");
        assert_eq!(QueueMessage::decode(&body).expect("decodes"), completed);
    }

    #[test]
    fn a_message_without_github_times_still_reads() {
        let mut value: serde_json::Value = serde_json::from_str(&sample().encode()).expect("json");
        value.as_object_mut().expect("object").remove("created_at");
        let read = QueueMessage::decode(&value.to_string()).expect("decodes");
        assert_eq!(read.github, GitHubTimes::default());
        assert!(!value.to_string().contains("started_at"));
    }

    #[test]
    fn warm_messages_name_their_runner_and_round_trip() {
        let runner = crate::model::RunnerRecord::new(
            "eph-linux-abc".into(),
            "linux".into(),
            sample().received_at,
        );
        let message = QueueMessage::warm(&runner);
        assert!(message.encode().contains("\"kind\":\"warm\""));
        assert_eq!(
            QueueMessage::decode(&message.encode()).expect("decodes"),
            message
        );
        assert_eq!(message.runner_name.as_deref(), Some("eph-linux-abc"));
    }

    #[test]
    fn other_versions_and_garbage_are_refused() {
        let body = sample().encode().replace("\"v\":1", "\"v\":2");
        assert!(matches!(
            QueueMessage::decode(&body),
            Err(MessageError::UnsupportedVersion(2))
        ));
        assert!(matches!(
            QueueMessage::decode("{}"),
            Err(MessageError::Malformed(_))
        ));
        assert!(matches!(
            QueueMessage::decode("not json"),
            Err(MessageError::Malformed(_))
        ));
    }
}
