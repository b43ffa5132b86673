//! [`DynamoReruns`]: the wanted re-runs of interrupted jobs ([`RerunStore`]) as one item
//! of the runners table, `RERUNS` (kind `reruns`), whose map `runs` holds an entry per
//! workflow run, keyed `owner/repo#run_id`; times are unix seconds.
//!
//! One item, so the reaper reads every entry with one `GetItem` and the scaler looks a
//! run up with the same read; entries are few (interruptions of the last day) and each is
//! forgotten a day after it was asked. Every change is an `UpdateItem` on the entry's
//! path, conditional on what the caller read (`state` and `state_at`), so of two reapers
//! only one marks an entry asked. Both functions' roles may read and update items of
//! the table.

use crate::dynamo::{store_error, unless_condition_failed};
use crate::items::{self, Item};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use ephemera_core::ports::RerunStore;
use ephemera_core::ports::StoreError;
use ephemera_core::rerun::{Rerun, RerunState, RunKey};
use std::collections::HashMap;
use time::OffsetDateTime;

/// The key of the re-runs item.
pub(crate) const RERUNS_KEY: &str = "RERUNS";
/// Its kind.
pub(crate) const KIND_RERUNS: &str = "reruns";
const RUNS: &str = "runs";

/// The re-runs of one deployment, in its runners table.
#[derive(Debug, Clone)]
pub struct DynamoReruns {
    client: Client,
    table: String,
}

impl DynamoReruns {
    pub fn new(client: Client, table: impl Into<String>) -> DynamoReruns {
        DynamoReruns {
            client,
            table: table.into(),
        }
    }

    async fn item(&self) -> Result<Option<Item>, StoreError> {
        let answer = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key()))
            .consistent_read(true)
            .send()
            .await
            .map_err(store_error)?;
        Ok(answer.item)
    }
}

fn key() -> Item {
    HashMap::from([(items::PK.to_owned(), items::s(RERUNS_KEY))])
}

/// The entry's name in the map.
fn entry_name(run: &RunKey) -> String {
    run.to_string()
}

fn state_parts(state: RerunState) -> (&'static str, i64) {
    match state {
        RerunState::Wanted => ("wanted", 0),
        RerunState::Asked(at) => ("asked", at.unix_timestamp()),
        RerunState::GaveUp(at) => ("gave_up", at.unix_timestamp()),
    }
}

fn entry(rerun: &Rerun) -> AttributeValue {
    let (state, state_at) = state_parts(rerun.state);
    let mut m = HashMap::from([
        ("owner".to_owned(), items::s(&rerun.run.owner)),
        ("repo".to_owned(), items::s(&rerun.run.repo)),
        ("run_id".to_owned(), items::n(rerun.run.run_id)),
        ("job_id".to_owned(), items::n(rerun.job_id)),
        ("run_attempt".to_owned(), items::n(rerun.run_attempt)),
        ("pool".to_owned(), items::s(&rerun.pool)),
        ("runner".to_owned(), items::s(&rerun.runner)),
        (
            "wanted_at".to_owned(),
            items::n(rerun.wanted_at.unix_timestamp()),
        ),
        ("state".to_owned(), items::s(state)),
        ("state_at".to_owned(), items::n(state_at)),
        (
            "next_check_at".to_owned(),
            items::n(rerun.next_check_at.unix_timestamp()),
        ),
    ]);
    if let Some(id) = rerun.installation_id {
        m.insert("installation_id".to_owned(), items::n(id));
    }
    AttributeValue::M(m)
}

/// An entry as the map holds it.
fn rerun_of(name: &str, value: &AttributeValue) -> Result<Rerun, StoreError> {
    let corrupt = |message: String| StoreError::Corrupt {
        key: format!("{RERUNS_KEY}.{name}"),
        message,
    };
    let m = value.as_m().map_err(|_| corrupt("not a map".to_owned()))?;
    let text = |field: &str| {
        m.get(field)
            .and_then(|v| v.as_s().ok())
            .cloned()
            .ok_or_else(|| corrupt(format!("{field}: not a string")))
    };
    let number = |field: &str| {
        m.get(field)
            .and_then(|v| v.as_n().ok())
            .and_then(|v| v.parse::<i64>().ok())
            .ok_or_else(|| corrupt(format!("{field}: not a number")))
    };
    let time = |field: &str| {
        OffsetDateTime::from_unix_timestamp(number(field)?)
            .map_err(|err| corrupt(format!("{field}: {err}")))
    };
    let unsigned = |field: &str| {
        u64::try_from(number(field)?).map_err(|_| corrupt(format!("{field}: negative")))
    };
    let state = match text("state")?.as_str() {
        "wanted" => RerunState::Wanted,
        "asked" => RerunState::Asked(time("state_at")?),
        "gave_up" => RerunState::GaveUp(time("state_at")?),
        other => return Err(corrupt(format!("unknown state {other:?}"))),
    };
    Ok(Rerun {
        run: RunKey {
            owner: text("owner")?,
            repo: text("repo")?,
            run_id: unsigned("run_id")?,
        },
        job_id: unsigned("job_id")?,
        run_attempt: u32::try_from(unsigned("run_attempt")?)
            .map_err(|_| corrupt("run_attempt: too large".to_owned()))?,
        installation_id: m
            .contains_key("installation_id")
            .then(|| unsigned("installation_id"))
            .transpose()?,
        pool: text("pool")?,
        runner: text("runner")?,
        wanted_at: time("wanted_at")?,
        state,
        next_check_at: time("next_check_at")?,
    })
}

