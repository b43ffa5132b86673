//! A first `sam deploy` cannot fail on the webhook's reserved concurrency: the default of
//! `WebhookReservedConcurrency` is one that `ephemera doctor`'s `webhook.concurrency` (the
//! rule: Lambda keeps 100 executions unreserved, so reserving N needs a quota of N + 100,
//! <https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html>) does not
//! fail on a new account's quota of 10, and that default reserves nothing: the template
//! leaves `ReservedConcurrentExecutions` out then (Lambda's own 0 would block every
//! invocation).

use anyhow::{ensure, Context};
use ephemera_cli::cmd::doctor::flood::{judge, WEBHOOK_RESERVED_CONCURRENCY};
use ephemera_cli::cmd::doctor::report::Status;
use ephemera_tests::stack::{template_path, translate_template};
use serde_json::json;

/// Lambda's concurrent executions on some new accounts
/// (<https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html>: "New AWS
/// accounts have reduced concurrency and memory quotas").
const NEW_ACCOUNT_QUOTA: u32 = 10;

#[tokio::test]
async fn the_default_webhook_reservation_deploys_on_a_new_account() -> anyhow::Result<()> {
    let template = translate_template(&template_path()).await?;
    let default = &template["Parameters"][WEBHOOK_RESERVED_CONCURRENCY]["Default"];
    let default: u32 = match default {
        serde_json::Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        serde_json::Value::String(s) => s.parse().ok(),
        _ => None,
    }
    .with_context(|| format!("{WEBHOOK_RESERVED_CONCURRENCY}'s default: {default}"))?;
    let check = judge(NEW_ACCOUNT_QUOTA, default);
    ensure!(
        check.status != Status::Fail,
        "the default {WEBHOOK_RESERVED_CONCURRENCY} {default} fails a first deploy on an \
         account whose quota is {NEW_ACCOUNT_QUOTA}: {}",
        check.message
    );
    ensure!(
        default == 0,
        "only 0 fits a quota of {NEW_ACCOUNT_QUOTA}, not {default}"
    );
    // 0 is not passed on to Lambda.
    let condition = &template["Conditions"]["ReservesWebhookConcurrency"];
    ensure!(
        *condition
            == json!({"Fn::Not": [{"Fn::Equals": [{"Ref": WEBHOOK_RESERVED_CONCURRENCY}, 0]}]}),
        "ReservesWebhookConcurrency: {condition}"
    );
    let reserved =
        &template["Resources"]["WebhookFunction"]["Properties"]["ReservedConcurrentExecutions"];
    ensure!(
        *reserved
            == json!({"Fn::If": ["ReservesWebhookConcurrency", {"Ref": WEBHOOK_RESERVED_CONCURRENCY}, {"Ref": "AWS::NoValue"}]}),
        "the webhook's ReservedConcurrentExecutions: {reserved}"
    );
    Ok(())
}
