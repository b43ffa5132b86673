//! What the three Lambda functions share at cold start: JSON logs, the environment that
//! template.yaml sets (checked all at once), and the adapters it names. The
//! configuration and the secrets, read at cold start and followed afterwards, are in
//! [`crate::reload`].
//!
//! Environment: `EPHEMERA_CONFIG_PARAMETER` (SSM parameter holding the YAML, written by
//! `ephemera config push`; optionally `EPHEMERA_DEFAULT_CONFIG_PARAMETER`, the stack's
//! own configuration, read while nothing was pushed),
//! `EPHEMERA_TABLE`, `EPHEMERA_QUEUE_URL`, `EPHEMERA_WEBHOOK_SECRET_ID` (and optionally
//! `EPHEMERA_WEBHOOK_PREVIOUS_SECRET_ID`), `EPHEMERA_GITHUB_KEY_SECRET_ID`,
//! `EPHEMERA_JIT_TABLE` (where JIT configs wait for their instances),
//! `EPHEMERA_INSTANCE_ARN_PREFIX` (`arn:<partition>:ec2:<region>:<account>:instance/`),
//! optionally `EPHEMERA_RELOAD_SECONDS` (see [`crate::reload`]) and
//! `EPHEMERA_LAUNCH_TEMPLATE_VERSION` and `EPHEMERA_SSM_LAUNCH_TEMPLATE_VERSION` (the
//! versions of the runner launch template and of its Session Manager twin the stack
//! last wrote; `$Latest` unless set), and for the scaler optionally
//! `EPHEMERA_REGISTRATIONS_PER_MINUTE` and `EPHEMERA_SCALER_CONCURRENCY` (its share of
//! each App's registration rate, see [`AppPaces::from_environment`]).

use crate::{sdk_config, AwsSettings, DynamoJitConfigs, DynamoRunnerStore, Ec2Fleet, SqsJobQueue};
use aws_config::SdkConfig;
use ephemera_core::config::Config;
use ephemera_core::handlers::reaper::Pricing;
use ephemera_core::pace::AppPaces;
use std::collections::HashMap;
use std::sync::Arc;

/// JSON logs on stdout, as CloudWatch reads them; `RUST_LOG` filters.
pub fn init_tracing() {
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,aws_config=warn,aws_smithy_runtime=warn".into()),
        )
        .with_current_span(false)
        .without_time()
        // CloudWatch stores the lines as they are: never colour codes.
        .with_ansi(false)
        .init();
}

/// The SSM parameter holding the configuration YAML.
pub(crate) const CONFIG_PARAMETER: &str = "EPHEMERA_CONFIG_PARAMETER";
/// Optional: the SSM parameter holding the stack's default configuration, read while
/// the parameter named by [`CONFIG_PARAMETER`] does not exist. The stack owns (and a
/// redeploy rewrites) this one; it never creates the other, which `ephemera config
/// push` writes, so a redeploy cannot put back an old configuration.
pub(crate) const DEFAULT_CONFIG_PARAMETER: &str = "EPHEMERA_DEFAULT_CONFIG_PARAMETER";
/// The DynamoDB table.
pub(crate) const TABLE: &str = "EPHEMERA_TABLE";
/// The jobs queue URL.
pub const QUEUE_URL: &str = "EPHEMERA_QUEUE_URL";
/// The Secrets Manager secret holding the webhook secret.
pub(crate) const WEBHOOK_SECRET_ID: &str = "EPHEMERA_WEBHOOK_SECRET_ID";
/// Optional: a second webhook secret accepted during a rotation.
pub(crate) const WEBHOOK_PREVIOUS_SECRET_ID: &str = "EPHEMERA_WEBHOOK_PREVIOUS_SECRET_ID";
/// The Secrets Manager secret holding the GitHub App's private key (PEM).
pub const GITHUB_KEY_SECRET_ID: &str = "EPHEMERA_GITHUB_KEY_SECRET_ID";
/// `arn:<partition>:ec2:<region>:<account>:instance/`.
pub(crate) const INSTANCE_ARN_PREFIX: &str = "EPHEMERA_INSTANCE_ARN_PREFIX";
/// The DynamoDB table where JIT configs wait for their instances.
pub(crate) const JIT_TABLE: &str = "EPHEMERA_JIT_TABLE";

