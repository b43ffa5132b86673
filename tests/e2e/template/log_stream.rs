//! What a runner instance's credentials (either instance role: the runner role, and the
//! Session Manager one of pools with `ssm_access`) may do with the runners' log group,
//! evaluated:
//! create a stream in the deployment's group and put events into a stream named like an
//! instance (`i-…`), nothing else — no read, no delete, no retention change, no other
//! group, no stream of another name, and nothing without an instance behind the
//! credentials. The residual that IAM cannot close (a stream name may not hold the ':' of
//! `${ec2:SourceInstanceARN}`) is pinned too: another instance's stream takes the write,
//! as docs/operating.md says.

use super::instance_role::{own_arn, runner_statements, INSTANCE_ROLES};
use super::policy::{allows, context, RequestContext, Stack, ACCOUNT, REGION};
use anyhow::ensure;
use ephemera_tests::stack::{template_path, translate_template};

/// The name bootstrap.sh derives for the group from the deployment's (the
/// `DeploymentName` default): the template must name the group the same way.
const GROUP: &str = "/ephemera/ephemera/runners";

fn stream(group: &str, name: &str) -> String {
    format!("arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{group}:log-stream:{name}")
}

fn group(name: &str) -> String {
    format!("arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{name}")
}

#[tokio::test]
async fn an_instance_may_only_write_instance_streams_of_the_runners_log_group() -> anyhow::Result<()>
{
    let template = translate_template(&template_path()).await?;
    let stack = Stack {
        template: &template,
    };
    ensure!(
        stack.arn_of("RunnerLogGroup")? == group(GROUP),
        "the runners' log group is not {GROUP}, the name bootstrap.sh writes to"
    );
    for role in INSTANCE_ROLES {
        let statements = runner_statements(&template, role)?;
        instance_writes_only_instance_streams(&stack, &statements)
            .map_err(|err| err.context(role))?;
    }
    Ok(())
}

fn instance_writes_only_instance_streams(
    stack: &Stack,
    statements: &[&serde_json::Value],
) -> anyhow::Result<()> {
    let own = own_arn();
    let on_instance = context(vec![("ec2:SourceInstanceARN", vec![own.as_str()])]);
    let may = |action: &str, resource: &str, request: &RequestContext| {
        allows(stack, statements, action, resource, request)
    };
    let own_stream = stream(GROUP, "i-0own");

    for action in ["logs:CreateLogStream", "logs:PutLogEvents"] {
        ensure!(
            may(action, &own_stream, &on_instance)?,
            "{action} on its own stream is refused"
        );
        ensure!(
            !may(action, &own_stream, &context(vec![]))?,
            "{action} allowed for credentials that name no instance"
        );
        for other in [
            stream("/aws/lambda/ephemera-scaler", "i-0own"),
            stream("/ephemera/other/runners", "i-0own"),
            stream("/ephemera/ephemera/runners-old", "i-0own"),
        ] {
            ensure!(
                !may(action, &other, &on_instance)?,
                "{action} allowed on {other}"
            );
        }
    }
    ensure!(
        !may(
            "logs:PutLogEvents",
            &stream(GROUP, "eph-linux-x64-l9nj93ftms"),
            &on_instance
        )?,
        "PutLogEvents allowed on a stream not named like an instance"
    );

    for action in [
        "logs:GetLogEvents",
        "logs:FilterLogEvents",
        "logs:StartQuery",
        "logs:DescribeLogStreams",
        "logs:DescribeLogGroups",
        "logs:DeleteLogStream",
        "logs:DeleteLogGroup",
        "logs:PutRetentionPolicy",
        "logs:DeleteRetentionPolicy",
        "logs:CreateLogGroup",
        "logs:PutSubscriptionFilter",
        "logs:AssociateKmsKey",
        "logs:TagResource",
        "logs:CreateExportTask",
    ] {
        for resource in [
            own_stream.clone(),
            group(GROUP),
            format!("{}:*", group(GROUP)),
        ] {
            ensure!(
                !may(action, &resource, &on_instance)?,
                "{action} allowed on {resource}"
            );
        }
    }

    // The documented residual: nothing in IAM ties the stream's name to the caller.
    ensure!(
        may(
            "logs:PutLogEvents",
            &stream(GROUP, "i-0other"),
            &on_instance
        )?,
        "another instance's stream refuses the write: update docs/operating.md's residual"
    );
    Ok(())
}
