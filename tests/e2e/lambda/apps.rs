//! Two GitHub Apps through the scaler's Lambda entry point under the project's runtime
//! API: the configuration lists the second App with the secret holding its key, the
//! function reads that secret with the stack's App key at its cold start, and one
//! batch's registrations go to both Apps. The reaper function reads it too, with its own
//! role, at its cold start, and its scheduled run answers a whole report.

use super::follow::{deployment_environment, queued_delivery};
use crate::cli::config_yaml;
use ephemera_tests::functions::{put_secret, Function};
use ephemera_tests::pipeline::{
    workspace_path, Pipeline, PipelineOptions, APP_ID, DEPLOYMENT, SECOND_APP_ID,
};
use ephemera_tests::runtime_api::{function_url_answer, sqs_event};

#[tokio::test]
async fn the_scaler_function_registers_one_batch_with_both_apps() -> anyhow::Result<()> {
    let p = Pipeline::start(PipelineOptions {
        drain_queue: false,
        reaper_interval: None,
        two_apps: true,
        ..PipelineOptions::default()
    })
    .await?;
    let secret = format!("ephemera/{DEPLOYMENT}/github-app-{SECOND_APP_ID}");
    let key = std::fs::read_to_string(workspace_path("tests/fixtures/github-app-test-key-2.pem"))?;
    let secret_arn = put_secret(&p.moto, &secret, &key).await?;
    let config = config_yaml(DEPLOYMENT, &p.sim.url).replace(
        &format!("  app_id: {APP_ID}\n"),
        &format!(
            "  app_id: {APP_ID}\n  more_apps:\n    - app_id: {SECOND_APP_ID}\n      key_secret: {secret}\n"
        ),
    );
    assert!(config.contains("more_apps"), "{config}");
    // The stack's MoreAppKeySecretArns names the secret, so the roles may read it.
    let env = deployment_environment(
        &p,
        &config,
        &[("EPHEMERA_MORE_APP_KEY_SECRET_ARNS", secret_arn.as_str())],
    )
    .await?;
    let mut webhook = Function::start("webhook", &env).await?;
    let mut scaler = Function::start("scaler", &env).await?;
    let x64 = ["self-hosted", "linux", "x64"];
    for job_id in 3001..3005 {
        let answer = webhook.invoke(queued_delivery(job_id, &x64)).await?;
        let (status, body) = function_url_answer(&answer);
        assert_eq!(status, 200, "{body}");
    }

    let received = p.queue.receive(10, 2).await?;
    assert_eq!(received.len(), 4);
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
    assert_eq!(
        answer["batchItemFailures"],
        serde_json::json!([]),
        "{answer}"
    );
    for job_id in 3001..3005 {
        let runner = p
            .runner_for_job(job_id)
            .await?
            .expect("a runner for the job");
        assert!(runner.github_runner_id.is_some(), "{runner:?}");
    }
    let counters = p.sim.snapshot().counters;
    assert_eq!(
        counters.registrations_by(APP_ID),
        2,
        "{:?}",
        counters.app_calls
    );
    assert_eq!(counters.registrations_by(SECOND_APP_ID), 2);

    // The reaper function, with the same environment: a cold start that reads both
    // Apps' keys as the reaper's role, and a scheduled run that answers its report.
    let mut reaper = Function::start("reaper", &env).await?;
    let report = reaper
        .invoke(serde_json::json!({"source": "aws.events", "detail-type": "Scheduled Event"}))
        .await?;
    assert_eq!(
        report["another_run_held_the_lease"],
        serde_json::json!(false),
        "{report}"
    );
    Ok(())
}
