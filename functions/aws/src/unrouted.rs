//! Unrouted jobs in the runners table ([`ephemera_core::unrouted`]): one item per job,
//! `UNROUTED#<job_id>`, of kind and status `unrouted`, so the `by-status` index lists
//! them (oldest first by `next_attempt_at`, here the time received) and no query for a
//! runner or job status ever sees them. `ttl` lets DynamoDB expire them.

use crate::dynamo::store_error;
use crate::items::{self, Item};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use ephemera_core::ports::StoreError;
use ephemera_core::ports::UnroutedJobs;
use ephemera_core::unrouted::{UnroutedJob, UNROUTED_TTL};
use std::collections::HashMap;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// The kind and the status of an unrouted job's item.
pub(crate) const KIND_UNROUTED: &str = "unrouted";
const DELIVERY_ID: &str = "delivery_id";
const REASON: &str = "reason";

/// The key of an unrouted job's item.
pub(crate) fn unrouted_key(job_id: u64) -> String {
    format!("UNROUTED#{job_id}")
}

/// Unrouted jobs in a deployment's runners table.
#[derive(Debug, Clone)]
pub struct DynamoUnroutedJobs {
    client: Client,
    table: String,
}

impl DynamoUnroutedJobs {
    pub fn new(client: Client, table: impl Into<String>) -> DynamoUnroutedJobs {
        DynamoUnroutedJobs {
            client,
            table: table.into(),
        }
    }
}

/// The item of an unrouted job.
pub(crate) fn unrouted_to_item(job: &UnroutedJob) -> Item {
    let mut item = HashMap::from([
        (items::PK.to_owned(), items::s(unrouted_key(job.job_id))),
        (items::KIND.to_owned(), items::s(KIND_UNROUTED)),
        (items::STATUS.to_owned(), items::s(KIND_UNROUTED)),
        (items::JOB_ID.to_owned(), items::n(job.job_id)),
        (items::RUN_ID.to_owned(), items::n(job.run_id)),
        (items::OWNER.to_owned(), items::s(job.owner.as_str())),
        (items::REPO.to_owned(), items::s(job.repo.as_str())),
        (items::LABELS.to_owned(), items::list(&job.labels)),
        (DELIVERY_ID.to_owned(), items::s(job.delivery_id.as_str())),
        (REASON.to_owned(), items::s(job.reason.as_str())),
        (
            items::RECEIVED_AT.to_owned(),
            items::timestamp(job.received_at),
        ),
        (
            items::NEXT_ATTEMPT_AT.to_owned(),
            items::millis(job.received_at),
        ),
        (
            items::TTL.to_owned(),
            items::epoch_seconds(job.received_at + UNROUTED_TTL),
        ),
    ]);
    if let Some(id) = job.installation_id {
        item.insert(items::INSTALLATION_ID.to_owned(), items::n(id));
    }
    item
}

/// An unrouted job read back from its item.
pub(crate) fn unrouted_from_item(item: &Item) -> Result<UnroutedJob, StoreError> {
    let key = match item.get(items::PK) {
        Some(AttributeValue::S(pk)) => pk.clone(),
        _ => "<no key>".to_owned(),
    };
    let corrupt = |message: String| StoreError::Corrupt {
        key: key.clone(),
        message,
    };
    let string = |name: &str| match item.get(name) {
        Some(AttributeValue::S(value)) => Ok(value.clone()),
        _ => Err(corrupt(format!("{name} missing or not a string"))),
    };
    let number = |name: &str| match item.get(name) {
        Some(AttributeValue::N(value)) => value
            .parse::<u64>()
            .map_err(|err| corrupt(format!("{name}: {err}"))),
        _ => Err(corrupt(format!("{name} missing or not a number"))),
    };
    let labels = match item.get(items::LABELS) {
        Some(AttributeValue::L(values)) => values
            .iter()
            .filter_map(|v| v.as_s().ok().cloned())
            .collect(),
        _ => Vec::new(),
    };
    let received_at = OffsetDateTime::parse(&string(items::RECEIVED_AT)?, &Rfc3339)
        .map_err(|err| corrupt(format!("{}: {err}", items::RECEIVED_AT)))?;
    Ok(UnroutedJob {
        job_id: number(items::JOB_ID)?,
        run_id: number(items::RUN_ID)?,
        owner: string(items::OWNER)?,
        repo: string(items::REPO)?,
        labels,
        reason: string(REASON).unwrap_or_default(),
        installation_id: number(items::INSTALLATION_ID).ok(),
        delivery_id: string(DELIVERY_ID).unwrap_or_default(),
        received_at,
    })
}

#[async_trait]
impl UnroutedJobs for DynamoUnroutedJobs {
    async fn record_unrouted(&self, job: &UnroutedJob) -> Result<(), StoreError> {
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(unrouted_to_item(job)))
            .send()
            .await
            .map_err(store_error)?;
        Ok(())
    }

    async fn list_unrouted(&self) -> Result<Vec<UnroutedJob>, StoreError> {
        let mut jobs = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let output = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(items::STATUS_INDEX)
                .key_condition_expression("#s = :s")
                .expression_attribute_names("#s", items::STATUS)
                .expression_attribute_values(":s", items::s(KIND_UNROUTED))
                .scan_index_forward(true)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(store_error)?;
            for item in output.items() {
                if items::kind_of(item) == Some(KIND_UNROUTED) {
                    jobs.push(unrouted_from_item(item)?);
                }
            }
            match output.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        Ok(jobs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn an_unrouted_job_survives_its_item_and_expires() {
        let job = UnroutedJob {
            job_id: 7,
            run_id: 9,
            owner: "octo-org".to_owned(),
            repo: "app".to_owned(),
            labels: vec!["self-hosted".to_owned(), "linx".to_owned()],
            reason: "no pool has all of its labels".to_owned(),
            installation_id: Some(3),
            delivery_id: "d-1".to_owned(),
            received_at: datetime!(2025-01-02 03:04:05 UTC),
        };
        let item = unrouted_to_item(&job);
        assert_eq!(items::status_of(&item), Some(KIND_UNROUTED));
        assert_eq!(
            item.get(items::TTL),
            Some(&items::epoch_seconds(job.received_at + UNROUTED_TTL))
        );
        assert_eq!(unrouted_from_item(&item).expect("decoded"), job);
    }

    #[test]
    fn an_item_written_before_reasons_were_kept_reads_with_an_empty_reason() {
        let job = UnroutedJob {
            job_id: 7,
            run_id: 9,
            owner: "octo-org".to_owned(),
            repo: "app".to_owned(),
            labels: vec!["self-hosted".to_owned()],
            reason: "gone".to_owned(),
            installation_id: None,
            delivery_id: "d-1".to_owned(),
            received_at: datetime!(2025-01-02 03:04:05 UTC),
        };
        let mut item = unrouted_to_item(&job);
        item.remove(REASON);
        assert_eq!(unrouted_from_item(&item).expect("decoded").reason, "");
    }
}
