//! The `--json` shapes: what scripts may rely on. They are defined here, apart from the
//! stored records, so the table layout can change without breaking a script; fields are
//! only ever added. Times are RFC 3339 (UTC); absent values are `null`.
//!
//! - `runners list --json`: `{"runners": [RunnerRow]}`
//! - `runners show --json`: `RunnerDetail`
//! - `pools --json`: `{"pools": [PoolRow]}`
//! - `jobs list --json`: `{"jobs": [JobRow]}`
//! - `jobs show --json`: `JobTimelineView`
//! - `jobs dlq list --json`: `{"dead_letter_queue": URL, "messages": [DeadLetterRow]}`
//! - `runners logs --json`: `RunnerLogsView`

use ephemera_core::costs;
use ephemera_core::model::{HistoryEntry, HostRunner, JobRecord, RunnerRecord};
use ephemera_core::prices::{usd_f64, Price};
use ephemera_core::timeline::Timeline;
use ephemera_core::unrouted::UnroutedJob;
use serde::Serialize;
use std::collections::BTreeMap;
use time::OffsetDateTime;

/// The runner status to show: a deleted runner is gone from GitHub whatever its record
/// last heard (`active` until the job that ended it), so it shows `gone`.
pub fn shown_runner_status(record: &RunnerRecord) -> String {
    if record.status == ephemera_core::lifecycle::InstanceStatus::Deleted {
        return GONE.to_owned();
    }
    record.runner_status.to_string()
}

/// The runner status of a deleted runner.
pub const GONE: &str = "gone";

/// One runner in a list.
#[derive(Debug, Serialize)]
pub struct RunnerRow {
    pub name: String,
    pub pool: String,
    pub status: String,
    pub runner_status: String,
    pub instance_id: Option<String>,
    pub job_id: Option<u64>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    pub age_seconds: i64,
    pub reason: Option<String>,
}

impl RunnerRow {
    pub fn new(record: &RunnerRecord, now: OffsetDateTime) -> RunnerRow {
        RunnerRow {
            name: record.name.clone(),
            pool: record.pool.clone(),
            status: record.status.to_string(),
            runner_status: shown_runner_status(record),
            instance_id: record.instance_id.clone(),
            job_id: record.job_id,
            created_at: record.created_at,
            age_seconds: (now - record.created_at).whole_seconds().max(0),
            reason: record.reason.clone(),
        }
    }
}

/// Everything known about one runner, with its history oldest first.
#[derive(Debug, Serialize)]
pub struct RunnerDetail {
    pub name: String,
    pub pool: String,
    pub status: String,
    pub runner_status: String,
    pub instance_id: Option<String>,
    pub github_runner_id: Option<u64>,
    pub job_id: Option<u64>,
    pub labels: Vec<String>,
    pub ephemeral: bool,
    pub installation_id: Option<u64>,
    pub owner: String,
    pub repo: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    pub reason: Option<String>,
    pub attempts: u32,
    #[serde(with = "time::serde::rfc3339")]
    pub next_attempt_at: OffsetDateTime,
    pub last_error: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub expires_at: Option<OffsetDateTime>,
    pub history: Vec<HistoryRow>,
    /// The type EC2 launched the instance as, and `spot` or `on_demand`.
    pub instance_type: Option<String>,
    pub market: Option<&'static str>,
    /// When the runner was first known online.
    #[serde(with = "time::serde::rfc3339::option")]
    pub online_at: Option<OffsetDateTime>,
    /// The runner version that ran, the image's baked one and the swap's milliseconds, as
    /// the host reported them (absent until the reaper deletes the runner, or from a
    /// host that reported none).
    #[serde(flatten)]
    pub host_runner: HostRunner,
}

