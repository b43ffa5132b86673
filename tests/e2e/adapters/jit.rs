//! The JIT config table against moto, through the real adapter: a config of realistic
//! size (6 KB) is stored under the instance's ARN and read back the way bootstrap.sh
//! reads it; a later registration replaces an earlier one and never the reverse; deletes
//! are idempotent; the bootstrap's read leaves a tombstone whose time the reaper's delete
//! returns, without the config; and what DynamoDB refuses comes back as an error that
//! carries no config.

use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine;
use ephemera_aws::jit::{
    bootstrap_read_reporting, item_key, BOOTSTRAP_READ_CONDITION, INSTANCE_ARN, ITEM_LIFETIME,
    JIT_CONFIG, JIT_READ_AT, PREPARE, RUNNER, RUNNER_ID, TTL,
};
use ephemera_aws::{ensure_resources, sdk_config, AwsSettings, DynamoJitConfigs, ResourceNames};
use ephemera_core::ports::{JitConfig, JitConfigStore, JitStoreError, Tombstone};
use ephemera_tests::moto::Moto;
use rand::{Rng, SeedableRng};
use std::time::{SystemTime, UNIX_EPOCH};

const ARN_PREFIX: &str = "arn:aws:ec2:eu-west-1:111122223333:instance/";

/// A JIT config shaped like GitHub's: base64 of a JSON map of the runner's files
/// (`.runner`, `.credentials`, `.credentials_rsaparams` with an RSA key), `size` bytes.
pub fn realistic_jit_config(size: usize, seed: u64) -> String {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut key = vec![0u8; size];
    rng.fill(&mut key[..]);
    let b64 = base64::engine::general_purpose::STANDARD;
    let files = serde_json::json!({
        ".runner": b64.encode(r#"{"agentId":7,"agentName":"eph-linux-a","poolId":1}"#),
        ".credentials": b64.encode(r#"{"scheme":"OAuthAccessToken","data":{"clientId":"c"}}"#),
        ".credentials_rsaparams": b64.encode(&key),
    });
    let mut encoded = b64.encode(files.to_string());
    encoded.truncate(size);
    encoded
}

fn jit(runner_id: u64, encoded: &str) -> JitConfig {
    JitConfig {
        runner_id,
        encoded: encoded.to_owned().into(),
    }
}

struct Table {
    _moto: Moto,
    dynamodb: aws_sdk_dynamodb::Client,
    jit: DynamoJitConfigs,
    /// The adapter as the scaler uses it: calling as template.yaml's ScalerRole.
    scaler_jit: DynamoJitConfigs,
}

async fn jit_table() -> anyhow::Result<Table> {
    let moto = Moto::start().await?;
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let resources = ensure_resources(&config, &ResourceNames::for_deployment("eph")).await?;
    let dynamodb = aws_sdk_dynamodb::Client::new(&config);
    let jit = DynamoJitConfigs::new(dynamodb.clone(), &resources.jit_table)
        .with_instance_arn_prefix(ARN_PREFIX);
    let scaler = sdk_config(&moto.role_settings("ScalerRole", "eph").await?).await;
    let scaler_jit =
        DynamoJitConfigs::new(aws_sdk_dynamodb::Client::new(&scaler), &resources.jit_table)
            .with_instance_arn_prefix(ARN_PREFIX);
    Ok(Table {
        _moto: moto,
        dynamodb,
        jit,
        scaler_jit,
    })
}

/// DynamoDB `GetItem` of key `{"instance_arn":{"S":ARN}}`, `ConsistentRead`, projection
/// `jit_config`: the request bootstrap.sh signs and sends with `curl --aws-sigv4`.
async fn read_as_bootstrap(table: &Table, instance_arn: &str) -> anyhow::Result<Option<String>> {
    let output = table
        .dynamodb
        .get_item()
        .table_name(table.jit.table())
        .set_key(Some(item_key(instance_arn)))
        .consistent_read(true)
        .projection_expression(JIT_CONFIG)
        .send()
        .await?;
    Ok(output
        .item
        .and_then(|item| item.get(JIT_CONFIG)?.as_s().ok().cloned()))
}

#[tokio::test]
async fn a_6_kb_jit_config_waits_under_the_instance_arn_and_is_read_as_bootstrap_reads_it(
) -> anyhow::Result<()> {
    let table = jit_table().await?;
    let config = realistic_jit_config(6 * 1024, 1);
    assert_eq!(config.len(), 6144);
    table
        .jit
        .put("i-0abc", "eph-linux-a", &jit(7, &config))
        .await?;
    let arn = format!("{ARN_PREFIX}i-0abc");
    assert_eq!(table.jit.instance_arn("i-0abc"), arn);
    assert_eq!(
        read_as_bootstrap(&table, &arn).await?.as_deref(),
        Some(config.as_str())
    );

    let item = table
        .dynamodb
        .get_item()
        .table_name(table.jit.table())
        .set_key(Some(item_key(&arn)))
        .send()
        .await?
        .item
        .expect("stored");
    assert_eq!(item[INSTANCE_ARN].as_s().ok(), Some(&arn));
    assert_eq!(
        item[RUNNER].as_s().ok().map(String::as_str),
        Some("eph-linux-a")
    );
    assert_eq!(item[RUNNER_ID].as_n().ok().map(String::as_str), Some("7"));
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let ttl: u64 = item[TTL].as_n().expect("ttl is a number").parse()?;
    assert!(
        ttl > now && ttl <= now + ITEM_LIFETIME.as_secs() + 5,
        "ttl {ttl}"
    );

    // Another instance's key holds nothing.
    assert_eq!(
        read_as_bootstrap(&table, &format!("{ARN_PREFIX}i-0def")).await?,
        None
    );
    table.jit.delete("i-0abc").await?;
    assert_eq!(read_as_bootstrap(&table, &arn).await?, None);
    table.jit.delete("i-0abc").await?;
    Ok(())
}

/// DynamoDB `UpdateItem` `REMOVE jit_config SET jit_read_at = :now, runner_version = :v,
/// runner_image_version = :i, runner_swap_ms = :w`, on the condition that the item is
/// there: what bootstrap.sh sends once it has read its config, on a baked image whose
/// runner was behind.
async fn stamp_as_bootstrap(table: &Table, instance_arn: &str, now: u64) -> anyhow::Result<()> {
    let s = |v: &str| AttributeValue::S(v.to_owned());
    table
        .dynamodb
        .update_item()
        .table_name(table.jit.table())
        .set_key(Some(item_key(instance_arn)))
        .update_expression(bootstrap_read_reporting(true, true))
        .condition_expression(BOOTSTRAP_READ_CONDITION)
        .expression_attribute_values(":now", AttributeValue::N(now.to_string()))
        .expression_attribute_values(":v", s("2.337.0"))
        .expression_attribute_values(":i", s("2.336.0"))
        .expression_attribute_values(":w", AttributeValue::N("4200".into()))
        .send()
        .await?;
    Ok(())
}

#[tokio::test]
async fn the_read_leaves_a_tombstone_whose_time_the_delete_returns_without_the_config(
) -> anyhow::Result<()> {
    let table = jit_table().await?;
    let config = realistic_jit_config(5000, 5);
    table.jit.put("i-0abc", "r", &jit(7, &config)).await?;
    let arn = table.jit.instance_arn("i-0abc");
    assert!(read_as_bootstrap(&table, &arn).await?.is_some());
    stamp_as_bootstrap(&table, &arn, 1_764_120_000).await?;
    assert_eq!(
        read_as_bootstrap(&table, &arn).await?,
        None,
        "the secret is gone"
    );
    let tombstone = table
        .dynamodb
        .get_item()
        .table_name(table.jit.table())
        .set_key(Some(item_key(&arn)))
        .send()
        .await?
        .item
        .expect("a tombstone");
    assert!(!tombstone.contains_key(JIT_CONFIG));
    assert_eq!(
        tombstone[JIT_READ_AT].as_n().ok().map(String::as_str),
        Some("1764120000")
    );
    let read = table.jit.delete("i-0abc").await?;
    assert_eq!(
        read.read_at.map(|at| at.unix_timestamp()),
        Some(1_764_120_000)
    );
    assert_eq!(read.runner.runner_version.as_deref(), Some("2.337.0"));
    assert_eq!(read.runner.runner_image_version.as_deref(), Some("2.336.0"));
    assert_eq!(read.runner.runner_swap_ms, Some(4200));
    let gone = table.jit.delete("i-0abc").await?;
    assert_eq!(gone, Tombstone::default(), "gone is deleted");

    // A stamp after the reaper's delete creates nothing.
    let late = stamp_as_bootstrap(&table, &arn, 1_764_120_001).await;
    assert!(late.is_err(), "the condition refuses a missing item");
    let scan = table
        .dynamodb
        .scan()
        .table_name(table.jit.table())
        .send()
        .await?;
    assert_eq!(scan.count(), 0);

    // A config never read is deleted all the same, and its answer is empty.
    table.jit.put("i-0def", "r", &jit(8, &config)).await?;
    assert_eq!(table.jit.delete("i-0def").await?, Tombstone::default());
    let unread = table.jit.instance_arn("i-0def");
    assert_eq!(read_as_bootstrap(&table, &unread).await?, None);
    Ok(())
}

#[tokio::test]
async fn a_later_registration_replaces_the_config_and_a_late_earlier_one_is_refused(
) -> anyhow::Result<()> {
    let table = jit_table().await?;
    let arn = table.jit.instance_arn("i-0abc");
    let (first, second) = (realistic_jit_config(5000, 2), realistic_jit_config(5000, 3));
    // As the scaler puts them: its role allows the read of the item a put lost to.
    let scaler = &table.scaler_jit;
    scaler.put("i-0abc", "r", &jit(7, &first)).await?;
    scaler.put("i-0abc", "r", &jit(7, &first)).await?;
    scaler.put("i-0abc", "r", &jit(9, &second)).await?;
    assert_eq!(
        read_as_bootstrap(&table, &arn).await?.as_deref(),
        Some(second.as_str())
    );

    let late = scaler.put("i-0abc", "r", &jit(7, &first)).await;
    assert!(
        matches!(late, Err(JitStoreError::Superseded { stored: 9 })),
        "{late:?}"
    );
    assert_eq!(
        read_as_bootstrap(&table, &arn).await?.as_deref(),
        Some(second.as_str())
    );
    Ok(())
}

#[tokio::test]
async fn a_refused_put_is_rejected_and_its_error_carries_no_config() -> anyhow::Result<()> {
    let table = jit_table().await?;
    // Over DynamoDB's 400 KB item limit.
    let huge = realistic_jit_config(401 * 1024, 4);
    let err = match table.jit.put("i-0abc", "r", &jit(1, &huge)).await {
        Err(err @ JitStoreError::Rejected(_)) => err,
        other => anyhow::bail!("a 401 KB item was not rejected: {other:?}"),
    };
    let text = format!("{:?}", anyhow::Error::from(err));
    assert!(!text.contains(&huge[..64]), "the error carries the config");
    assert_eq!(
        read_as_bootstrap(&table, &table.jit.instance_arn("i-0abc")).await?,
        None
    );

    let nowhere = DynamoJitConfigs::new(table.dynamodb.clone(), "no-such-table");
    let refused = nowhere.put("i-0abc", "r", &jit(1, "x")).await;
    assert!(
        matches!(refused, Err(JitStoreError::Rejected(_))),
        "{refused:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_prepare_item_holds_no_config_and_a_later_config_replaces_it() -> anyhow::Result<()> {
    let table = jit_table().await?;
    // As the scaler writes it for a stopped pool's instance: the word, no config.
    table
        .scaler_jit
        .put_prepare("i-0prep", "eph-linux-p")
        .await?;
    table
        .scaler_jit
        .put_prepare("i-0prep", "eph-linux-p")
        .await?;
    let arn = format!("{ARN_PREFIX}i-0prep");
    assert_eq!(read_as_bootstrap(&table, &arn).await?, None, "no config");
    let item = table
        .dynamodb
        .get_item()
        .table_name(table.jit.table())
        .set_key(Some(item_key(&arn)))
        .send()
        .await?
        .item
        .expect("stored");
    assert_eq!(item[PREPARE].as_bool().ok(), Some(&true));
    assert!(!item.contains_key(JIT_CONFIG));

    // The take's config replaces it, and a late prepare put leaves the config alone.
    table
        .scaler_jit
        .put("i-0prep", "eph-linux-p", &jit(3, "config"))
        .await?;
    table
        .scaler_jit
        .put_prepare("i-0prep", "eph-linux-p")
        .await?;
    assert_eq!(
        read_as_bootstrap(&table, &arn).await?.as_deref(),
        Some("config")
    );
    Ok(())
}
