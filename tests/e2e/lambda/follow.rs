//! Configuration and secrets that follow their source, through the Lambda entry points
//! (the `webhook` and `scaler` binaries under the project's runtime API) on moto and the
//! GitHub simulator: a pushed configuration with a new pool routes and launches without
//! a restart; a rotated webhook secret is accepted, and the previous one still is
//! during the rotation window.

use crate::cli::{config_yaml, ephemera, stdout_of, Scratch};
use ephemera_aws::ResourceNames;
use ephemera_core::webhook::signature_header;
use ephemera_tests::functions::{app_key, environment, put_secret, Function};
use ephemera_tests::moto::Moto;
use ephemera_tests::pipeline::{Pipeline, PipelineOptions, DEPLOYMENT, WEBHOOK_SECRET};
use ephemera_tests::runtime_api::{function_url_answer, function_url_event, sqs_event};
use std::time::Duration;

pub(super) const PARAMETER: &str = "/ephemera/eph/config";
/// The check interval the functions run with here (the default is 30 s).
const RELOAD_SECONDS: u64 = 1;

/// Puts `config` into the configuration parameter and the webhook secret and App key into
/// Secrets Manager, as a deployment holds them; returns the functions' environment for
/// that deployment, with `extra` variables after the common ones.
pub(super) async fn deployment_environment(
    p: &Pipeline,
    config: &str,
    extra: &[(&str, &str)],
) -> anyhow::Result<Vec<(String, String)>> {
    put_config(&p.moto.endpoint, config).await?;
    let hook_id = put_secret(&p.moto, "ephemera/eph/webhook-secret", WEBHOOK_SECRET).await?;
    let key_id = put_secret(&p.moto, "ephemera/eph/github-app-key", &app_key()?).await?;
    let names = ResourceNames::for_deployment(DEPLOYMENT);
    let mut vars = vec![
        ("EPHEMERA_CONFIG_PARAMETER", PARAMETER),
        ("EPHEMERA_TABLE", names.table.as_str()),
        ("EPHEMERA_QUEUE_URL", p.queue.queue_url()),
        ("EPHEMERA_WEBHOOK_SECRET_ID", hook_id.as_str()),
        ("EPHEMERA_GITHUB_KEY_SECRET_ID", key_id.as_str()),
        (
            "EPHEMERA_INSTANCE_ARN_PREFIX",
            "arn:aws:ec2:us-east-1:123456789012:instance/",
        ),
        ("EPHEMERA_JIT_TABLE", names.jit_table.as_str()),
    ];
    vars.extend_from_slice(extra);
    Ok(environment(&p.moto.endpoint, &vars))
}

pub(super) async fn put_config(endpoint: &str, text: &str) -> anyhow::Result<()> {
    let sdk = ephemera_aws::sdk_config(&ephemera_aws::AwsSettings::emulator(endpoint)).await;
    aws_sdk_ssm::Client::new(&sdk)
        .put_parameter()
        .name(PARAMETER)
        .value(text)
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .overwrite(true)
        .send()
        .await?;
    Ok(())
}

/// A signed `ping` delivery through the webhook function: its HTTP status.
async fn ping(webhook: &mut Function, secret: &str) -> anyhow::Result<u16> {
    let body = r#"{"zen":"Keep it logically awesome.","hook_id":1}"#;
    let signature = signature_header(secret.as_bytes(), body.as_bytes());
    let event = function_url_event(
        &[
            ("X-GitHub-Event", "ping"),
            ("X-GitHub-Delivery", "d-1"),
            ("X-Hub-Signature-256", &signature),
        ],
        body,
    );
    let (status, body) = function_url_answer(&webhook.invoke(event).await?);
    println!("ping signed with {secret:?}: {status} {body}");
    Ok(status)
}

#[tokio::test]
async fn a_rotated_webhook_secret_is_accepted_and_the_previous_one_still_is() -> anyhow::Result<()>
{
    let moto = Moto::start().await?;
    put_config(
        &moto.endpoint,
        &config_yaml(DEPLOYMENT, "http://127.0.0.1:9"),
    )
    .await?;
    let secret_id = put_secret(&moto, "ephemera/eph/webhook-secret", "old-secret").await?;
    // A long interval: only the check a failed signature asks for can see the rotation.
    let env = environment(
        &moto.endpoint,
        &[
            ("EPHEMERA_CONFIG_PARAMETER", PARAMETER),
            ("EPHEMERA_QUEUE_URL", "http://127.0.0.1:9/queue/eph-jobs"),
            ("EPHEMERA_WEBHOOK_SECRET_ID", &secret_id),
            ("EPHEMERA_RELOAD_SECONDS", "600"),
        ],
    );
    let mut webhook = Function::start("webhook", &env).await?;
    assert_eq!(ping(&mut webhook, "old-secret").await?, 200);
    put_secret(&moto, "ephemera/eph/webhook-secret", "new-secret").await?;
    // Forced checks are at most every 5 s.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(ping(&mut webhook, "new-secret").await?, 200);
    assert_eq!(
        ping(&mut webhook, "old-secret").await?,
        200,
        "previous one, within the window"
    );
    assert_eq!(ping(&mut webhook, "not-the-secret").await?, 401);
    drop(webhook);
    moto.stop().await;
    Ok(())
}