/// The runner version a host ran, in words: `2.337.0`, with the image's baked version
/// when that was behind (`2.337.0 (image had 2.336.0, swapped in 5.5 s)`), or `-` when
/// the host did not say.
pub fn runner_version_shown(ran: &HostRunner) -> String {
    let Some(version) = ran.runner_version.as_deref() else {
        return "-".to_owned();
    };
    let baked = ran.runner_image_version.as_deref();
    match (ran.image_behind(), baked, ran.runner_swap_ms) {
        (Some(true), Some(baked), Some(ms)) => {
            let swap = ms as f64 / 1000.0;
            format!("{version} (image had {baked}, swapped in {swap:.1} s)")
        }
        (Some(true), Some(baked), None) => format!("{version} (image had {baked})"),
        (Some(false), _, _) => format!("{version} (the image's)"),
        _ => format!("{version} (stock image)"),
    }
}

/// One step of a runner's life: a status change, or a change of GitHub's view of it.
#[derive(Debug, Serialize)]
pub struct HistoryRow {
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    pub status: Option<String>,
    pub runner_status: Option<String>,
    pub reason: Option<String>,
}

impl From<&HistoryEntry> for HistoryRow {
    fn from(entry: &HistoryEntry) -> HistoryRow {
        HistoryRow {
            at: entry.at,
            status: entry.status.map(|s| s.to_string()),
            runner_status: entry.runner_status.map(|s| s.to_string()),
            reason: entry.reason.clone(),
        }
    }
}

impl From<&RunnerRecord> for RunnerDetail {
    fn from(r: &RunnerRecord) -> RunnerDetail {
        RunnerDetail {
            name: r.name.clone(),
            pool: r.pool.clone(),
            status: r.status.to_string(),
            runner_status: shown_runner_status(r),
            instance_id: r.instance_id.clone(),
            github_runner_id: r.github_runner_id,
            job_id: r.job_id,
            labels: r.labels.clone(),
            ephemeral: r.ephemeral,
            installation_id: r.installation_id,
            owner: r.owner.clone(),
            repo: r.repo.clone(),
            created_at: r.created_at,
            updated_at: r.updated_at,
            reason: r.reason.clone(),
            attempts: r.attempts,
            next_attempt_at: r.next_attempt_at,
            last_error: r.last_error.clone(),
            expires_at: r.ttl,
            history: r.history.iter().map(HistoryRow::from).collect(),
            instance_type: r.instance_type.clone(),
            market: r.market.map(|m| m.as_str()),
            online_at: r.online_at,
            host_runner: r.host_runner.clone(),
        }
    }
}

/// One pool: its limits from the configuration (`null` when no configuration was
/// given and the pool is known only from its records), its slot counter, and its
/// live runners.
#[derive(Debug, Serialize)]
pub struct PoolRow {
    pub name: String,
    pub max_runners: Option<u32>,
    pub min_idle: Option<u32>,
    pub slots_used: u32,
    /// Runners whose record is not `deleted`.
    pub live: usize,
    /// Live runners by instance status (only statuses with runners appear).
    pub by_status: BTreeMap<String, usize>,
    /// Live runners GitHub sees online and waiting for a job.
    pub idle: usize,
    /// Live runners running a job.
    pub active: usize,
    /// The pool's `stopped` (`null` without a configuration), and its instances prepared
    /// and stopped now, ready to be taken by a job (records in `stopped`).
    pub stopped_target: Option<u32>,
    pub stopped: usize,
    pub queued_jobs: usize,
    /// Until when the pool's spot circuit breaker sends its launches on-demand (RFC 3339),
    /// if it is open now.
    pub spot_paused_until: Option<String>,
    /// Spot interruptions counted for the breaker (those of the last `spot_breaker.within`).
    pub spot_interruptions: usize,
}

