//! What the three Lambda functions share at cold start: JSON logs, the configuration from
//! its SSM parameter, secrets from Secrets Manager, and the adapters named by the
//! environment that template.yaml sets.
//!
//! Environment: `EPHEMERA_CONFIG_PARAMETER` (SSM parameter holding the YAML),
//! `EPHEMERA_TABLE`, `EPHEMERA_QUEUE_URL`, `EPHEMERA_WEBHOOK_SECRET_ID` (and optionally
//! `EPHEMERA_WEBHOOK_PREVIOUS_SECRET_ID`), `EPHEMERA_GITHUB_KEY_SECRET_ID`,
//! `EPHEMERA_JIT_TABLE` (where JIT configs wait for their instances),
//! `EPHEMERA_INSTANCE_ARN_PREFIX` (`arn:<partition>:ec2:<region>:<account>:instance/`).

use crate::{sdk_config, AwsSettings, DynamoJitConfigs, DynamoRunnerStore, Ec2Fleet, SqsJobQueue};
use anyhow::Context;
use aws_config::SdkConfig;
use ephemera_core::config::Config;
use ephemera_core::webhook::WebhookSecrets;
use secrecy::SecretString;
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
        .init();
}

/// A required environment variable, with an error naming it.
pub fn required_var(name: &str) -> anyhow::Result<String> {
    match std::env::var(name) {
        Ok(value) if !value.is_empty() => Ok(value),
        _ => anyhow::bail!("environment variable {name} must be set"),
    }
}

/// A function's view of its deployment, loaded once at cold start.
pub struct LambdaEnv {
    pub sdk: SdkConfig,
    pub config: Arc<Config>,
}

impl LambdaEnv {
    /// Loads the SDK configuration and the deployment's configuration parameter.
    pub async fn load() -> anyhow::Result<LambdaEnv> {
        let sdk = sdk_config(&AwsSettings::default()).await;
        let parameter = required_var("EPHEMERA_CONFIG_PARAMETER")?;
        let config = load_config_parameter(&aws_sdk_ssm::Client::new(&sdk), &parameter).await?;
        Ok(LambdaEnv {
            sdk,
            config: Arc::new(config),
        })
    }

    pub fn store(&self) -> anyhow::Result<DynamoRunnerStore> {
        let table = required_var("EPHEMERA_TABLE")?;
        Ok(DynamoRunnerStore::new(
            aws_sdk_dynamodb::Client::new(&self.sdk),
            table,
        ))
    }

    pub fn queue(&self) -> anyhow::Result<SqsJobQueue> {
        let url = required_var("EPHEMERA_QUEUE_URL")?;
        Ok(SqsJobQueue::new(aws_sdk_sqs::Client::new(&self.sdk), url))
    }

    /// Metrics as EMF lines on stdout, which CloudWatch Logs turns into metrics; one
    /// handle per function, shared by its handler and its GitHub client.
    pub fn metrics(&self) -> ephemera_core::metrics::Metrics {
        ephemera_core::metrics::Metrics::stdout(&self.config.deployment)
    }

    pub fn fleet(&self) -> Ec2Fleet {
        Ec2Fleet::new(aws_sdk_ec2::Client::new(&self.sdk), &self.config.deployment)
    }

    /// JIT config items in `EPHEMERA_JIT_TABLE`, keyed by ARNs under
    /// `EPHEMERA_INSTANCE_ARN_PREFIX`, which the runner role's policy compares with the
    /// caller's instance.
    pub fn jit_secrets(&self) -> anyhow::Result<DynamoJitConfigs> {
        let table = required_var("EPHEMERA_JIT_TABLE")?;
        let prefix = required_var("EPHEMERA_INSTANCE_ARN_PREFIX")?;
        Ok(
            DynamoJitConfigs::new(aws_sdk_dynamodb::Client::new(&self.sdk), table)
                .with_instance_arn_prefix(prefix),
        )
    }

    /// The secret whose id is in the environment variable `var`.
    pub async fn secret(&self, var: &str) -> anyhow::Result<SecretString> {
        let id = required_var(var)?;
        let client = aws_sdk_secretsmanager::Client::new(&self.sdk);
        crate::secrets::read_secret(&client, &id).await
    }

    /// The current webhook secret and, during a rotation, the previous one.
    pub async fn webhook_secrets(&self) -> anyhow::Result<WebhookSecrets> {
        let current = self.secret("EPHEMERA_WEBHOOK_SECRET_ID").await?;
        let previous = match std::env::var("EPHEMERA_WEBHOOK_PREVIOUS_SECRET_ID") {
            Ok(id) if !id.is_empty() => {
                Some(self.secret("EPHEMERA_WEBHOOK_PREVIOUS_SECRET_ID").await?)
            }
            _ => None,
        };
        Ok(WebhookSecrets { current, previous })
    }
}

/// Reads and validates the configuration kept in the SSM parameter `name`.
pub async fn load_config_parameter(
    client: &aws_sdk_ssm::Client,
    name: &str,
) -> anyhow::Result<Config> {
    let output = client
        .get_parameter()
        .name(name)
        .with_decryption(true)
        .send()
        .await
        .with_context(|| format!("reading configuration parameter {name}"))?;
    let text = output
        .parameter()
        .and_then(|p| p.value())
        .with_context(|| format!("configuration parameter {name} has no value"))?;
    Ok(Config::parse(&format!("ssm:{name}"), text)?)
}
