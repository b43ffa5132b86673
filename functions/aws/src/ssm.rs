//! [`SsmJitSecrets`]: the [`JitSecrets`] port on SSM Parameter Store.
//!
//! The scaler puts each runner's JIT config into a SecureString parameter whose name
//! carries the instance id ([`ephemera_core::names::jit_parameter_name`]); the instance
//! role may read and delete only its own, and the bootstrap script deletes it once read.
//! The reaper deletes it again in case the instance never started.

use crate::tags;
use async_trait::async_trait;
use aws_sdk_ssm::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_ssm::types::ParameterType;
use aws_sdk_ssm::Client;
use ephemera_core::names::jit_parameter_name;
use ephemera_core::ports::{JitSecrets, SecretError};
use secrecy::{ExposeSecret, SecretString};
use tracing::instrument;

/// JIT configs of one deployment's runners.
#[derive(Debug, Clone)]
pub struct SsmJitSecrets {
    client: Client,
    deployment: String,
}

impl SsmJitSecrets {
    pub fn new(client: Client, deployment: impl Into<String>) -> Self {
        SsmJitSecrets {
            client,
            deployment: deployment.into(),
        }
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
