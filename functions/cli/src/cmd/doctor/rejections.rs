//! `webhook.rejections`: what the webhook refused over the last hour, from the
//! `WebhookRejected` metric its screen writes by reason.
//!
//! The webhook's URL is public, so some refusals are the background noise of any public
//! endpoint; they cost little (the screen refuses them before reading the body) and
//! `webhook.concurrency` bounds what a flood of them can take. They are a warning, not a
//! failure: the deployment works, but the operator should know. `bad_signature` is the
//! one that can also mean the deployment is broken: GitHub's webhook secret and the
//! stack's differ, and every genuine delivery is refused. It is what the alarm
//! `<deployment>-webhook-bad-signatures` watches, and its fix line is the runbook.

use super::ports::{MetricsPort, Rejections};
use super::report::{Check, Report};
use crate::errors::describe;
use std::fmt::Write as _;
use std::time::Duration;

const CHECK: &str = "webhook.rejections";
/// How far back the check looks.
pub const WINDOW: Duration = Duration::from_secs(3600);
/// The reason that can mean a secret mismatch rather than noise.
const BAD_SIGNATURE: &str = "bad_signature";

/// `webhook.rejections` for the deployment's metrics; skipped without a configuration,
/// which names the deployment the metric is recorded under.
pub async fn webhook_rejections_check(
    deployment: Option<&str>,
    metrics: &dyn MetricsPort,
    report: &mut Report,
) {
    let Some(deployment) = deployment else {
        report.push(Check::skip(CHECK, "config.valid failed"));
        return;
    };
    let check = match metrics.webhook_rejections(deployment, WINDOW).await {
        Ok(rejections) => judge(deployment, &rejections),
        Err(err) => Check::warn(
            CHECK,
            format!(
                "cannot read the webhook's WebhookRejected metric: {}",
                describe(&err)
            ),
            "the credentials need cloudwatch:GetMetricData to read the webhook's refusals",
        ),
    };
    report.push(check);
}

/// The verdict on the last hour's refusals of `deployment`'s webhook.
pub fn judge(deployment: &str, rejections: &Rejections) -> Check {
    let counted: Vec<(&str, u64)> = rejections
        .by_reason
        .iter()
        .map(|(reason, sum)| (reason.as_str(), sum.max(0.0).round() as u64))
        .filter(|(_, count)| *count > 0)
        .collect();
    if counted.is_empty() {
        return Check::pass(CHECK, "the webhook refused no request in the last hour");
    }
    let total: u64 = counted.iter().map(|(_, count)| count).sum();
    let mut message = format!("the webhook refused {total} requests in the last hour:");
    for (i, (reason, count)) in counted.iter().enumerate() {
        let separator = if i == 0 { " " } else { ", " };
        let _ = write!(message, "{separator}{reason} {count}");
    }
    let bad_signatures = counted.iter().any(|(reason, _)| *reason == BAD_SIGNATURE);
    let fix = if bad_signatures {
        format!(
            "bad_signature means an attack on the public URL or a webhook secret mismatch: if \
             github.deliveries shows 401s, GitHub signs with another secret than the stack's \
             WebhookSecret, so set the App's webhook secret to the stack's; otherwise the URL \
             is under attack, which the webhook's reserved concurrency bounds (alarm \
             {deployment}-webhook-bad-signatures)"
        )
    } else {
        "nothing to do unless they grow: no_signature and too_large come from something \
         other than GitHub (a scan of the public URL), unknown_event from that or from \
         events the App sends besides Workflow job; the webhook's reserved concurrency \
         bounds them"
            .to_owned()
    };
    Check::warn(CHECK, message, fix)
}
