//! Each pool's EC2 launch: the launch template, subnets and security groups exist, the
//! instance types run the image's architecture, and a dry-run launch is allowed.

use crate::cmd::doctor::ports::{DryRunAnswer, DryRunLaunch, Ec2Port};
use crate::cmd::doctor::report::{Check, Report};
use crate::errors::describe;
use ephemera_aws::stack::LAUNCH_TEMPLATE_NAME;
use ephemera_core::config::{Config, PoolConfig};
use ephemera_core::ports::TemplateVersion;
use std::collections::BTreeMap;

/// `ec2.launch_template`, `ec2.subnets`, `ec2.security_groups`, `ec2.architecture` and
/// `ec2.dry_run` for one pool. Returns the image the pool launches (its `ami`, else its
/// launch template's), if one is named.
pub(super) async fn pool_checks(
    config: &Config,
    pool: &PoolConfig,
    outputs: &BTreeMap<String, String>,
    ec2: &dyn Ec2Port,
    report: &mut Report,
) -> Option<String> {
    let subject = format!("pool {}", pool.name);
    let push = |report: &mut Report, check: Check| report.push(check.on(subject.clone()));
    let template_name = match &pool.launch_template {
        _ if pool.ssm_access => pool.launch_template_name(&config.deployment),
        Some(template) => template.clone(),
        None => outputs
            .get(LAUNCH_TEMPLATE_NAME)
            .cloned()
            .unwrap_or_else(|| format!("{}-runner", config.deployment)),
    };
    // The version the scaler launches: the stack's own template at the version its stack
    // last wrote (`$Latest`: CloudFormation never moves the default), a pool's own
    // template at the version it configures (`$Default` unless it says otherwise).
    let version = match pool.template_version(&config.deployment) {
        TemplateVersion::Stack => ephemera_aws::ec2::LATEST_VERSION.to_owned(),
        TemplateVersion::Named(version) => version,
    };
    let template = match ec2.launch_template(&template_name, &version).await {
        Ok(Some(template)) => {
            push(
                report,
                Check::pass("ec2.launch_template", template_name.clone()),
            );
            Some(template)
        }
        Ok(None) => {
            push(
                report,
                Check::fail(
                    "ec2.launch_template",
                    format!("launch template {template_name} does not exist"),
                    format!(
                        "name an existing template in the pool's launch_template, or drop it \
                         to use the stack's {}",
                        outputs
                            .get(LAUNCH_TEMPLATE_NAME)
                            .map_or("DEPLOYMENT-runner", String::as_str)
                    ),
                ),
            );
            None
        }
        Err(err) => {
            push(
                report,
                Check::fail(
                    "ec2.launch_template",
                    describe(&err),
                    "the credentials need ec2:DescribeLaunchTemplates and \
                     ec2:DescribeLaunchTemplateVersions",
                ),
            );
            None
        }
    };
    let subnets_ok = if pool.subnets.is_empty() {
        push(
            report,
            Check::pass("ec2.subnets", "none named: EC2 uses the default VPC's"),
        );
        true
    } else {
        match ec2.missing_subnets(&pool.subnets).await {
            Ok(missing) if missing.is_empty() => {
                push(report, Check::pass("ec2.subnets", pool.subnets.join(", ")));
                true
            }
            Ok(missing) => {
                push(
                    report,
                    Check::fail(
                        "ec2.subnets",
                        format!("EC2 knows no subnet {}", missing.join(", ")),
                        "list the runners' subnets (aws ec2 describe-subnets) and set them in \
                         the pool's subnets (RunnerSubnets for the stack's default pool), \
                         then push or deploy",
                    ),
                );
                false
            }
            Err(err) => {
                push(
                    report,
                    Check::fail(
                        "ec2.subnets",
                        describe(&err),
                        "the credentials need ec2:DescribeSubnets",
                    ),
                );
                false
            }
        }
    };
    let groups_ok = match &template {
        None => {
            push(
                report,
                Check::skip("ec2.security_groups", "ec2.launch_template failed"),
            );
            false
        }
        Some(template) if template.security_groups.is_empty() => {
            push(
                report,
                Check::pass(
                    "ec2.security_groups",
                    "the template names none: the subnet's VPC default group",
                ),
            );
            true
        }
        Some(template) => match ec2.missing_security_groups(&template.security_groups).await {
            Ok(missing) if missing.is_empty() => {
                push(
                    report,
                    Check::pass("ec2.security_groups", template.security_groups.join(", ")),
                );
                true
            }
            Ok(missing) => {
                push(
                    report,
                    Check::fail(
                        "ec2.security_groups",
                        format!(
                            "launch template {template_name} names security group {}, which \
                             EC2 does not know",
                            missing.join(", ")
                        ),
                        "deploy again with RunnerSecurityGroups set to existing groups of the \
                         subnets' VPC",
                    ),
                );
                false
            }
            Err(err) => {
                push(
                    report,
                    Check::fail(
                        "ec2.security_groups",
                        describe(&err),
                        "the credentials need ec2:DescribeSecurityGroups",
                    ),
                );
                false
            }
        },
    };
    let image = pool
        .ami
        .clone()
        .or_else(|| template.as_ref().and_then(|t| t.image_id.clone()));
    let types_ok = architecture_check(pool, image.as_deref(), ec2, report, &subject).await;
    if template.is_none() || !subnets_ok || !groups_ok || !types_ok {
        push(
            report,
            Check::skip(
                "ec2.dry_run",
                "the launch template, subnets, security groups or types failed above",
            ),
        );
        return image;
    }
    let launch = DryRunLaunch {
        launch_template: template_name,
        version,
        instance_type: pool.instance_types.first().cloned().unwrap_or_default(),
        subnet: pool.subnets.first().cloned(),
        image: pool.ami.clone(),
    };
    push(
        report,
        match ec2.dry_run(&launch).await {
            Ok(DryRunAnswer::WouldSucceed) => Check::pass(
                "ec2.dry_run",
                format!(
                    "RunInstances would launch {}{}",
                    launch.instance_type,
                    launch
                        .subnet
                        .as_deref()
                        .map(|s| format!(" in {s}"))
                        .unwrap_or_default()
                ),
            ),
            Ok(DryRunAnswer::Refused { code, message }) if code == "UnauthorizedOperation" => {
                Check::fail(
                    "ec2.dry_run",
                    format!("{code}: {message}"),
                    "these credentials may not launch from the template (ec2:RunInstances, \
                     ec2:CreateFleet, iam:PassRole on the runner role); the scaler's role \
                     has them in template.yaml",
                )
            }
            Ok(DryRunAnswer::Refused { code, message }) => Check::fail(
                "ec2.dry_run",
                format!("EC2 would refuse the launch: {code}: {message}"),
                "fix what EC2 names in the pool (instance_types, subnets, ami) or the launch \
                 template",
            ),
            Err(err) => Check::fail(
                "ec2.dry_run",
                describe(&err),
                "check that EC2 is reachable and try again",
            ),
        },
    );
    image
}

