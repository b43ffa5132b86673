//! The DynamoDB item layout: the only module that knows attribute names.
//!
//! The runners table holds ten kinds of item, told apart by the key prefix and by
//! `kind`: runners (`RUNNER#<name>`), jobs (`JOB#<job_id>`) and pools (`POOL#<name>`),
//! laid out here; the cached prices (`PRICES`, [`crate::price_book`]), unrouted jobs
//! (`UNROUTED#<job_id>`, [`crate::unrouted`]), leases
//! (`LEASE#<name>`, the store's lease module) and the configuration each function runs
//! (`RUNNING#<function>`, [`crate::running`]), the shared installation tokens
//! (`TOKEN#<app_id>#<installation_id>`, [`crate::token_shelf`]) and each pool's spot circuit
//! breaker (`BREAKER#<pool>`, [`crate::breaker`]) and the wanted re-runs of interrupted
//! jobs (`RERUNS`, [`crate::reruns`]), each laid out by its own module with the
//! constants shared from here. Runner, job and unrouted items carry `status` and
//! `next_attempt_at` (unix milliseconds), the key of the `by-status` index through which
//! the reaper finds its work; job statuses never share a name with runner statuses, so
//! one index serves both. JIT configs wait in a table of their own ([`crate::jit`]). `ttl` is unix seconds, as
//! DynamoDB's time-to-live expects. An absent `Option` is an absent attribute.
//!
//! Everything here is `pub(crate)` but the key attribute, the TTL attribute, the status
//! index and the runner item's encoding, which the end-to-end tests use to write items
//! and to check the deployed table.

use aws_sdk_dynamodb::types::AttributeValue;
use ephemera_core::lifecycle::{InstanceStatus, RunnerStatus};
use ephemera_core::model::{
    GitHubTimes, HistoryEntry, JobRecord, JobStatus, PoolRecord, RunnerRecord, INTERRUPTION_NOTE,
};
use ephemera_core::ports::{HostRunner, Market, StoreError};
use std::collections::HashMap;
use std::fmt::Display;
use std::str::FromStr;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// A DynamoDB item.
pub type Item = HashMap<String, AttributeValue>;

pub const PK: &str = "pk";
pub(crate) const KIND: &str = "kind";
pub(crate) const NAME: &str = "name";
pub(crate) const POOL: &str = "pool";
pub(crate) const STATUS: &str = "status";
pub(crate) const RUNNER_STATUS: &str = "runner_status";
pub(crate) const INSTANCE_ID: &str = "instance_id";
pub(crate) const GITHUB_RUNNER_ID: &str = "github_runner_id";
pub(crate) const JOB_ID: &str = "job_id";
pub(crate) const LABELS: &str = "labels";
pub(crate) const EPHEMERAL: &str = "ephemeral";
pub(crate) const INSTALLATION_ID: &str = "installation_id";
pub(crate) const OWNER: &str = "owner";
pub(crate) const REPO: &str = "repo";
pub(crate) const CREATED_AT: &str = "created_at";
pub(crate) const JOB_QUEUED_AT: &str = "job_queued_at";
pub(crate) const UPDATED_AT: &str = "updated_at";
pub(crate) const REASON: &str = "reason";
pub(crate) const ATTEMPTS: &str = "attempts";
pub(crate) const NEXT_ATTEMPT_AT: &str = "next_attempt_at";
pub(crate) const LAST_ERROR: &str = "last_error";
pub const TTL: &str = "ttl";
pub(crate) const RUN_ID: &str = "run_id";
pub(crate) const RUNNER_NAME: &str = "runner_name";
pub(crate) const LAUNCHED_RUNNER: &str = "launched_runner";
pub(crate) const RECEIVED_AT: &str = "received_at";
/// GitHub's `created_at` of a job (when it was queued); not `created_at`, which on a
/// runner item is when ephemera wrote it.
pub(crate) const GITHUB_CREATED_AT: &str = "github_created_at";
pub(crate) const STARTED_AT: &str = "started_at";
pub(crate) const COMPLETED_AT: &str = "completed_at";
pub(crate) const CLAIMED_AT: &str = "claimed_at";
pub(crate) const ONLINE_AT: &str = "online_at";
/// EC2's launch time of the runner's instance, kept when the runner is deleted.
pub(crate) const INSTANCE_LAUNCHED_AT: &str = "instance_launched_at";
/// When the instance read its JIT config (its clock), kept when the runner is deleted.
pub(crate) const JIT_READ_AT: &str = "jit_read_at";
/// The runner the host ran, from its tombstone, kept when the runner is deleted: the
/// same names as the JIT item's attributes (`crate::jit`).
pub(crate) const RUNNER_VERSION: &str = crate::jit::RUNNER_VERSION;
pub(crate) const RUNNER_IMAGE_VERSION: &str = crate::jit::RUNNER_IMAGE_VERSION;
pub(crate) const RUNNER_SWAP_MS: &str = crate::jit::RUNNER_SWAP_MS;
pub(crate) const INSTANCE_TYPE: &str = "instance_type";
/// The root volume a launch gave the instance: its size in GiB, and its EBS type.
pub(crate) const ROOT_VOLUME_GIB: &str = "root_volume_gib";
pub(crate) const ROOT_VOLUME_TYPE: &str = "root_volume_type";
/// When EC2 warned that it reclaims the runner's spot instance (absent: no warning, or an
/// item written before the attribute, see [`runner_from_item`]).
pub(crate) const INTERRUPTED_AT: &str = "interrupted_at";
/// `spot` or `on_demand`.
pub(crate) const MARKET: &str = "market";
pub(crate) const SLOTS_USED: &str = "slots_used";
pub(crate) const HISTORY: &str = "history";
pub(crate) const SLOT_HELD: &str = "slot_held";
/// A stopped pool's record (written only when true).
pub(crate) const PREPARE: &str = "prepare";
const AT: &str = "at";

