//! The stack, its outputs and the configuration, with the version each function runs.

use super::*;
use crate::cmd::doctor::report::Check;

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

/// A stack on an emulator (moto makes no Function URL), as `make up` makes it.
fn emulated() -> (World, Request) {
    let mut world = healthy();
    world.outputs.remove("WebhookUrl");
    let request = Request {
        stack: "eph".into(),
        emulator: Some("http://127.0.0.1:5000".into()),
        ..Request::default()
    };
    (world, request)
}

async fn run_request(world: &World, request: &Request) -> Report {
    let ports = Ports {
        stack: world,
        github: world,
        ec2: world,
        quotas: world,
        iam: world,
        metrics: world,
    };
    diagnose(request, &ports).await
}

#[tokio::test]
async fn on_an_emulator_a_stack_without_a_webhook_url_is_a_warning_naming_the_local_one() {
    let (world, request) = emulated();
    let report = run_request(&world, &request).await;
    let check = &report.named("github.webhook_url")[0];
    assert_eq!(check.status, Status::Warn, "{}", report.text());
    assert!(
        check.message.contains("makes no Function URL"),
        "{}",
        check.message
    );
    let fix = check.fix.as_deref().unwrap_or_default();
    assert!(fix.contains("EPHEMERA_WEBHOOK_URL"), "{fix}");
    assert!(!fix.contains("make deploy"), "{fix}");

    // On AWS, the same stack fails the check.
    let on_aws = Request {
        emulator: None,
        ..request.clone()
    };
    let report = run_request(&world, &on_aws).await;
    assert_eq!(report.named("github.webhook_url")[0].status, Status::Fail);

    // Given the local URL, it passes.
    let given = Request {
        webhook_url: Some("https://hook.lambda-url/".into()),
        ..request
    };
    let report = run_request(&world, &given).await;
    assert_eq!(report.named("github.webhook_url")[0].status, Status::Pass);
}

#[test]
fn on_an_emulator_only_the_warnings_it_cannot_answer_are_said_to_be_its() {
    let mut report = Report {
        stack: "eph".into(),
        checks: vec![
            Check::warn("iam.simulate", "cannot simulate", "grant it").on("ScalerRole"),
            Check::warn("quotas.vcpu", "unknown quota", "check the console"),
            Check::pass("iam.simulate", "allowed"),
            Check::warn("config.running", "has not run yet", "wait"),
            Check::fail("ec2.architecture", "arm64 image", "pick x86_64 types"),
        ],
    };
    crate::cmd::doctor::checks::as_emulated(&mut report, "http://127.0.0.1:5000");
    let [iam, quota, passed, running, failed] = &report.checks[..] else {
        panic!("{}", report.text());
    };
    for said in [iam, quota] {
        assert!(
            said.message
                .starts_with("the emulator at http://127.0.0.1:5000 cannot answer this"),
            "{}",
            said.message
        );
        assert_eq!(said.status, Status::Warn);
        assert!(said
            .fix
            .as_deref()
            .is_some_and(|f| f.starts_with("nothing to do locally; on AWS: ")));
    }
    assert!(iam.message.contains("cannot simulate"), "the cause kept");
    assert_eq!(passed.message, "allowed");
    assert_eq!(running.message, "has not run yet");
    assert_eq!(failed.status, Status::Fail);
    assert_eq!(failed.message, "arm64 image");
}