/// One job (`status` `unrouted` with `pool` `""` for a job no pool takes).
#[derive(Debug, Serialize)]
pub struct JobRow {
    pub job_id: u64,
    pub status: String,
    pub pool: String,
    /// `owner/repo`.
    pub repo: String,
    pub run_id: u64,
    pub runner_name: Option<String>,
    pub labels: Vec<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub received_at: OffsetDateTime,
    pub age_seconds: i64,
    /// Why no pool takes an unrouted job (`null` for the others, and for records kept
    /// from before reasons were).
    pub reason: Option<String>,
    /// Queued → started, or queued → now while it waits (GitHub's queued time, else
    /// the webhook's receipt); `null` when it ended without a known start.
    pub wait_seconds: Option<i64>,
}

impl JobRow {
    pub fn new(job: &JobRecord, now: OffsetDateTime) -> JobRow {
        JobRow {
            wait_seconds: Timeline::wait(job, now).map(|w| w.whole_seconds().max(0)),
            job_id: job.job_id,
            status: job.status.to_string(),
            pool: job.pool.clone(),
            repo: format!("{}/{}", job.owner, job.repo),
            run_id: job.run_id,
            runner_name: job.runner_name.clone(),
            labels: job.labels.clone(),
            received_at: job.received_at,
            age_seconds: (now - job.received_at).whole_seconds().max(0),
            reason: None,
        }
    }

    /// A job no pool takes: status `unrouted`, pool `""`.
    pub fn unrouted(job: &UnroutedJob, now: OffsetDateTime) -> JobRow {
        JobRow {
            job_id: job.job_id,
            status: UNROUTED.to_owned(),
            pool: String::new(),
            repo: format!("{}/{}", job.owner, job.repo),
            run_id: job.run_id,
            runner_name: None,
            labels: job.labels.clone(),
            received_at: job.received_at,
            age_seconds: (now - job.received_at).whole_seconds().max(0),
            reason: Some(job.reason.clone()).filter(|r| !r.is_empty()),
            wait_seconds: Some((now - job.received_at).whole_seconds().max(0)),
        }
    }
}

/// One stage of a job's timeline.
#[derive(Debug, Serialize)]
pub struct StageRow {
    pub stage: &'static str,
    /// `github`, `ec2`, `instance` or `ephemera`: whose clock says it.
    pub source: &'static str,
    /// What happened, in words ("instance launched (EC2)").
    pub label: &'static str,
    #[serde(with = "time::serde::rfc3339::option")]
    pub at: Option<OffsetDateTime>,
    /// Since the closest earlier stage with a time.
    pub gap_seconds: Option<f64>,
}