/// The index by status, sorted by `next_attempt_at`.
pub const STATUS_INDEX: &str = "by-status";
/// The index by EC2 instance (keys only, sparse: only items with an `instance_id`), for
/// EC2's events, which name an instance and nothing else.
pub(crate) const INSTANCE_INDEX: &str = "by-instance";

pub(crate) const KIND_RUNNER: &str = "runner";
pub(crate) const KIND_JOB: &str = "job";
pub(crate) const KIND_POOL: &str = "pool";

pub(crate) fn runner_key(name: &str) -> String {
    format!("RUNNER#{name}")
}

pub(crate) fn job_key(job_id: u64) -> String {
    format!("JOB#{job_id}")
}

pub(crate) fn pool_key(name: &str) -> String {
    format!("POOL#{name}")
}

/// The key map of an item.
pub fn key(pk: String) -> Item {
    HashMap::from([(PK.to_owned(), AttributeValue::S(pk))])
}

// ----------------------------------------------------------------------------- values

pub(crate) fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

pub(crate) fn n(value: impl Display) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

pub(crate) fn list(values: &[String]) -> AttributeValue {
    AttributeValue::L(values.iter().map(|v| s(v.as_str())).collect())
}

/// An RFC 3339 timestamp.
pub(crate) fn timestamp(at: OffsetDateTime) -> AttributeValue {
    // Formatting a valid OffsetDateTime as RFC 3339 fails only for years outside 0..=9999.
    s(at.format(&Rfc3339)
        .unwrap_or_else(|_| at.unix_timestamp().to_string()))
}

/// Unix epoch milliseconds (the index's sort key).
pub(crate) fn millis(at: OffsetDateTime) -> AttributeValue {
    n(at.unix_timestamp_nanos() / 1_000_000)
}

/// Unix epoch seconds (DynamoDB's TTL format).
pub(crate) fn epoch_seconds(at: OffsetDateTime) -> AttributeValue {
    n(at.unix_timestamp())
}

fn put_opt(item: &mut Item, name: &str, value: Option<AttributeValue>) {
    if let Some(value) = value {
        item.insert(name.to_owned(), value);
    }
}

// ----------------------------------------------------------------------------- encode

/// The attributes of what a host reported of its runner, those it reported.
pub(crate) fn host_runner_values(runner: &HostRunner) -> Vec<(&'static str, AttributeValue)> {
    let values = [
        (RUNNER_VERSION, runner.runner_version.as_deref().map(s)),
        (
            RUNNER_IMAGE_VERSION,
            runner.runner_image_version.as_deref().map(s),
        ),
        (RUNNER_SWAP_MS, runner.runner_swap_ms.map(n)),
    ];
    let reported = values.into_iter();
    reported
        .filter_map(|(name, value)| Some((name, value?)))
        .collect()
}

