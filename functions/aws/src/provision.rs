//! Provisioning: creating ephemera's resources where they are missing (the table, the
//! JIT config table, the queue and its DLQ, and the runner launch template).
//!
//! SAM creates these in a real deployment; `ephemera local --bootstrap` (the flag's name
//! predates this module's) and the tests create them here, against moto or a scratch account. Every step accepts a resource
//! that already exists, so running it twice is harmless.

use crate::{items, jit};
use anyhow::{bail, Context};
use aws_config::SdkConfig;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, TableStatus, TimeToLiveSpecification, TimeToLiveStatus,
};
use aws_sdk_ec2::types::{
    Filter, InstanceType, LaunchTemplateBlockDeviceMappingRequest,
    LaunchTemplateEbsBlockDeviceRequest, LaunchTemplateHttpTokensState,
    LaunchTemplateInstanceMetadataOptionsRequest, RequestLaunchTemplateData, ShutdownBehavior,
    VolumeType,
};
use aws_sdk_sqs::types::QueueAttributeName;
use std::time::{Duration, Instant};

/// The names of one deployment's resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceNames {
    pub deployment: String,
    pub table: String,
    /// Where JIT configs wait for their instances ([`crate::jit`]).
    pub jit_table: String,
    pub queue: String,
    pub dlq: String,
    pub launch_template: String,
    /// The runner template a pool with `ssm_access` launches from. Locally it is the
    /// runner template's twin: `ephemera local` makes no IAM, so neither has an
    /// instance profile.
    pub ssm_launch_template: String,
}

impl ResourceNames {
    /// The conventional names for the deployment `prefix`.
    pub fn for_deployment(prefix: &str) -> ResourceNames {
        ResourceNames {
            deployment: prefix.to_owned(),
            table: format!("{prefix}-runners"),
            jit_table: format!("{prefix}-jit"),
            queue: format!("{prefix}-jobs"),
            dlq: format!("{prefix}-jobs-dlq"),
            launch_template: ephemera_core::names::launch_template_name(prefix),
            ssm_launch_template: ephemera_core::names::ssm_launch_template_name(prefix),
        }
    }
}

/// What [`ensure_resources`] found or made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resources {
    pub table: String,
    pub jit_table: String,
    pub queue_url: String,
    pub dlq_url: String,
    pub launch_template: String,
}

/// Receives after which a message goes to the DLQ.
pub const MAX_RECEIVE_COUNT: u32 = 5;
/// An Amazon Linux 2 image that moto ships, for when no image can be looked up.
const FALLBACK_IMAGE: &str = "ami-04681a1dbd79675a5";

/// Creates whatever of `names` is missing.
pub async fn ensure_resources(
    config: &SdkConfig,
    names: &ResourceNames,
) -> anyhow::Result<Resources> {
    let dynamodb = aws_sdk_dynamodb::Client::new(config);
    ensure_table(&dynamodb, &names.table).await?;
    ensure_jit_table(&dynamodb, &names.jit_table).await?;
    let sqs = aws_sdk_sqs::Client::new(config);
    let (queue_url, dlq_url) = ensure_queues(&sqs, names).await?;
    let ec2 = aws_sdk_ec2::Client::new(config);
    ensure_launch_template(&ec2, &names.launch_template, &names.deployment).await?;
    ensure_launch_template(&ec2, &names.ssm_launch_template, &names.deployment).await?;
    Ok(Resources {
        table: names.table.clone(),
        jit_table: names.jit_table.clone(),
        queue_url,
        dlq_url,
        launch_template: names.launch_template.clone(),
    })
}

fn key(attribute: &str, key_type: KeyType) -> anyhow::Result<KeySchemaElement> {
    Ok(KeySchemaElement::builder()
        .attribute_name(attribute)
        .key_type(key_type)
        .build()?)
}

fn attribute(name: &str, kind: ScalarAttributeType) -> anyhow::Result<AttributeDefinition> {
    Ok(AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(kind)
        .build()?)
}