/// `jobs show --json`: a job's timeline and what ran it.
#[derive(Debug, Serialize)]
pub struct JobTimelineView {
    pub job_id: u64,
    pub status: String,
    pub pool: String,
    /// `owner/repo`.
    pub repo: String,
    pub run_id: u64,
    /// The runner that ran it, or the one launched for it while it waits.
    pub runner_name: Option<String>,
    /// False when that runner was launched for another job (a hand-over) or warm.
    pub runner_launched_for_job: bool,
    pub instance_id: Option<String>,
    pub instance_type: Option<String>,
    /// `spot` or `on_demand`.
    pub market: Option<&'static str>,
    /// What its instance cost in USD (`null` when no price is known: `cost_note` says
    /// why): final once terminated, so far while it lives (`cost_until`).
    pub cost: Option<f64>,
    /// One line on the cost: the figure and how it was made, or why there is none.
    pub cost_note: String,
    /// `terminated` (final) or `now` (so far); `null` with no instance.
    pub cost_until: Option<&'static str>,
    /// Instance-seconds billed (launch requested → `cost_until`, at least 60).
    pub cost_seconds: Option<u64>,
    /// The hourly price used, in USD.
    pub price_usd_per_hour: Option<f64>,
    pub wait_seconds: Option<f64>,
    /// The runner version that ran the job, the image's baked one and the swap's
    /// milliseconds, as the runner's host reported them.
    #[serde(flatten)]
    pub host_runner: HostRunner,
    pub stages: Vec<StageRow>,
    /// Pairs of stages whose times contradict their order, `[earlier, later]`.
    pub out_of_order: Vec<[&'static str; 2]>,
}

impl JobTimelineView {
    /// The view of `job` run by `runner`, a live runner priced from `prices`.
    pub fn new(
        job: &JobRecord,
        runner: Option<&RunnerRecord>,
        prices: &[Price],
        now: OffsetDateTime,
    ) -> Self {
        let timeline = Timeline::of(job, runner);
        let cost = costs::shown(runner, prices, now);
        let figure = cost.cost.as_ref();
        JobTimelineView {
            job_id: job.job_id,
            status: job.status.to_string(),
            pool: job.pool.clone(),
            repo: format!("{}/{}", job.owner, job.repo),
            run_id: job.run_id,
            runner_name: runner.map(|r| r.name.clone()),
            runner_launched_for_job: timeline.own_runner,
            instance_id: runner.and_then(|r| r.instance_id.clone()),
            instance_type: runner.and_then(|r| r.instance_type.clone()),
            market: runner.and_then(|r| r.market).map(|m| m.as_str()),
            cost: figure.and_then(|c| c.usd_micros).map(usd_f64),
            cost_note: cost.note.clone(),
            cost_until: cost.until.map(|u| u.as_str()),
            cost_seconds: figure.map(|c| c.seconds),
            price_usd_per_hour: figure.and_then(|c| c.usd_micros_per_hour).map(usd_f64),
            wait_seconds: Timeline::wait(job, now).map(|w| w.as_seconds_f64()),
            host_runner: runner.map(|r| r.host_runner.clone()).unwrap_or_default(),
            stages: timeline
                .stamps
                .iter()
                .map(|s| StageRow {
                    stage: s.stage.as_str(),
                    source: s.stage.source(),
                    label: s.stage.label(),
                    at: s.at,
                    gap_seconds: s.gap.map(|g| g.as_seconds_f64()),
                })
                .collect(),
            out_of_order: timeline
                .out_of_order()
                .into_iter()
                .map(|(a, b)| [a.as_str(), b.as_str()])
                .collect(),
        }
    }
}

/// What a runner's host shipped to CloudWatch Logs, oldest first.
#[derive(Debug, Serialize)]
pub struct RunnerLogsView {
    /// The runner asked for; `null` when read by `--instance`.
    pub runner: Option<String>,
    /// The instance, and the name of its stream.
    pub instance_id: String,
    pub log_group: String,
    /// False when reading stopped at its page limit before the end of the stream.
    pub complete: bool,
    pub events: Vec<LogLineRow>,
}

/// One shipped line.
#[derive(Debug, Serialize)]
pub struct LogLineRow {
    /// When the host shipped it (the line itself says when it was written).
    #[serde(with = "time::serde::rfc3339")]
    pub shipped_at: OffsetDateTime,
    /// The line, prefixed with the file it came from (`bootstrap.log: …`).
    pub message: String,
}

/// The status shown for a job no pool takes.
pub const UNROUTED: &str = "unrouted";

/// Prints `value` as pretty JSON on stdout.
pub fn print_json(value: &impl Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ephemera_core::lifecycle::{InstanceStatus, RunnerStatus};
    use time::macros::datetime;

    #[test]
    fn a_deleted_runner_never_shows_active() {
        let at = datetime!(2025-01-02 00:00 UTC);
        let mut record = RunnerRecord::new("eph-a".to_owned(), "linux".to_owned(), at);
        record.runner_status = RunnerStatus::Active;
        record.status = InstanceStatus::Running;
        assert_eq!(RunnerRow::new(&record, at).runner_status, "active");
        record.status = InstanceStatus::Deleted;
        assert_eq!(RunnerRow::new(&record, at).runner_status, GONE);
        assert_eq!(RunnerDetail::from(&record).runner_status, GONE);
    }
}
