//! What the chosen parts of `ephemera local` need from the environment and the command
//! line (the webhook secret, the App key, credentials for an emulator), checked all at
//! once before anything starts, then read.

use super::{LocalArgs, Part};
use anyhow::{bail, Context};
use ephemera_aws::secrets::{looks_like_pem_key, read_secret, AppKeySecret};
use ephemera_core::apps::AppSource;
use ephemera_core::config::Config;
use ephemera_core::metrics::Metrics;
use ephemera_core::ports::TokenShelf;
use ephemera_core::webhook::WebhookSecrets;
use ephemera_github::{deployment_apps, GitHubApp};
use secrecy::SecretString;
use std::sync::Arc;

pub(super) fn aws_sdk_sqs_client(sdk: &aws_config::SdkConfig) -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(sdk)
}

/// Every input the chosen parts need and do not have, reported at once before anything
/// starts (a listener, a bootstrap): the webhook secret, the App key, and credentials
/// for an emulator (which takes any, while the SDK would otherwise ask the instance
/// metadata service and fail with a message about its session token).
pub(super) fn missing_inputs(args: &LocalArgs, parts: &[Part]) -> anyhow::Result<()> {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.is_empty());
    let mut missing = Vec::new();
    if parts.contains(&Part::Webhook) && !set("EPHEMERA_WEBHOOK_SECRET") {
        missing.push("EPHEMERA_WEBHOOK_SECRET must hold the webhook secret (the webhook part)");
    }
    let github = parts.contains(&Part::Scaler) || parts.contains(&Part::Reaper);
    if github && args.github_app_key.is_none() {
        missing.push(
            "--github-app-key FILE (or EPHEMERA_GITHUB_APP_KEY_FILE): the App's private key \
             (the scaler and reaper parts)",
        );
    }
    let credentials = set("AWS_ACCESS_KEY_ID") || set("AWS_PROFILE");
    if args.endpoint_url.is_some() && !credentials {
        missing.push(
            "AWS credentials: an emulator takes any, e.g. AWS_ACCESS_KEY_ID=testing \
             AWS_SECRET_ACCESS_KEY=testing",
        );
    }
    if missing.is_empty() {
        return Ok(());
    }
    bail!("ephemera local cannot start:\n  {}", missing.join("\n  "))
}

pub(super) fn webhook_secrets_from_env() -> anyhow::Result<WebhookSecrets> {
    let current = std::env::var("EPHEMERA_WEBHOOK_SECRET")
        .context("EPHEMERA_WEBHOOK_SECRET must hold the webhook secret")?;
    if current.is_empty() {
        bail!("EPHEMERA_WEBHOOK_SECRET is empty");
    }
    let previous = std::env::var("EPHEMERA_WEBHOOK_SECRET_PREVIOUS")
        .ok()
        .filter(|s| !s.is_empty());
    Ok(WebhookSecrets {
        current: SecretString::from(current),
        previous: previous.map(SecretString::from),
    })
}

/// Every App of the configuration: the first with its key from `--github-app-key`, each
/// of `github.more_apps` with its key from its secret (read through `sdk`, as the
/// functions read it, and read again when GitHub refuses it); all at the configuration's
/// API URL unless `--github-api-url` says otherwise.
pub(super) async fn github_apps(
    config: &Config,
    args: &LocalArgs,
    sdk: &aws_config::SdkConfig,
    shelf: Arc<dyn TokenShelf>,
    metrics: &Metrics,
) -> anyhow::Result<Vec<Arc<GitHubApp>>> {
    let key_file = args.github_app_key.as_ref().context(
        "--github-app-key (or EPHEMERA_GITHUB_APP_KEY_FILE) must name the App's private key",
    )?;
    let pem = std::fs::read_to_string(key_file)
        .with_context(|| format!("cannot read the GitHub App key {}", key_file.display()))?;
    let mut sources = vec![AppSource {
        app_id: config.github.app_id,
        key: SecretString::from(pem),
        kept_in: key_file.display().to_string(),
        key_source: None,
    }];
    let secrets = aws_sdk_secretsmanager::Client::new(sdk);
    for app in &config.github.more_apps {
        let key = read_secret(&secrets, &app.key_secret)
            .await
            .with_context(|| format!("the key of App {} (github.more_apps)", app.app_id))?;
        if !looks_like_pem_key(&key) {
            bail!(
                "secret {} (the key of App {} in github.more_apps) does not hold a PEM private key",
                app.key_secret,
                app.app_id
            );
        }
        sources.push(AppSource {
            app_id: app.app_id,
            key,
            kept_in: format!("in secret {}", app.key_secret),
            key_source: Some(Arc::new(AppKeySecret {
                client: secrets.clone(),
                secret_id: app.key_secret.clone(),
            })),
        });
    }
    let api_url = args
        .github_api_url
        .clone()
        .unwrap_or(config.github.api_url.clone());
    deployment_apps(&api_url, sources, Some(shelf), metrics).map_err(|(kept_in, err)| {
        anyhow::Error::new(err).context(format!("GitHub App key {kept_in}"))
    })
}
