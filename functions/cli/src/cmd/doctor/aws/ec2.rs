//! The EC2 port of `ephemera doctor` on the AWS SDK: the launch template, subnets (and
//! their free addresses), security groups, image and instance types described, the
//! region's network interfaces counted, and `RunInstances` with `DryRun`.
//!
//! EC2 answers a describe of an id it does not know with an error, not an empty list
//! (`InvalidSubnetID.NotFound`, `InvalidGroup.NotFound`, `InvalidAMIID.NotFound`,
//! `InvalidLaunchTemplateName.NotFoundException`, `InvalidInstanceType`; the
//! `….Malformed` codes for ids of the wrong shape), so each id is described alone and
//! those codes mean "missing". A `DryRun` that would succeed is the error
//! `DryRunOperation`; a refused one is `UnauthorizedOperation` or the error the launch
//! would have had. (moto answers `DryRunOperation` before validating anything; the
//! subnet, group, image and type checks are what catch those in the tests.)

use super::AwsPorts;
use crate::cmd::doctor::ports::{
    DryRunAnswer, DryRunLaunch, Ec2Port, ImageFacts, InstanceTypeFacts, TemplateFacts,
};
use crate::errors::aws;
use async_trait::async_trait;
use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_sdk_ec2::types::{Filter, InstanceType, LaunchTemplateSpecification};
use std::collections::BTreeMap;

/// Whether an EC2 error code says the id is unknown or malformed.
fn unknown_id(code: Option<&str>) -> bool {
    code.is_some_and(|code| {
        code.ends_with(".NotFound")
            || code.ends_with(".NotFoundException")
            || code.ends_with(".Malformed")
            || code == "InvalidInstanceType"
    })
}

/// The tag infra/image/template.yaml puts on its images: the bake's `RunnerVersion`.
pub const RUNNER_VERSION_TAG: &str = "ephemera:runner-version";

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

    async fn launch_template(
        &self,
        name: &str,
        version: &str,
    ) -> anyhow::Result<Option<TemplateFacts>> {
        let described = match self
            .ec2
            .describe_launch_template_versions()
            .launch_template_name(name)
            .versions(version)
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

    async fn image(&self, image_id: &str) -> anyhow::Result<Option<ImageFacts>> {
        let found = match self.ec2.describe_images().image_ids(image_id).send().await {
            Ok(found) => found,
            Err(err) if unknown_id(err.code()) => return Ok(None),
            Err(err) => return Err(aws("EC2", "DescribeImages")(err)),
        };
        Ok(found.images().first().map(|image| ImageFacts {
            state: image
                .state()
                .map(|s| s.as_str().to_owned())
                .unwrap_or_default(),
            // ISO 8601 in UTC, e.g. 2026-11-20T04:12:31.000Z.
            created: image.creation_date().and_then(|date| {
                time::OffsetDateTime::parse(date, &time::format_description::well_known::Rfc3339)
                    .ok()
            }),
            runner_version: image
                .tags()
                .iter()
                .find(|tag| tag.key() == Some(RUNNER_VERSION_TAG))
                .and_then(|tag| tag.value())
                .map(str::to_owned),
            architecture: image.architecture().map(|arch| arch.as_str().to_owned()),
        }))
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
                let architectures = ephemera_aws::instance_types::architectures(info);
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

    async fn network_interfaces(&self) -> anyhow::Result<u64> {
        // At most 1,000 a page (API_DescribeNetworkInterfaces, MaxResults).
        let mut pages = self
            .ec2
            .describe_network_interfaces()
            .max_results(1_000)
            .into_paginator()
            .send();
        let mut count = 0;
        while let Some(page) = pages.next().await {
            let page = page.map_err(aws("EC2", "DescribeNetworkInterfaces"))?;
            count += page.network_interfaces().len() as u64;
        }
        Ok(count)
    }

    async fn free_addresses(&self, subnets: &[String]) -> anyhow::Result<BTreeMap<String, u64>> {
        let mut described = Vec::new();
        if subnets.is_empty() {
            let mut pages = self
                .ec2
                .describe_subnets()
                .filters(
                    Filter::builder()
                        .name("default-for-az")
                        .values("true")
                        .build(),
                )
                .into_paginator()
                .send();
            while let Some(page) = pages.next().await {
                let page = page.map_err(aws("EC2", "DescribeSubnets"))?;
                described.extend(page.subnets().iter().cloned());
            }
        }
        // One id a call, as in `missing_subnets`: an unknown one (which `ec2.subnets`
        // reports) fails only its own call.
        for subnet in subnets {
            match self.ec2.describe_subnets().subnet_ids(subnet).send().await {
                Ok(found) => described.extend(found.subnets().iter().cloned()),
                Err(err) if unknown_id(err.code()) => {}
                Err(err) => return Err(aws("EC2", "DescribeSubnets")(err)),
            }
        }
        Ok(described
            .iter()
            .filter_map(|subnet| {
                let free = u64::try_from(subnet.available_ip_address_count()?).ok()?;
                Some((subnet.subnet_id()?.to_owned(), free))
            })
            .collect())
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
                    .version(&launch.version)
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
