//! The stack, its outputs and the configuration, with the version each function runs.

use super::*;

#[tokio::test]
async fn an_invalid_configuration_fails_its_check_and_skips_what_needs_it() {
    let mut world = healthy();
    world.config = Ok(CONFIG.replace("max_runners: 4", "max_runners: 0"));
    let report = run(&world).await;
    let (check, message, fix) = only_failure(&report);
    assert_eq!(check, "config.valid");
    assert!(message.contains("max_runners"), "{message}");
    assert!(
        fix.contains("ephemera config push FILE --stack eph"),
        "{fix}"
    );
    assert_eq!(report.named("ec2.pools")[0].status, Status::Skip);
}

#[tokio::test]
async fn a_stack_that_cannot_be_read_is_one_failure_and_nothing_else() {
    let request = Request {
        stack: "nope".into(),
        ..Request::default()
    };
    let world = healthy();
    let ports = Ports {
        stack: &world,
        github: &world,
        ec2: &world,
        quotas: &world,
        iam: &world,
        metrics: &world,
    };
    let report = diagnose(&request, &ports).await;
    assert_eq!(report.checks.len(), 1, "{}", report.text());
    assert_eq!(report.checks[0].status, Status::Fail);
}

#[tokio::test]
async fn a_missing_output_fails_the_outputs_check() {
    let mut world = healthy();
    world.outputs.remove("GitHubAppKeySecret");
    let report = run(&world).await;
    let (check, message, _) = only_failure(&report);
    assert_eq!(check, "stack.outputs");
    assert!(message.contains("GitHubAppKeySecret"), "{message}");
    assert_eq!(report.named("github.app_key")[0].status, Status::Skip);
}

#[tokio::test]
async fn a_function_on_an_older_configuration_version_is_a_warning_naming_it() {
    let mut world = healthy();
    world
        .running
        .insert("scaler".into(), ("/ephemera/eph/config".into(), 2));
    world.running.remove("reaper");
    let report = run(&world).await;
    assert!(report.ok(), "{}", report.text());
    let lines = report.named("config.running");
    let by = |subject: &str| {
        lines
            .iter()
            .find(|c| c.subject.as_deref() == Some(subject))
            .unwrap_or_else(|| panic!("no line for {subject}: {}", report.text()))
    };
    assert_eq!(by("webhook").status, Status::Pass);
    assert_eq!(by("scaler").status, Status::Warn);
    assert!(
        by("scaler").message.contains("runs version 2"),
        "{}",
        report.text()
    );
    assert_eq!(by("reaper").status, Status::Warn);
    assert!(
        by("reaper").message.contains("has not run yet"),
        "{}",
        report.text()
    );
}

#[tokio::test]
async fn the_runners_log_group_passes_with_its_retention() {
    let report = run(&healthy()).await;
    let check = &report.named("stack.runner_logs")[0];
    assert_eq!(check.status, Status::Pass, "{}", report.text());
    assert!(check
        .message
        .contains("/ephemera/eph/runners, kept 30 days"));
}

#[tokio::test]
async fn a_missing_runners_log_group_fails_and_a_stack_without_it_warns() {
    let mut world = healthy();
    world.log_groups.clear();
    let report = run(&world).await;
    let (check, message, fix) = only_failure(&report);
    assert_eq!(check, "stack.runner_logs");
    assert!(message.contains("does not exist"), "{message}");
    assert!(fix.contains("make deploy"), "{fix}");

    world.outputs.remove("RunnerLogGroupName");
    let report = run(&world).await;
    let check = &report.named("stack.runner_logs")[0];
    assert_eq!(check.status, Status::Warn, "{}", report.text());
    assert!(check.message.contains("RunnerLogGroupName"));
}
