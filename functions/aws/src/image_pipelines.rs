//! [`ImageBuilderPipelines`]: the [`ImagePipelines`] port on EC2 Image Builder's
//! StartImagePipelineExecution
//! (<https://docs.aws.amazon.com/imagebuilder/latest/APIReference/API_StartImagePipelineExecution.html>:
//! `imagePipelineArn` and an idempotency `clientToken` of 1 to 36 characters; the caller
//! needs `imagebuilder:StartImagePipelineExecution` on the pipeline).

use async_trait::async_trait;
use ephemera_core::ports::{ImagePipelines, PipelineError};
use tracing::instrument;

/// The pipelines the stack was given (`ImagePipelineArns`).
#[derive(Clone)]
pub struct ImageBuilderPipelines {
    client: aws_sdk_imagebuilder::Client,
    arns: Vec<String>,
}

impl ImageBuilderPipelines {
    /// The pipelines of `arns`, a comma-separated list (blank entries skipped).
    pub fn new(sdk: &aws_config::SdkConfig, arns: &str) -> ImageBuilderPipelines {
        ImageBuilderPipelines {
            client: aws_sdk_imagebuilder::Client::new(sdk),
            arns: arns
                .split(',')
                .map(str::trim)
                .filter(|arn| !arn.is_empty())
                .map(str::to_owned)
                .collect(),
        }
    }
}

#[async_trait]
impl ImagePipelines for ImageBuilderPipelines {
    fn arns(&self) -> Vec<String> {
        self.arns.clone()
    }

    #[instrument(skip_all, fields(pipeline = arn))]
    async fn start(&self, arn: &str, client_token: &str) -> Result<(), PipelineError> {
        self.client
            .start_image_pipeline_execution()
            .image_pipeline_arn(arn)
            .client_token(client_token)
            .send()
            .await
            .map_err(|err| PipelineError {
                arn: arn.to_owned(),
                cause: Box::new(err),
            })?;
        Ok(())
    }
}
