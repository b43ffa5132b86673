//! [`DynamoJitConfigs`]: the [`JitConfigStore`] port on a small DynamoDB table of the stack.
//!
//! One item per runner instance, keyed by the instance's ARN
//! (`arn:<partition>:ec2:<region>:<account>:instance/<id>`), written by the scaler after
//! the launch. The runner role may only `GetItem` the item whose key equals the
//! `ec2:SourceInstanceARN` of its credentials (`dynamodb:LeadingKeys`), and `UpdateItem`
//! it touching only `instance_arn`, `jit_config`, `jit_read_at` and the three attributes
//! naming the runner it ran ([`RUNNER_VERSION`], [`RUNNER_IMAGE_VERSION`],
//! [`RUNNER_SWAP_MS`]), so an instance reads its own config and nothing else. The bootstrap script reads the item, then turns it
//! into a tombstone ([`BOOTSTRAP_READ`]: the config removed, the read's time kept) and
//! starts the runner; the reaper deletes the item, tombstone or unread config; a TTL is
//! the last backstop.
//!
//! Why DynamoDB and not SSM: a JIT config is about 4–6 KB (SSM's Standard tier holds 4 KB),
//! SSM writes are capped at a few per second per account and region, and an account holds
//! 10,000 Standard parameters. A DynamoDB item holds up to 400 KB, an on-demand table takes
//! thousands of writes a second, and a deleted item counts against nothing.
//!
//! Errors: `ConditionalCheckFailedException` on put means a later registration's config is
//! waiting ([`JitStoreError::Superseded`]); throttling codes are [`JitStoreError::Throttled`];
//! `ValidationException` (e.g. an item over 400 KB) and `ResourceNotFoundException` cannot
//! succeed on a retry ([`JitStoreError::Rejected`]); anything else is transient. One
//! request asks for the old item back: the reaper's delete, and only on the condition
//! that the item holds no config (a tombstone), so its answer is the read's time and
//! never a config; no request asks for the item on a failed condition, so no error ever
//! carries a config either.

use async_trait::async_trait;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use aws_sdk_dynamodb::Client;
use ephemera_core::ports::{HostRunner, JitConfig, JitConfigStore, JitStoreError, Tombstone};
use secrecy::ExposeSecret;
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use time::OffsetDateTime;
use tracing::instrument;

/// The partition key: the ARN of the instance the config is for.
pub const INSTANCE_ARN: &str = "instance_arn";
/// The encoded JIT config, as GitHub returned it.
pub const JIT_CONFIG: &str = "jit_config";
/// The runner the config registers, for an operator reading the table.
pub const RUNNER: &str = "runner";
/// GitHub's id of that runner: a later registration has a higher one.
pub const RUNNER_ID: &str = "runner_id";
/// Set (true) on a stopped pool's item, which has no config: the host prepares and
/// powers off (docs/design.md, "Stopped pool").
pub const PREPARE: &str = "prepare";
/// When DynamoDB may delete the item by itself (epoch seconds).
pub const TTL: &str = "ttl";
/// When the instance read its config (epoch seconds, the instance's clock): set by the
/// bootstrap as it removes the config, the tombstone the reaper's delete returns.
pub const JIT_READ_AT: &str = "jit_read_at";

/// The runner version that runs the job (S), written by the bootstrap with the read.
pub const RUNNER_VERSION: &str = "runner_version";
/// The runner version the image had baked in (S); absent on a stock image.
pub const RUNNER_IMAGE_VERSION: &str = "runner_image_version";
/// Milliseconds the start phase spent replacing the image's runner from the deployment's
/// copy (N); absent when the image's runner was current.
pub const RUNNER_SWAP_MS: &str = "runner_swap_ms";

/// The bootstrap's `UpdateItem` of its own item once it has read the config, with the
/// read's time as `:now` (epoch seconds): the secret goes, the stamp stays.
/// A bootstrap that reports its runner adds `, runner_version = :v` and, when they apply,
/// `runner_image_version` and `runner_swap_ms` ([`bootstrap_read_reporting`]).
pub const BOOTSTRAP_READ: &str = "REMOVE jit_config SET jit_read_at = :now";

