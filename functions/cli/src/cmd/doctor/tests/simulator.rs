//! `iam.simulate` where IAM's policy simulator cannot judge: a refusal that hangs on a
//! DynamoDB condition key is a warning naming the key, the reaper lease's release is
//! asked, and the resources asked about are in the roles' own partition.

use super::*;
use crate::cmd::doctor::iam::Decision;

fn answer(world: &mut World, role: &str, action: &str, decision: Decision) {
    world
        .denied
        .entry(format!("arn:aws:iam::123456789012:role/eph-{role}"))
        .or_default()
        .insert(action.into(), decision);
}

#[tokio::test]
async fn a_refusal_on_a_leading_keys_condition_is_a_warning_naming_the_key() {
    let mut world = healthy();
    // The webhook's PutItem carries dynamodb:LeadingKeys, which the simulator cannot judge.
    answer(
        &mut world,
        "WebhookRole",
        "dynamodb:PutItem",
        Decision::ImplicitDeny,
    );
    let report = run(&world).await;
    assert!(report.ok(), "{}", report.text());
    let line = report
        .named("iam.simulate")
        .into_iter()
        .find(|c| c.subject.as_deref() == Some("WebhookRole"))
        .expect("the webhook's line");
    assert_eq!(line.status, Status::Warn, "{}", report.text());
    assert!(
        line.message.contains("cannot judge") && line.message.contains("dynamodb:LeadingKeys"),
        "{}",
        line.message
    );
}

#[tokio::test]
async fn missing_context_values_the_simulator_names_are_a_warning_naming_them() {
    let mut world = healthy();
    answer(
        &mut world,
        "RunnerRole",
        "dynamodb:UpdateItem",
        Decision::Undecided {
            keys: vec!["dynamodb:Attributes".into()],
        },
    );
    let report = run(&world).await;
    assert!(report.ok(), "{}", report.text());
    let line = report
        .named("iam.simulate")
        .into_iter()
        .find(|c| c.subject.as_deref() == Some("RunnerRole"))
        .expect("the runner role's line");
    assert_eq!(line.status, Status::Warn, "{}", report.text());
    assert!(
        line.message.contains("dynamodb:Attributes"),
        "{}",
        line.message
    );
}

#[tokio::test]
async fn a_reaper_that_may_not_update_its_lease_fails_naming_the_release() {
    let mut world = healthy();
    answer(
        &mut world,
        "ReaperRole",
        "dynamodb:UpdateItem",
        Decision::ImplicitDeny,
    );
    let report = run(&world).await;
    let (check, message, _) = only_failure(&report);
    assert_eq!(check, "iam.simulate");
    assert!(
        message.contains("dynamodb:UpdateItem on arn:aws:dynamodb:us-east-1:123456789012:table/eph-runners (the reaper lease's release)"),
        "{message}"
    );
}

#[tokio::test]
async fn the_resources_asked_about_are_in_the_roles_partition() {
    let mut world = healthy();
    world.partition = "aws-cn".into();
    let report = run(&world).await;
    let lines = report.named("iam.simulate");
    assert_eq!(lines.len(), 4, "{}", report.text());
    assert!(
        lines.iter().all(|c| c.status == Status::Pass),
        "{}",
        report.text()
    );
}
