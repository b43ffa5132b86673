//! Configuration and secrets that follow their source. A function builds its handler
//! from the configuration parameter and its secrets at cold start, and builds it again
//! when any of them changed: at most every `EPHEMERA_RELOAD_SECONDS` (default
//! [`DEFAULT_RELOAD`]) it reads the parameter and the secrets (one GetParameter — two
//! while nothing was pushed and the stack's default is read — and one GetSecretValue
//! per secret, only when that time has passed) and compares their
//! versions; and a caller that saw a sign of rotation (a webhook signature that fails
//! with the cached secrets) may ask for a check at once, at most every
//! [`FORCED_CHECK_GAP`]. A check that fails keeps the handler it has. Every build logs
//! the configuration version it runs and records it in the runners table
//! ([`crate::running`], when the function has `EPHEMERA_TABLE`), for `ephemera doctor`.
//!
//! The environment is [`crate::lambda`]'s and the reading of the parameter
//! [`crate::config_source`]'s; this module uses both, and neither uses it.

use crate::lambda::{
    app_key_fix, LambdaEnv, CONFIG_PARAMETER, GITHUB_KEY_SECRET_ID, TABLE,
    WEBHOOK_PREVIOUS_SECRET_ID, WEBHOOK_SECRET_ID,
};
use anyhow::Context;
use ephemera_core::apps::AppSource;
use ephemera_core::config::Config;
use ephemera_core::webhook::WebhookSecrets;
use secrecy::SecretString;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;
use tokio::time::Instant;
use tracing::{info, warn};

/// How often the sources are checked when `EPHEMERA_RELOAD_SECONDS` is not set.
pub(crate) const DEFAULT_RELOAD: Duration = Duration::from_secs(30);
/// The environment variable setting the check interval, in seconds.
pub const RELOAD_SECONDS: &str = "EPHEMERA_RELOAD_SECONDS";
/// The shortest gap between two checks asked for at once (forged signatures must not
/// turn into a Secrets Manager call each).
pub(crate) const FORCED_CHECK_GAP: Duration = Duration::from_secs(5);

/// What a handler is built from, read together.
pub struct Sources {
    pub config: Arc<Config>,
    /// The parameter's version, as SSM numbers them.
    pub config_version: i64,
    /// The parameter it was read from: the pushed one, or the stack's default.
    pub config_parameter: String,
    /// Each secret read, by the environment variable naming it.
    pub secrets: HashMap<String, crate::secrets::VersionedSecret>,
}

impl Sources {
    /// The secret named by `var` (one of those given to [`Reloading::start`]).
    pub fn secret(&self, var: &str) -> anyhow::Result<&crate::secrets::VersionedSecret> {
        self.secrets
            .get(var)
            .with_context(|| format!("secret {var} was not read"))
    }

    /// The GitHub App's private key among these sources, checked to be a PEM private
    /// key: the stack creates the secret with a placeholder, and an error here names
    /// the secret and the fix.
    pub fn app_key(&self, env: &LambdaEnv) -> anyhow::Result<SecretString> {
        let id = env.var(GITHUB_KEY_SECRET_ID)?;
        let key = &self.secret(GITHUB_KEY_SECRET_ID)?.value;
        if !crate::secrets::looks_like_pem_key(key) {
            anyhow::bail!(
                "secret {id} does not hold a PEM private key (a new stack holds a \
                 placeholder); {}",
                app_key_fix(&id)
            );
        }
        Ok(key.clone())
    }

    /// Every App among these sources, its key checked to be a PEM private key and
    /// followed from its secret: `github.app_id`'s from the stack's secret, then each of
    /// `github.more_apps`'s from its `key_secret` (read only by functions that read the
    /// stack's App key).
    pub fn app_sources(&self, env: &LambdaEnv) -> anyhow::Result<Vec<AppSource>> {
        let secret_id = env.var(GITHUB_KEY_SECRET_ID)?;
        let mut apps = vec![AppSource {
            app_id: self.config.github.app_id,
            key: self.app_key(env)?,
            key_source: Some(env.app_key_source_in(&secret_id)),
            kept_in: secret_id,
        }];
        for app in &self.config.github.more_apps {
            let key = &self.secret(&more_app_var(app.app_id))?.value;
            if !crate::secrets::looks_like_pem_key(key) {
                anyhow::bail!(
                    "secret {} (the key of App {} in github.more_apps) does not hold a PEM \
                     private key; {}",
                    app.key_secret,
                    app.app_id,
                    app_key_fix(&app.key_secret)
                );
            }
            apps.push(AppSource {
                app_id: app.app_id,
                key: key.clone(),
                key_source: Some(env.app_key_source_in(&app.key_secret)),
                kept_in: app.key_secret.clone(),
            });
        }
        Ok(apps)
    }

