//! [`ImagePipelines`]: the deployment's EC2 Image Builder pipelines, started when the
//! runner bucket takes a new release so that the baked images follow it.
//!
//! Fake: `memory::FakeImagePipelines`. Adapter: `ephemera_aws::ImageBuilderPipelines`.

use super::Cause;
use async_trait::async_trait;

/// A pipeline that could not be started.
#[derive(Debug, thiserror::Error)]
#[error("image pipeline {arn} not started")]
pub struct PipelineError {
    pub arn: String,
    #[source]
    pub cause: Cause,
}

/// The image pipelines the deployment was given (possibly none).
#[async_trait]
pub trait ImagePipelines: Send + Sync {
    /// The pipelines' ARNs.
    fn arns(&self) -> Vec<String>;
    /// Starts one run of the pipeline `arn`. Idempotent per `client_token`: Image
    /// Builder answers a repeated token with the first call's build.
    async fn start(&self, arn: &str, client_token: &str) -> Result<(), PipelineError>;
}
