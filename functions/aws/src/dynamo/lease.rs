//! The [`Leases`] port on the runners table: one item per lease (`LEASE#<name>`, with
//! its holder and expiry), taken with a conditional put and given back with a
//! conditional update that sets its expiry to the epoch, so the next taker's condition
//! (`expires_at <= now`) holds at once. An update rather than a delete: the reaper's role
//! may write the runners table's items (PutItem, UpdateItem) but delete none of them
//! (template.yaml, ReaperRole). The item has no status, so the status index never sees
//! it; its TTL removes a lease nobody took for a day.

use super::{store_error, DynamoRunnerStore};
use crate::items;
use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use ephemera_core::ports::Leases;
use ephemera_core::ports::StoreError;
use time::OffsetDateTime;

const HOLDER: &str = "holder";
const EXPIRES_AT: &str = "expires_at";
/// The expiry of a lease given back: the epoch, before any `now`.
const RELEASED: i64 = 0;
/// How long after its expiry DynamoDB's TTL may remove a lease item.
const KEEP_AFTER_EXPIRY: i64 = 24 * 3600;

fn lease_key(name: &str) -> String {
    format!("LEASE#{name}")
}

#[async_trait]
impl Leases for DynamoRunnerStore {
    async fn acquire(
        &self,
        name: &str,
        holder: &str,
        until: OffsetDateTime,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let mut item = items::key(lease_key(name));
        item.insert(HOLDER.to_owned(), AttributeValue::S(holder.to_owned()));
        let expires = until.unix_timestamp();
        item.insert(
            EXPIRES_AT.to_owned(),
            AttributeValue::N(expires.to_string()),
        );
        let ttl = (expires + KEEP_AFTER_EXPIRY).to_string();
        item.insert(items::TTL.to_owned(), AttributeValue::N(ttl));
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#pk) OR #expires <= :now")
            .expression_attribute_names("#pk", items::PK)
            .expression_attribute_names("#expires", EXPIRES_AT)
            .expression_attribute_values(
                ":now",
                AttributeValue::N(now.unix_timestamp().to_string()),
            )
            .send()
            .await;
        match put {
            Ok(_) => Ok(true),
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                Ok(false)
            }
            Err(err) => Err(store_error(err)),
        }
    }

    async fn release(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        // `#holder = :holder` is false on a missing item, so the update never creates one.
        let released = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(items::key(lease_key(name))))
            .update_expression("SET #expires = :released")
            .condition_expression("#holder = :holder")
            .expression_attribute_names("#holder", HOLDER)
            .expression_attribute_names("#expires", EXPIRES_AT)
            .expression_attribute_values(":holder", AttributeValue::S(holder.to_owned()))
            .expression_attribute_values(":released", AttributeValue::N(RELEASED.to_string()))
            .send()
            .await;
        match released {
            Ok(_) => Ok(()),
            // Not ours any more (it expired and someone took it), or already gone.
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                Ok(())
            }
            Err(err) => Err(store_error(err)),
        }
    }
}