    /// The webhook secrets among these sources: the current one and, during a rotation,
    /// the previous one (the secret named by `EPHEMERA_WEBHOOK_PREVIOUS_SECRET_ID` when set,
    /// else the secret's own previous value within its rotation window).
    pub fn webhook_secrets(&self) -> anyhow::Result<WebhookSecrets> {
        let current = self.secret(WEBHOOK_SECRET_ID)?;
        let previous = match self.secrets.get(WEBHOOK_PREVIOUS_SECRET_ID) {
            Some(explicit) => Some(explicit.value.clone()),
            None => current.previous.clone(),
        };
        Ok(WebhookSecrets {
            current: current.value.clone(),
            previous,
        })
    }

    /// What changes when any source changes.
    fn fingerprint(&self) -> String {
        let mut versions: Vec<String> = self
            .secrets
            .iter()
            .map(|(var, s)| format!("{var}={}", s.version))
            .collect();
        versions.sort();
        format!(
            "config={}@{} {}",
            self.config_parameter,
            self.config_version,
            versions.join(" ")
        )
    }
}

/// Where [`Sources::secrets`] keeps the key of App `app_id` of `github.more_apps`.
fn more_app_var(app_id: u64) -> String {
    format!("github.more_apps[{app_id}]")
}

type Build<H> = dyn Fn(&LambdaEnv, &Sources) -> anyhow::Result<H> + Send + Sync;

struct Current<H> {
    handler: Arc<H>,
    fingerprint: String,
    checked: Instant,
}

/// A handler kept in step with its sources.
pub struct Reloading<H> {
    env: LambdaEnv,
    /// The function's name in its running-configuration item (`webhook`, …).
    function: &'static str,
    secret_vars: Vec<String>,
    build: Box<Build<H>>,
    every: Duration,
    current: Mutex<Current<H>>,
}

impl<H> Reloading<H> {
    /// Reads the sources and builds the first handler (the cold start).
    pub async fn start(
        env: LambdaEnv,
        function: &'static str,
        secret_vars: &[&str],
        build: impl Fn(&LambdaEnv, &Sources) -> anyhow::Result<H> + Send + Sync + 'static,
    ) -> anyhow::Result<Reloading<H>> {
        let every = reload_interval()?;
        let secret_vars: Vec<String> = secret_vars.iter().map(|v| (*v).to_owned()).collect();
        let sources = read_sources(&env, &secret_vars).await?;
        let handler = Arc::new(build(&env, &sources)?);
        info!(
            config_version = sources.config_version,
            config_parameter = %sources.config_parameter,
            reload_every_s = every.as_secs(),
            "running configuration version {} of {}",
            sources.config_version,
            sources.config_parameter
        );
        record_running(&env, function, &sources);
        Ok(Reloading {
            env,
            function,
            secret_vars,
            build: Box::new(build),
            every,
            current: Mutex::new(Current {
                handler,
                fingerprint: sources.fingerprint(),
                checked: Instant::now(),
            }),
        })
    }

    /// The handler in use, without any check: for what must not cost a call (the
    /// webhook's refusal of a request from its headers).
    pub async fn current(&self) -> Arc<H> {
        self.current.lock().await.handler.clone()
    }

    /// The handler to use now, built again first if a due check found a change.
    pub async fn handler(&self) -> Arc<H> {
        let mut current = self.current.lock().await;
        if current.checked.elapsed() >= self.every {
            self.check(&mut current).await;
        }
        current.handler.clone()
    }