/// The bootstrap's update expression when it reports the runner it ran: the image's
/// version only from a baked image, the swap's time only after a swap.
pub fn bootstrap_read_reporting(image_version: bool, swap: bool) -> String {
    let mut expression = format!("{BOOTSTRAP_READ}, {RUNNER_VERSION} = :v");
    if image_version {
        expression.push_str(&format!(", {RUNNER_IMAGE_VERSION} = :i"));
    }
    if swap {
        expression.push_str(&format!(", {RUNNER_SWAP_MS} = :w"));
    }
    expression
}
/// Its condition: the config is still there (a late update creates no item, and a
/// repeated one does not stamp again).
pub const BOOTSTRAP_READ_CONDITION: &str = "attribute_exists(jit_config)";

/// How long an item lives without its instance or the reaper deleting it: well beyond a
/// bootstrap's wait for it (`EPHEMERA_JIT_WAIT`, 10 minutes). DynamoDB deletes expired
/// items within days, not at once: the reaper, not the TTL, is what removes them in time.
pub const ITEM_LIFETIME: Duration = Duration::from_secs(3600);

/// The account the emulator (moto) runs everything in.
pub(crate) const EMULATOR_ACCOUNT_ID: &str = "123456789012";

/// `arn:<partition>:ec2:<region>:<account>:instance/`, what an instance id is appended to.
pub(crate) fn instance_arn_prefix(partition: &str, region: &str, account_id: &str) -> String {
    format!("arn:{partition}:ec2:{region}:{account_id}:instance/")
}

/// The table of one deployment's waiting JIT configs.
#[derive(Debug, Clone)]
pub struct DynamoJitConfigs {
    client: Client,
    table: String,
    instance_arn_prefix: String,
}

impl DynamoJitConfigs {
    /// The instances' ARNs are taken to be in the emulator's account, in the client's
    /// region; a deployment on AWS names its own with [`Self::with_instance_arn_prefix`].
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        let region = client
            .config()
            .region()
            .map_or("us-east-1".to_owned(), ToString::to_string);
        DynamoJitConfigs {
            client,
            table: table.into(),
            instance_arn_prefix: instance_arn_prefix("aws", &region, EMULATOR_ACCOUNT_ID),
        }
    }

    /// Where the instances live: `arn:<partition>:ec2:<region>:<account>:instance/`.
    pub fn with_instance_arn_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.instance_arn_prefix = prefix.into();
        self
    }

    /// The ARN the instance's role credentials carry as `ec2:SourceInstanceARN`: the key
    /// of its item.
    pub fn instance_arn(&self, instance_id: &str) -> String {
        format!("{}{instance_id}", self.instance_arn_prefix)
    }

    pub fn table(&self) -> &str {
        &self.table
    }
}

/// The key of the item waiting for the instance `instance_arn`.
pub fn item_key(instance_arn: &str) -> HashMap<String, AttributeValue> {
    HashMap::from([(
        INSTANCE_ARN.to_owned(),
        AttributeValue::S(instance_arn.to_owned()),
    )])
}

fn expires_at(now: SystemTime) -> u64 {
    (now + ITEM_LIFETIME)
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn jit_store_error<E, R>(err: SdkError<E, R>) -> JitStoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match err.code() {
        Some(
            "ProvisionedThroughputExceededException"
            | "ThrottlingException"
            | "RequestLimitExceeded",
        ) => JitStoreError::Throttled(Box::new(err)),
        Some("ValidationException" | "ResourceNotFoundException") => {
            JitStoreError::Rejected(Box::new(err))
        }
        _ => JitStoreError::Transient(Box::new(err)),
    }
}

