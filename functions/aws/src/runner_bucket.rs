//! [`S3RunnerBucket`]: the [`RunnerBucket`] port on S3. Small objects are written with
//! PutObject; a tarball with a multipart upload (CreateMultipartUpload, UploadPart per
//! part, then CompleteMultipartUpload or AbortMultipartUpload), so the sync never holds a
//! tarball whole and nothing is visible before the sum was checked.
//!
//! S3's rules relied on: PutObject needs the body's length up front (`Content-Length`,
//! <https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html>), which a
//! download of unknown length cannot give, hence the parts; every part but the last is
//! at least 5 MiB and an upload has at most 10,000 parts
//! (<https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html>); an object
//! uploaded in parts appears only when the upload is completed
//! (<https://docs.aws.amazon.com/AmazonS3/latest/userguide/mpuoverview.html>). All four
//! actions need `s3:PutObject` on the key, PutObjectTagging `s3:PutObjectTagging`, AbortMultipartUpload `s3:AbortMultipartUpload`
//! (<https://docs.aws.amazon.com/AmazonS3/latest/userguide/mpuoverview.html#mpuAndPermissions>).

use async_trait::async_trait;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use ephemera_core::ports::{BucketError, BucketUpload, Cause, RunnerBucket};
use tracing::instrument;

/// The deployment's runner bucket.
#[derive(Clone)]
pub struct S3RunnerBucket {
    client: aws_sdk_s3::Client,
    bucket: String,
}

fn failed(what: String, cause: impl Into<Cause>) -> BucketError {
    BucketError {
        what,
        cause: cause.into(),
    }
}

/// An S3 configuration from `sdk`: path-style addressing when the SDK has an endpoint
/// override (an emulator, which has no per-bucket host names), virtual-hosted on AWS.
pub fn s3_config(sdk: &aws_config::SdkConfig) -> aws_sdk_s3::config::Builder {
    aws_sdk_s3::config::Builder::from(sdk).force_path_style(sdk.endpoint_url().is_some())
}

/// An S3 client from `sdk`, addressed as [`s3_config`] says.
pub fn s3_client(sdk: &aws_config::SdkConfig) -> aws_sdk_s3::Client {
    aws_sdk_s3::Client::from_conf(s3_config(sdk).build())
}

impl S3RunnerBucket {
    /// The bucket `bucket` through `sdk`, addressed as [`s3_config`] says.
    pub fn new(sdk: &aws_config::SdkConfig, bucket: String) -> S3RunnerBucket {
        let config = s3_config(sdk)
            // The parts are signed whole; no streaming checksum trailer is needed.
            .request_checksum_calculation(
                aws_sdk_s3::config::RequestChecksumCalculation::WhenRequired,
            )
            .response_checksum_validation(
                aws_sdk_s3::config::ResponseChecksumValidation::WhenRequired,
            )
            .build();
        S3RunnerBucket {
            client: aws_sdk_s3::Client::from_conf(config),
            bucket,
        }
    }
}

/// One multipart upload under way.
struct S3Upload {
    client: aws_sdk_s3::Client,
    bucket: String,
    key: String,
    upload_id: String,
    parts: Vec<CompletedPart>,
}

#[async_trait]
impl BucketUpload for S3Upload {
    async fn part(&mut self, bytes: Vec<u8>) -> Result<(), BucketError> {
        let number = self.parts.len() as i32 + 1;
        let answer = self
            .client
            .upload_part()
            .bucket(&self.bucket)
            .key(&self.key)
            .upload_id(&self.upload_id)
            .part_number(number)
            .body(ByteStream::from(bytes))
            .send()
            .await
            .map_err(|err| failed(format!("part {number} of {}", self.key), err))?;
        self.parts.push(
            CompletedPart::builder()
                .part_number(number)
                .set_e_tag(answer.e_tag)
                .build(),
        );
        Ok(())
    }

    async fn complete(self: Box<Self>) -> Result<(), BucketError> {
        let parts = CompletedMultipartUpload::builder()
            .set_parts(Some(self.parts))
            .build();
        self.client
            .complete_multipart_upload()
            .bucket(&self.bucket)
            .key(&self.key)
            .upload_id(&self.upload_id)
            .multipart_upload(parts)
            .send()
            .await
            .map_err(|err| failed(format!("completing {}", self.key), err))?;
        Ok(())
    }

    async fn abort(self: Box<Self>) -> Result<(), BucketError> {
        self.client
            .abort_multipart_upload()
            .bucket(&self.bucket)
            .key(&self.key)
            .upload_id(&self.upload_id)
            .send()
            .await
            .map_err(|err| failed(format!("aborting {}", self.key), err))?;
        Ok(())
    }
}

#[async_trait]
impl RunnerBucket for S3RunnerBucket {
    #[instrument(skip_all, fields(key))]
    async fn read(&self, key: &str) -> Result<Option<String>, BucketError> {
        let answer = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await;
        let object = match answer {
            Ok(object) => object,
            Err(err) if err.as_service_error().is_some_and(|e| e.is_no_such_key()) => {
                return Ok(None)
            }
            Err(err) => return Err(failed(format!("reading {key}"), err)),
        };
        let bytes = object
            .body
            .collect()
            .await
            .map_err(|err| failed(format!("reading {key}"), err))?;
        Ok(Some(
            String::from_utf8_lossy(&bytes.into_bytes()).into_owned(),
        ))
    }

    #[instrument(skip_all, fields(key))]
    async fn write(&self, key: &str, text: &str) -> Result<(), BucketError> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type("text/plain")
            .body(ByteStream::from(text.as_bytes().to_vec()))
            .send()
            .await
            .map_err(|err| failed(format!("writing {key}"), err))?;
        Ok(())
    }

    #[instrument(skip_all, fields(key))]
    async fn mark_superseded(&self, key: &str) -> Result<(), BucketError> {
        let (tag_key, tag_value) = ephemera_core::releases::SUPERSEDED_TAG;
        let tag = aws_sdk_s3::types::Tag::builder()
            .key(tag_key)
            .value(tag_value)
            .build()
            .map_err(|err| failed(format!("tagging {key}"), err))?;
        let tagging = aws_sdk_s3::types::Tagging::builder()
            .tag_set(tag)
            .build()
            .map_err(|err| failed(format!("tagging {key}"), err))?;
        let answer = self
            .client
            .put_object_tagging()
            .bucket(&self.bucket)
            .key(key)
            .tagging(tagging)
            .send()
            .await;
        match answer {
            Ok(_) => Ok(()),
            Err(err)
                if err
                    .raw_response()
                    .is_some_and(|r| r.status().as_u16() == 404) =>
            {
                Ok(())
            }
            Err(err) => Err(failed(format!("tagging {key}"), err)),
        }
    }

    #[instrument(skip_all, fields(key))]
    async fn upload(&self, key: &str) -> Result<Box<dyn BucketUpload>, BucketError> {
        let answer = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .content_type("application/gzip")
            .send()
            .await
            .map_err(|err| failed(format!("starting the upload of {key}"), err))?;
        let upload_id = answer
            .upload_id
            .ok_or_else(|| failed(format!("starting the upload of {key}"), "no upload id"))?;
        Ok(Box::new(S3Upload {
            client: self.client.clone(),
            bucket: self.bucket.clone(),
            key: key.to_owned(),
            upload_id,
            parts: Vec::new(),
        }))
    }
}
