//! `github.rate_limit`: the installation's budgets, bucket by bucket, through the GitHub
//! port's `GET /rate_limit`.

use super::*;
use crate::cmd::doctor::checks::judge_rate_limits;
use crate::cmd::doctor::report::Check;

async fn rate_limit_check(world: &World) -> Check {
    let report = run(world).await;
    assert!(
        report.ok(),
        "a budget never fails doctor: {}",
        report.text()
    );
    let checks = report.named("github.rate_limit");
    assert_eq!(checks.len(), 1, "one per installation: {}", report.text());
    checks[0].clone()
}

#[tokio::test]
async fn both_buckets_are_reported_with_what_is_left() {
    let check = rate_limit_check(&healthy()).await;
    assert_eq!(check.status, Status::Pass, "{check:?}");
    assert_eq!(
        check.message,
        "core 4990 of 5000 left, actions_runner_registration 10000 of 10000 left"
    );
}

#[tokio::test]
async fn a_nearly_spent_bucket_warns_when_it_refills() {
    let mut world = healthy();
    world
        .rate_limits
        .insert("actions_runner_registration".into(), bucket(120, 10_000));
    let check = rate_limit_check(&world).await;
    assert_eq!(check.status, Status::Warn, "{check:?}");
    assert!(check.message.contains("nearly spent"), "{check:?}");
    let fix = check.fix.unwrap_or_default();
    assert!(
        fix.contains("actions_runner_registration refills in 30 min"),
        "{fix}"
    );
    assert!(!fix.contains("core refills"), "{fix}");
}

#[test]
fn buckets_ephemera_does_not_spend_are_not_reported() {
    let now = time::OffsetDateTime::now_utc();
    let only_search = BTreeMap::from([("search".to_owned(), bucket(0, 30))]);
    let check = judge_rate_limits(&only_search, now);
    assert_eq!(check.status, Status::Warn, "{check:?}");
    assert!(check.message.contains("neither core"), "{check:?}");
}
