//! `stack.runner_image`: the image stack's parameter that `RunnerAmi` names, written by a
//! bake, naming an available image, and not too old.

use super::*;
use crate::cmd::doctor::report::Check;

const PARAMETER: &str = "/ephemera/eph/runner-image/arm64";

fn line(report: &Report) -> &Check {
    let lines = report.named("stack.runner_image");
    assert_eq!(lines.len(), 1, "{}", report.text());
    lines[0]
}

#[tokio::test]
async fn a_parameter_no_bake_wrote_fails_naming_the_parameter_and_the_first_bake() {
    let mut world = healthy();
    world.ssm_parameters.clear();
    let report = run(&world).await;
    let (check, message, fix) = only_failure(&report);
    assert_eq!(check, "stack.runner_image");
    assert!(message.contains(PARAMETER), "{message}");
    assert!(fix.contains("BakeArm64Now"), "{fix}");
}

#[tokio::test]
async fn a_parameter_naming_an_image_ec2_does_not_know_fails() {
    let mut world = healthy();
    world
        .ssm_parameters
        .insert(PARAMETER.into(), "ami-gone".into());
    let report = run(&world).await;
    let failed = line(&report);
    assert_eq!(failed.status, Status::Fail, "{}", report.text());
    assert!(failed.message.contains("ami-gone"), "{}", failed.message);
}

#[tokio::test]
async fn an_image_that_is_not_available_fails_with_its_state() {
    let mut world = healthy();
    world.images.get_mut("ami-1").expect("ami-1").state = "failed".into();
    let report = run(&world).await;
    let failed = line(&report);
    assert_eq!(failed.status, Status::Fail, "{}", report.text());
    assert!(failed.message.contains("failed"), "{}", failed.message);
}

#[tokio::test]
async fn an_image_older_than_thirty_days_is_a_warning_with_its_age() {
    let mut world = healthy();
    world.images.get_mut("ami-1").expect("ami-1").created =
        Some(OffsetDateTime::now_utc() - time::Duration::days(45));
    let report = run(&world).await;
    assert!(report.ok(), "{}", report.text());
    let warned = line(&report);
    assert_eq!(warned.status, Status::Warn, "{}", report.text());
    assert!(warned.message.contains("45 days ago"), "{}", warned.message);
}

#[tokio::test]
async fn a_public_parameter_is_not_the_image_stacks_and_is_not_read() {
    let mut world = healthy();
    world.parameters.insert(
        "RunnerAmi".into(),
        "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-arm64".into(),
    );
    world.ssm_parameters.clear();
    let report = run(&world).await;
    assert!(report.ok(), "{}", report.text());
    let passed = line(&report);
    assert_eq!(passed.status, Status::Pass, "{}", report.text());
    assert!(
        passed.message.contains("public parameter"),
        "{}",
        passed.message
    );
}
