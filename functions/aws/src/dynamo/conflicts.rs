//! DynamoDB's `TransactionConflictException` as a transient error: a single-item write to
//! an item a transaction is changing at that moment is refused with it, and the AWS SDK's
//! standard retry does not retry it on its own. Such a write is right as it is a moment
//! later, so the SDK retries it (with its backoff, within its attempts).

use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_smithy_runtime_api::client::interceptors::context::InterceptorContext;
use aws_smithy_runtime_api::client::retries::classifiers::{ClassifyRetry, RetryAction};

/// The code DynamoDB answers a single-item write with while a transaction holds the item.
pub(crate) const TRANSACTION_CONFLICT: &str = "TransactionConflictException";

/// Retries a PutItem, UpdateItem or DeleteItem refused for a transaction in progress.
#[derive(Debug, Default)]
pub(crate) struct TransactionConflictRetry;

impl ClassifyRetry for TransactionConflictRetry {
    fn classify_retry(&self, ctx: &InterceptorContext) -> RetryAction {
        let Some(Err(err)) = ctx.output_or_error() else {
            return RetryAction::NoActionIndicated;
        };
        let Some(err) = err.as_operation_error() else {
            return RetryAction::NoActionIndicated;
        };
        let code = err
            .downcast_ref::<UpdateItemError>()
            .and_then(ProvideErrorMetadata::code)
            .or_else(|| {
                err.downcast_ref::<PutItemError>()
                    .and_then(ProvideErrorMetadata::code)
            })
            .or_else(|| {
                err.downcast_ref::<DeleteItemError>()
                    .and_then(ProvideErrorMetadata::code)
            });
        if code == Some(TRANSACTION_CONFLICT) {
            RetryAction::transient_error()
        } else {
            RetryAction::NoActionIndicated
        }
    }

    fn name(&self) -> &'static str {
        "TransactionConflictRetry"
    }
}

/// `client` with [`TransactionConflictRetry`] among its retry classifiers.
pub(crate) fn retrying_transaction_conflicts(
    client: &aws_sdk_dynamodb::Client,
) -> aws_sdk_dynamodb::Client {
    let config = client
        .config()
        .to_builder()
        .retry_classifier(TransactionConflictRetry)
        .build();
    aws_sdk_dynamodb::Client::from_conf(config)
}