/// Optional: an App's registrations a minute, GitHub's limit when unset.
pub(crate) const REGISTRATIONS_PER_MINUTE: &str = "EPHEMERA_REGISTRATIONS_PER_MINUTE";
/// Optional: the scaler invocations that may run at once (template.yaml sets it from
/// `ScalerMaxConcurrency`), sharing each App's registration rate; 1 when unset.
pub(crate) const SCALER_CONCURRENCY: &str = "EPHEMERA_SCALER_CONCURRENCY";
/// Optional: the version of the deployment's launch template to launch, the
/// `LatestVersionNumber` template.yaml passes (a stack update writes a new version and
/// leaves the default one where it was); unless set, `$Latest`.
pub const LAUNCH_TEMPLATE_VERSION: &str = "EPHEMERA_LAUNCH_TEMPLATE_VERSION";
/// Optional: the same for the deployment's Session Manager launch template, which pools
/// with `ssm_access` launch.
pub const SSM_LAUNCH_TEMPLATE_VERSION: &str = "EPHEMERA_SSM_LAUNCH_TEMPLATE_VERSION";

/// Optional (the reaper): the bucket where the newest runner is kept for the hosts.
pub const RUNNER_BUCKET: &str = "EPHEMERA_RUNNER_BUCKET";
/// Optional (the reaper): the image pipelines started when the bucket takes a new
/// release, a comma-separated list of ARNs.
pub const IMAGE_PIPELINE_ARNS: &str = "EPHEMERA_IMAGE_PIPELINE_ARNS";

/// What the webhook function needs.
pub const WEBHOOK_VARS: &[&str] = &[CONFIG_PARAMETER, QUEUE_URL, WEBHOOK_SECRET_ID];
/// What the scaler and the reaper need.
pub const SCALER_VARS: &[&str] = &[
    CONFIG_PARAMETER,
    TABLE,
    QUEUE_URL,
    GITHUB_KEY_SECRET_ID,
    INSTANCE_ARN_PREFIX,
    JIT_TABLE,
];
/// What the reaper needs (the same as the scaler).
pub const REAPER_VARS: &[&str] = SCALER_VARS;

/// An optional environment variable's value, trimmed, when it is set and not blank.
fn optional_var(name: &str) -> Option<String> {
    let value = std::env::var(name).ok()?;
    Some(value.trim().to_owned()).filter(|v| !v.is_empty())
}

/// A required environment variable, with an error naming it.
pub(crate) fn required_var(name: &str) -> anyhow::Result<String> {
    required_vars(&[name]).map(|mut values| values.remove(name).unwrap_or_default())
}

/// Every one of `names`, or one error naming all that are missing or empty.
pub(crate) fn required_vars(names: &[&str]) -> anyhow::Result<HashMap<String, String>> {
    let mut values = HashMap::new();
    let mut missing = Vec::new();
    for name in names {
        match std::env::var(name) {
            Ok(value) if !value.trim().is_empty() => {
                values.insert((*name).to_owned(), value);
            }
            _ => missing.push(*name),
        }
    }
    if missing.is_empty() {
        return Ok(values);
    }
    let plural = if missing.len() == 1 { "" } else { "s" };
    anyhow::bail!(
        "environment variable{plural} {} must be set (template.yaml sets them on each \
         function; set them yourself when running it elsewhere)",
        missing.join(", ")
    )
}

/// For the App key in secret `id` that looked like PEM but did not parse.
pub fn unusable_app_key_in(
    id: &str,
    error: impl std::error::Error + Send + Sync + 'static,
) -> anyhow::Error {
    anyhow::Error::new(error).context(format!(
        "the GitHub App key in secret {id} is not a usable RSA private key; {}",
        app_key_fix(id)
    ))
}

/// The fix for an App key secret that holds no usable key.
pub(crate) fn app_key_fix(secret_id: &str) -> String {
    format!(
        "put the GitHub App's private key into secret {secret_id}: aws secretsmanager \
         put-secret-value --secret-id {secret_id} --secret-string file://app.pem"
    )
}

/// Runs a function's cold start; a failure is logged with its whole cause chain before
/// the process exits with it (Lambda keeps the output in the function's log and reports
/// the start as failed).
pub async fn cold_start<T>(
    start: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    let started = start.await;
    if let Err(error) = &started {
        tracing::error!(error = %format!("{error:#}"), "cold start failed");
    }
    started
}

