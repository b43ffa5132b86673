//! The further Apps of `github.more_apps`, each checked as the first one is where it
//! matters to the calls it makes: its key (in the secret the configuration names), GitHub
//! accepting its JWT, its permissions, and its installation (with its budgets) on every
//! account the first App must be on. Webhooks come from the first App alone, so its
//! webhook URL, events and deliveries are not asked of the others. Every check's subject
//! names the App (`App 43`, `App 43 on acme`), so a failure says which App is missing
//! where.

use super::github::{accounts_to_check, github_error, lacking_permissions};
use super::{Ports, Request, APP_KEY_PLACEHOLDER};
use crate::cmd::doctor::ports::GitHubPort;
use crate::cmd::doctor::report::{Check, Report};
use crate::errors::describe;
use ephemera_core::config::{Config, MoreApp};

/// `github.app_key`, `github.app`, `github.permissions`, `github.installation` and
/// `github.rate_limit` of each of `github.more_apps`.
pub(super) async fn more_apps_checks(
    request: &Request,
    config: Option<&Config>,
    ports: &Ports<'_>,
    report: &mut Report,
) {
    let Some(config) = config else {
        return;
    };
    for app in &config.github.more_apps {
        let who = format!("App {}", app.app_id);
        let Some(github) = key_check(request, config, app, &who, ports, report).await else {
            for check in ["github.app", "github.permissions", "github.installation"] {
                report.push(Check::skip(check, "github.app_key failed").on(who.clone()));
            }
            continue;
        };
        app_checks(request, config, app, &who, github.as_ref(), report).await;
    }
}

/// `github.app_key` of one further App: its secret holds a key the App's port takes.
async fn key_check(
    request: &Request,
    config: &Config,
    app: &MoreApp,
    who: &str,
    ports: &Ports<'_>,
    report: &mut Report,
) -> Option<Box<dyn GitHubPort>> {
    let secret = &app.key_secret;
    let put_key = format!(
        "put App {}'s private key (its settings → Private keys → Generate) into the secret \
         github.more_apps names: aws secretsmanager put-secret-value --secret-id {secret} \
         --secret-string file://app.pem",
        app.app_id
    );
    let fail = |message: String, fix: String| Check::fail("github.app_key", message, fix).on(who);
    let pem = match ports.stack.secret_value(secret).await {
        Ok(pem) => pem,
        Err(err) => {
            let fix = format!(
                "create the secret {secret} with the App's key, or give these credentials \
                 secretsmanager:GetSecretValue on it"
            );
            report.push(fail(describe(&err), fix));
            return None;
        }
    };
    if pem.trim() == APP_KEY_PLACEHOLDER {
        report.push(fail(
            format!("secret {secret} holds a placeholder, not a key"),
            put_key,
        ));
        return None;
    }
    let api_url = request
        .github_api_url
        .clone()
        .unwrap_or_else(|| config.github.api_url.clone());
    match ports.github.connect(&api_url, app.app_id, &pem) {
        Ok(github) => {
            let message = format!("secret {secret} holds an RSA private key");
            report.push(Check::pass("github.app_key", message).on(who));
            Some(github)
        }
        Err(why) => {
            report.push(fail(format!("secret {secret}: {why}"), put_key));
            None
        }
    }
}

/// `github.app`, `github.permissions`, and per account `github.installation` and
/// `github.rate_limit`, of one further App.
async fn app_checks(
    request: &Request,
    config: &Config,
    app: &MoreApp,
    who: &str,
    github: &dyn GitHubPort,
    report: &mut Report,
) {
    let described = match github.describe_app().await {
        Ok(described) => described,
        Err(err) => {
            let fix = format!(
                "the key in {} is not one of App {}'s keys, or the id in github.more_apps \
                 is not the App's: compare the App's settings (App ID, Private keys)",
                app.key_secret, app.app_id
            );
            let message = format!("GET /app: {}", github_error(&err));
            report.push(Check::fail("github.app", message, fix).on(who));
            for check in ["github.permissions", "github.installation"] {
                report.push(Check::skip(check, "github.app failed").on(who));
            }
            return;
        }
    };
    let message = format!(
        "GitHub accepts the JWT of App {} (id {})",
        described.name, described.id
    );
    report.push(Check::pass("github.app", message).on(who));
    let lacking = lacking_permissions(config, &described.permissions);
    report.push(if lacking.is_empty() {
        Check::pass("github.permissions", "the same as the first App's needs").on(who)
    } else {
        Check::fail(
            "github.permissions",
            format!("{who} lacks {}", lacking.join(", ")),
            format!(
                "grant them in {who}'s settings → Permissions & events, then accept the \
                 new permissions on every installation"
            ),
        )
        .on(who)
    });
    let install = described
        .slug
        .as_deref()
        .map(|slug| format!("https://github.com/apps/{slug}/installations/new"))
        .unwrap_or_else(|| format!("{who}'s public page → Install"));
    for account in accounts_to_check(config, &request.accounts) {
        let (owner, repo) = match account.split_once('/') {
            Some((owner, repo)) => (owner, Some(repo)),
            None => (account.as_str(), None),
        };
        let subject = format!("{who} on {account}");
        let found = github.installation(owner, repo).await;
        report.push(
            match &found {
                Ok(Some(id)) => Check::pass(
                    "github.installation",
                    format!("installed (installation {id})"),
                ),
                Ok(None) => Check::fail(
                    "github.installation",
                    format!("{who} is not installed on {account}"),
                    format!(
                        "install it on {account}, as the first App is (every App of a \
                         deployment serves the same accounts): {install}"
                    ),
                ),
                Err(err) => Check::fail(
                    "github.installation",
                    github_error(err),
                    "check that GitHub is reachable and try again",
                ),
            }
            .on(subject.clone()),
        );
        if let Ok(Some(id)) = found {
            let now = time::OffsetDateTime::now_utc();
            let check = super::rate_limit::rate_limit_check(github, id, &account, now).await;
            report.push(check.on(subject));
        }
    }
}