/// The item of a runner record.
pub fn runner_to_item(runner: &RunnerRecord) -> Item {
    let mut item = HashMap::from([
        (PK.to_owned(), s(runner_key(&runner.name))),
        (KIND.to_owned(), s(KIND_RUNNER)),
        (NAME.to_owned(), s(runner.name.as_str())),
        (POOL.to_owned(), s(runner.pool.as_str())),
        (STATUS.to_owned(), s(runner.status.as_str())),
        (RUNNER_STATUS.to_owned(), s(runner.runner_status.as_str())),
        (LABELS.to_owned(), list(&runner.labels)),
        (EPHEMERAL.to_owned(), AttributeValue::Bool(runner.ephemeral)),
        (OWNER.to_owned(), s(runner.owner.as_str())),
        (CREATED_AT.to_owned(), timestamp(runner.created_at)),
        (UPDATED_AT.to_owned(), timestamp(runner.updated_at)),
        (ATTEMPTS.to_owned(), n(runner.attempts)),
        (SLOT_HELD.to_owned(), AttributeValue::Bool(runner.slot_held)),
        (NEXT_ATTEMPT_AT.to_owned(), millis(runner.next_attempt_at)),
    ]);
    put_opt(&mut item, INSTANCE_ID, runner.instance_id.as_deref().map(s));
    put_opt(&mut item, GITHUB_RUNNER_ID, runner.github_runner_id.map(n));
    put_opt(&mut item, JOB_ID, runner.job_id.map(n));
    put_opt(
        &mut item,
        JOB_QUEUED_AT,
        runner.job_queued_at.map(timestamp),
    );
    put_opt(&mut item, INSTALLATION_ID, runner.installation_id.map(n));
    put_opt(&mut item, REPO, runner.repo.as_deref().map(s));
    put_opt(&mut item, REASON, runner.reason.as_deref().map(s));
    put_opt(&mut item, LAST_ERROR, runner.last_error.as_deref().map(s));
    put_opt(&mut item, TTL, runner.ttl.map(epoch_seconds));
    put_opt(&mut item, ONLINE_AT, runner.online_at.map(timestamp));
    put_opt(
        &mut item,
        INSTANCE_LAUNCHED_AT,
        runner.instance_launched_at.map(timestamp),
    );
    put_opt(&mut item, JIT_READ_AT, runner.jit_read_at.map(timestamp));
    for (name, value) in host_runner_values(&runner.host_runner) {
        item.insert(name.to_owned(), value);
    }
    put_opt(
        &mut item,
        INTERRUPTED_AT,
        runner.interrupted_at.map(timestamp),
    );
    put_opt(
        &mut item,
        INSTANCE_TYPE,
        runner.instance_type.as_deref().map(s),
    );
    put_opt(&mut item, MARKET, runner.market.map(|m| s(m.as_str())));
    put_opt(&mut item, ROOT_VOLUME_GIB, runner.root_volume_gib.map(n));
    put_opt(
        &mut item,
        ROOT_VOLUME_TYPE,
        runner.root_volume_type.as_deref().map(s),
    );
    put_opt(&mut item, COST, runner.cost.as_ref().map(cost_value));
    if runner.prepare {
        item.insert(PREPARE.to_owned(), AttributeValue::Bool(true));
    }
    item.insert(HISTORY.to_owned(), history(&runner.history));
    item
}

/// History entries as a list of maps `{at, status?, runner_status?, reason?}`.
pub(crate) fn history(entries: &[HistoryEntry]) -> AttributeValue {
    let entry = |e: &HistoryEntry| {
        let mut map = HashMap::from([(AT.to_owned(), timestamp(e.at))]);
        put_opt(&mut map, STATUS, e.status.map(|st| s(st.as_str())));
        put_opt(
            &mut map,
            RUNNER_STATUS,
            e.runner_status.map(|st| s(st.as_str())),
        );
        put_opt(&mut map, REASON, e.reason.as_deref().map(s));
        AttributeValue::M(map)
    };
    AttributeValue::L(entries.iter().map(entry).collect())
}