impl DynamoJitConfigs {
    /// The runner id of the config waiting for `instance_arn`, after a refused put.
    async fn stored_runner_id(&self, instance_arn: &str) -> Result<u64, JitStoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(item_key(instance_arn)))
            .projection_expression("#id")
            .expression_attribute_names("#id", RUNNER_ID)
            .consistent_read(true)
            .send()
            .await
            .map_err(jit_store_error)?;
        let stored = output.item.as_ref().and_then(|item| item.get(RUNNER_ID));
        Ok(match stored {
            Some(AttributeValue::N(id)) => id.parse().unwrap_or_default(),
            _ => 0,
        })
    }
}

#[async_trait]
impl JitConfigStore for DynamoJitConfigs {
    #[instrument(skip_all, fields(instance_id, runner = %runner_name, runner_id = jit.runner_id))]
    async fn put(
        &self,
        instance_id: &str,
        runner_name: &str,
        jit: &JitConfig,
    ) -> Result<(), JitStoreError> {
        let instance_arn = self.instance_arn(instance_id);
        let item = HashMap::from([
            (
                INSTANCE_ARN.to_owned(),
                AttributeValue::S(instance_arn.clone()),
            ),
            (
                JIT_CONFIG.to_owned(),
                AttributeValue::S(jit.encoded.expose_secret().to_owned()),
            ),
            (RUNNER.to_owned(), AttributeValue::S(runner_name.to_owned())),
            (
                RUNNER_ID.to_owned(),
                AttributeValue::N(jit.runner_id.to_string()),
            ),
            (
                TTL.to_owned(),
                AttributeValue::N(expires_at(SystemTime::now()).to_string()),
            ),
        ]);
        // A retry of the same registration replaces its own item; a try that lost its
        // lease and comes back with an earlier registration leaves the later one alone.
        let written = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#arn) OR #id <= :id")
            .expression_attribute_names("#arn", INSTANCE_ARN)
            .expression_attribute_names("#id", RUNNER_ID)
            .expression_attribute_values(":id", AttributeValue::N(jit.runner_id.to_string()))
            .send()
            .await;
        match written {
            Ok(_) => Ok(()),
            Err(err) if err.code() == Some("ConditionalCheckFailedException") => {
                let stored = self.stored_runner_id(&instance_arn).await?;
                Err(JitStoreError::Superseded { stored })
            }
            Err(err) => Err(jit_store_error(err)),
        }
    }

    #[instrument(skip_all, fields(instance_id, runner = %runner_name))]
    async fn put_prepare(&self, instance_id: &str, runner_name: &str) -> Result<(), JitStoreError> {
        let item = HashMap::from([
            (
                INSTANCE_ARN.to_owned(),
                AttributeValue::S(self.instance_arn(instance_id)),
            ),
            (PREPARE.to_owned(), AttributeValue::Bool(true)),
            (RUNNER.to_owned(), AttributeValue::S(runner_name.to_owned())),
            (RUNNER_ID.to_owned(), AttributeValue::N("0".to_owned())),
            (
                TTL.to_owned(),
                AttributeValue::N(expires_at(SystemTime::now()).to_string()),
            ),
        ]);
        // Only where nothing is stored: a config put meanwhile (a take) is never replaced.
        let written = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#arn)")
            .expression_attribute_names("#arn", INSTANCE_ARN)
            .send()
            .await;
        match written {
            Ok(_) => Ok(()),
            Err(err) if err.code() == Some("ConditionalCheckFailedException") => Ok(()),
            Err(err) => Err(jit_store_error(err)),
        }
    }

    #[instrument(skip_all, fields(instance_id))]
    async fn delete(&self, instance_id: &str) -> Result<Tombstone, JitStoreError> {
        let key = item_key(&self.instance_arn(instance_id));
        // The old item is asked back only on the condition that it holds no config: a
        // tombstone (or nothing), so the answer carries the read's time and never a secret.
        let tombstone = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key.clone()))
            .condition_expression("attribute_not_exists(#config)")
            .expression_attribute_names("#config", JIT_CONFIG)
            .return_values(ReturnValue::AllOld)
            .send()
            .await;
        match tombstone {
            Ok(output) => Ok(tombstone_of(output.attributes())),
            // A config nobody read: the one path with a second request, a plain delete
            // (deleting an item that is not there succeeds, so no condition is needed).
            Err(err) if err.code() == Some("ConditionalCheckFailedException") => {
                self.client
                    .delete_item()
                    .table_name(&self.table)
                    .set_key(Some(key))
                    .send()
                    .await
                    .map_err(jit_store_error)?;
                Ok(Tombstone::default())
            }
            Err(err) => Err(jit_store_error(err)),
        }
    }
}