/// During a rotation an operator can name the previous secret itself
/// (`WebhookPreviousSecretArn`): the webhook function reads both with its role (the stack
/// grants the previous one only when it is named) and accepts a delivery signed with
/// either.
#[tokio::test]
async fn an_explicitly_named_previous_secret_is_read_with_the_role_and_accepted(
) -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    put_config(
        &moto.endpoint,
        &config_yaml(DEPLOYMENT, "http://127.0.0.1:9"),
    )
    .await?;
    let current = put_secret(&moto, "ephemera/eph/webhook-secret", "current-secret").await?;
    let previous = put_secret(&moto, "ephemera/eph/webhook-secret-old", "previous-secret").await?;
    let names = ResourceNames::for_deployment(DEPLOYMENT);
    let env = environment(
        &moto.endpoint,
        &[
            ("EPHEMERA_CONFIG_PARAMETER", PARAMETER),
            ("EPHEMERA_TABLE", names.table.as_str()),
            ("EPHEMERA_QUEUE_URL", "http://127.0.0.1:9/queue/eph-jobs"),
            ("EPHEMERA_WEBHOOK_SECRET_ID", &current),
            ("EPHEMERA_WEBHOOK_PREVIOUS_SECRET_ID", &previous),
        ],
    );
    let mut webhook = Function::start("webhook", &env).await?;
    assert_eq!(ping(&mut webhook, "current-secret").await?, 200);
    assert_eq!(ping(&mut webhook, "previous-secret").await?, 200);
    assert_eq!(ping(&mut webhook, "not-the-secret").await?, 401);
    drop(webhook);
    moto.stop().await;
    Ok(())
}

#[tokio::test]
async fn a_pushed_configuration_with_a_new_pool_routes_and_launches_without_a_restart(
) -> anyhow::Result<()> {
    let p = Pipeline::start(PipelineOptions {
        drain_queue: false,
        reaper_interval: None,
        ..PipelineOptions::default()
    })
    .await?;
    let first = config_yaml(DEPLOYMENT, &p.sim.url);
    let reload = RELOAD_SECONDS.to_string();
    let env = deployment_environment(&p, &first, &[("EPHEMERA_RELOAD_SECONDS", &reload)]).await?;
    let mut webhook = Function::start("webhook", &env).await?;
    let mut scaler = Function::start("scaler", &env).await?;
    let arm = ["self-hosted", "linux", "arm64"];
    let deliver = |job_id: u64| queued_delivery(job_id, &arm);

    let (status, body) = function_url_answer(&webhook.invoke(deliver(1001)).await?);
    assert!(body.contains("no pool for labels"), "{status} {body}");

    let scratch = Scratch::new()?;
    let second = format!(
        "{first}  - name: linux-arm64\n    labels: [self-hosted, linux, arm64]\n    \
         max_runners: 2\n    instance_types: [t4g.micro]\n    ami: {}\n",
        ephemera_tests::moto::ARM64_IMAGE
    );
    let file = scratch.write("config.yaml", &second)?;
    let endpoint = p.moto.endpoint.clone();
    let pushed = tokio::task::spawn_blocking(move || {
        ephemera()?
            .args(["config", "push"])
            .arg(&file)
            .args(["--config-parameter", PARAMETER, "--endpoint-url", &endpoint])
            .args(["--region", "us-east-1"])
            .output()
            .map_err(anyhow::Error::from)
    })
    .await??;
    let said = stdout_of(&pushed);
    assert!(pushed.status.success());
    assert!(said.contains("EPHEMERA_RELOAD_SECONDS"), "{said}");

    tokio::time::sleep(Duration::from_secs(RELOAD_SECONDS) + Duration::from_millis(200)).await;
    let (status, body) = function_url_answer(&webhook.invoke(deliver(1002)).await?);
    assert_eq!(
        (status, body.as_str()),
        (200, r#"{"message":"queued for pool linux-arm64"}"#)
    );

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
    tokio::time::sleep(Duration::from_secs(RELOAD_SECONDS)).await;
    let answer = scaler.invoke(sqs_event(&batch)).await?;
    println!("scaler: {answer}");
    assert_eq!(answer["batchItemFailures"], serde_json::json!([]));
    let runner = p.runner_for_job(1002).await?.expect("a runner for the job");
    assert_eq!(runner.pool, "linux-arm64");
    assert!(runner.instance_id.is_some(), "{runner:?}");

    // Each function recorded the version it runs now (for `ephemera doctor`): the
    // pushed one, the parameter's second version.
    let dynamodb = aws_sdk_dynamodb::Client::new(&p.sdk);
    let table = ResourceNames::for_deployment(DEPLOYMENT).table;
    for function in ["webhook", "scaler"] {
        let running = ephemera_aws::running::read(&dynamodb, &table, function)
            .await?
            .unwrap_or_else(|| panic!("{function} recorded no running configuration"));
        assert_eq!(
            (running.parameter.as_str(), running.version),
            (PARAMETER, 2),
            "{function}: {running:?}"
        );
    }
    Ok(())
}

/// A signed `queued` delivery for job `job_id` with `labels`, in the simulator's
/// installation.
pub(super) fn queued_delivery(job_id: u64, labels: &[&str]) -> serde_json::Value {
    let body = serde_json::json!({
        "action": "queued",
        "workflow_job": {
            "id": job_id, "run_id": 7, "status": "queued", "labels": labels,
            "runner_id": null, "runner_name": null,
            "created_at": "2026-01-01T00:00:00Z", "started_at": null,
        },
        "repository": { "name": "app", "full_name": "octo-org/app",
                        "owner": { "login": "octo-org" } },
        "organization": { "login": "octo-org" },
        "installation": { "id": 1 },
    })
    .to_string();
    let signature = signature_header(WEBHOOK_SECRET.as_bytes(), body.as_bytes());
    function_url_event(
        &[
            ("X-GitHub-Event", "workflow_job"),
            ("X-GitHub-Delivery", &format!("d-{job_id}")),
            ("X-Hub-Signature-256", &signature),
        ],
        &body,
    )
}
