//! [`SsmJitSecrets`]: the [`JitSecrets`] port on SSM Parameter Store.
//!
//! The scaler puts each runner's JIT config into a SecureString parameter whose name
//! carries the instance id ([`ephemera_core::names::jit_parameter_name`]) and which is
//! tagged with the instance's ARN: the instance role's policy compares that tag with
//! `${ec2:SourceInstanceARN}`, so an instance may read and delete only its own. The
//! bootstrap script deletes it once read; the reaper deletes it again in case the
//! instance never started.

use crate::tags;
use async_trait::async_trait;
use aws_sdk_ssm::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_ssm::types::ParameterType;
use aws_sdk_ssm::Client;
use ephemera_core::names::jit_parameter_name;
use ephemera_core::ports::{JitSecrets, SecretError};
use secrecy::{ExposeSecret, SecretString};
use tracing::instrument;

/// The account the emulator (moto) runs everything in.
pub const EMULATOR_ACCOUNT_ID: &str = "123456789012";

/// `arn:<partition>:ec2:<region>:<account>:instance/`, what an instance id is appended to.
pub fn instance_arn_prefix(partition: &str, region: &str, account_id: &str) -> String {
    format!("arn:{partition}:ec2:{region}:{account_id}:instance/")
}

/// JIT configs of one deployment's runners.
#[derive(Debug, Clone)]
pub struct SsmJitSecrets {
    client: Client,
    deployment: String,
    instance_arn_prefix: String,
}

impl SsmJitSecrets {
    /// The instances' ARNs are taken to be in the emulator's account, in the client's
    /// region; a deployment on AWS names its own with [`Self::with_instance_arn_prefix`].
    pub fn new(client: Client, deployment: impl Into<String>) -> Self {
        let region = client
            .config()
            .region()
            .map_or("us-east-1".to_owned(), ToString::to_string);
        SsmJitSecrets {
            client,
            deployment: deployment.into(),
            instance_arn_prefix: instance_arn_prefix("aws", &region, EMULATOR_ACCOUNT_ID),
        }
    }

    /// Where the instances live: `arn:<partition>:ec2:<region>:<account>:instance/`.
    pub fn with_instance_arn_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.instance_arn_prefix = prefix.into();
        self
    }

    /// The ARN the instance's role credentials carry as `ec2:SourceInstanceARN`.
    pub fn instance_arn(&self, instance_id: &str) -> String {
        format!("{}{instance_id}", self.instance_arn_prefix)
    }
}

fn secret_error<E, R>(err: SdkError<E, R>) -> SecretError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match err.code() {
        Some("ThrottlingException" | "Throttling" | "TooManyUpdates") => {
            SecretError::Throttled(Box::new(err))
        }
        _ => SecretError::Transient(Box::new(err)),
    }
}

#[async_trait]
impl JitSecrets for SsmJitSecrets {
    #[instrument(skip_all, fields(instance_id, runner = %runner_name))]
    async fn put(
        &self,
        instance_id: &str,
        runner_name: &str,
        jit_config: &SecretString,
    ) -> Result<(), SecretError> {
        let name = jit_parameter_name(&self.deployment, instance_id);
        // SSM refuses tags together with Overwrite: tag on creation, overwrite untagged.
        let created = self
            .client
            .put_parameter()
            .name(&name)
            .value(jit_config.expose_secret())
            .r#type(ParameterType::SecureString)
            .set_tags(Some(tags::jit_parameter_tags(
                &self.deployment,
                runner_name,
                instance_id,
                &self.instance_arn(instance_id),
            )))
            .send()
            .await;
        match created {
            Ok(_) => Ok(()),
            Err(err) if err.code() == Some("ParameterAlreadyExists") => {
                self.client
                    .put_parameter()
                    .name(&name)
                    .value(jit_config.expose_secret())
                    .r#type(ParameterType::SecureString)
                    .overwrite(true)
                    .send()
                    .await
                    .map_err(secret_error)?;
                Ok(())
            }
            Err(err) => Err(secret_error(err)),
        }
    }

    #[instrument(skip_all, fields(instance_id))]
    async fn delete(&self, instance_id: &str) -> Result<(), SecretError> {
        let name = jit_parameter_name(&self.deployment, instance_id);
        match self.client.delete_parameter().name(&name).send().await {
            Ok(_) => Ok(()),
            Err(err) if err.code() == Some("ParameterNotFound") => Ok(()),
            Err(err) => Err(secret_error(err)),
        }
    }
}