async fn ensure_table(client: &aws_sdk_dynamodb::Client, table: &str) -> anyhow::Result<()> {
    let index = GlobalSecondaryIndex::builder()
        .index_name(items::STATUS_INDEX)
        .key_schema(key(items::STATUS, KeyType::Hash)?)
        .key_schema(key(items::NEXT_ATTEMPT_AT, KeyType::Range)?)
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::All)
                .build(),
        )
        .build()?;
    let by_instance = GlobalSecondaryIndex::builder()
        .index_name(items::INSTANCE_INDEX)
        .key_schema(key(items::INSTANCE_ID, KeyType::Hash)?)
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::KeysOnly)
                .build(),
        )
        .build()?;
    let created = client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attribute(items::PK, ScalarAttributeType::S)?)
        .attribute_definitions(attribute(items::STATUS, ScalarAttributeType::S)?)
        .attribute_definitions(attribute(items::NEXT_ATTEMPT_AT, ScalarAttributeType::N)?)
        .attribute_definitions(attribute(items::INSTANCE_ID, ScalarAttributeType::S)?)
        .key_schema(key(items::PK, KeyType::Hash)?)
        .global_secondary_indexes(index)
        .global_secondary_indexes(by_instance)
        .send()
        .await;
    table_ready(client, table, created, items::TTL).await
}

/// The JIT config table: keyed by instance ARN, with its own TTL attribute.
async fn ensure_jit_table(client: &aws_sdk_dynamodb::Client, table: &str) -> anyhow::Result<()> {
    let created = client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attribute(jit::INSTANCE_ARN, ScalarAttributeType::S)?)
        .key_schema(key(jit::INSTANCE_ARN, KeyType::Hash)?)
        .send()
        .await;
    table_ready(client, table, created, jit::TTL).await
}

/// Waits for a table just created, or there already, and turns on TTL on `ttl`.
async fn table_ready(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    created: Result<
        aws_sdk_dynamodb::operation::create_table::CreateTableOutput,
        aws_sdk_dynamodb::error::SdkError<
            aws_sdk_dynamodb::operation::create_table::CreateTableError,
        >,
    >,
    ttl: &str,
) -> anyhow::Result<()> {
    match created {
        Ok(_) => {}
        Err(err) if err.code() == Some("ResourceInUseException") => {}
        Err(err) => return Err(err).with_context(|| format!("creating table {table}")),
    }
    wait_for_table(client, table).await?;
    ensure_ttl(client, table, ttl).await
}

/// Turns on TTL on `attribute` unless it is on already.
async fn ensure_ttl(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    attribute: &str,
) -> anyhow::Result<()> {
    let ttl = client
        .describe_time_to_live()
        .table_name(table)
        .send()
        .await
        .with_context(|| format!("reading the TTL setting of {table}"))?;
    let ttl_on = ttl
        .time_to_live_description()
        .and_then(|d| d.time_to_live_status())
        .is_some_and(|s| matches!(s, TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling));
    if !ttl_on {
        client
            .update_time_to_live()
            .table_name(table)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .attribute_name(attribute)
                    .enabled(true)
                    .build()?,
            )
            .send()
            .await
            .with_context(|| format!("turning on TTL for {table}"))?;
    }
    Ok(())
}

