//! Asking IAM's policy simulator about each role's requests, and judging its answers.
//!
//! The simulator evaluates a role's policies against the context keys it is given, but
//! it cannot judge every condition as the service would: DynamoDB's keys, which DynamoDB
//! derives from the request itself (`dynamodb:LeadingKeys`, `dynamodb:Attributes`,
//! `dynamodb:ReturnValues`), leave a correct policy `implicitDeny`, and it lists what it
//! lacked as the evaluation's `MissingContextValues`
//! (https://docs.aws.amazon.com/IAM/latest/APIReference/API_EvaluationResult.html; "the
//! policy simulator results can differ from your live AWS environment",
//! https://docs.aws.amazon.com/IAM/latest/APIReference/API_SimulatePrincipalPolicy.html).
//! Such a refusal is a warning that names the key, never a FAIL of a sound deployment.

use super::{account_of, partition_of, requests, Decision, IamPort, Names, Request, Role};
use crate::cmd::doctor::report::{Check, Report};
use crate::errors::describe;

/// Condition keys the simulator cannot judge as DynamoDB does: a request carrying one
/// that the simulator refuses is undecided, not refused.
pub const UNJUDGED_KEYS: [&str; 3] = [
    "dynamodb:LeadingKeys",
    "dynamodb:Attributes",
    "dynamodb:ReturnValues",
];

/// `iam.simulate`, one line per role: `roles` maps each role's logical id to its name
/// (the stack's physical id); `names` without `runner_role_arn` and `account`, which
/// come from IAM.
pub async fn simulate_roles(
    roles: &std::collections::BTreeMap<String, String>,
    mut names: Names,
    iam: &dyn IamPort,
    report: &mut Report,
) {
    let mut arns = std::collections::BTreeMap::new();
    for role in Role::ALL {
        let Some(name) = roles.get(role.logical_id()) else {
            report.push(
                Check::fail(
                    "iam.simulate",
                    format!("the stack has no {}", role.logical_id()),
                    "deploy the stack again from this version's template.yaml: make deploy",
                )
                .on(role.logical_id()),
            );
            continue;
        };
        match iam.role_arn(name).await {
            Ok(arn) => {
                arns.insert(role.logical_id(), arn);
            }
            Err(err) => report.push(
                Check::warn(
                    "iam.simulate",
                    format!("cannot read role {name}: {}", describe(&err)),
                    "the credentials need iam:GetRole and iam:SimulatePrincipalPolicy",
                )
                .on(role.logical_id()),
            ),
        }
    }
    if let Some(runner) = arns.get(Role::Runner.logical_id()) {
        names.runner_role_arn = runner.clone();
    }
    if let Some(account) = arns.values().find_map(|arn| account_of(arn)) {
        names.account = account.to_owned();
    }
    // The roles' own partition (aws-cn, aws-us-gov, ...), so the resources asked about
    // are ARNs of the partition the stack is in.
    if let Some(partition) = arns.values().find_map(|arn| partition_of(arn)) {
        names.partition = partition.to_owned();
    }
    // The simulator's first error stands for the other roles (the same credentials, the
    // same endpoint): each is reported, none asked again.
    let mut unavailable: Option<String> = None;
    for role in Role::ALL {
        let Some(principal) = arns.get(role.logical_id()) else {
            continue;
        };
        let check = match &unavailable {
            Some(why) => unsimulated(why),
            None => match simulate_role(role, principal, &names, iam).await {
                Ok(check) => check,
                Err(why) => {
                    let check = unsimulated(&why);
                    unavailable = Some(why);
                    check
                }
            },
        };
        report.push(check.on(role.logical_id()));
    }
}

fn unsimulated(why: &str) -> Check {
    Check::warn(
        "iam.simulate",
        format!("cannot simulate the role's policies: {why}"),
        "the credentials need iam:SimulatePrincipalPolicy; or check the role's policies in \
         the IAM console against template.yaml",
    )
}

/// `request` as a line of the check: its action and resource, and what it is for.
fn described(request: &Request) -> String {
    match request.purpose {
        Some(purpose) => format!("{} on {} ({purpose})", request.action, request.resource),
        None => format!("{} on {}", request.action, request.resource),
    }
}

/// The keys of `request`'s context that the simulator cannot judge.
fn unjudged_keys(request: &Request) -> Vec<String> {
    request
        .context
        .iter()
        .map(|(key, _)| *key)
        .filter(|key| UNJUDGED_KEYS.contains(key))
        .map(str::to_owned)
        .collect()
}

/// The role's check; `Err` with why when the simulator cannot answer.
async fn simulate_role(
    role: Role,
    principal: &str,
    names: &Names,
    iam: &dyn IamPort,
) -> Result<Check, String> {
    let requests = requests(role, names);
    let mut refused = Vec::new();
    let mut undecided = Vec::new();
    let mut explicit = false;
    for request in &requests {
        let decision = iam
            .simulate(principal, request)
            .await
            .map_err(|err| describe(&err))?;
        let keys = match decision {
            Decision::Allowed => continue,
            Decision::Undecided { keys } => keys,
            Decision::ImplicitDeny => unjudged_keys(request),
            Decision::ExplicitDeny => {
                explicit = true;
                refused.push(format!("{} (explicitly denied)", described(request)));
                continue;
            }
        };
        if keys.is_empty() {
            refused.push(format!("{} (not allowed)", described(request)));
        } else {
            undecided.push(format!(
                "{} (condition key {})",
                described(request),
                keys.join(", ")
            ));
        }
    }
    let allowed = requests.len() - refused.len() - undecided.len();
    if refused.is_empty() && undecided.is_empty() {
        return Ok(Check::pass(
            "iam.simulate",
            format!("{} requests allowed", requests.len()),
        ));
    }
    if refused.is_empty() {
        return Ok(Check::warn(
            "iam.simulate",
            format!(
                "{allowed} requests allowed; IAM's policy simulator cannot judge {}",
                undecided.join("; ")
            ),
            "the simulator cannot evaluate these condition keys as the service does; compare \
             the role's policy with template.yaml's (aws iam get-role-policy), or deploy the \
             stack again (make deploy) to restore it",
        ));
    }
    let fix = if explicit {
        "a Deny overrides the stack's policy: look for a permissions boundary on the role, an \
         organization SCP or a Deny statement, and exempt these actions"
    } else {
        "the role's policy no longer grants them: deploy the stack again (make deploy) to \
         restore template.yaml's policy"
    };
    let mut message = format!("the role may not make {}", refused.join("; "));
    if !undecided.is_empty() {
        message.push_str(&format!(
            "; the simulator cannot judge {}",
            undecided.join("; ")
        ));
    }
    Ok(Check::fail("iam.simulate", message, fix))
}
