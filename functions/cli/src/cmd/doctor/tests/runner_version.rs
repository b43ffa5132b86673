//! `runner.version`: each pool's image's runner version against the bucket's newest.

use super::*;
use crate::cmd::doctor::report::Check;

fn line(report: &Report) -> &Check {
    let lines = report.named("runner.version");
    assert_eq!(lines.len(), 1, "{}", report.text());
    lines[0]
}

fn tagged(version: &str) -> World {
    let mut world = healthy();
    world.images.get_mut("ami-1").expect("ami-1").runner_version = Some(version.into());
    world
}

#[tokio::test]
async fn a_stock_image_passes_saying_hosts_take_the_buckets_runner() {
    let report = run(&healthy()).await;
    let passed = line(&report);
    assert_eq!(passed.status, Status::Pass, "{}", report.text());
    assert!(passed.message.contains("2.330.1"), "{}", passed.message);
    assert_eq!(passed.subject.as_deref(), Some("pool linux-arm64"));
}

#[tokio::test]
async fn a_pinned_image_behind_the_newest_warns_naming_both_versions_and_the_bake() {
    let report = run(&tagged("2.329.0")).await;
    assert!(report.ok(), "{}", report.text());
    let warned = line(&report);
    assert_eq!(warned.status, Status::Warn, "{}", report.text());
    assert!(warned.message.contains("2.329.0"), "{}", warned.message);
    assert!(warned.message.contains("2.330.1"), "{}", warned.message);
    assert_eq!(warned.subject.as_deref(), Some("pool linux-arm64"));
    let fix = warned.fix.as_deref().expect("a fix");
    assert!(fix.contains("BakeArm64Now"), "{fix}");
}

#[tokio::test]
async fn a_pinned_image_at_the_newest_passes() {
    let report = run(&tagged("2.330.1")).await;
    assert_eq!(line(&report).status, Status::Pass, "{}", report.text());
}

#[tokio::test]
async fn an_image_baked_from_latest_passes_saying_boots_compare() {
    let report = run(&tagged("latest")).await;
    let passed = line(&report);
    assert_eq!(passed.status, Status::Pass, "{}", report.text());
    assert!(passed.message.contains("bake time"), "{}", passed.message);
}

#[tokio::test]
async fn an_empty_bucket_warns_that_the_sync_has_not_run() {
    let mut world = tagged("2.329.0");
    world.runner_latest.clear();
    let report = run(&world).await;
    let warned = line(&report);
    assert_eq!(warned.status, Status::Warn, "{}", report.text());
    assert!(
        warned.message.contains("runner/latest-arm64") && warned.message.contains("sync"),
        "{}",
        warned.message
    );
}

#[tokio::test]
async fn on_an_emulator_an_empty_bucket_is_what_it_cannot_answer() {
    let mut world = healthy();
    world.runner_latest.clear();
    let request = Request {
        stack: "eph".into(),
        emulator: Some("http://127.0.0.1:5000".into()),
        ..Request::default()
    };
    let ports = Ports {
        stack: &world,
        github: &world,
        ec2: &world,
        quotas: &world,
        iam: &world,
        metrics: &world,
    };
    let report = diagnose(&request, &ports).await;
    let warned = line(&report);
    assert!(
        warned
            .message
            .starts_with("the emulator at http://127.0.0.1:5000 cannot answer this"),
        "{}",
        warned.message
    );
}

#[tokio::test]
async fn a_stack_without_the_bucket_output_skips() {
    let mut world = healthy();
    world.outputs.remove("RunnerBucketName");
    let report = run(&world).await;
    assert_eq!(line(&report).status, Status::Skip, "{}", report.text());
}
