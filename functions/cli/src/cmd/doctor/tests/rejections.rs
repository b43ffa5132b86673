//! `webhook.rejections`: the last hour of the webhook's refusals, by reason, through the
//! metrics port.

use super::*;
use crate::cmd::doctor::ports::{MetricsPort, Rejections};
use crate::cmd::doctor::report::Check;
use std::time::Duration;

#[async_trait]
impl MetricsPort for World {
    async fn webhook_rejections(
        &self,
        deployment: &str,
        window: Duration,
    ) -> anyhow::Result<Rejections> {
        assert_eq!(deployment, "eph", "the configuration's deployment");
        assert_eq!(window, Duration::from_secs(3600), "the last hour");
        let by_reason = self.rejections.clone().map_err(anyhow::Error::msg)?;
        Ok(Rejections { by_reason })
    }
}

fn refusing(counts: &[(&str, f64)]) -> World {
    let mut world = healthy();
    world.rejections = Ok(counts
        .iter()
        .map(|(reason, count)| (reason.to_string(), *count))
        .collect());
    world
}

async fn rejections_check(world: &World) -> Check {
    let report = run(world).await;
    assert!(
        report.ok(),
        "a refusal never fails doctor: {}",
        report.text()
    );
    let checks = report.named("webhook.rejections");
    assert_eq!(checks.len(), 1, "{}", report.text());
    checks[0].clone()
}

#[tokio::test]
async fn no_rejection_in_the_last_hour_passes() {
    let check = rejections_check(&refusing(&[("no_signature", 0.0)])).await;
    assert_eq!(check.status, Status::Pass, "{check:?}");
    assert!(check.message.contains("no request"), "{check:?}");
}

#[tokio::test]
async fn some_rejections_warn_with_the_count_of_each_reason() {
    let world = refusing(&[("no_signature", 12.0), ("unknown_event", 3.0)]);
    let check = rejections_check(&world).await;
    assert_eq!(check.status, Status::Warn, "{check:?}");
    assert!(check.message.contains("refused 15 requests"), "{check:?}");
    assert!(check.message.contains("no_signature 12"), "{check:?}");
    assert!(check.message.contains("unknown_event 3"), "{check:?}");
    let fix = check.fix.unwrap_or_default();
    assert!(!fix.contains("secret mismatch"), "{fix}");
}

#[tokio::test]
async fn many_bad_signatures_warn_of_an_attack_or_a_secret_mismatch() {
    let world = refusing(&[("bad_signature", 4_812.0), ("no_signature", 1.0)]);
    let check = rejections_check(&world).await;
    assert_eq!(check.status, Status::Warn, "{check:?}");
    assert!(check.message.contains("bad_signature 4812"), "{check:?}");
    assert!(check.message.contains("no_signature 1"), "{check:?}");
    let fix = check.fix.unwrap_or_default();
    assert!(fix.contains("an attack"), "{fix}");
    assert!(fix.contains("secret mismatch"), "{fix}");
    assert!(fix.contains("eph-webhook-bad-signatures"), "{fix}");
}

#[tokio::test]
async fn a_refused_metrics_read_warns_that_the_credentials_need_get_metric_data() {
    let mut world = healthy();
    world.rejections = Err("CloudWatch GetMetricData: AccessDenied: not authorized".into());
    let check = rejections_check(&world).await;
    assert_eq!(check.status, Status::Warn, "{check:?}");
    assert!(check.message.contains("AccessDenied"), "{check:?}");
    let fix = check.fix.unwrap_or_default();
    assert!(fix.contains("cloudwatch:GetMetricData"), "{fix}");
}

#[tokio::test]
async fn without_a_configuration_the_rejections_are_not_read() {
    let mut world = healthy();
    world.config = Ok(CONFIG.replace("max_runners: 4", "max_runners: 0"));
    world.rejections = Err("must not be asked".into());
    let report = run(&world).await;
    let checks = report.named("webhook.rejections");
    assert_eq!(checks.len(), 1, "{}", report.text());
    assert_eq!(checks[0].status, Status::Skip, "{}", report.text());
}
