//! The App key: the secret holds a real RSA private key, not the placeholder a new
//! stack puts there, and the GitHub port is built with it.

use super::{Ports, Request, APP_KEY_PLACEHOLDER};
use crate::cmd::doctor::ports::GitHubPort;
use crate::cmd::doctor::report::{Check, Report};
use crate::errors::describe;
use ephemera_aws::stack::APP_KEY_SECRET;
use ephemera_core::config::Config;
use std::collections::BTreeMap;

/// `github.app_key`: the secret holds a real RSA private key; the GitHub port built
/// with it.
pub(super) async fn app_key_check(
    request: &Request,
    outputs: &BTreeMap<String, String>,
    config: Option<&Config>,
    ports: &Ports<'_>,
    report: &mut Report,
) -> Option<Box<dyn GitHubPort>> {
    let Some(secret) = outputs.get(APP_KEY_SECRET) else {
        report.push(Check::skip("github.app_key", "stack.outputs failed"));
        return None;
    };
    let put_key = format!(
        "put the App's private key (App settings → Private keys → Generate) into the \
         secret: aws secretsmanager put-secret-value --secret-id {secret} --secret-string \
         file://app.pem"
    );
    let pem = match ports.stack.secret_value(secret).await {
        Ok(pem) => pem,
        Err(err) => {
            report.push(Check::fail(
                "github.app_key",
                describe(&err),
                format!("the credentials need secretsmanager:GetSecretValue on {secret}"),
            ));
            return None;
        }
    };
    if pem.trim() == APP_KEY_PLACEHOLDER {
        report.push(Check::fail(
            "github.app_key",
            format!("secret {secret} still holds the stack's placeholder, not a key"),
            put_key,
        ));
        return None;
    }
    let Some(config) = config else {
        report.push(Check::skip("github.app_key", "config.valid failed"));
        return None;
    };
    let api_url = request
        .github_api_url
        .clone()
        .unwrap_or_else(|| config.github.api_url.clone());
    match ports.github.connect(&api_url, config.github.app_id, &pem) {
        Ok(github) => {
            report.push(Check::pass(
                "github.app_key",
                format!("secret {secret} holds an RSA private key"),
            ));
            Some(github)
        }
        Err(why) => {
            report.push(Check::fail(
                "github.app_key",
                format!("secret {secret}: {why}"),
                put_key,
            ));
            None
        }
    }
}