    /// Checks the sources now (unless the last check is under [`FORCED_CHECK_GAP`] old);
    /// whether the handler changed.
    pub async fn check_now(&self) -> bool {
        let mut current = self.current.lock().await;
        if current.checked.elapsed() < FORCED_CHECK_GAP {
            return false;
        }
        self.check(&mut current).await
    }

    async fn check(&self, current: &mut Current<H>) -> bool {
        current.checked = Instant::now();
        let sources = match read_sources(&self.env, &self.secret_vars).await {
            Ok(sources) => sources,
            Err(err) => {
                warn!(error = %format!("{err:#}"), "cannot read the configuration or secrets; keeping the ones in use");
                return false;
            }
        };
        let fingerprint = sources.fingerprint();
        if fingerprint == current.fingerprint {
            return false;
        }
        match (self.build)(&self.env, &sources) {
            Ok(handler) => {
                info!(
                    config_version = sources.config_version,
                    config_parameter = %sources.config_parameter,
                    "configuration or secrets changed; running configuration version {} of {}",
                    sources.config_version,
                    sources.config_parameter
                );
                current.handler = Arc::new(handler);
                current.fingerprint = fingerprint;
                record_running(&self.env, self.function, &sources);
                true
            }
            Err(err) => {
                warn!(config_version = sources.config_version, error = %format!("{err:#}"), "the changed configuration or secrets cannot be used; keeping the ones in use");
                false
            }
        }
    }
}

/// Records the configuration `function` now runs, in the background: the item is for
/// the operator's checks only, so neither a cold start nor the invocation that reloaded
/// waits for the write, and a failure is only logged.
fn record_running(env: &LambdaEnv, function: &str, sources: &Sources) {
    let Ok(table) = env.var(TABLE) else {
        return;
    };
    let running = crate::running::RunningConfig {
        function: function.to_owned(),
        parameter: sources.config_parameter.clone(),
        version: sources.config_version,
        at: time::OffsetDateTime::now_utc(),
    };
    let client = aws_sdk_dynamodb::Client::new(&env.sdk);
    tokio::spawn(async move {
        if let Err(err) = crate::running::record(&client, &table, &running).await {
            warn!(error = %format!("{err:#}"), "cannot record the configuration version this function runs");
        }
    });
}

fn reload_interval() -> anyhow::Result<Duration> {
    match std::env::var(RELOAD_SECONDS) {
        Ok(text) if !text.trim().is_empty() => {
            let seconds: u64 = text.trim().parse().with_context(|| {
                format!("{RELOAD_SECONDS} must be a whole number of seconds, not {text:?}")
            })?;
            Ok(Duration::from_secs(seconds))
        }
        _ => Ok(DEFAULT_RELOAD),
    }
}

async fn read_sources(env: &LambdaEnv, secret_vars: &[String]) -> anyhow::Result<Sources> {
    let parameter = env.var(CONFIG_PARAMETER)?;
    let ssm = aws_sdk_ssm::Client::new(&env.sdk);
    let default = env.default_config_parameter();
    let loaded =
        crate::config_source::load_config_or_default(&ssm, &parameter, default.as_deref()).await?;
    let client = aws_sdk_secretsmanager::Client::new(&env.sdk);
    let mut secrets = HashMap::new();
    for var in secret_vars {
        let id = env.var(var)?;
        let with_previous = var == WEBHOOK_SECRET_ID;
        let secret = crate::secrets::read_versioned(&client, &id, with_previous).await?;
        secrets.insert(var.clone(), secret);
    }
    // The other Apps' keys, for the functions that call GitHub (those reading the
    // stack's App key); the configuration names their secrets.
    if secret_vars.iter().any(|var| var == GITHUB_KEY_SECRET_ID) {
        for app in &loaded.config.github.more_apps {
            let secret = crate::secrets::read_versioned(&client, &app.key_secret, false)
                .await
                .with_context(|| {
                    format!("reading the key of App {} (github.more_apps)", app.app_id)
                })?;
            secrets.insert(more_app_var(app.app_id), secret);
        }
    }
    Ok(Sources {
        config: Arc::new(loaded.config),
        config_version: loaded.version,
        config_parameter: loaded.parameter,
        secrets,
    })
}
