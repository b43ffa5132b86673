//! The strict layer in front of moto refuses what AWS refuses, with AWS's codes,
//! statuses and messages, and allows what AWS allows: the SSM, DynamoDB, SQS/Lambda and
//! EC2 cases (and sized launches) are in the modules under `strict/`; this one holds
//! what they share and the control API itself.

mod dynamo;
mod fleet;
mod instance_states;
mod launch_rules;
mod queue;
mod releases;
mod sizing;
mod ssm;

use aws_sdk_ssm::error::{ProvideErrorMetadata, SdkError};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use ephemera_tests::moto::Moto;
use serde_json::json;

/// What an AWS service answered when it refused a request.
#[derive(Debug)]
pub struct Refusal {
    pub code: String,
    pub message: String,
    pub status: u16,
}

/// The refusal in `err`; panics if the request failed for another reason (no answer).
pub fn refusal<E: ProvideErrorMetadata + std::fmt::Debug>(
    err: &SdkError<E, HttpResponse>,
) -> Refusal {
    let Some(raw) = err.raw_response() else {
        panic!("expected an answer from the service, got {err:?}");
    };
    Refusal {
        code: err.code().unwrap_or_default().to_owned(),
        message: err.message().unwrap_or_default().to_owned(),
        status: raw.status().as_u16(),
    }
}

#[tokio::test]
async fn strict_settings_are_on_by_default_refuse_unknown_keys_and_reset_with_moto(
) -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let settings = moto.strict_settings().await?;
    assert_eq!(settings["enabled"], json!(true));
    assert_eq!(settings["ssm_put_parameter_tps"], json!(3));
    assert_eq!(settings["lambda_recursion_cutoff"], json!(16));
    assert_eq!(settings["sqs_max_message_bytes"], json!(1_048_576));

    let changed = moto
        .set_strict(json!({"ssm_high_throughput": true}))
        .await?;
    assert_eq!(changed["ssm_high_throughput"], json!(true));
    let refused = moto.set_strict(json!({"ssm_tps": 4})).await.unwrap_err();
    assert!(
        refused.to_string().contains("unknown setting 'ssm_tps'"),
        "{refused}"
    );
    let refused = moto
        .set_strict(json!({"enabled": "yes"}))
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("enabled must be true or false"),
        "{refused}"
    );

    moto.reset().await?;
    assert_eq!(
        moto.strict_settings().await?["ssm_high_throughput"],
        json!(false)
    );
    assert!(moto.strict_stats().await?.refusals.is_empty());
    Ok(())
}
