//! `stack.runner_image`: when the stack's `RunnerAmi` names the image stack's parameter
//! (`/ephemera/DEPLOYMENT/runner-image/ARCH`, infra/image/template.yaml), that a bake has
//! written it, that it names an image EC2 can launch, and how old that image is. A
//! parameter no bake wrote launches no runner at all (EC2 resolves `resolve:ssm:` at
//! each launch), and an image older than [`MAX_IMAGE_AGE`] means the scheduled bakes
//! stopped publishing (the default schedule bakes weekly), so runners miss the OS's
//! security updates.

use crate::cmd::doctor::ports::{Ec2Port, StackPort};
use crate::cmd::doctor::report::{Check, Report};
use crate::errors::describe;
use std::collections::BTreeMap;
use time::{Duration, OffsetDateTime};

const NAME: &str = "stack.runner_image";
/// An image older than this is a warning: about four missed weekly bakes.
pub const MAX_IMAGE_AGE: Duration = Duration::days(30);

/// The image stack's parameter that `runner_ami` names (as template.yaml's `RunnerAmi`,
/// a parameter name, or as `resolve:ssm:NAME`), if it names one.
pub fn image_stack_parameter(runner_ami: &str) -> Option<&str> {
    let name = runner_ami
        .strip_prefix("resolve:ssm:")
        .unwrap_or(runner_ami);
    let rest = name.strip_prefix("/ephemera/")?;
    let (deployment, arch) = rest.split_once("/runner-image/")?;
    let plain = |part: &str| !part.is_empty() && !part.contains('/');
    (plain(deployment) && plain(arch)).then_some(name)
}

/// `stack.runner_image`, from the stack's deployed parameters.
pub(super) async fn runner_image_check(
    parameters: &BTreeMap<String, String>,
    stack: &dyn StackPort,
    ec2: &dyn Ec2Port,
    now: OffsetDateTime,
    report: &mut Report,
) {
    let Some(runner_ami) = parameters.get("RunnerAmi") else {
        report.push(Check::skip(NAME, "the stack has no RunnerAmi parameter"));
        return;
    };
    let Some(parameter) = image_stack_parameter(runner_ami) else {
        // A public parameter (AWS's, Canonical's) is kept current by its owner; the
        // image it names is checked per pool (ec2.architecture, ec2.dry_run).
        report.push(Check::pass(
            NAME,
            format!("RunnerAmi {runner_ami} is a public parameter, not the image stack's"),
        ));
        return;
    };
    report.push(image_check(parameter, stack, ec2, now).await);
}

async fn image_check(
    parameter: &str,
    stack: &dyn StackPort,
    ec2: &dyn Ec2Port,
    now: OffsetDateTime,
) -> Check {
    let image = match stack.ssm_parameter(parameter).await {
        Ok(Some(image)) => image,
        Ok(None) => {
            return Check::fail(
                NAME,
                format!(
                    "RunnerAmi names {parameter}, which no bake has written: no runner launches"
                ),
                "start the image pipeline once (the image stack's BakeX86Now or BakeArm64Now \
                 output) and wait for the bake; a stack from before the pipelines' execution \
                 roles never publishes: deploy infra/image/template.yaml again",
            )
        }
        Err(err) => {
            return Check::warn(
                NAME,
                format!("cannot read {parameter}: {}", describe(&err)),
                "the credentials need ssm:GetParameter on the parameter",
            )
        }
    };
    let facts =
        match ec2.image(&image).await {
            Ok(Some(facts)) => facts,
            Ok(None) => return Check::fail(
                NAME,
                format!("{parameter} names {image}, which EC2 does not know (deregistered?)"),
                "bake again (the image stack's BakeX86Now or BakeArm64Now output), or raise the \
                 image stack's KeepImages",
            ),
            Err(err) => {
                return Check::warn(
                    NAME,
                    format!("cannot describe {image}: {}", describe(&err)),
                    "the credentials need ec2:DescribeImages",
                )
            }
        };
    if facts.state != "available" {
        return Check::fail(
            NAME,
            format!("{parameter} names {image}, which is {}", facts.state),
            "bake again (the image stack's BakeX86Now or BakeArm64Now output) and see the \
             last bake's log: aws imagebuilder list-image-pipeline-images",
        );
    }
    let Some(created) = facts.created else {
        return Check::pass(
            NAME,
            format!("{parameter} names {image}, available (EC2 gives no creation date)"),
        );
    };
    let days = (now - created).whole_days();
    if now - created > MAX_IMAGE_AGE {
        Check::warn(
            NAME,
            format!(
                "{parameter} names {image}, made {days} days ago (over {}): the scheduled \
                 bakes are not publishing",
                MAX_IMAGE_AGE.whole_days()
            ),
            "see the pipeline's last runs (aws imagebuilder list-image-pipeline-images) and \
             that the image stack's BakeSchedule is what you meant",
        )
    } else {
        Check::pass(
            NAME,
            format!("{parameter} names {image}, available, made {days} days ago"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::image_stack_parameter;

    #[test]
    fn the_image_stacks_parameter_is_known_in_both_forms() {
        for named in [
            "/ephemera/eph/runner-image/arm64",
            "resolve:ssm:/ephemera/eph/runner-image/arm64",
        ] {
            assert_eq!(
                image_stack_parameter(named),
                Some("/ephemera/eph/runner-image/arm64")
            );
        }
        for other in [
            "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-arm64",
            "/ephemera/eph/config",
            "/ephemera//runner-image/arm64",
            "/ephemera/eph/runner-image/arm64/extra",
            "ami-0123456789abcdef0",
        ] {
            assert_eq!(image_stack_parameter(other), None, "{other}");
        }
    }
}
