//! The AWS calls of `ephemera destroy`: finding what a deployment has (its stacks, the
//! instances and AMIs tagged for it, the parameters no stack owns) and deleting it.
//!
//! CloudFormation's `DeleteStack` returns at once; the stack is gone when
//! `DescribeStacks` by name no longer finds it ("Stack with id … does not exist"), or
//! shows `DELETE_FAILED` with its reason
//! (https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_DeleteStack.html).
//! Deregistering an AMI leaves its snapshots, which are then deleted one by one
//! (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/deregister-ami.html).
//! The main stack retains its runner bucket (`DeletionPolicy: Retain`: CloudFormation
//! cannot delete a bucket that holds objects, "AWS::S3::Bucket", and the reaper may write
//! one up to the stack's last moment), so once the stack is gone its objects are deleted
//! and then the bucket (`DeleteBucket`: "All objects ... must be deleted before the
//! bucket itself can be deleted",
//! https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteBucket.html).

use crate::errors::aws;
use crate::exit::Failure;
use crate::render::Progress;
use aws_config::SdkConfig;
use aws_sdk_cloudformation::error::ProvideErrorMetadata;
use aws_sdk_ec2::types::Filter;
use ephemera_aws::tags::DEPLOYMENT;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The parameters of the templates that name a secret the stack did not make.
const SECRET_PARAMETERS: [&str; 2] = ["GitHubAppKeySecretArn", "WebhookSecretArn"];
/// Resource types whose names the plan spells out (what an operator looks for), and what
/// goes with them.
const NAMED_TYPES: [(&str, &str); 6] = [
    ("AWS::DynamoDB::Table", " (with their items)"),
    ("AWS::SQS::Queue", " (with their messages)"),
    ("AWS::Logs::LogGroup", " (with their logs)"),
    (
        "AWS::SecretsManager::Secret",
        " (Secrets Manager keeps a deleted secret for its recovery window)",
    ),
    ("AWS::SSM::Parameter", ""),
    ("AWS::Lambda::Function", ""),
];
/// How long a stack may take to delete.
const STACK_DELETE_LIMIT: Duration = Duration::from_secs(60 * 60);
/// Instance states that still cost or may: what is terminated.
const LIVE_STATES: [&str; 4] = ["pending", "running", "stopping", "stopped"];

/// A stack that exists.
#[derive(Debug)]
pub struct StackFound {
    pub name: String,
    pub status: String,
    /// Its `DeploymentName` parameter.
    pub deployment: Option<String>,
    /// What deleting it deletes, one line per resource type.
    pub summary: Vec<String>,
    /// Secrets it was given by ARN (kept).
    pub given_secrets: Vec<String>,
    /// Its S3 buckets (retained by the stack, deleted by destroy once it is gone).
    pub buckets: Vec<String>,
}

/// An AMI made for the deployment.
#[derive(Debug)]
pub struct ImageFound {
    pub id: String,
    pub name: String,
}

/// Everything of one deployment.
#[derive(Debug, Default)]
pub struct Found {
    pub main: Option<StackFound>,
    pub image: Option<StackFound>,
    pub instances: Vec<String>,
    pub images: Vec<ImageFound>,
    pub snapshots: Vec<String>,
    pub parameters: Vec<String>,
    pub kept_secrets: Vec<String>,
    pub kept_images: bool,
}

impl Found {
    pub fn is_empty(&self) -> bool {
        self.main.is_none()
            && self.image.is_none()
            && self.instances.is_empty()
            && self.images.is_empty()
            && self.snapshots.is_empty()
            && self.parameters.is_empty()
    }
}

/// The parameters of a deployment that no stack owns: the pushed configuration
/// (`ephemera config push`) and the AMI ids the bakes write (the image stack's
/// `SsmParameterConfigurations`).
pub fn loose_parameters(deployment: &str) -> [String; 3] {
    [
        format!("/ephemera/{deployment}/config"),
        format!("/ephemera/{deployment}/runner-image/x86_64"),
        format!("/ephemera/{deployment}/runner-image/arm64"),
    ]
}