async fn wait_for_table(client: &aws_sdk_dynamodb::Client, table: &str) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        let output = client
            .describe_table()
            .table_name(table)
            .send()
            .await
            .with_context(|| format!("describing table {table}"))?;
        let status = output.table().and_then(|t| t.table_status());
        if status == Some(&TableStatus::Active) {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(120) {
            bail!("table {table} is not active after 2 minutes (status {status:?})");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Creates the DLQ, then the jobs queue redriving into it; returns (queue, DLQ) URLs.
async fn ensure_queues(
    client: &aws_sdk_sqs::Client,
    names: &ResourceNames,
) -> anyhow::Result<(String, String)> {
    let dlq_url = ensure_queue(client, &names.dlq, &[]).await?;
    let dlq_arn = client
        .get_queue_attributes()
        .queue_url(&dlq_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .with_context(|| format!("reading the ARN of {}", names.dlq))?
        .attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .with_context(|| format!("queue {} has no ARN", names.dlq))?;
    let redrive = serde_json::json!({
        "deadLetterTargetArn": dlq_arn,
        "maxReceiveCount": MAX_RECEIVE_COUNT,
    });
    let attributes = [
        (QueueAttributeName::RedrivePolicy, redrive.to_string()),
        (QueueAttributeName::VisibilityTimeout, "30".to_owned()),
    ];
    let queue_url = ensure_queue(client, &names.queue, &attributes).await?;
    Ok((queue_url, dlq_url))
}

async fn ensure_queue(
    client: &aws_sdk_sqs::Client,
    name: &str,
    attributes: &[(QueueAttributeName, String)],
) -> anyhow::Result<String> {
    let mut request = client.create_queue().queue_name(name);
    for (attribute, value) in attributes {
        request = request.attributes(attribute.clone(), value);
    }
    let url = match request.send().await {
        Ok(output) => output.queue_url,
        // It exists with other attributes: keep it as it is.
        Err(err) if err.code() == Some("QueueAlreadyExists") => {
            client
                .get_queue_url()
                .queue_name(name)
                .send()
                .await
                .with_context(|| format!("finding queue {name}"))?
                .queue_url
        }
        Err(err) => return Err(err).with_context(|| format!("creating queue {name}")),
    };
    url.with_context(|| format!("SQS returned no URL for queue {name}"))
}

/// The newest Amazon Linux image EC2 offers (moto ships a few), or a fixed one.
async fn default_image(client: &aws_sdk_ec2::Client) -> anyhow::Result<String> {
    let output = client
        .describe_images()
        .owners("amazon")
        .filters(
            Filter::builder()
                .name("name")
                .values("al2023-ami-2023.*-x86_64")
                .values("amzn2-ami-hvm-*-x86_64-gp2")
                .build(),
        )
        .send()
        .await
        .context("looking up an Amazon Linux image")?;
    let newest = output
        .images()
        .iter()
        .filter(|image| image.image_id().is_some())
        .max_by_key(|image| image.creation_date().unwrap_or_default().to_owned())
        .and_then(|image| image.image_id());
    Ok(newest.unwrap_or(FALLBACK_IMAGE).to_owned())
}

/// The deployment's launch template, tagged `ephemera:deployment` as template.yaml tags
/// it: the scaler's role may launch only from a template carrying its deployment's tag
/// (`aws:ResourceTag/ephemera:deployment`), so an untagged one is refused as on AWS.
async fn ensure_launch_template(
    client: &aws_sdk_ec2::Client,
    name: &str,
    deployment: &str,
) -> anyhow::Result<()> {
    let image = default_image(client).await?;
    let data = RequestLaunchTemplateData::builder()
        .image_id(image)
        .instance_type(InstanceType::T3Micro)
        .instance_initiated_shutdown_behavior(ShutdownBehavior::Terminate)
        .metadata_options(
            LaunchTemplateInstanceMetadataOptionsRequest::builder()
                .http_tokens(LaunchTemplateHttpTokensState::Required)
                .http_put_response_hop_limit(2)
                .build(),
        )
        .block_device_mappings(
            LaunchTemplateBlockDeviceMappingRequest::builder()
                .device_name("/dev/xvda")
                .ebs(
                    LaunchTemplateEbsBlockDeviceRequest::builder()
                        .encrypted(true)
                        .volume_type(VolumeType::Gp3)
                        .volume_size(30)
                        .delete_on_termination(true)
                        .build(),
                )
                .build(),
        )
        .build();
    let created = client
        .create_launch_template()
        .launch_template_name(name)
        .launch_template_data(data)
        .tag_specifications(
            aws_sdk_ec2::types::TagSpecification::builder()
                .resource_type(aws_sdk_ec2::types::ResourceType::LaunchTemplate)
                .tags(
                    aws_sdk_ec2::types::Tag::builder()
                        .key(crate::tags::DEPLOYMENT)
                        .value(deployment)
                        .build(),
                )
                .build(),
        )
        .send()
        .await;
    match created {
        Ok(_) => Ok(()),
        Err(err) if err.code() == Some("InvalidLaunchTemplateName.AlreadyExistsException") => {
            Ok(())
        }
        Err(err) => Err(err).with_context(|| format!("creating launch template {name}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_deployment_prefix() {
        let names = ResourceNames::for_deployment("eph");
        assert_eq!(names.table, "eph-runners");
        assert_eq!(names.jit_table, "eph-jit");
        assert_eq!(names.queue, "eph-jobs");
        assert_eq!(names.dlq, "eph-jobs-dlq");
        assert_eq!(names.launch_template, "eph-runner");
        assert_eq!(names.ssm_launch_template, "eph-runner-ssm");
        assert_eq!(names.deployment, "eph");
    }
}
