//! GitHub's view of the App: the JWT is accepted, the permissions and events ephemera
//! needs are granted, the webhook URL is the stack's, the App is installed where the
//! pools need it, and recent deliveries reached the webhook.

use super::Request;
use crate::cmd::doctor::ports::GitHubPort;
use crate::cmd::doctor::report::{Check, Report};
use ephemera_aws::stack::{APP_KEY_SECRET, WEBHOOK_URL};
use ephemera_core::config::{Config, Scope};
use ephemera_core::ports::ForgeError;
use std::collections::BTreeMap;

/// The App permissions ephemera's calls need: runners registered and removed on the
/// organization (`scope: org`) or the repositories (`scope: repo`), and jobs read by
/// the reaper; jobs re-run (`actions: write`) when a pool re-runs its interrupted jobs.
pub fn needed_permissions(config: &Config) -> Vec<(&'static str, &'static str)> {
    let runners = match config.github.scope {
        Scope::Org => ("organization_self_hosted_runners", "write"),
        Scope::Repo => ("administration", "write"),
    };
    let actions = if reruns_jobs(config) { "write" } else { "read" };
    vec![runners, ("actions", actions)]
}

/// Whether a pool re-runs the jobs its spot interruptions fail.
fn reruns_jobs(config: &Config) -> bool {
    config.pools.iter().any(|pool| pool.reruns_interrupted())
}

/// Whether `granted` (`read`/`write`) covers `needed`.
fn covers(granted: &str, needed: &str) -> bool {
    granted == needed || (granted == "write" && needed == "read")
}

/// The organizations and repositories the App must be installed on: those the pools
/// name for their warm runners, then those asked for.
pub fn accounts_to_check(config: &Config, asked: &[String]) -> Vec<String> {
    let mut accounts: Vec<String> = Vec::new();
    for pool in &config.pools {
        if let Some(owner) = &pool.warm_owner {
            let account = match (&config.github.scope, &pool.warm_repo) {
                (Scope::Repo, Some(repo)) => format!("{owner}/{repo}"),
                _ => owner.clone(),
            };
            accounts.push(account);
        }
    }
    accounts.extend(asked.iter().cloned());
    let mut seen = std::collections::BTreeSet::new();
    accounts.retain(|a| seen.insert(a.to_lowercase()));
    accounts
}

/// The permissions `scope` needs that `granted` lacks, as `name: level (has …)`.
pub(super) fn lacking_permissions(
    config: &Config,
    granted: &BTreeMap<String, String>,
) -> Vec<String> {
    needed_permissions(config)
        .into_iter()
        .filter(|(name, level)| !granted.get(*name).is_some_and(|has| covers(has, level)))
        .map(|(name, level)| {
            let has = granted.get(name).map_or("none", String::as_str);
            let why = if name == "actions" && level == "write" {
                ", to re-run the jobs spot interruptions fail (rerun_interrupted)"
            } else {
                ""
            };
            format!("{name}: {level} (has {has}{why})")
        })
        .collect()
}

pub(super) fn github_error(err: &ForgeError) -> String {
    match err {
        ForgeError::Transient(cause) => format!("{err}: {cause}"),
        other => other.to_string(),
    }
}

/// `github.app`, `github.permissions`, `github.events`, `github.webhook_url`,
/// `github.installation` and `github.rate_limit` (per account), `github.deliveries`.
pub(super) async fn github_checks(
    request: &Request,
    outputs: &BTreeMap<String, String>,
    config: Option<&Config>,
    github: Option<&dyn GitHubPort>,
    report: &mut Report,
) {
    const GITHUB_CHECKS: [&str; 6] = [
        "github.app",
        "github.permissions",
        "github.events",
        "github.webhook_url",
        "github.installation",
        "github.deliveries",
    ];
    let (Some(github), Some(config)) = (github, config) else {
        for check in GITHUB_CHECKS {
            report.push(Check::skip(check, "github.app_key failed"));
        }
        return;
    };
    let app_id = config.github.app_id;
    let secret = outputs.get(APP_KEY_SECRET).cloned().unwrap_or_default();
    let app = match github.describe_app().await {
        Ok(app) => {
            report.push(Check::pass(
                "github.app",
                format!("GitHub accepts the JWT of App {} (id {})", app.name, app.id),
            ));
            app
        }
        Err(err) => {
            let fix = match err {
                ForgeError::Unauthorized => format!(
                    "the key is not one of App {app_id}'s keys, or github.app_id is not the \
                     App's id: compare the App's settings (App ID, Private keys) with the \
                     configuration and the secret {secret}"
                ),
                _ => format!(
                    "check github.api_url ({}) and that GitHub is reachable from here",
                    request
                        .github_api_url
                        .as_deref()
                        .unwrap_or(&config.github.api_url)
                ),
            };
            report.push(Check::fail(
                "github.app",
                format!("GET /app: {}", github_error(&err)),
                fix,
            ));
            for check in &GITHUB_CHECKS[1..] {
                report.push(Check::skip(check, "github.app failed"));
            }
            return;
        }
    };
    let settings = app
        .slug
        .as_deref()
        .map(|slug| format!("https://github.com/settings/apps/{slug}"))
        .unwrap_or_else(|| "the App's settings".to_owned());
    let lacking = lacking_permissions(config, &app.permissions);
    report.push(if lacking.is_empty() {
        let needed: Vec<String> = needed_permissions(config)
            .into_iter()
            .map(|(name, level)| format!("{name}: {level}"))
            .collect();
        Check::pass("github.permissions", needed.join(", "))
    } else {
        Check::fail(
            "github.permissions",
            format!("the App lacks {}", lacking.join(", ")),
            format!(
                "grant them in {settings} → Permissions & events, then accept the new \
                 permissions on every installation"
            ),
        )
    });
    report.push(if app.events.iter().any(|e| e == "workflow_job") {
        Check::pass("github.events", "subscribed to workflow_job")
    } else {
        Check::fail(
            "github.events",
            format!(
                "the App is not subscribed to workflow_job (it gets: {})",
                if app.events.is_empty() {
                    "nothing".to_owned()
                } else {
                    app.events.join(", ")
                }
            ),
            format!("tick \"Workflow job\" under Subscribe to events in {settings} → Permissions & events"),
        )
    });
    webhook_check(request, outputs, github, &settings, report).await;
    installation_checks(config, request, github, &app.slug, report).await;
    deliveries_check(github, report).await;
}

