//! The log streams port on CloudWatch Logs: `GetLogEvents` from the head of a stream,
//! its events mapped to [`LogEvent`]s and its errors to what the command says.

use super::{LogEvent, LogStreams, Page, StreamError};
use crate::errors::AwsError;
use async_trait::async_trait;
use aws_sdk_cloudwatchlogs::error::ProvideErrorMetadata;
use aws_sdk_cloudwatchlogs::Client;

/// The runners' log group, read with the CLI's credentials.
pub struct CloudWatchStreams {
    client: Client,
}

impl CloudWatchStreams {
    pub fn new(client: Client) -> CloudWatchStreams {
        CloudWatchStreams { client }
    }
}

#[async_trait]
impl LogStreams for CloudWatchStreams {
    #[tracing::instrument(skip_all, fields(group = %group, stream = %stream))]
    async fn page(
        &self,
        group: &str,
        stream: &str,
        token: Option<&str>,
    ) -> Result<Page, StreamError> {
        let answer = self
            .client
            .get_log_events()
            .log_group_name(group)
            .log_stream_name(stream)
            .start_from_head(true)
            .set_next_token(token.map(str::to_owned))
            .send()
            .await
            .map_err(|err| {
                let message = err.message().unwrap_or_default().to_owned();
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_resource_not_found_exception())
                {
                    StreamError::NotFound(message)
                } else if err.code() == Some("AccessDeniedException") {
                    StreamError::AccessDenied(message)
                } else {
                    StreamError::Other(anyhow::Error::new(AwsError::new(
                        "CloudWatch Logs",
                        "GetLogEvents",
                        &err,
                    )))
                }
            })?;
        let events = answer
            .events()
            .iter()
            .map(|e| LogEvent {
                timestamp: e.timestamp().unwrap_or_default(),
                message: e.message().unwrap_or_default().to_owned(),
            })
            .collect();
        Ok(Page {
            events,
            next_forward_token: answer.next_forward_token().map(str::to_owned),
        })
    }

    async fn group_exists(&self, group: &str) -> Result<bool, StreamError> {
        let answer = self
            .client
            .describe_log_groups()
            .log_group_name_prefix(group)
            .send()
            .await
            .map_err(|err| {
                StreamError::Other(anyhow::Error::new(AwsError::new(
                    "CloudWatch Logs",
                    "DescribeLogGroups",
                    &err,
                )))
            })?;
        Ok(answer
            .log_groups()
            .iter()
            .any(|g| g.log_group_name() == Some(group)))
    }
}