/// The item of a job record; `next_attempt_at` is when it was received, so queued jobs
/// are found oldest first in the status index.
pub(crate) fn job_to_item(job: &JobRecord) -> Item {
    let mut item = HashMap::from([
        (PK.to_owned(), s(job_key(job.job_id))),
        (KIND.to_owned(), s(KIND_JOB)),
        (JOB_ID.to_owned(), n(job.job_id)),
        (STATUS.to_owned(), s(job.status.as_str())),
        (POOL.to_owned(), s(job.pool.as_str())),
        (OWNER.to_owned(), s(job.owner.as_str())),
        (REPO.to_owned(), s(job.repo.as_str())),
        (RUN_ID.to_owned(), n(job.run_id)),
        (LABELS.to_owned(), list(&job.labels)),
        (RECEIVED_AT.to_owned(), timestamp(job.received_at)),
        (UPDATED_AT.to_owned(), timestamp(job.updated_at)),
        (NEXT_ATTEMPT_AT.to_owned(), millis(job.received_at)),
    ]);
    put_opt(&mut item, INSTALLATION_ID, job.installation_id.map(n));
    put_opt(&mut item, RUNNER_NAME, job.runner_name.as_deref().map(s));
    put_opt(
        &mut item,
        LAUNCHED_RUNNER,
        job.launched_runner.as_deref().map(s),
    );
    for (name, at) in github_times(&job.github) {
        put_opt(&mut item, name, at.map(timestamp));
    }
    put_opt(&mut item, CLAIMED_AT, job.claimed_at.map(timestamp));
    item
}

/// GitHub's times of a job, by the attribute each is kept in.
pub(crate) fn github_times(times: &GitHubTimes) -> [(&'static str, Option<OffsetDateTime>); 3] {
    [
        (GITHUB_CREATED_AT, times.created_at),
        (STARTED_AT, times.started_at),
        (COMPLETED_AT, times.completed_at),
    ]
}

// ----------------------------------------------------------------------------- decode

/// Reads typed attributes out of one item, naming the item in every error.
struct Reader<'a> {
    item: &'a Item,
}

impl<'a> Reader<'a> {
    fn corrupt(&self, message: impl Into<String>) -> StoreError {
        let key = match self.item.get(PK) {
            Some(AttributeValue::S(pk)) => pk.clone(),
            _ => "<no key>".to_owned(),
        };
        StoreError::Corrupt {
            key,
            message: message.into(),
        }
    }

