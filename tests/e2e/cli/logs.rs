//! `runners logs`: a runner's logs, shipped as its host's bootstrap ships them, read
//! through the CLI after the runner was deleted, with no JIT config in any line; and the
//! errors for an unknown runner and a stream that is not there yet.
//!
//! The end to end cannot boot an instance, so the lines go through the bootstrap's own
//! `events` function (taken from infra/runner/bootstrap.sh and run by bash: redaction,
//! cutting, JSON escaping), the runner's real JIT config among them as a careless runner
//! would log it, and into moto's CloudWatch Logs with the SDK, in the instance's stream.

use super::{stderr_of, stdout_of, Operator};
use anyhow::{bail, Context};
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::ports::RunnerStore;
use ephemera_tests::pipeline::{workspace_path, Pipeline, PipelineOptions, DEPLOYMENT, LABELS};
use ephemera_tests::sim::body::encode_jit_config;
use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The runners' log group of the test deployment, as template.yaml names it.
fn group() -> String {
    format!("/ephemera/{DEPLOYMENT}/runners")
}

/// `lines` as the bootstrap turns them into PutLogEvents events (bash runs its
/// `events` function on them): (timestamp, message) pairs.
fn bootstrap_events(file: &str, lines: &[String]) -> anyhow::Result<Vec<(i64, String)>> {
    let script = std::fs::read_to_string(workspace_path("infra/runner/bootstrap.sh"))?;
    let start = script
        .find("\nevents() {")
        .context("no events() in bootstrap.sh")?;
    let end = start
        + script[start..]
            .find("\n}\n")
            .context("events() does not end")?
        + 3;
    let program = format!(
        "set -euo pipefail\nt=$(date +%s%3N)\n{}events {file}\n",
        &script[start..end]
    );
    let mut child = Command::new("bash")
        .args(["-c", &program])
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .context("stdin")?
        .write_all((lines.join("\n") + "\n").as_bytes())?;
    let output = child.wait_with_output()?;
    if !output.status.success() {
        bail!("events() failed: {}", output.status);
    }
    String::from_utf8(output.stdout)?
        .lines()
        .map(|line| {
            let event: Value = serde_json::from_str(line.trim_start_matches(','))?;
            Ok((
                event["timestamp"].as_i64().context("timestamp")?,
                event["message"].as_str().context("message")?.to_owned(),
            ))
        })
        .collect()
}