async fn webhook_check(
    request: &Request,
    outputs: &BTreeMap<String, String>,
    github: &dyn GitHubPort,
    settings: &str,
    report: &mut Report,
) {
    let Some(expected) = request
        .webhook_url
        .clone()
        .or_else(|| outputs.get(WEBHOOK_URL).cloned())
    else {
        report.push(match &request.emulator {
            // moto cannot create a Function URL (tests/src/stack.rs strips it).
            Some(endpoint) => Check::warn(
                "github.webhook_url",
                format!(
                    "the emulator at {endpoint} makes no Function URL, so the stack has no \
                     WebhookUrl output: the App's webhook URL not compared"
                ),
                "give the local webhook URL: --webhook-url URL or EPHEMERA_WEBHOOK_URL \
                 (make up prints it)",
            ),
            None => Check::fail(
                "github.webhook_url",
                "the stack has no WebhookUrl output to compare the App's webhook URL with",
                "deploy the stack from this version's template.yaml (make deploy), or give \
                 --webhook-url URL",
            ),
        });
        return;
    };
    let same = |a: &str, b: &str| a.trim_end_matches('/') == b.trim_end_matches('/');
    report.push(match github.webhook_url().await {
        Ok(Some(url)) if same(&url, &expected) => Check::pass("github.webhook_url", url),
        Ok(actual) => Check::fail(
            "github.webhook_url",
            match actual {
                Some(url) => format!("the App's webhook URL is {url}, the stack's is {expected}"),
                None => format!("the App has no webhook URL; the stack's is {expected}"),
            },
            format!("set Webhook URL to {expected} in {settings} → General → Webhook"),
        ),
        Err(err) => Check::fail(
            "github.webhook_url",
            format!("GET /app/hook/config: {}", github_error(&err)),
            "check that GitHub is reachable and try again",
        ),
    });
}

async fn installation_checks(
    config: &Config,
    request: &Request,
    github: &dyn GitHubPort,
    slug: &Option<String>,
    report: &mut Report,
) {
    let accounts = accounts_to_check(config, &request.accounts);
    if accounts.is_empty() {
        report.push(Check::warn(
            "github.installation",
            "no pool names an organization or repository (warm_owner) to check",
            "give --owner ORG (or --owner OWNER/REPO) for where jobs run",
        ));
        return;
    }
    let install = slug
        .as_deref()
        .map(|slug| format!("https://github.com/apps/{slug}/installations/new"))
        .unwrap_or_else(|| "the App's public page → Install".to_owned());
    for account in accounts {
        let (owner, repo) = match account.split_once('/') {
            Some((owner, repo)) => (owner, Some(repo)),
            None => (account.as_str(), None),
        };
        let found = github.installation(owner, repo).await;
        report.push(
            match &found {
                Ok(Some(id)) => Check::pass(
                    "github.installation",
                    format!("installed (installation {id})"),
                ),
                Ok(None) => Check::fail(
                    "github.installation",
                    format!("the App is not installed on {account}"),
                    format!("install it on {account}: {install}"),
                ),
                Err(err) => Check::fail(
                    "github.installation",
                    github_error(err),
                    "check that GitHub is reachable and try again",
                ),
            }
            .on(account.clone()),
        );
        if let Ok(Some(id)) = found {
            let now = time::OffsetDateTime::now_utc();
            report.push(super::rate_limit::rate_limit_check(github, id, &account, now).await);
        }
    }
}

/// Why a delivery failed, from its status code (0: GitHub got no answer).
fn failure_reason(status_code: u16) -> String {
    match status_code {
        0 => "no answer (connection failed or timed out)".to_owned(),
        401 => "401 (signature refused: webhook secret mismatch)".to_owned(),
        code => format!("HTTP {code}"),
    }
}

async fn deliveries_check(github: &dyn GitHubPort, report: &mut Report) {
    let deliveries = match github.recent_deliveries().await {
        Ok(deliveries) => deliveries,
        Err(err) => {
            report.push(Check::fail(
                "github.deliveries",
                format!("GET /app/hook/deliveries: {}", github_error(&err)),
                "check that GitHub is reachable and try again",
            ));
            return;
        }
    };
    let failed: Vec<_> = deliveries.iter().filter(|d| !d.delivered()).collect();
    if failed.is_empty() {
        report.push(Check::pass(
            "github.deliveries",
            format!("{} recent deliveries, none failed", deliveries.len()),
        ));
        return;
    }
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for delivery in &failed {
        *reasons
            .entry(failure_reason(delivery.status_code))
            .or_default() += 1;
    }
    let reasons: Vec<String> = reasons
        .into_iter()
        .map(|(reason, n)| format!("{n}× {reason}"))
        .collect();
    report.push(Check::warn(
        "github.deliveries",
        format!(
            "{} of {} recent deliveries failed: {}",
            failed.len(),
            deliveries.len(),
            reasons.join(", ")
        ),
        "see the webhook function's log for those times; ephemera redelivers failed \
         deliveries of the last hours on its own (the reaper's sweep)",
    ));
}