    fn opt_s(&self, name: &str) -> Result<Option<&'a str>, StoreError> {
        match self.item.get(name) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(AttributeValue::S(value)) => Ok(Some(value)),
            Some(_) => Err(self.corrupt(format!("{name} is not a string"))),
        }
    }

    fn s(&self, name: &str) -> Result<&'a str, StoreError> {
        self.opt_s(name)?
            .ok_or_else(|| self.corrupt(format!("{name} is missing")))
    }

    fn opt_n<T: FromStr>(&self, name: &str) -> Result<Option<T>, StoreError> {
        match self.item.get(name) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(AttributeValue::N(value)) => value
                .parse()
                .map(Some)
                .map_err(|_| self.corrupt(format!("{name} is not a valid number: {value}"))),
            Some(_) => Err(self.corrupt(format!("{name} is not a number"))),
        }
    }

    fn n<T: FromStr>(&self, name: &str) -> Result<T, StoreError> {
        self.opt_n(name)?
            .ok_or_else(|| self.corrupt(format!("{name} is missing")))
    }

    fn parsed<T: FromStr>(&self, name: &str) -> Result<T, StoreError> {
        let value = self.s(name)?;
        value
            .parse()
            .map_err(|_| self.corrupt(format!("{name} {value:?} is not known")))
    }

    fn opt_bool(&self, name: &str) -> Result<Option<bool>, StoreError> {
        match self.item.get(name) {
            None => Ok(None),
            Some(AttributeValue::Bool(value)) => Ok(Some(*value)),
            Some(_) => Err(self.corrupt(format!("{name} is not a boolean"))),
        }
    }

    fn bool(&self, name: &str) -> Result<bool, StoreError> {
        match self.item.get(name) {
            Some(AttributeValue::Bool(value)) => Ok(*value),
            _ => Err(self.corrupt(format!("{name} is not a boolean"))),
        }
    }

    fn labels(&self, name: &str) -> Result<Vec<String>, StoreError> {
        match self.item.get(name) {
            None => Ok(Vec::new()),
            Some(AttributeValue::Ss(values)) => Ok(values.clone()),
            Some(AttributeValue::L(values)) => values
                .iter()
                .map(|value| match value {
                    AttributeValue::S(label) => Ok(label.clone()),
                    _ => Err(self.corrupt(format!("{name} holds a non-string"))),
                })
                .collect(),
            Some(_) => Err(self.corrupt(format!("{name} is not a list"))),
        }
    }

    fn timestamp(&self, name: &str) -> Result<OffsetDateTime, StoreError> {
        let value = self.s(name)?;
        OffsetDateTime::parse(value, &Rfc3339)
            .map_err(|_| self.corrupt(format!("{name} {value:?} is not an RFC 3339 time")))
    }

    fn opt_timestamp(&self, name: &str) -> Result<Option<OffsetDateTime>, StoreError> {
        match self.item.get(name) {
            None => Ok(None),
            Some(_) => self.timestamp(name).map(Some),
        }
    }

    fn millis(&self, name: &str) -> Result<OffsetDateTime, StoreError> {
        let ms: i128 = self.n(name)?;
        OffsetDateTime::from_unix_timestamp_nanos(ms * 1_000_000)
            .map_err(|_| self.corrupt(format!("{name} {ms} is out of range")))
    }

    fn opt_epoch_seconds(&self, name: &str) -> Result<Option<OffsetDateTime>, StoreError> {
        self.opt_n::<i64>(name)?
            .map(|secs| {
                OffsetDateTime::from_unix_timestamp(secs)
                    .map_err(|_| self.corrupt(format!("{name} {secs} is out of range")))
            })
            .transpose()
    }

    fn history(&self) -> Result<Vec<HistoryEntry>, StoreError> {
        let entries = match self.item.get(HISTORY) {
            None => return Ok(Vec::new()),
            Some(AttributeValue::L(entries)) => entries,
            Some(_) => return Err(self.corrupt(format!("{HISTORY} is not a list"))),
        };
        entries
            .iter()
            .map(|entry| {
                let AttributeValue::M(map) = entry else {
                    return Err(self.corrupt(format!("{HISTORY} holds a non-map entry")));
                };
                let r = Reader { item: map };
                Ok(HistoryEntry {
                    at: r.timestamp(AT)?,
                    status: r
                        .opt_s(STATUS)?
                        .map(str::parse)
                        .transpose()
                        .map_err(|e| self.corrupt(format!("{e}")))?,
                    runner_status: r
                        .opt_s(RUNNER_STATUS)?
                        .map(str::parse)
                        .transpose()
                        .map_err(|e| self.corrupt(format!("{e}")))?,
                    reason: r.opt_s(REASON)?.map(str::to_owned),
                })
            })
            .collect()
    }

    fn expect_kind(&self, kind: &str) -> Result<(), StoreError> {
        match self.opt_s(KIND)? {
            Some(found) if found == kind => Ok(()),
            found => Err(self.corrupt(format!("kind is {found:?}, not {kind}"))),
        }
    }
}

/// The kind of an item (`runner`, `job`, `pool`), if it says.
pub(crate) fn kind_of(item: &Item) -> Option<&str> {
    match item.get(KIND) {
        Some(AttributeValue::S(kind)) => Some(kind),
        _ => None,
    }
}

/// The `status` attribute of an item, if any.
pub(crate) fn status_of(item: &Item) -> Option<&str> {
    match item.get(STATUS) {
        Some(AttributeValue::S(status)) => Some(status),
        _ => None,
    }
}