/// Puts the events in `stream` of the runners' group (created here, as the stack does).
async fn ship(p: &Pipeline, stream: &str, events: Vec<(i64, String)>) -> anyhow::Result<()> {
    use aws_sdk_cloudwatchlogs::types::InputLogEvent;
    let logs = aws_sdk_cloudwatchlogs::Client::new(&p.sdk);
    logs.create_log_group()
        .log_group_name(group())
        .send()
        .await?;
    logs.create_log_stream()
        .log_group_name(group())
        .log_stream_name(stream)
        .send()
        .await?;
    let events = events
        .into_iter()
        .map(|(timestamp, message)| {
            InputLogEvent::builder()
                .timestamp(timestamp)
                .message(message)
                .build()
        })
        .collect::<Result<Vec<_>, _>>()?;
    logs.put_log_events()
        .log_group_name(group())
        .log_stream_name(stream)
        .set_log_events(Some(events))
        .send()
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_runners_logs_are_read_with_no_jit_config_in_them() -> anyhow::Result<()> {
    let options = PipelineOptions {
        reaper_interval: None,
        ..PipelineOptions::default()
    };
    let p = Pipeline::start(options).await?;
    let op = Operator::new(&p)?;
    let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    let (name, instance, jit) = p
        .wait_for(
            "the runner on GitHub, with its instance",
            Duration::from_secs(60),
            || async {
                let Some(record) = p.runner_for_job(job_id).await? else {
                    return Ok(None);
                };
                let Some(instance) = record.instance_id.clone() else {
                    return Ok(None);
                };
                let sim = p.sim.snapshot();
                Ok(sim
                    .runners
                    .values()
                    .find(|r| r.name == record.name)
                    .map(|r| (record.name.clone(), instance, encode_jit_config(r, "_work"))))
            },
        )
        .await?;

    let mut events = bootstrap_events(
        "bootstrap.log",
        &[
            format!("2026-11-26T04:00:00Z ephemera-bootstrap: instance {instance} in us-east-1"),
            "2026-11-26T04:00:05Z ephemera-bootstrap: starting the runner as runner".to_owned(),
        ],
    )?;
    events.extend(bootstrap_events(
        "Runner_20261126-040005-utc.log",
        &[
            format!("[2026-11-26 04:00:05Z INFO Runner] Arguments: --jitconfig {jit}"),
            format!("[2026-11-26 04:00:05Z INFO Runner] {jit}"),
            "[2026-11-26 04:00:06Z INFO Runner] Listening for Jobs".to_owned(),
        ],
    )?);
    ship(&p, &instance, events).await?;

    p.wait_for("the job to end", Duration::from_secs(60), || async {
        Ok(p.runner_for_job(job_id)
            .await?
            .filter(|r| r.status == InstanceStatus::PendingDelete))
    })
    .await?;
    op.run_with_github(&["runners", "delete", &name, "--force"])?
        .assert()
        .success();
    p.reap_once().await?;
    let deleted = p.store.get_runner(&name).await?.context("record")?;
    assert_eq!(deleted.status, InstanceStatus::Deleted);

    let out = op
        .run(&["runners", "logs", &name, "--log-group", &group()])?
        .assert()
        .success();
    let text = stdout_of(out.get_output());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            format!(
                "bootstrap.log: 2026-11-26T04:00:00Z ephemera-bootstrap: instance {instance} \
                 in us-east-1"
            ),
            "bootstrap.log: 2026-11-26T04:00:05Z ephemera-bootstrap: starting the runner as \
             runner"
                .to_owned(),
            "Runner_20261126-040005-utc.log: [2026-11-26 04:00:05Z INFO Runner] Arguments: \
             --jitconfig [redacted]"
                .to_owned(),
            "Runner_20261126-040005-utc.log: [2026-11-26 04:00:05Z INFO Runner] [redacted]"
                .to_owned(),
            "Runner_20261126-040005-utc.log: [2026-11-26 04:00:06Z INFO Runner] Listening \
             for Jobs"
                .to_owned(),
        ]
    );
    // The leak check of the log lines: no piece of the JIT config in any.
    for piece in jit.as_bytes().chunks(40).map(String::from_utf8_lossy) {
        assert!(
            !text.contains(piece.as_ref()),
            "part of the JIT config shipped"
        );
    }

    let out = op
        .run(&["runners", "logs", "--instance", &instance, "--json"])?
        .args(["--log-group", &group()])
        .assert()
        .success();
    let view: Value = serde_json::from_str(&stdout_of(out.get_output()))?;
    assert_eq!(view["instance_id"], instance.as_str());
    assert_eq!(view["log_group"], group().as_str());
    assert_eq!(view["complete"], true);
    assert_eq!(view["events"].as_array().map(Vec::len), Some(5));
    assert!(
        view["events"][0]["shipped_at"]
            .as_str()
            .is_some_and(|at| at.starts_with("20") && at.ends_with('Z')),
        "RFC 3339: {view:#}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_runner_and_a_missing_stream_exit_4_with_what_to_do() -> anyhow::Result<()> {
    let options = PipelineOptions {
        reaper_interval: None,
        drain_queue: false,
        ..PipelineOptions::default()
    };
    let p = Pipeline::start(options).await?;
    let op = Operator::new(&p)?;
    aws_sdk_cloudwatchlogs::Client::new(&p.sdk)
        .create_log_group()
        .log_group_name(group())
        .send()
        .await?;

    let out = op
        .run(&["runners", "logs", "eph-nobody", "--log-group", &group()])?
        .assert()
        .code(4);
    let err = stderr_of(out.get_output());
    assert!(err.contains("no runner named eph-nobody"), "{err}");
    assert!(err.contains("--instance ID"), "says what to do: {err}");

    let out = op
        .run(&[
            "runners",
            "logs",
            "--instance",
            "i-0notyet",
            "--log-group",
            &group(),
        ])?
        .assert()
        .code(4);
    let err = stderr_of(out.get_output());
    assert!(
        err.contains("no logs yet for instance i-0notyet: no stream i-0notyet in log group"),
        "{err}"
    );

    let out = op.run(&["runners", "logs", "eph-nobody"])?.assert().code(4);
    let err = stderr_of(out.get_output());
    assert!(
        err.contains("no runner named"),
        "the record is read first: {err}"
    );
    let out = op
        .run(&["runners", "logs", "--instance", "i-0notyet"])?
        .assert()
        .code(2);
    let err = stderr_of(out.get_output());
    assert!(err.contains("--log-group NAME"), "{err}");
    Ok(())
}
