//! The AWS ports of `ephemera doctor` on the AWS SDK: CloudFormation `DescribeStacks`,
//! DynamoDB `DescribeTable`, SQS `GetQueueAttributes`, SSM `GetParameter` (through the
//! functions' own loader), Secrets Manager `GetSecretValue`, and EC2's describe calls and
//! `RunInstances` with `DryRun`, S3 `GetObject` of the runner bucket's `latest-<arch>`, IAM's `GetRole` and `SimulatePrincipalPolicy`, and
//! Service Quotas' `GetServiceQuota` (falling back to `GetAWSDefaultServiceQuota` for a
//! quota never changed in the account).
//!
//! The EC2 port is in [`ec2`], the metrics port (CloudWatch) in [`cloudwatch`].

mod cloudwatch;
mod ec2;

use super::iam::{Decision, IamPort, Request as SimulatedRequest};
use super::ports::{QuotaPort, StackFacts, StackPort};
use crate::errors::aws;
use async_trait::async_trait;
use aws_config::SdkConfig;
use aws_sdk_sqs::types::QueueAttributeName;
use ephemera_aws::config_source::{load_config_or_default, LoadedConfig};
use ephemera_aws::runner_bucket::S3RunnerBucket;
use ephemera_aws::running::RunningConfig;
use ephemera_core::ports::RunnerBucket;
use std::collections::BTreeMap;

/// Every AWS client the checks use.
pub struct AwsPorts {
    cloudformation: aws_sdk_cloudformation::Client,
    dynamodb: aws_sdk_dynamodb::Client,
    sqs: aws_sdk_sqs::Client,
    ssm: aws_sdk_ssm::Client,
    secrets: aws_sdk_secretsmanager::Client,
    ec2: aws_sdk_ec2::Client,
    quotas: aws_sdk_servicequotas::Client,
    iam: aws_sdk_iam::Client,
    cloudwatch: aws_sdk_cloudwatch::Client,
    logs: aws_sdk_cloudwatchlogs::Client,
    sdk: SdkConfig,
    region: String,
}

impl AwsPorts {
    pub fn new(sdk: &SdkConfig) -> AwsPorts {
        AwsPorts {
            cloudformation: aws_sdk_cloudformation::Client::new(sdk),
            logs: aws_sdk_cloudwatchlogs::Client::new(sdk),
            dynamodb: aws_sdk_dynamodb::Client::new(sdk),
            sqs: aws_sdk_sqs::Client::new(sdk),
            ssm: aws_sdk_ssm::Client::new(sdk),
            secrets: aws_sdk_secretsmanager::Client::new(sdk),
            ec2: aws_sdk_ec2::Client::new(sdk),
            quotas: aws_sdk_servicequotas::Client::new(sdk),
            iam: aws_sdk_iam::Client::new(sdk),
            cloudwatch: aws_sdk_cloudwatch::Client::new(sdk),
            sdk: sdk.clone(),
            region: sdk
                .region()
                .map(|r| r.as_ref().to_owned())
                .unwrap_or_else(|| "us-east-1".to_owned()),
        }
    }
}

#[async_trait]
impl StackPort for AwsPorts {
    async fn describe_stack(&self, name: &str) -> anyhow::Result<StackFacts> {
        let described = self
            .cloudformation
            .describe_stacks()
            .stack_name(name)
            .send()
            .await
            .map_err(aws("CloudFormation", "DescribeStacks"))?;
        let stack = described
            .stacks()
            .first()
            .ok_or_else(|| anyhow::anyhow!("stack {name} not found"))?;
        Ok(StackFacts {
            status: stack
                .stack_status()
                .map(|s| s.as_str().to_owned())
                .unwrap_or_default(),
            outputs: stack
                .outputs()
                .iter()
                .filter_map(|o| Some((o.output_key()?.to_owned(), o.output_value()?.to_owned())))
                .collect(),
            parameters: stack
                .parameters()
                .iter()
                .filter_map(|p| {
                    Some((
                        p.parameter_key()?.to_owned(),
                        p.parameter_value()?.to_owned(),
                    ))
                })
                .collect(),
        })
    }

    async fn table_status(&self, table: &str) -> anyhow::Result<String> {
        let described = self
            .dynamodb
            .describe_table()
            .table_name(table)
            .send()
            .await
            .map_err(aws("DynamoDB", "DescribeTable"))?;
        Ok(described
            .table()
            .and_then(|t| t.table_status())
            .map(|s| s.as_str().to_owned())
            .unwrap_or_default())
    }

    async fn queue_reachable(&self, queue_url: &str) -> anyhow::Result<()> {
        self.sqs
            .get_queue_attributes()
            .queue_url(queue_url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .map_err(aws("SQS", "GetQueueAttributes"))?;
        Ok(())
    }

    async fn log_group_retention(&self, name: &str) -> anyhow::Result<Option<Option<i32>>> {
        // By prefix, the call's one filter on a name: the exact name among those found.
        let groups = self
            .logs
            .describe_log_groups()
            .log_group_name_prefix(name)
            .send()
            .await
            .map_err(aws("CloudWatch Logs", "DescribeLogGroups"))?;
        Ok(groups
            .log_groups()
            .iter()
            .find(|g| g.log_group_name() == Some(name))
            .map(|g| g.retention_in_days()))
    }

    async fn load_config(
        &self,
        parameter: &str,
        default: Option<&str>,
    ) -> anyhow::Result<LoadedConfig> {
        load_config_or_default(&self.ssm, parameter, default).await
    }

    async fn secret_value(&self, secret_id: &str) -> anyhow::Result<String> {
        let output = self
            .secrets
            .get_secret_value()
            .secret_id(secret_id)
            .send()
            .await
            .map_err(aws("Secrets Manager", "GetSecretValue"))?;
        output
            .secret_string()
            .map(str::to_owned)
            .ok_or_else(|| anyhow::anyhow!("secret {secret_id} has no string value"))
    }

    async fn ssm_parameter(&self, name: &str) -> anyhow::Result<Option<String>> {
        match self.ssm.get_parameter().name(name).send().await {
            Ok(got) => Ok(got.parameter().and_then(|p| p.value()).map(str::to_owned)),
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_parameter_not_found()) =>
            {
                Ok(None)
            }
            Err(err) => Err(aws("SSM", "GetParameter")(err)),
        }
    }

