//! [`DynamoTokenShelf`]: the [`TokenShelf`] port in the runners table, one item per App
//! and installation (`TOKEN#<app_id>#<installation_id>`, kind `installation_token`).
//!
//! Who can read it: the runners table is readable by the scaler's and the reaper's roles
//! and by the operator's credentials the CLI runs with, nobody else in the stack (the
//! webhook's role may only put `UNROUTED#` and its own `RUNNING#` item, the runner role
//! reaches only the JIT table: the template's IAM posture test holds both). The token is
//! not encrypted again inside the item, for DynamoDB encrypts every table at rest
//! (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/EncryptionAtRest.html)
//! and everyone who can read the item can also read the App's private key secret, which
//! mints such tokens at will: a second key would cost a KMS call per read and protect
//! nothing those readers cannot already do. The item expires with the token: it is never
//! handed out after its `expires_at` (the client refuses it five minutes before), and its
//! `ttl` lets DynamoDB drop it an hour later.
//!
//! Writes are conditional: a token is shelved only over one that expires earlier (two
//! processes that minted at once keep the later), and withdrawn (marked expired, with
//! `UpdateItem`, which the scaler's and reaper's roles have; they may not delete items)
//! only if it is still the one GitHub refused (by its SHA-256, so no condition carries
//! the token).

use crate::dynamo::{store_error, unless_condition_failed};
use crate::items::{self, Item};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use ephemera_core::ports::{SharedToken, StoreError, TokenShelf};
use secrecy::{ExposeSecret, SecretString};
use std::collections::HashMap;
use time::OffsetDateTime;

/// The kind of a shared installation token's item.
pub(crate) const KIND_INSTALLATION_TOKEN: &str = "installation_token";
const TOKEN: &str = "token";
const FINGERPRINT: &str = "fingerprint";
const EXPIRES_AT: &str = "expires_at";
/// How long after the token's expiry DynamoDB may drop the item.
const TTL_AFTER_EXPIRY: time::Duration = time::Duration::hours(1);

/// The key of the App's token for the installation.
pub fn token_key(app_id: u64, installation_id: u64) -> String {
    format!("TOKEN#{app_id}#{installation_id}")
}

/// The shared installation tokens of one deployment, in its runners table.
#[derive(Debug, Clone)]
pub struct DynamoTokenShelf {
    client: Client,
    table: String,
}

impl DynamoTokenShelf {
    pub fn new(client: Client, table: impl Into<String>) -> DynamoTokenShelf {
        DynamoTokenShelf {
            client,
            table: table.into(),
        }
    }
}

fn key(app_id: u64, installation_id: u64) -> HashMap<String, AttributeValue> {
    HashMap::from([(
        items::PK.to_owned(),
        items::s(token_key(app_id, installation_id)),
    )])
}

fn corrupt(app_id: u64, installation_id: u64, message: &str) -> StoreError {
    StoreError::Corrupt {
        key: token_key(app_id, installation_id),
        message: message.to_owned(),
    }
}

/// The token an item holds.
fn token_from_item(
    item: &Item,
    app_id: u64,
    installation_id: u64,
) -> Result<SharedToken, StoreError> {
    let token = match item.get(TOKEN) {
        Some(AttributeValue::S(token)) => SecretString::from(token.clone()),
        _ => return Err(corrupt(app_id, installation_id, "no token")),
    };
    let expires_at = match item.get(EXPIRES_AT) {
        Some(AttributeValue::N(secs)) => secs
            .parse::<i64>()
            .ok()
            .and_then(|secs| OffsetDateTime::from_unix_timestamp(secs).ok()),
        _ => None,
    }
    .ok_or_else(|| corrupt(app_id, installation_id, "no expires_at in unix seconds"))?;
    Ok(SharedToken { token, expires_at })
}

#[async_trait]
impl TokenShelf for DynamoTokenShelf {
    async fn read(
        &self,
        app_id: u64,
        installation_id: u64,
    ) -> Result<Option<SharedToken>, StoreError> {
        let answer = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(app_id, installation_id)))
            .consistent_read(true)
            .send()
            .await
            .map_err(store_error)?;
        answer
            .item()
            .map(|item| token_from_item(item, app_id, installation_id))
            .transpose()
    }

    async fn shelve(
        &self,
        app_id: u64,
        installation_id: u64,
        token: &SharedToken,
    ) -> Result<(), StoreError> {
        let expires = token.expires_at.unix_timestamp();
        let item: Item = HashMap::from([
            (
                items::PK.to_owned(),
                items::s(token_key(app_id, installation_id)),
            ),
            (items::KIND.to_owned(), items::s(KIND_INSTALLATION_TOKEN)),
            (TOKEN.to_owned(), items::s(token.token.expose_secret())),
            (FINGERPRINT.to_owned(), items::s(token.fingerprint())),
            (EXPIRES_AT.to_owned(), items::n(expires)),
            (
                items::TTL.to_owned(),
                items::n((token.expires_at + TTL_AFTER_EXPIRY).unix_timestamp()),
            ),
        ]);
        let written = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#pk) OR #expires_at < :expires_at")
            .expression_attribute_names("#pk", items::PK)
            .expression_attribute_names("#expires_at", EXPIRES_AT)
            .expression_attribute_values(":expires_at", items::n(expires))
            .send()
            .await;
        // A token that expires later may be there: it stays.
        unless_condition_failed(written).map(|_| ())
    }

    async fn withdraw(
        &self,
        app_id: u64,
        installation_id: u64,
        fingerprint: &str,
    ) -> Result<(), StoreError> {
        // Marked expired rather than deleted: the functions' roles may update items of
        // the table but not delete them; the next shelve replaces it, the `ttl` drops it.
        let withdrawn = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(app_id, installation_id)))
            .update_expression("SET #expires_at = :withdrawn")
            .condition_expression("#fingerprint = :fingerprint")
            .expression_attribute_names("#expires_at", EXPIRES_AT)
            .expression_attribute_names("#fingerprint", FINGERPRINT)
            .expression_attribute_values(":withdrawn", items::n(0))
            .expression_attribute_values(":fingerprint", items::s(fingerprint))
            .send()
            .await;
        // Gone, or another token replaced it since: nothing to withdraw.
        unless_condition_failed(withdrawn).map(|_| ())
    }
}
