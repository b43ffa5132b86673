//! The stack itself: its status, the outputs every other check reads, and the table,
//! queue and runners' log group they name.

use super::{Request, REQUIRED_OUTPUTS};
use crate::cmd::doctor::ports::StackPort;
use crate::cmd::doctor::report::{Check, Report};
use crate::errors::describe;
use ephemera_aws::stack::{QUEUE_URL, RUNNER_LOG_GROUP_NAME, TABLE_NAME};
use std::collections::BTreeMap;

/// `stack.status`, `stack.outputs`, `stack.table`, `stack.queue`, `stack.runner_logs`;
/// the outputs and the parameters, unless the stack cannot be read.
pub(super) async fn stack_checks(
    request: &Request,
    stack: &dyn StackPort,
    report: &mut Report,
) -> Option<(BTreeMap<String, String>, BTreeMap<String, String>)> {
    let name = &request.stack;
    let facts = match stack.describe_stack(name).await {
        Ok(facts) => facts,
        Err(err) => {
            report.push(Check::fail(
                "stack.status",
                format!("cannot read stack {name}: {}", describe(&err)),
                format!(
                    "check the name, the region and the credentials: aws cloudformation \
                     describe-stacks --stack-name {name}"
                ),
            ));
            return None;
        }
    };
    let status = facts.status.as_str();
    report.push(
        if status == "CREATE_COMPLETE" || status == "UPDATE_COMPLETE" {
            Check::pass("stack.status", status)
        } else if status.ends_with("_IN_PROGRESS") {
            Check::warn(
                "stack.status",
                format!("{status}: the stack is changing"),
                "run ephemera doctor again when the deploy has finished",
            )
        } else if status == "UPDATE_ROLLBACK_COMPLETE" {
            Check::warn(
                "stack.status",
                format!("{status}: the last update failed and was rolled back"),
                format!("see why: aws cloudformation describe-stack-events --stack-name {name}"),
            )
        } else {
            Check::fail(
                "stack.status",
                format!("{status}: the stack is not deployed"),
                format!(
                    "see why: aws cloudformation describe-stack-events --stack-name {name}; then \
                 make deploy"
                ),
            )
        },
    );
    let missing: Vec<&str> = REQUIRED_OUTPUTS
        .into_iter()
        .filter(|key| facts.outputs.get(*key).is_none_or(|v| v.is_empty()))
        .collect();
    report.push(if missing.is_empty() {
        Check::pass(
            "stack.outputs",
            format!("{} outputs readable", facts.outputs.len()),
        )
    } else {
        Check::fail(
            "stack.outputs",
            format!("the stack has no output {}", missing.join(", ")),
            "deploy the stack again from this version's template.yaml: make deploy",
        )
    });
    let outputs = facts.outputs;
    match outputs.get(TABLE_NAME) {
        Some(table) => report.push(match stack.table_status(table).await {
            Ok(status) if status == "ACTIVE" => {
                Check::pass("stack.table", format!("{table} ACTIVE"))
            }
            Ok(status) => Check::warn(
                "stack.table",
                format!("{table} is {status}"),
                "wait until the table is ACTIVE",
            ),
            Err(err) => Check::fail(
                "stack.table",
                format!("table {table}: {}", describe(&err)),
                "the stack's table is gone or unreadable: make deploy; the credentials need \
                 dynamodb:DescribeTable",
            ),
        }),
        None => report.push(Check::skip("stack.table", "stack.outputs failed")),
    }
    match outputs.get(QUEUE_URL) {
        Some(url) => report.push(match stack.queue_reachable(url).await {
            Ok(()) => Check::pass("stack.queue", url.as_str()),
            Err(err) => Check::fail(
                "stack.queue",
                format!("queue {url}: {}", describe(&err)),
                "the stack's jobs queue is gone or unreadable: make deploy; the credentials \
                 need sqs:GetQueueAttributes",
            ),
        }),
        None => report.push(Check::skip("stack.queue", "stack.outputs failed")),
    }
    report.push(runner_logs_check(stack, outputs.get(RUNNER_LOG_GROUP_NAME)).await);
    Some((outputs, facts.parameters))
}

/// `stack.runner_logs`: the group runner hosts ship their logs to, and its retention. A
/// stack from before the group is a warning: runners work, their logs are not kept.
async fn runner_logs_check(stack: &dyn StackPort, group: Option<&String>) -> Check {
    const NAME: &str = "stack.runner_logs";
    let Some(group) = group else {
        return Check::warn(
            NAME,
            format!("the stack has no output {RUNNER_LOG_GROUP_NAME}: runner logs are not kept"),
            "deploy the stack again from this version's template.yaml: make deploy",
        );
    };
    match stack.log_group_retention(group).await {
        Ok(Some(Some(days))) => Check::pass(NAME, format!("{group}, kept {days} days")),
        Ok(Some(None)) => Check::pass(NAME, format!("{group}, kept forever")),
        Ok(None) => Check::fail(
            NAME,
            format!("log group {group} does not exist: runner hosts cannot ship their logs"),
            "deploy the stack again (make deploy); it creates the group",
        ),
        Err(err) => Check::warn(
            NAME,
            format!("log group {group}: {}", describe(&err)),
            "the credentials need logs:DescribeLogGroups (reading logs: logs:GetLogEvents)",
        ),
    }
}