    async fn running_config(
        &self,
        table: &str,
        function: &str,
    ) -> anyhow::Result<Option<RunningConfig>> {
        ephemera_aws::running::read(&self.dynamodb, table, function).await
    }

    async fn stack_resources(&self, name: &str) -> anyhow::Result<BTreeMap<String, String>> {
        let described = self
            .cloudformation
            .describe_stack_resources()
            .stack_name(name)
            .send()
            .await
            .map_err(aws("CloudFormation", "DescribeStackResources"))?;
        Ok(described
            .stack_resources()
            .iter()
            .filter_map(|r| {
                Some((
                    r.logical_resource_id()?.to_owned(),
                    r.physical_resource_id()?.to_owned(),
                ))
            })
            .collect())
    }

    async fn runner_latest(&self, bucket: &str, arch: &str) -> anyhow::Result<Option<String>> {
        // S3 GetObject, through the functions' own adapter.
        let bucket = S3RunnerBucket::new(&self.sdk, bucket.to_owned());
        Ok(bucket
            .read(&ephemera_core::releases::latest_key(arch))
            .await?)
    }

    fn region(&self) -> String {
        self.region.clone()
    }
}

#[async_trait]
impl QuotaPort for AwsPorts {
    async fn quota(&self, service_code: &str, quota_code: &str) -> anyhow::Result<Option<f64>> {
        use aws_sdk_servicequotas::error::ProvideErrorMetadata as _;
        let unknown = |code: Option<&str>| code == Some("NoSuchResourceException");
        match self
            .quotas
            .get_service_quota()
            .service_code(service_code)
            .quota_code(quota_code)
            .send()
            .await
        {
            Ok(found) => {
                if let Some(value) = found.quota().and_then(|q| q.value()) {
                    return Ok(Some(value));
                }
            }
            Err(err) if unknown(err.code()) => {}
            Err(err) => return Err(aws("Service Quotas", "GetServiceQuota")(err)),
        }
        match self
            .quotas
            .get_aws_default_service_quota()
            .service_code(service_code)
            .quota_code(quota_code)
            .send()
            .await
        {
            Ok(found) => Ok(found.quota().and_then(|q| q.value())),
            // GetServiceQuota already said the quota is unknown here; a default that
            // cannot be read either (moto does not implement this call) leaves it so.
            Err(_) => Ok(None),
        }
    }
}

#[async_trait]
impl IamPort for AwsPorts {
    async fn role_arn(&self, role_name: &str) -> anyhow::Result<String> {
        let got = self
            .iam
            .get_role()
            .role_name(role_name)
            .send()
            .await
            .map_err(aws("IAM", "GetRole"))?;
        got.role()
            .map(|r| r.arn().to_owned())
            .ok_or_else(|| anyhow::anyhow!("IAM returned no role {role_name}"))
    }

    async fn simulate(
        &self,
        principal_arn: &str,
        request: &SimulatedRequest,
    ) -> anyhow::Result<Decision> {
        use aws_sdk_iam::types::{ContextEntry, ContextKeyTypeEnum, PolicyEvaluationDecisionType};
        let mut call = self
            .iam
            .simulate_principal_policy()
            .policy_source_arn(principal_arn)
            .action_names(request.action)
            .resource_arns(&request.resource);
        for (key, values) in &request.context {
            let kind = if values.len() > 1 || *key == "dynamodb:LeadingKeys" {
                ContextKeyTypeEnum::StringList
            } else {
                ContextKeyTypeEnum::String
            };
            call = call.context_entries(
                ContextEntry::builder()
                    .context_key_name(*key)
                    .set_context_key_values(Some(values.clone()))
                    .context_key_type(kind)
                    .build(),
            );
        }
        let simulated = call
            .send()
            .await
            .map_err(aws("IAM", "SimulatePrincipalPolicy"))?;
        let result = simulated
            .evaluation_results()
            .first()
            .ok_or_else(|| anyhow::anyhow!("IAM returned no evaluation for {}", request.action))?;
        // An implicit deny that lists missing context values is the simulator unable to
        // judge a condition, not a policy that refuses (API_EvaluationResult,
        // MissingContextValues).
        let missing = result.missing_context_values();
        Ok(match result.eval_decision() {
            PolicyEvaluationDecisionType::Allowed => Decision::Allowed,
            PolicyEvaluationDecisionType::ExplicitDeny => Decision::ExplicitDeny,
            _ if !missing.is_empty() => Decision::Undecided {
                keys: missing.to_vec(),
            },
            _ => Decision::ImplicitDeny,
        })
    }
}