fn entries(item: Option<&Item>) -> Result<Vec<Rerun>, StoreError> {
    let Some(runs) = item.and_then(|item| item.get(RUNS)) else {
        return Ok(Vec::new());
    };
    let runs = runs.as_m().map_err(|_| StoreError::Corrupt {
        key: RERUNS_KEY.to_owned(),
        message: format!("{RUNS} is not a map"),
    })?;
    runs.iter()
        .map(|(name, value)| rerun_of(name, value))
        .collect()
}

#[async_trait]
impl RerunStore for DynamoReruns {
    async fn want_rerun(&self, rerun: &Rerun) -> Result<bool, StoreError> {
        // A nested path can be set only in a map that exists.
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key()))
            .update_expression("SET #kind = :kind, #runs = if_not_exists(#runs, :empty)")
            .expression_attribute_names("#kind", items::KIND)
            .expression_attribute_names("#runs", RUNS)
            .expression_attribute_values(":kind", items::s(KIND_RERUNS))
            .expression_attribute_values(":empty", AttributeValue::M(HashMap::new()))
            .send()
            .await
            .map_err(store_error)?;
        let put = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key()))
            .update_expression("SET #runs.#run = :entry")
            .condition_expression("attribute_not_exists(#runs.#run)")
            .expression_attribute_names("#runs", RUNS)
            .expression_attribute_names("#run", entry_name(&rerun.run))
            .expression_attribute_values(":entry", entry(rerun))
            .send()
            .await;
        Ok(unless_condition_failed(put)?.is_some())
    }

    async fn reruns(&self) -> Result<Vec<Rerun>, StoreError> {
        entries(self.item().await?.as_ref())
    }

    async fn rerun_of(&self, run: &RunKey) -> Result<Option<Rerun>, StoreError> {
        let name = entry_name(run);
        let item = self.item().await?;
        match item
            .as_ref()
            .and_then(|i| i.get(RUNS))
            .and_then(|r| r.as_m().ok())
        {
            Some(runs) => runs.get(&name).map(|v| rerun_of(&name, v)).transpose(),
            None => Ok(None),
        }
    }

    async fn move_rerun(
        &self,
        run: &RunKey,
        from: RerunState,
        to: RerunState,
        next_check_at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let (from_state, from_at) = state_parts(from);
        let (to_state, to_at) = state_parts(to);
        let moved = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key()))
            .update_expression(
                "SET #runs.#run.#state = :to, #runs.#run.#at = :to_at, #runs.#run.#next = :next",
            )
            .condition_expression("#runs.#run.#state = :from AND #runs.#run.#at = :from_at")
            .expression_attribute_names("#runs", RUNS)
            .expression_attribute_names("#run", entry_name(run))
            .expression_attribute_names("#state", "state")
            .expression_attribute_names("#at", "state_at")
            .expression_attribute_names("#next", "next_check_at")
            .expression_attribute_values(":to", items::s(to_state))
            .expression_attribute_values(":to_at", items::n(to_at))
            .expression_attribute_values(":from", items::s(from_state))
            .expression_attribute_values(":from_at", items::n(from_at))
            .expression_attribute_values(":next", items::n(next_check_at.unix_timestamp()))
            .send()
            .await;
        Ok(unless_condition_failed(moved)?.is_some())
    }

    async fn forget_rerun(&self, run: &RunKey) -> Result<(), StoreError> {
        let removed = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key()))
            .update_expression("REMOVE #runs.#run")
            .condition_expression("attribute_exists(#runs)")
            .expression_attribute_names("#runs", RUNS)
            .expression_attribute_names("#run", entry_name(run))
            .send()
            .await;
        unless_condition_failed(removed).map(|_| ())
    }
}