/// A function's view of its deployment: its environment and the SDK configuration.
/// What follows the configuration parameter and the secrets is in [`crate::reload`].
pub struct LambdaEnv {
    pub sdk: SdkConfig,
    vars: HashMap<String, String>,
    /// Each App's registration pace, as long as the environment lives: a configuration
    /// reload keeps them (a refill would let a reloaded scaler burst past GitHub's
    /// minute).
    paces: Arc<AppPaces>,
}

impl LambdaEnv {
    /// Checks that every variable in `required` is set (all missing ones reported at
    /// once, before any network call), then loads the SDK configuration.
    pub async fn load(required: &[&str]) -> anyhow::Result<LambdaEnv> {
        let vars = required_vars(required)?;
        let paces = AppPaces::from_environment(
            optional_var(REGISTRATIONS_PER_MINUTE).as_deref(),
            optional_var(SCALER_CONCURRENCY).as_deref(),
        )
        .map_err(anyhow::Error::msg)?;
        let sdk = sdk_config(&AwsSettings::default()).await;
        Ok(LambdaEnv {
            sdk,
            vars,
            paces: Arc::new(paces),
        })
    }

    /// This invocation's share of each App's registration rate
    /// (`EPHEMERA_REGISTRATIONS_PER_MINUTE` over `EPHEMERA_SCALER_CONCURRENCY`).
    pub fn app_paces(&self) -> Arc<AppPaces> {
        self.paces.clone()
    }

    /// The deployment's adapters under `config`, from which
    /// [`crate::assembly`] builds the scaler and the reaper.
    pub fn deployment(&self, config: &Arc<Config>) -> anyhow::Result<crate::assembly::Deployment> {
        let fleet = Arc::new(self.fleet(config));
        let (book, list) = self.pricing()?;
        Ok(crate::assembly::Deployment {
            config: config.clone(),
            metrics: metrics(config),
            store: Arc::new(self.store()?),
            fleet: fleet.clone(),
            launcher: fleet,
            jit_store: Arc::new(self.jit_store()?),
            queue: Arc::new(self.queue()?),
            spot_breakers: Arc::new(self.spot_breakers()?),
            reruns: Arc::new(self.reruns()?),
            pricing: Pricing {
                book: Arc::new(book),
                list: Arc::new(list),
            },
            runner_copy: self.runner_copy(),
        })
    }

    /// The runner bucket (`EPHEMERA_RUNNER_BUCKET`) and the image pipelines
    /// (`EPHEMERA_IMAGE_PIPELINE_ARNS`, a comma list, possibly empty); none without a bucket.
    pub fn runner_copy(&self) -> Option<crate::assembly::RunnerCopy> {
        let bucket = optional_var(RUNNER_BUCKET)?;
        let arns = optional_var(IMAGE_PIPELINE_ARNS).unwrap_or_default();
        Some(crate::assembly::RunnerCopy {
            bucket: Arc::new(crate::runner_bucket::S3RunnerBucket::new(&self.sdk, bucket)),
            pipelines: Arc::new(crate::image_pipelines::ImageBuilderPipelines::new(
                &self.sdk, &arns,
            )),
        })
    }

    /// A variable checked by [`LambdaEnv::load`]; `var` must be among those it required.
    pub fn var(&self, var: &str) -> anyhow::Result<String> {
        match self.vars.get(var) {
            Some(value) => Ok(value.clone()),
            None => required_var(var),
        }
    }

    /// The stack's default configuration parameter, when the environment names one.
    pub fn default_config_parameter(&self) -> Option<String> {
        std::env::var(DEFAULT_CONFIG_PARAMETER)
            .ok()
            .filter(|name| !name.trim().is_empty())
    }

    pub fn store(&self) -> anyhow::Result<DynamoRunnerStore> {
        Ok(DynamoRunnerStore::new(
            aws_sdk_dynamodb::Client::new(&self.sdk),
            self.var(TABLE)?,
        ))
    }

    /// Each pool's spot circuit breaker, in the table.
    pub fn spot_breakers(&self) -> anyhow::Result<crate::breaker::DynamoSpotBreakers> {
        Ok(crate::breaker::DynamoSpotBreakers::new(
            aws_sdk_dynamodb::Client::new(&self.sdk),
            self.var(TABLE)?,
        ))
    }

    /// The wanted re-runs of interrupted jobs, in the table.
    pub fn reruns(&self) -> anyhow::Result<crate::reruns::DynamoReruns> {
        Ok(crate::reruns::DynamoReruns::new(
            aws_sdk_dynamodb::Client::new(&self.sdk),
            self.var(TABLE)?,
        ))
    }

