//! Errors as an operator reads them: one line, each cause said once, and an AWS error
//! as `<service> <operation>: <code>: <message>` instead of the SDK's layers ("service
//! error", the same exception twice, `Error { code: …, … }` structs).

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_smithy_types::error::ErrorMetadata;
use std::error::Error;
use std::fmt;

/// An AWS call that failed, said once.
#[derive(Debug)]
pub struct AwsError {
    pub service: &'static str,
    pub operation: &'static str,
    /// The service's error code; `None` when no answer came (a timeout, no route).
    pub code: Option<String>,
    pub message: String,
}

impl fmt::Display for AwsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: ", self.service, self.operation)?;
        match &self.code {
            Some(code) if self.message.is_empty() => write!(f, "{code}"),
            Some(code) => write!(f, "{code}: {}", self.message),
            None => write!(f, "{}", self.message),
        }
    }
}

impl Error for AwsError {}

impl AwsError {
    /// The error of one SDK call, named by its service and operation.
    pub fn new<E>(service: &'static str, operation: &'static str, err: &SdkError<E>) -> AwsError
    where
        E: ProvideErrorMetadata + Error + 'static,
    {
        match err.code() {
            Some(code) => AwsError {
                service,
                operation,
                code: Some(code.to_owned()),
                message: err.message().unwrap_or_default().to_owned(),
            },
            None => AwsError {
                service,
                operation,
                code: None,
                message: credentials_hint(causes(err)),
            },
        }
    }
}

/// What to set when the SDK found no credentials (its own text lists every provider of
/// the default chain it tried:
/// https://docs.aws.amazon.com/sdkref/latest/guide/standardized-credentials.html).
pub const NO_CREDENTIALS: &str = "no AWS credentials found: set AWS_PROFILE to a profile of \
     ~/.aws/config (after `aws configure` or `aws sso login`), or AWS_ACCESS_KEY_ID and \
     AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary ones)";

/// The SDK's "no credentials" text replaced by [`NO_CREDENTIALS`]; anything else as is.
fn credentials_hint(message: String) -> String {
    let missing = message.contains("no credentials found in chain")
        || message.contains("the credential provider was not enabled");
    if missing {
        NO_CREDENTIALS.to_owned()
    } else {
        message
    }
}

/// `map_err` for an SDK call: `.map_err(aws("SQS", "ReceiveMessage"))`.
pub fn aws<E>(
    service: &'static str,
    operation: &'static str,
) -> impl FnOnce(SdkError<E>) -> anyhow::Error
where
    E: ProvideErrorMetadata + Error + Send + Sync + 'static,
{
    move |err| anyhow::Error::new(AwsError::new(service, operation, &err))
}

/// An AWS error among the SDK errors of the calls the CLI makes (directly or through the
/// store), named.
fn known_aws_error(cause: &(dyn Error + 'static)) -> Option<AwsError> {
    if let Some(err) = cause.downcast_ref::<AwsError>() {
        return Some(AwsError {
            service: err.service,
            operation: err.operation,
            code: err.code.clone(),
            message: err.message.clone(),
        });
    }
    macro_rules! try_calls {
        ($($service:literal $operation:literal $error:ty;)*) => {
            $(
                if let Some(err) = cause.downcast_ref::<SdkError<$error>>() {
                    return Some(AwsError::new($service, $operation, err));
                }
            )*
        };
    }
    use aws_sdk_cloudformation::operation as cfn;
    use aws_sdk_dynamodb::operation as ddb;
    use aws_sdk_sqs::operation as sqs;
    use aws_sdk_ssm::operation as ssm;
    try_calls! {
        "DynamoDB" "Query" ddb::query::QueryError;
        "DynamoDB" "GetItem" ddb::get_item::GetItemError;
        "DynamoDB" "PutItem" ddb::put_item::PutItemError;
        "DynamoDB" "UpdateItem" ddb::update_item::UpdateItemError;
        "DynamoDB" "DeleteItem" ddb::delete_item::DeleteItemError;
        "DynamoDB" "TransactWriteItems" ddb::transact_write_items::TransactWriteItemsError;
        "SQS" "GetQueueUrl" sqs::get_queue_url::GetQueueUrlError;
        "SQS" "GetQueueAttributes" sqs::get_queue_attributes::GetQueueAttributesError;
        "SQS" "ReceiveMessage" sqs::receive_message::ReceiveMessageError;
        "SQS" "SendMessage" sqs::send_message::SendMessageError;
        "SQS" "DeleteMessage" sqs::delete_message::DeleteMessageError;
        "SQS" "ChangeMessageVisibility" sqs::change_message_visibility::ChangeMessageVisibilityError;
        "SSM" "GetParameter" ssm::get_parameter::GetParameterError;
        "SSM" "PutParameter" ssm::put_parameter::PutParameterError;
        "CloudFormation" "DescribeStacks" cfn::describe_stacks::DescribeStacksError;
    }
    None
}

/// Whether `error` is DynamoDB saying a table does not exist (its message names none).
pub fn is_missing_table(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        known_aws_error(cause).is_some_and(|aws| {
            aws.service == "DynamoDB" && aws.code.as_deref() == Some("ResourceNotFoundException")
        })
    })
}

