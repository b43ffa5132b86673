//! What a function says when its cold start cannot succeed: every missing environment
//! variable at once, before any network call; and for the App key secret still holding
//! the stack's placeholder, the secret's name and the command that fixes it.

use ephemera_aws::stack::APP_KEY_PLACEHOLDER as PLACEHOLDER;
use ephemera_tests::functions::{environment, put_secret, run_until_exit, HungEndpoint};
use ephemera_tests::moto::Moto;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn every_missing_variable_is_named_at_once_before_any_network_call() -> anyhow::Result<()> {
    // Any call would reach the hung endpoint and be counted.
    let hung = HungEndpoint::start().await?;
    let env = environment(&hung.url, &[("EPHEMERA_TABLE", "eph-runners")]);
    let exited = run_until_exit("scaler", &env, LIMIT).await?;
    assert!(!exited.success);
    assert!(
        exited.output.contains(
            "environment variables EPHEMERA_CONFIG_PARAMETER, EPHEMERA_QUEUE_URL, \
             EPHEMERA_GITHUB_KEY_SECRET_ID, EPHEMERA_INSTANCE_ARN_PREFIX, EPHEMERA_JIT_TABLE \
             must be set"
        ),
        "{}",
        exited.output
    );
    assert_eq!(
        hung.connections(),
        0,
        "no call before the variables are checked"
    );
    Ok(())
}

#[tokio::test]
async fn the_placeholder_app_key_is_named_with_the_command_that_fixes_it() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let sdk = ephemera_aws::sdk_config(&ephemera_aws::AwsSettings::emulator(&moto.endpoint)).await;
    aws_sdk_ssm::Client::new(&sdk)
        .put_parameter()
        .name("/ephemera/eph/config")
        .value(
            "deployment: eph\ngithub:\n  app_id: 1\n  api_url: http://127.0.0.1:9\npools:\n  \
             - name: linux\n    labels: [linux]\n    max_runners: 1\n    \
             instance_types: [t3.micro]\n    launch_template: eph-runner\n",
        )
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await?;
    let key_arn = put_secret(&moto, "ephemera/eph/github-app-key", PLACEHOLDER).await?;
    for function in ["scaler", "reaper"] {
        let env = environment(
            &moto.endpoint,
            &[
                ("EPHEMERA_CONFIG_PARAMETER", "/ephemera/eph/config"),
                ("EPHEMERA_TABLE", "eph-runners"),
                ("EPHEMERA_QUEUE_URL", "http://127.0.0.1:9/queue/eph-jobs"),
                ("EPHEMERA_GITHUB_KEY_SECRET_ID", &key_arn),
                (
                    "EPHEMERA_INSTANCE_ARN_PREFIX",
                    "arn:aws:ec2:us-east-1:1:instance/",
                ),
                ("EPHEMERA_JIT_TABLE", "eph-jit"),
            ],
        );
        let exited = run_until_exit(function, &env, LIMIT).await?;
        assert!(!exited.success);
        let fix = format!(
            "put the GitHub App's private key into secret {key_arn}: aws secretsmanager \
             put-secret-value --secret-id {key_arn} --secret-string file://app.pem"
        );
        assert!(exited.output.contains(&fix), "{}", exited.output);
        assert!(
            !exited.output.contains(PLACEHOLDER),
            "the secret's value is never shown"
        );
    }
    moto.stop().await;
    Ok(())
}