/// `ec2.architecture`: EC2 knows every type, and each runs the image's architecture.
/// Returns whether the types can launch the image.
async fn architecture_check(
    pool: &PoolConfig,
    image: Option<&str>,
    ec2: &dyn Ec2Port,
    report: &mut Report,
    subject: &str,
) -> bool {
    let fail = |report: &mut Report, message: String, fix: &str| {
        report.push(Check::fail("ec2.architecture", message, fix).on(subject));
        false
    };
    let types = match ec2.instance_types(&pool.instance_types).await {
        Ok(types) => types,
        Err(err) => {
            return fail(
                report,
                describe(&err),
                "the credentials need ec2:DescribeInstanceTypes",
            )
        }
    };
    let unknown: Vec<&str> = pool
        .instance_types
        .iter()
        .filter(|t| !types.contains_key(*t))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        return fail(
            report,
            format!("EC2 knows no instance type {}", unknown.join(", ")),
            "fix the pool's instance_types (aws ec2 describe-instance-types)",
        );
    }
    let Some(image) = image else {
        report.push(
            Check::warn(
                "ec2.architecture",
                "neither the pool nor its launch template names an image",
                "set ImageId in the launch template or the pool's ami",
            )
            .on(subject),
        );
        return true;
    };
    let arch = match ec2.image_architecture(image).await {
        Ok(Some(arch)) => arch,
        Ok(None) => {
            return fail(
                report,
                format!("EC2 knows no image {image}"),
                "set the pool's ami (or the stack's RunnerAmi) to an image of this region",
            )
        }
        Err(err) => {
            return fail(
                report,
                describe(&err),
                "the credentials need ec2:DescribeImages",
            )
        }
    };
    let wrong: Vec<String> = pool
        .instance_types
        .iter()
        .filter(|t| !types[*t].architectures.contains(&arch))
        .map(|t| format!("{t} ({})", types[t].architectures.join(", ")))
        .collect();
    if wrong.is_empty() {
        report.push(
            Check::pass(
                "ec2.architecture",
                format!("image {image} is {arch}; every type runs it"),
            )
            .on(subject),
        );
        true
    } else {
        fail(
            report,
            format!(
                "image {image} is {arch}; {} cannot run it",
                wrong.join(", ")
            ),
            "pick instance types of the image's architecture (arm64: Graviton types such \
             as t4g, m7g), or an image of theirs",
        )
    }
}