/// The causes below `err`, each said once (an error that repeats its source's text is
/// not repeated), without the SDK's own wrappers.
fn causes(err: &(dyn Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cause = Some(err);
    while let Some(current) = cause {
        cause = current.source();
        let text = match current.downcast_ref::<ErrorMetadata>() {
            Some(meta) => match (meta.code(), meta.message()) {
                (Some(code), Some(message)) => format!("{code}: {message}"),
                (Some(code), None) => code.to_owned(),
                (None, Some(message)) => message.to_owned(),
                (None, None) => continue,
            },
            None => current.to_string(),
        };
        let wrapper = text == "service error"
            || text == "dispatch failure"
            || text.starts_with("unhandled error");
        if text.is_empty() || (wrapper && cause.is_some()) {
            continue;
        }
        if parts.iter().any(|part| part.ends_with(&text)) {
            continue;
        }
        parts.push(text);
    }
    parts.join(": ")
}

/// The whole error as one line for `error: …`: contexts first, then the cause; an AWS
/// error ends the line with its service, operation, code and message.
pub fn describe(error: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in error.chain() {
        if let Some(aws) = known_aws_error(cause) {
            parts.push(aws.to_string());
            break;
        }
        let text = causes_of_one(cause);
        if text.is_empty() || parts.iter().any(|part| part.ends_with(&text)) {
            continue;
        }
        parts.push(text);
    }
    parts.join(": ")
}

/// One link of a chain as text (the SDK's wrappers and metadata structs made plain).
fn causes_of_one(cause: &(dyn Error + 'static)) -> String {
    if let Some(meta) = cause.downcast_ref::<ErrorMetadata>() {
        return match (meta.code(), meta.message()) {
            (Some(code), Some(message)) => format!("{code}: {message}"),
            (Some(code), None) => code.to_owned(),
            (None, message) => message.unwrap_or_default().to_owned(),
        };
    }
    let text = cause.to_string();
    if cause.source().is_some()
        && (text == "service error"
            || text == "dispatch failure"
            || text.starts_with("unhandled error"))
    {
        return String::new();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_aws_error_is_said_once_with_service_operation_code_and_message() {
        let meta = ErrorMetadata::builder()
            .code("ResourceNotFoundException")
            .message("Requested resource not found")
            .build();
        let inner = aws_sdk_dynamodb::operation::query::QueryError::generic(meta);
        let raw = aws_smithy_runtime_api::http::Response::new(
            aws_smithy_runtime_api::http::StatusCode::try_from(400).expect("status"),
            aws_smithy_types::body::SdkBody::empty(),
        );
        let err = SdkError::service_error(inner, raw);
        let error = anyhow::Error::new(err).context("reading runners");
        assert_eq!(
            describe(&error),
            "reading runners: DynamoDB Query: ResourceNotFoundException: Requested resource not found"
        );
    }

    #[test]
    fn missing_credentials_say_what_to_set() {
        let raw = "other: the credential provider was not enabled: no credentials found in \
                   chain. Attempted:\n  Environment: the credential provider was not enabled";
        assert_eq!(credentials_hint(raw.to_owned()), NO_CREDENTIALS);
        assert_eq!(credentials_hint("timeout".to_owned()), "timeout");
    }

    #[test]
    fn a_cause_repeated_by_its_context_is_said_once() {
        let error = anyhow::anyhow!("no such file").context("cannot read x: no such file");
        assert_eq!(describe(&error), "cannot read x: no such file");
        let error = anyhow::anyhow!("root").context("middle").context("top");
        assert_eq!(describe(&error), "top: middle: root");
    }
}