/// Reads a runner record. An item written before `interrupted_at` was kept tells of a
/// spot interruption only by its warning's history note ([`INTERRUPTION_NOTE`]): its
/// time is read as `interrupted_at`, here and nowhere else.
pub(crate) fn runner_from_item(item: &Item) -> Result<RunnerRecord, StoreError> {
    let r = Reader { item };
    r.expect_kind(KIND_RUNNER)?;
    let history = r.history()?;
    let interrupted_at = match r.opt_timestamp(INTERRUPTED_AT)? {
        Some(at) => Some(at),
        None => noted_interruption(&history),
    };
    Ok(RunnerRecord {
        name: r.s(NAME)?.to_owned(),
        pool: r.s(POOL)?.to_owned(),
        status: r.parsed::<InstanceStatus>(STATUS)?,
        runner_status: r.parsed::<RunnerStatus>(RUNNER_STATUS)?,
        instance_id: r.opt_s(INSTANCE_ID)?.map(str::to_owned),
        github_runner_id: r.opt_n(GITHUB_RUNNER_ID)?,
        job_id: r.opt_n(JOB_ID)?,
        job_queued_at: r.opt_timestamp(JOB_QUEUED_AT)?,
        labels: r.labels(LABELS)?,
        ephemeral: r.bool(EPHEMERAL)?,
        installation_id: r.opt_n(INSTALLATION_ID)?,
        owner: r.opt_s(OWNER)?.unwrap_or_default().to_owned(),
        repo: r.opt_s(REPO)?.map(str::to_owned),
        created_at: r.timestamp(CREATED_AT)?,
        updated_at: r.timestamp(UPDATED_AT)?,
        reason: r.opt_s(REASON)?.map(str::to_owned),
        attempts: r.opt_n(ATTEMPTS)?.unwrap_or(0),
        slot_held: r.opt_bool(SLOT_HELD)?.unwrap_or(true),
        next_attempt_at: r.millis(NEXT_ATTEMPT_AT)?,
        last_error: r.opt_s(LAST_ERROR)?.map(str::to_owned),
        ttl: r.opt_epoch_seconds(TTL)?,
        history,
        online_at: r.opt_timestamp(ONLINE_AT)?,
        instance_launched_at: r.opt_timestamp(INSTANCE_LAUNCHED_AT)?,
        jit_read_at: r.opt_timestamp(JIT_READ_AT)?,
        host_runner: HostRunner {
            runner_version: r.opt_s(RUNNER_VERSION)?.map(str::to_owned),
            runner_image_version: r.opt_s(RUNNER_IMAGE_VERSION)?.map(str::to_owned),
            runner_swap_ms: r.opt_n(RUNNER_SWAP_MS)?,
        },
        instance_type: r.opt_s(INSTANCE_TYPE)?.map(str::to_owned),
        market: r
            .opt_s(MARKET)?
            .map(market)
            .transpose()
            .map_err(|m| r.corrupt(m))?,
        cost: r.cost()?,
        interrupted_at,
        prepare: r.opt_bool(PREPARE)?.unwrap_or(false),
        root_volume_gib: r.opt_n(ROOT_VOLUME_GIB)?,
        root_volume_type: r.opt_s(ROOT_VOLUME_TYPE)?.map(str::to_owned),
    })
}

/// When the first spot interruption warning in `history` came, by its note.
fn noted_interruption(history: &[HistoryEntry]) -> Option<OffsetDateTime> {
    history
        .iter()
        .find(|entry| {
            entry
                .reason
                .as_deref()
                .is_some_and(|reason| reason.starts_with(INTERRUPTION_NOTE))
        })
        .map(|entry| entry.at)
}

/// A market as an item spells it.
pub(crate) fn market(value: &str) -> Result<Market, String> {
    [Market::Spot, Market::OnDemand]
        .into_iter()
        .find(|m| m.as_str() == value)
        .ok_or_else(|| format!("unknown market {value:?}"))
}

/// Reads a job record.
pub(crate) fn job_from_item(item: &Item) -> Result<JobRecord, StoreError> {
    let r = Reader { item };
    r.expect_kind(KIND_JOB)?;
    Ok(JobRecord {
        job_id: r.n(JOB_ID)?,
        status: r.parsed::<JobStatus>(STATUS)?,
        pool: r.s(POOL)?.to_owned(),
        owner: r.opt_s(OWNER)?.unwrap_or_default().to_owned(),
        repo: r.opt_s(REPO)?.unwrap_or_default().to_owned(),
        run_id: r.opt_n(RUN_ID)?.unwrap_or(0),
        installation_id: r.opt_n(INSTALLATION_ID)?,
        labels: r.labels(LABELS)?,
        runner_name: r.opt_s(RUNNER_NAME)?.map(str::to_owned),
        launched_runner: r.opt_s(LAUNCHED_RUNNER)?.map(str::to_owned),
        received_at: r.timestamp(RECEIVED_AT)?,
        updated_at: r.timestamp(UPDATED_AT)?,
        github: GitHubTimes {
            created_at: r.opt_timestamp(GITHUB_CREATED_AT)?,
            started_at: r.opt_timestamp(STARTED_AT)?,
            completed_at: r.opt_timestamp(COMPLETED_AT)?,
        },
        claimed_at: r.opt_timestamp(CLAIMED_AT)?,
    })
}

/// Reads a pool counter.
pub(crate) fn pool_from_item(name: &str, item: &Item) -> Result<PoolRecord, StoreError> {
    let r = Reader { item };
    Ok(PoolRecord {
        name: name.to_owned(),
        slots_used: r.opt_n(SLOTS_USED)?.unwrap_or(0),
    })
}

mod cost;
pub(crate) use cost::{cost_value, COST};

#[cfg(test)]
mod tests;