    /// The installation tokens shared by the deployment's processes, in the table.
    pub fn token_shelf(&self) -> anyhow::Result<crate::token_shelf::DynamoTokenShelf> {
        Ok(crate::token_shelf::DynamoTokenShelf::new(
            aws_sdk_dynamodb::Client::new(&self.sdk),
            self.var(TABLE)?,
        ))
    }

    /// Where the webhook records jobs no pool takes: the table, when `EPHEMERA_TABLE`
    /// is set (it is optional for the webhook, which otherwise never reads it).
    pub fn unrouted_jobs(&self) -> Option<crate::DynamoUnroutedJobs> {
        let table = self.var(TABLE).ok()?;
        Some(crate::DynamoUnroutedJobs::new(
            aws_sdk_dynamodb::Client::new(&self.sdk),
            table,
        ))
    }

    /// The prices cached in the table, and where they are read from (the reaper's).
    pub fn pricing(&self) -> anyhow::Result<(crate::DynamoPriceBook, crate::AwsPriceList)> {
        let book =
            crate::DynamoPriceBook::new(aws_sdk_dynamodb::Client::new(&self.sdk), self.var(TABLE)?);
        Ok((book, crate::AwsPriceList::new(&self.sdk)))
    }

    pub fn queue(&self) -> anyhow::Result<SqsJobQueue> {
        Ok(SqsJobQueue::new(
            aws_sdk_sqs::Client::new(&self.sdk),
            self.var(QUEUE_URL)?,
        ))
    }

    /// Instances of the deployment, launched from the template versions named by
    /// `EPHEMERA_LAUNCH_TEMPLATE_VERSION` and `EPHEMERA_SSM_LAUNCH_TEMPLATE_VERSION`
    /// when they are set.
    pub fn fleet(&self, config: &Config) -> Ec2Fleet {
        let mut fleet = Ec2Fleet::new(aws_sdk_ec2::Client::new(&self.sdk), &config.deployment);
        if let Some(version) = optional_var(LAUNCH_TEMPLATE_VERSION) {
            fleet = fleet.with_stack_template_version(version);
        }
        if let Some(version) = optional_var(SSM_LAUNCH_TEMPLATE_VERSION) {
            fleet = fleet.with_ssm_template_version(version);
        }
        fleet
    }

    /// JIT config items in `EPHEMERA_JIT_TABLE`, keyed by ARNs under
    /// `EPHEMERA_INSTANCE_ARN_PREFIX`, which the runner role's policy compares with the
    /// caller's instance.
    pub fn jit_store(&self) -> anyhow::Result<DynamoJitConfigs> {
        let table = self.var(JIT_TABLE)?;
        let prefix = self.var(INSTANCE_ARN_PREFIX)?;
        Ok(
            DynamoJitConfigs::new(aws_sdk_dynamodb::Client::new(&self.sdk), table)
                .with_instance_arn_prefix(prefix),
        )
    }

    /// The secret `secret_id` holding an App's key, for the GitHub client of that App to
    /// read again when GitHub refuses the key it has (the
    /// [`AppKeySource`](ephemera_core::ports::AppKeySource) port).
    pub(crate) fn app_key_source_in(
        &self,
        secret_id: &str,
    ) -> std::sync::Arc<crate::secrets::AppKeySecret> {
        std::sync::Arc::new(crate::secrets::AppKeySecret {
            client: aws_sdk_secretsmanager::Client::new(&self.sdk),
            secret_id: secret_id.to_owned(),
        })
    }

    /// The secrets the webhook reads: the current one, and the explicit previous one
    /// when `EPHEMERA_WEBHOOK_PREVIOUS_SECRET_ID` is set.
    pub fn webhook_secret_vars(&self) -> Vec<&'static str> {
        let explicit_previous =
            std::env::var(WEBHOOK_PREVIOUS_SECRET_ID).is_ok_and(|id| !id.trim().is_empty());
        if explicit_previous {
            vec![WEBHOOK_SECRET_ID, WEBHOOK_PREVIOUS_SECRET_ID]
        } else {
            vec![WEBHOOK_SECRET_ID]
        }
    }
}

/// Metrics as EMF lines on stdout, which CloudWatch Logs turns into metrics; one handle
/// per handler, shared with its GitHub client.
pub fn metrics(config: &Config) -> ephemera_core::metrics::Metrics {
    ephemera_core::metrics::Metrics::stdout(&config.deployment)
}
