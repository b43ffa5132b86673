//! The AWS ports of `ephemera doctor` on the AWS SDK: CloudFormation `DescribeStacks`,
//! DynamoDB `DescribeTable`, SQS `GetQueueAttributes`, SSM `GetParameter` (through the
//! functions' own loader), Secrets Manager `GetSecretValue`, and EC2's describe calls and
//! `RunInstances` with `DryRun`, IAM's `GetRole` and `SimulatePrincipalPolicy`, and Service Quotas' `GetServiceQuota` (falling back to
//! `GetAWSDefaultServiceQuota` for a quota never changed in the account).
//!
//! EC2 answers a describe of an id it does not know with an error, not an empty list
//! (`InvalidSubnetID.NotFound`, `InvalidGroup.NotFound`, `InvalidAMIID.NotFound`,
//! `InvalidLaunchTemplateName.NotFoundException`, `InvalidInstanceType`; the
//! `….Malformed` codes for ids of the wrong shape), so each id is described alone and
//! those codes mean "missing". A `DryRun` that would succeed is the error
//! `DryRunOperation`; a refused one is `UnauthorizedOperation` or the error the launch
//! would have had. (moto answers `DryRunOperation` before validating anything; the
//! subnet, group, image and type checks are what catch those in the tests.)

use super::iam::{Decision, IamPort, Request as SimulatedRequest};
use super::ports::{
    DryRunAnswer, DryRunLaunch, Ec2Port, InstanceTypeFacts, QuotaPort, StackFacts, StackPort,
    TemplateFacts,
};
use crate::errors::aws;
use async_trait::async_trait;
use aws_config::SdkConfig;
use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_sdk_ec2::types::{InstanceType, LaunchTemplateSpecification};
use aws_sdk_sqs::types::QueueAttributeName;
use ephemera_aws::lambda::{load_config_or_default, LoadedConfig};
use ephemera_aws::running::RunningConfig;
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
    region: String,
}

impl AwsPorts {
    pub fn new(sdk: &SdkConfig) -> AwsPorts {
        AwsPorts {
            cloudformation: aws_sdk_cloudformation::Client::new(sdk),
            dynamodb: aws_sdk_dynamodb::Client::new(sdk),
            sqs: aws_sdk_sqs::Client::new(sdk),
            ssm: aws_sdk_ssm::Client::new(sdk),
            secrets: aws_sdk_secretsmanager::Client::new(sdk),
            ec2: aws_sdk_ec2::Client::new(sdk),
            quotas: aws_sdk_servicequotas::Client::new(sdk),
            iam: aws_sdk_iam::Client::new(sdk),
            region: sdk
                .region()
                .map(|r| r.as_ref().to_owned())
                .unwrap_or_else(|| "us-east-1".to_owned()),
        }
    }
}

/// Whether an EC2 error code says the id is unknown or malformed.
fn unknown_id(code: Option<&str>) -> bool {
    code.is_some_and(|code| {
        code.ends_with(".NotFound")
            || code.ends_with(".NotFoundException")
            || code.ends_with(".Malformed")
            || code == "InvalidInstanceType"
    })
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

    fn region(&self) -> String {
        self.region.clone()
    }
}

#[async_trait]
impl Ec2Port for AwsPorts {
    async fn missing_subnets(&self, subnets: &[String]) -> anyhow::Result<Vec<String>> {
        let mut missing = Vec::new();
        for subnet in subnets {
            match self.ec2.describe_subnets().subnet_ids(subnet).send().await {
                Ok(found) if !found.subnets().is_empty() => {}
                Ok(_) => missing.push(subnet.clone()),
                Err(err) if unknown_id(err.code()) => missing.push(subnet.clone()),
                Err(err) => return Err(aws("EC2", "DescribeSubnets")(err)),
            }
        }
        Ok(missing)
    }

    async fn missing_security_groups(&self, groups: &[String]) -> anyhow::Result<Vec<String>> {
        let mut missing = Vec::new();
        for group in groups {
            match self
                .ec2
                .describe_security_groups()
                .group_ids(group)
                .send()
                .await
            {
                Ok(found) if !found.security_groups().is_empty() => {}
                Ok(_) => missing.push(group.clone()),
                Err(err) if unknown_id(err.code()) => missing.push(group.clone()),
                Err(err) => return Err(aws("EC2", "DescribeSecurityGroups")(err)),
            }
        }
        Ok(missing)
    }