pub struct Clients {
    cfn: aws_sdk_cloudformation::Client,
    ec2: aws_sdk_ec2::Client,
    ssm: aws_sdk_ssm::Client,
    s3: aws_sdk_s3::Client,
}

impl Clients {
    pub fn new(sdk: &SdkConfig) -> Clients {
        Clients {
            cfn: aws_sdk_cloudformation::Client::new(sdk),
            ec2: aws_sdk_ec2::Client::new(sdk),
            ssm: aws_sdk_ssm::Client::new(sdk),
            s3: ephemera_aws::runner_bucket::s3_client(sdk),
        }
    }

    /// The stack `name` with what deleting it deletes, or `None` when there is none.
    pub async fn stack(&self, name: &str) -> Result<Option<StackFound>, Failure> {
        let Some((status, parameters)) = self.stack_status(name).await? else {
            return Ok(None);
        };
        let mut by_type: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut pages = self
            .cfn
            .list_stack_resources()
            .stack_name(name)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(aws("CloudFormation", "ListStackResources"))?;
            for resource in page.stack_resource_summaries() {
                // moto lists placeholders without a type; AWS gives every resource one.
                let Some(kind) = resource.resource_type().filter(|t| !t.is_empty()) else {
                    continue;
                };
                let kind = kind.to_owned();
                let id = resource
                    .physical_resource_id()
                    .or(resource.logical_resource_id())
                    .unwrap_or_default()
                    .to_owned();
                by_type.entry(kind).or_default().push(id);
            }
        }
        let buckets = by_type.get("AWS::S3::Bucket").cloned().unwrap_or_default();
        let summary = by_type
            .into_iter()
            .map(|(kind, ids)| {
                if let Some((_, with)) = NAMED_TYPES.iter().find(|(t, _)| *t == kind) {
                    format!("{kind}: {}{with}", ids.join(", "))
                } else {
                    format!("{kind}: {}", ids.len())
                }
            })
            .collect();
        let given_secrets = SECRET_PARAMETERS
            .iter()
            .filter_map(|key| parameters.get(*key))
            .filter(|arn| !arn.is_empty())
            .cloned()
            .collect();
        Ok(Some(StackFound {
            name: name.to_owned(),
            status,
            deployment: parameters.get("DeploymentName").cloned(),
            summary,
            given_secrets,
            buckets,
        }))
    }

    /// The stack's status and parameters; `None` when it does not exist (any more).
    async fn stack_status(
        &self,
        name: &str,
    ) -> Result<Option<(String, BTreeMap<String, String>)>, Failure> {
        let described = match self.cfn.describe_stacks().stack_name(name).send().await {
            Ok(described) => described,
            Err(err) if err.message().is_some_and(|m| m.contains("does not exist")) => {
                return Ok(None)
            }
            Err(err) => return Err(aws("CloudFormation", "DescribeStacks")(err).into()),
        };
        let Some(stack) = described.stacks().first() else {
            return Ok(None);
        };
        let status = stack
            .stack_status()
            .map(|s| s.as_str().to_owned())
            .unwrap_or_default();
        if status == "DELETE_COMPLETE" {
            return Ok(None);
        }
        let parameters = stack
            .parameters()
            .iter()
            .filter_map(|p| {
                Some((
                    p.parameter_key()?.to_owned(),
                    p.parameter_value()?.to_owned(),
                ))
            })
            .collect();
        Ok(Some((status, parameters)))
    }

    /// Everything of `deployment` besides its stacks.
    pub async fn find(
        &self,
        deployment: &str,
        main: Option<StackFound>,
        image: Option<StackFound>,
        keep_images: bool,
    ) -> Result<Found, Failure> {
        let mut found = Found {
            kept_secrets: main
                .iter()
                .flat_map(|stack| stack.given_secrets.clone())
                .collect(),
            main,
            image,
            instances: self.instances(deployment).await?,
            parameters: self.parameters(deployment).await?,
            kept_images: keep_images,
            ..Found::default()
        };
        if !keep_images {
            let (images, snapshots) = self.images(deployment).await?;
            found.images = images;
            found.snapshots = snapshots;
        }
        Ok(found)
    }

    fn tagged(deployment: &str) -> Filter {
        Filter::builder()
            .name(format!("tag:{DEPLOYMENT}"))
            .values(deployment)
            .build()
    }

    /// The live instances tagged for the deployment (runners, image builds).
    async fn instances(&self, deployment: &str) -> Result<Vec<String>, Failure> {
        let state = Filter::builder()
            .name("instance-state-name")
            .set_values(Some(LIVE_STATES.map(str::to_owned).to_vec()))
            .build();
        let mut ids = Vec::new();
        let mut pages = self
            .ec2
            .describe_instances()
            .filters(Self::tagged(deployment))
            .filters(state)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(aws("EC2", "DescribeInstances"))?;
            ids.extend(
                page.reservations()
                    .iter()
                    .flat_map(|r| r.instances())
                    .filter_map(|i| i.instance_id().map(str::to_owned)),
            );
        }
        Ok(ids)
    }

    /// The account's AMIs tagged for the deployment, and their snapshots.
    async fn images(&self, deployment: &str) -> Result<(Vec<ImageFound>, Vec<String>), Failure> {
        let described = self
            .ec2
            .describe_images()
            .owners("self")
            .filters(Self::tagged(deployment))
            .send()
            .await
            .map_err(aws("EC2", "DescribeImages"))?;
        let mut images = Vec::new();
        let mut snapshots = Vec::new();
        for image in described.images() {
            let Some(id) = image.image_id() else { continue };
            images.push(ImageFound {
                id: id.to_owned(),
                name: image.name().unwrap_or_default().to_owned(),
            });
            snapshots.extend(
                image
                    .block_device_mappings()
                    .iter()
                    .filter_map(|m| m.ebs()?.snapshot_id().map(str::to_owned)),
            );
        }
        snapshots.sort();
        snapshots.dedup();
        Ok((images, snapshots))
    }

    /// Which of the deployment's loose parameters exist.
    async fn parameters(&self, deployment: &str) -> Result<Vec<String>, Failure> {
        let got = self
            .ssm
            .get_parameters()
            .set_names(Some(loose_parameters(deployment).to_vec()))
            .send()
            .await
            .map_err(aws("SSM", "GetParameters"))?;
        let mut names: Vec<String> = got
            .parameters()
            .iter()
            .filter_map(|p| p.name().map(str::to_owned))
            .collect();
        names.sort();
        Ok(names)
    }

    /// Deletes what `found` holds, saying each step.
    pub async fn delete(
        &self,
        deployment: &str,
        found: &Found,
        progress: &mut Progress,
    ) -> Result<(), Failure> {
        // The runners first, while their roles and instance profiles still exist; then
        // again once the main stack is gone, for any its scaler launched meanwhile.
        self.terminate(&found.instances, progress).await?;
        if let Some(stack) = &found.main {
            self.delete_stack(stack, progress).await?;
        }
        let launched_meanwhile = self.instances(deployment).await?;
        self.terminate(&launched_meanwhile, progress).await?;
        if let Some(stack) = &found.image {
            self.delete_stack(stack, progress).await?;
        }
        let buckets = found
            .main
            .iter()
            .chain(&found.image)
            .flat_map(|s| &s.buckets);
        for bucket in buckets {
            self.delete_bucket(bucket, progress).await?;
        }
        for image in &found.images {
            self.ec2
                .deregister_image()
                .image_id(&image.id)
                .send()
                .await
                .map_err(aws("EC2", "DeregisterImage"))?;
            progress.step(format!("deregistered AMI {} ({})", image.id, image.name));
        }
        for snapshot in &found.snapshots {
            self.ec2
                .delete_snapshot()
                .snapshot_id(snapshot)
                .send()
                .await
                .map_err(aws("EC2", "DeleteSnapshot"))?;
            progress.step(format!("deleted snapshot {snapshot}"));
        }
        if !found.parameters.is_empty() {
            self.ssm
                .delete_parameters()
                .set_names(Some(found.parameters.clone()))
                .send()
                .await
                .map_err(aws("SSM", "DeleteParameters"))?;
            progress.step(format!("deleted {}", found.parameters.join(", ")));
        }
        Ok(())
    }

    /// Deletes bucket `name`'s objects, then the bucket; one already gone is no error.
    async fn delete_bucket(&self, name: &str, progress: &mut Progress) -> Result<(), Failure> {
        let mut deleted = 0usize;
        let mut pages = self
            .s3
            .list_objects_v2()
            .bucket(name)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = match page {
                Ok(page) => page,
                Err(err) if err.code() == Some("NoSuchBucket") => {
                    progress.step(format!("bucket {name}: gone already"));
                    return Ok(());
                }
                Err(err) => return Err(aws("S3", "ListObjectsV2")(err).into()),
            };
            for object in page.contents() {
                let Some(key) = object.key() else { continue };
                self.s3
                    .delete_object()
                    .bucket(name)
                    .key(key)
                    .send()
                    .await
                    .map_err(aws("S3", "DeleteObject"))?;
                deleted += 1;
            }
        }
        match self.s3.delete_bucket().bucket(name).send().await {
            Ok(_) => {}
            Err(err) if err.code() == Some("NoSuchBucket") => return Ok(()),
            Err(err) => return Err(aws("S3", "DeleteBucket")(err).into()),
        }
        progress.step(format!(
            "deleted bucket {name} (objects deleted first: {deleted})"
        ));
        Ok(())
    }

    async fn terminate(
        &self,
        instances: &[String],
        progress: &mut Progress,
    ) -> Result<(), Failure> {
        if instances.is_empty() {
            return Ok(());
        }
        self.ec2
            .terminate_instances()
            .set_instance_ids(Some(instances.to_vec()))
            .send()
            .await
            .map_err(aws("EC2", "TerminateInstances"))?;
        progress.step(format!("terminating {}", instances.join(", ")));
        Ok(())
    }

    async fn delete_stack(
        &self,
        stack: &StackFound,
        progress: &mut Progress,
    ) -> Result<(), Failure> {
        self.cfn
            .delete_stack()
            .stack_name(&stack.name)
            .send()
            .await
            .map_err(aws("CloudFormation", "DeleteStack"))?;
        progress.wait(format!("deleting stack {}", stack.name));
        let started = Instant::now();
        let mut pause = Duration::from_millis(200);
        loop {
            match self.stack_status(&stack.name).await? {
                None => break,
                Some((status, _)) if status == "DELETE_FAILED" => {
                    progress.clear();
                    return Err(anyhow::anyhow!(
                        "stack {} could not be deleted (DELETE_FAILED): see `aws cloudformation \
                         describe-stack-events --stack-name {}`, fix, and run destroy again",
                        stack.name,
                        stack.name
                    )
                    .into());
                }
                Some(_) if started.elapsed() > STACK_DELETE_LIMIT => {
                    progress.clear();
                    return Err(anyhow::anyhow!(
                        "stack {}: still deleting after an hour",
                        stack.name
                    )
                    .into());
                }
                Some(_) => {}
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(10));
        }
        progress.clear();
        progress.step(format!(
            "deleted stack {} ({} s)",
            stack.name,
            started.elapsed().as_secs()
        ));
        Ok(())
    }
}
