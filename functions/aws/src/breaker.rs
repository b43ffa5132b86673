//! [`DynamoSpotBreakers`]: each pool's spot circuit breaker ([`SpotBreakerStore`]) as an
//! item of the runners table, `BREAKER#<pool>` (kind `spot_breaker`): a map of the
//! interrupted instances to when each was reported (unix seconds), and `paused_until`.
//!
//! Its own item, not the pool's: the pool item takes part in every claim's transaction,
//! and a write to it meanwhile would cancel claims (`TransactionConflict`). Counting is
//! two `UpdateItem`s (the map made if missing, then the instance set if absent, so a
//! repeated event counts once), a third only to forget old entries; the scaler reads the
//! item once per spot launch of the pool. Both functions' roles may read and update
//! items of the table.

use crate::dynamo::{store_error, unless_condition_failed};
use crate::items::{self, Item};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use aws_sdk_dynamodb::Client;
use ephemera_core::breaker::SpotBreakerState;
use ephemera_core::ports::SpotBreakerStore;
use ephemera_core::ports::StoreError;
use std::collections::HashMap;
use time::OffsetDateTime;

/// The kind of a pool's breaker item.
pub(crate) const KIND_SPOT_BREAKER: &str = "spot_breaker";
const INTERRUPTED: &str = "interrupted";
const PAUSED_UNTIL: &str = "paused_until";

/// The key of `pool`'s breaker item.
pub(crate) fn breaker_key(pool: &str) -> String {
    format!("BREAKER#{pool}")
}

/// The breakers of one deployment's pools, in its runners table.
#[derive(Debug, Clone)]
pub struct DynamoSpotBreakers {
    client: Client,
    table: String,
}

impl DynamoSpotBreakers {
    pub fn new(client: Client, table: impl Into<String>) -> DynamoSpotBreakers {
        DynamoSpotBreakers {
            client,
            table: table.into(),
        }
    }
}

fn key(pool: &str) -> HashMap<String, AttributeValue> {
    HashMap::from([(items::PK.to_owned(), items::s(breaker_key(pool)))])
}

fn seconds(value: &AttributeValue) -> Option<OffsetDateTime> {
    let secs = value.as_n().ok()?.parse::<i64>().ok()?;
    OffsetDateTime::from_unix_timestamp(secs).ok()
}

/// The state an item holds; an entry that is not unix seconds is a corrupt item.
fn state_of(pool: &str, item: Option<&Item>) -> Result<SpotBreakerState, StoreError> {
    let Some(item) = item else {
        return Ok(SpotBreakerState::default());
    };
    let corrupt = |message: String| StoreError::Corrupt {
        key: breaker_key(pool),
        message,
    };
    let mut state = SpotBreakerState::default();
    if let Some(map) = item.get(INTERRUPTED) {
        let map = map
            .as_m()
            .map_err(|_| corrupt(format!("{INTERRUPTED} is not a map")))?;
        for (instance_id, at) in map {
            let at =
                seconds(at).ok_or_else(|| corrupt(format!("{instance_id}: not unix seconds")))?;
            state.interrupted.insert(instance_id.clone(), at);
        }
    }
    if let Some(until) = item.get(PAUSED_UNTIL) {
        let until =
            seconds(until).ok_or_else(|| corrupt(format!("{PAUSED_UNTIL}: not unix seconds")))?;
        state.paused_until = Some(until);
    }
    Ok(state)
}

#[async_trait]
impl SpotBreakerStore for DynamoSpotBreakers {
    async fn note_interruption(
        &self,
        pool: &str,
        instance_id: &str,
        at: OffsetDateTime,
        forget_before: OffsetDateTime,
    ) -> Result<SpotBreakerState, StoreError> {
        // A nested path can be set only in a map that exists.
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(pool)))
            .update_expression(
                "SET #kind = :kind, #interrupted = if_not_exists(#interrupted, :empty)",
            )
            .expression_attribute_names("#kind", items::KIND)
            .expression_attribute_names("#interrupted", INTERRUPTED)
            .expression_attribute_values(":kind", items::s(KIND_SPOT_BREAKER))
            .expression_attribute_values(":empty", AttributeValue::M(HashMap::new()))
            .send()
            .await
            .map_err(store_error)?;
        let answer = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(pool)))
            .update_expression(
                "SET #interrupted.#instance = if_not_exists(#interrupted.#instance, :at)",
            )
            .expression_attribute_names("#interrupted", INTERRUPTED)
            .expression_attribute_names("#instance", instance_id)
            .expression_attribute_values(":at", items::n(at.unix_timestamp()))
            .return_values(ReturnValue::AllNew)
            .send()
            .await
            .map_err(store_error)?;
        let mut state = state_of(pool, answer.attributes())?;
        let old: Vec<String> = state
            .interrupted
            .iter()
            .filter(|(_, when)| **when < forget_before)
            .map(|(id, _)| id.clone())
            .collect();
        if !old.is_empty() {
            let mut forget = self
                .client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key(pool)))
                .expression_attribute_names("#interrupted", INTERRUPTED);
            let mut paths = Vec::new();
            for (i, id) in old.iter().enumerate() {
                forget = forget.expression_attribute_names(format!("#old{i}"), id);
                paths.push(format!("#interrupted.#old{i}"));
                state.interrupted.remove(id);
            }
            forget
                .update_expression(format!("REMOVE {}", paths.join(", ")))
                .send()
                .await
                .map_err(store_error)?;
        }
        Ok(state)
    }

    async fn pause_spot(&self, pool: &str, until: OffsetDateTime) -> Result<(), StoreError> {
        let paused = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(pool)))
            .update_expression("SET #until = :until, #kind = :kind")
            .condition_expression("attribute_not_exists(#until) OR #until < :until")
            .expression_attribute_names("#until", PAUSED_UNTIL)
            .expression_attribute_names("#kind", items::KIND)
            .expression_attribute_values(":until", items::n(until.unix_timestamp()))
            .expression_attribute_values(":kind", items::s(KIND_SPOT_BREAKER))
            .send()
            .await;
        // A later pause is set already: it stands.
        unless_condition_failed(paused).map(|_| ())
    }

    async fn breaker_state(&self, pool: &str) -> Result<SpotBreakerState, StoreError> {
        let answer = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(pool)))
            .consistent_read(true)
            .send()
            .await
            .map_err(store_error)?;
        state_of(pool, answer.item())
    }
}