    async fn launch_template(&self, name: &str) -> anyhow::Result<Option<TemplateFacts>> {
        let described = match self
            .ec2
            .describe_launch_template_versions()
            .launch_template_name(name)
            .versions("$Default")
            // The stack's template names its image as resolve:ssm:...: the AMI it is now.
            .resolve_alias(true)
            .send()
            .await
        {
            Ok(described) => described,
            Err(err) if unknown_id(err.code()) => return Ok(None),
            Err(err) => return Err(aws("EC2", "DescribeLaunchTemplateVersions")(err)),
        };
        let Some(data) = described
            .launch_template_versions()
            .first()
            .and_then(|v| v.launch_template_data())
        else {
            return Ok(None);
        };
        let mut security_groups: Vec<String> = data.security_group_ids().to_vec();
        for interface in data.network_interfaces() {
            security_groups.extend(interface.groups().iter().cloned());
        }
        Ok(Some(TemplateFacts {
            image_id: data.image_id().map(str::to_owned),
            security_groups,
        }))
    }

    async fn image_architecture(&self, image_id: &str) -> anyhow::Result<Option<String>> {
        match self.ec2.describe_images().image_ids(image_id).send().await {
            Ok(found) => Ok(found
                .images()
                .first()
                .and_then(|image| image.architecture())
                .map(|arch| arch.as_str().to_owned())),
            Err(err) if unknown_id(err.code()) => Ok(None),
            Err(err) => Err(aws("EC2", "DescribeImages")(err)),
        }
    }

    async fn instance_types(
        &self,
        types: &[String],
    ) -> anyhow::Result<BTreeMap<String, InstanceTypeFacts>> {
        let mut known = BTreeMap::new();
        for name in types {
            let described = match self
                .ec2
                .describe_instance_types()
                .instance_types(InstanceType::from(name.as_str()))
                .send()
                .await
            {
                Ok(described) => described,
                Err(err) if unknown_id(err.code()) => continue,
                Err(err) => return Err(aws("EC2", "DescribeInstanceTypes")(err)),
            };
            for info in described.instance_types() {
                let architectures = info
                    .processor_info()
                    .map(|p| {
                        p.supported_architectures()
                            .iter()
                            .map(|a| a.as_str().to_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                let vcpus = info
                    .v_cpu_info()
                    .and_then(|v| v.default_v_cpus())
                    .and_then(|v| u32::try_from(v).ok())
                    .unwrap_or(0);
                known.insert(
                    name.clone(),
                    InstanceTypeFacts {
                        architectures,
                        vcpus,
                    },
                );
            }
        }
        Ok(known)
    }

    async fn dry_run(&self, launch: &DryRunLaunch) -> anyhow::Result<DryRunAnswer> {
        let result = self
            .ec2
            .run_instances()
            .dry_run(true)
            .min_count(1)
            .max_count(1)
            .launch_template(
                LaunchTemplateSpecification::builder()
                    .launch_template_name(&launch.launch_template)
                    .version("$Default")
                    .build(),
            )
            .instance_type(InstanceType::from(launch.instance_type.as_str()))
            .set_subnet_id(launch.subnet.clone())
            .set_image_id(launch.image.clone())
            .send()
            .await;
        match result {
            Ok(_) => anyhow::bail!("EC2 RunInstances with DryRun launched an instance"),
            Err(err) => match err.code() {
                Some("DryRunOperation") => Ok(DryRunAnswer::WouldSucceed),
                Some(code) => Ok(DryRunAnswer::Refused {
                    code: code.to_owned(),
                    message: err.message().unwrap_or_default().to_owned(),
                }),
                None => Err(aws("EC2", "RunInstances")(err)),
            },
        }
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
        let decision = simulated
            .evaluation_results()
            .first()
            .map(|r| r.eval_decision().clone())
            .ok_or_else(|| anyhow::anyhow!("IAM returned no evaluation for {}", request.action))?;
        Ok(match decision {
            PolicyEvaluationDecisionType::Allowed => Decision::Allowed,
            PolicyEvaluationDecisionType::ExplicitDeny => Decision::ExplicitDeny,
            _ => Decision::ImplicitDeny,
        })
    }
}