/// What a deleted tombstone says: its read's time and the runner the host ran; empty for
/// an item never read, or absent. A garbled attribute counts as absent.
fn tombstone_of(item: Option<&HashMap<String, AttributeValue>>) -> Tombstone {
    let text = |name: &str| {
        let value = item?.get(name)?.as_s().ok()?;
        Some(value.clone())
    };
    Tombstone {
        read_at: read_at(item),
        runner: HostRunner {
            runner_version: text(RUNNER_VERSION),
            runner_image_version: text(RUNNER_IMAGE_VERSION),
            runner_swap_ms: item
                .and_then(|item| item.get(RUNNER_SWAP_MS)?.as_n().ok()?.parse().ok()),
        },
    }
}

/// The `jit_read_at` of a deleted tombstone; none for an item never read, or absent.
fn read_at(item: Option<&HashMap<String, AttributeValue>>) -> Option<OffsetDateTime> {
    let seconds = item?.get(JIT_READ_AT)?.as_n().ok()?.parse().ok()?;
    OffsetDateTime::from_unix_timestamp(seconds).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_expire_an_hour_after_the_put() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        assert_eq!(expires_at(now), 4_600);
        assert_eq!(
            instance_arn_prefix("aws-cn", "cn-north-1", "1"),
            "arn:aws-cn:ec2:cn-north-1:1:instance/"
        );
    }

    #[test]
    fn a_tombstone_gives_its_read_time_and_anything_else_none() {
        let n = |v: &str| AttributeValue::N(v.to_owned());
        let tombstone = HashMap::from([(JIT_READ_AT.to_owned(), n("1764120000"))]);
        let at = OffsetDateTime::from_unix_timestamp(1_764_120_000).ok();
        assert_eq!(read_at(Some(&tombstone)), at);
        let garbled = HashMap::from([(JIT_READ_AT.to_owned(), n("soon"))]);
        assert_eq!(read_at(Some(&garbled)), None);
        assert_eq!(read_at(Some(&HashMap::new())), None);
        assert_eq!(read_at(None), None);
    }

    #[test]
    fn a_tombstone_gives_the_runner_its_host_ran() {
        let s = |v: &str| AttributeValue::S(v.to_owned());
        let n = |v: &str| AttributeValue::N(v.to_owned());
        let tombstone = HashMap::from([
            (JIT_READ_AT.to_owned(), n("1764120000")),
            (RUNNER_VERSION.to_owned(), s("2.337.0")),
            (RUNNER_IMAGE_VERSION.to_owned(), s("2.336.0")),
            (RUNNER_SWAP_MS.to_owned(), n("4200")),
        ]);
        let runner = tombstone_of(Some(&tombstone)).runner;
        assert_eq!(runner.runner_version.as_deref(), Some("2.337.0"));
        assert_eq!(runner.runner_image_version.as_deref(), Some("2.336.0"));
        assert_eq!(runner.runner_swap_ms, Some(4200));
        assert_eq!(runner.image_behind(), Some(true));
        let earlier_host = HashMap::from([(JIT_READ_AT.to_owned(), n("1764120000"))]);
        assert!(tombstone_of(Some(&earlier_host)).runner.is_empty());
        assert_eq!(tombstone_of(None), Tombstone::default());
        assert_eq!(
            bootstrap_read_reporting(true, false),
            "REMOVE jit_config SET jit_read_at = :now, runner_version = :v, runner_image_version = :i"
        );
    }
}
