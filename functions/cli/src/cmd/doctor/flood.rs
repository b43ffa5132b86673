//! `webhook.concurrency`: what the account's Lambda concurrency lets the webhook reserve,
//! against the stack's `WebhookReservedConcurrency`.
//!
//! The webhook is a public URL, and its reserved concurrency is the ceiling a flood of
//! requests runs into, so that the flood throttles the webhook alone and leaves the
//! scaler and the reaper their share. Lambda keeps at least 100 concurrent executions
//! unreserved in an account, so a reservation of N needs a quota of N + 100, and an
//! account at the new-account quota of 10 can reserve nothing.
//! <https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html>,
//! <https://docs.aws.amazon.com/lambda/latest/api/API_PutFunctionConcurrency.html>

use super::quotas::LAMBDA_CONCURRENCY;
use super::report::{Check, Report};
use crate::errors::describe;
use std::collections::BTreeMap;

/// The stack parameter reserving the webhook's concurrency (0: nothing reserved).
pub const WEBHOOK_RESERVED_CONCURRENCY: &str = "WebhookReservedConcurrency";
/// What Lambda keeps unreserved in every account.
pub const UNRESERVED_MINIMUM: u32 = 100;
/// The reservation recommended once the account allows it (template.yaml defaults to 0,
/// no reservation, so that a first deploy cannot fail on a new account's quota).
const RESERVED_DEFAULT: u32 = 50;
const CHECK: &str = "webhook.concurrency";

/// What the account may reserve for the webhook: its quota less what stays unreserved
/// (other functions' reservations, which this does not read, come off it too).
pub fn reservable(quota: u32) -> u32 {
    quota.saturating_sub(UNRESERVED_MINIMUM)
}

/// `webhook.concurrency`, from the account's quota and the stack's parameters (a stack
/// made before the parameter reserves nothing).
pub fn webhook_concurrency_check(
    parameters: &BTreeMap<String, String>,
    quota: &anyhow::Result<Option<f64>>,
    report: &mut Report,
) {
    let reserved = parameters
        .get(WEBHOOK_RESERVED_CONCURRENCY)
        .and_then(|value| value.trim().parse::<u32>().ok())
        .unwrap_or(0);
    let check = match quota {
        Ok(Some(quota)) => judge(*quota as u32, reserved),
        Ok(None) => Check::warn(
            CHECK,
            format!(
                "Service Quotas does not know Lambda's Concurrent executions \
                 ({LAMBDA_CONCURRENCY}) here: the webhook's reservation of {reserved} \
                 not checked"
            ),
            "check it with aws lambda get-account-settings (UnreservedConcurrentExecutions)",
        ),
        Err(err) => Check::warn(
            CHECK,
            format!("cannot read {LAMBDA_CONCURRENCY}: {}", describe(err)),
            "the credentials need servicequotas:GetServiceQuota and \
             servicequotas:GetAWSDefaultServiceQuota",
        ),
    };
    report.push(check);
}

/// The verdict for an account of `quota` concurrent executions whose webhook reserves
/// `reserved`.
pub fn judge(quota: u32, reserved: u32) -> Check {
    let most = reservable(quota);
    if reserved > most {
        return Check::fail(
            CHECK,
            format!(
                "{WEBHOOK_RESERVED_CONCURRENCY} {reserved} needs a Lambda concurrency quota of \
                 {} (100 stay unreserved); the account has {quota}, so the deployment fails",
                reserved + UNRESERVED_MINIMUM
            ),
            format!(
                "deploy with {WEBHOOK_RESERVED_CONCURRENCY}={} (0 reserves nothing), or request \
                 an increase of Lambda's Concurrent executions ({LAMBDA_CONCURRENCY})",
                if most == 0 {
                    0
                } else {
                    most.min(RESERVED_DEFAULT)
                }
            ),
        );
    }
    if reserved > 0 {
        return Check::pass(
            CHECK,
            format!(
                "the webhook reserves {reserved} of {quota} concurrent executions: a flood \
                 at its URL is throttled there (429) and leaves the scaler and the reaper \
                 the rest; the account allows up to {most}"
            ),
        );
    }
    let fix = if most == 0 {
        format!(
            "request an increase of Lambda's Concurrent executions ({LAMBDA_CONCURRENCY}) to \
             at least {}, then deploy with {WEBHOOK_RESERVED_CONCURRENCY}={RESERVED_DEFAULT}",
            UNRESERVED_MINIMUM + RESERVED_DEFAULT
        )
    } else {
        format!(
            "deploy with {WEBHOOK_RESERVED_CONCURRENCY}={}",
            most.min(RESERVED_DEFAULT)
        )
    };
    Check::warn(
        CHECK,
        format!(
            "the webhook reserves no concurrency: a flood at its public URL can take all \
             {quota} of the account's executions and throttle the scaler and the reaper; \
             the account allows the webhook up to {most}"
        ),
        fix,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::doctor::report::Status;

    #[test]
    fn a_reservation_the_account_allows_passes() {
        let check = judge(1_000, 50);
        assert_eq!(check.status, Status::Pass, "{check:?}");
        assert!(check.message.contains("up to 900"), "{check:?}");
    }

    #[test]
    fn a_reservation_over_the_quota_less_100_fails_and_says_what_fits() {
        let check = judge(120, 50);
        assert_eq!(check.status, Status::Fail, "{check:?}");
        assert!(check.message.contains("quota of 150"), "{check:?}");
        assert!(
            check.fix.as_deref().unwrap_or_default().contains("=20"),
            "{check:?}"
        );
        let small = judge(10, 50);
        assert_eq!(small.status, Status::Fail, "{small:?}");
        assert!(
            small.fix.as_deref().unwrap_or_default().contains("=0"),
            "{small:?}"
        );
        assert_eq!(judge(150, 50).status, Status::Pass);
        assert_eq!(judge(149, 50).status, Status::Fail);
    }

    #[test]
    fn no_reservation_warns_with_what_the_account_allows() {
        let check = judge(1_000, 0);
        assert_eq!(check.status, Status::Warn, "{check:?}");
        assert!(
            check.fix.as_deref().unwrap_or_default().contains("=50"),
            "{check:?}"
        );
        let small = judge(10, 0);
        assert_eq!(small.status, Status::Warn, "{small:?}");
        assert!(small.message.contains("up to 0"), "{small:?}");
        assert!(
            small
                .fix
                .as_deref()
                .unwrap_or_default()
                .contains("at least 150"),
            "{small:?}"
        );
    }
}
