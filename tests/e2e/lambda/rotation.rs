//! A rotated GitHub App key, through the scaler's Lambda entry point under the project's
//! runtime API: the App's key is replaced at GitHub (the simulator) and in Secrets
//! Manager (moto) while the function is warm; GitHub's 401 to the old key makes the
//! scaler read the secret again and launch the runner, without a restart and long before
//! its next periodic check.

use super::follow::{deployment_environment, queued_delivery};
use crate::cli::config_yaml;
use ephemera_tests::functions::{put_secret, Function};
use ephemera_tests::pipeline::{workspace_path, Pipeline, PipelineOptions, DEPLOYMENT};
use ephemera_tests::runtime_api::{function_url_answer, sqs_event};

#[tokio::test]
async fn a_rotated_app_key_is_read_again_on_githubs_401_and_the_runner_launches(
) -> anyhow::Result<()> {
    let p = Pipeline::start(PipelineOptions {
        drain_queue: false,
        reaper_interval: None,
        ..PipelineOptions::default()
    })
    .await?;
    // A long interval: only GitHub's 401 can make the scaler see the new key.
    let config = config_yaml(DEPLOYMENT, &p.sim.url);
    let env = deployment_environment(&p, &config, &[("EPHEMERA_RELOAD_SECONDS", "600")]).await?;
    let mut webhook = Function::start("webhook", &env).await?;
    let mut scaler = Function::start("scaler", &env).await?;
    let x64 = ["self-hosted", "linux", "x64"];
    let (status, body) = function_url_answer(&webhook.invoke(queued_delivery(2001, &x64)).await?);
    assert_eq!(status, 200, "{body}");
    // The scaler is warm with the first key (its cold start read it).
    scaler.invoke(sqs_event(&[])).await?;

    // The operator generates a new key in the App's settings, deletes the old one, and
    // puts the new one into the secret.
    let new_public = std::fs::read_to_string(workspace_path(
        "tests/fixtures/github-app-test-key-2.pub.pem",
    ))?;
    p.sim.set_app_keys(&[&new_public])?;
    let new_private =
        std::fs::read_to_string(workspace_path("tests/fixtures/github-app-test-key-2.pem"))?;
    put_secret(&p.moto, "ephemera/eph/github-app-key", &new_private).await?;

    let received = p.queue.receive(10, 2).await?;
    assert_eq!(received.len(), 1);
    let batch: Vec<_> = received
        .iter()
        .map(|m| {
            (
                m.message_id.clone(),
                m.receipt_handle.clone(),
                m.body.clone(),
            )
        })
        .collect();
    let answer = scaler.invoke(sqs_event(&batch)).await?;
    println!("scaler: {answer}");
    assert_eq!(answer["batchItemFailures"], serde_json::json!([]));
    let runner = p.runner_for_job(2001).await?.expect("a runner for the job");
    assert!(runner.instance_id.is_some(), "{runner:?}");
    assert!(
        !p.sim.snapshot().tokens.is_empty(),
        "GitHub issued an installation token to the new key"
    );
    Ok(())
}
