//! `runners list/show`, `pools` and `jobs list`, as tables and as JSON, on a runner
//! that is running a job; and the delete GitHub refuses because of that job.

use super::{stderr_of, stdout_of, Operator};
use ephemera_core::lifecycle::{InstanceStatus, RunnerStatus};
use ephemera_core::ports::RunnerStore;
use ephemera_tests::pipeline::{Pipeline, PipelineOptions, LABELS};
use serde_json::Value;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// A pipeline whose one runner is running a long job, with the reaper idle.
async fn busy_pipeline() -> anyhow::Result<(Pipeline, u64, String)> {
    let options = PipelineOptions {
        job_duration: Duration::from_secs(120),
        reaper_interval: None,
        ..PipelineOptions::default()
    };
    let p = Pipeline::start(options).await?;
    let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    p.wait_for("the job to run", LIMIT, || async {
        let started = p.sim.snapshot().jobs[&job_id].status == "in_progress";
        let runner = p.runner_for_job(job_id).await?;
        Ok(runner
            .filter(|r| started && r.status == InstanceStatus::Running)
            .filter(|r| r.runner_status == RunnerStatus::Active)
            .filter(|r| r.job_id == Some(job_id)))
    })
    .await?;
    let name = p
        .runner_for_job(job_id)
        .await?
        .map(|r| r.name)
        .ok_or_else(|| anyhow::anyhow!("no runner"))?;
    Ok((p, job_id, name))
}

fn json_of(output: &std::process::Output) -> anyhow::Result<Value> {
    Ok(serde_json::from_slice(&output.stdout)?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_sees_runners_pools_and_jobs_and_cannot_delete_a_busy_runner(
) -> anyhow::Result<()> {
    let (p, job_id, name) = busy_pipeline().await?;
    let op = Operator::new(&p)?;

    // runners list: a table for people, JSON for scripts.
    let out = op.run(&["runners", "list"])?.assert().success();
    let text = stdout_of(out.get_output());
    let header = text.lines().next().unwrap_or_default();
    assert!(header.starts_with("NAME"), "{text}");
    for column in [
        "POOL", "STATUS", "RUNNER", "INSTANCE", "JOB", "AGE", "REASON",
    ] {
        assert!(header.contains(column), "{column} missing: {text}");
    }
    let row = text
        .lines()
        .find(|l| l.starts_with(&name))
        .unwrap_or_default();
    assert!(
        row.contains("linux-x64") && row.contains("running"),
        "{text}"
    );
    assert!(row.contains(&job_id.to_string()), "{text}");

    let out = op.run(&["runners", "list", "--json"])?.assert().success();
    let json = json_of(out.get_output())?;
    let runners = json["runners"].as_array().cloned().unwrap_or_default();
    assert_eq!(runners.len(), 1, "{json}");
    assert_eq!(runners[0]["name"], name.as_str());
    assert_eq!(runners[0]["pool"], "linux-x64");
    assert_eq!(runners[0]["status"], "running");
    assert_eq!(runners[0]["job_id"], job_id);
    assert!(runners[0]["instance_id"]
        .as_str()
        .is_some_and(|i| i.starts_with("i-")));

    let out = op
        .run(&["runners", "list", "--status", "deleted", "--json"])?
        .assert()
        .success();
    assert_eq!(json_of(out.get_output())?["runners"], Value::Array(vec![]));
    let out = op
        .run(&["runners", "list", "--pool", "other"])?
        .assert()
        .success();
    assert_eq!(stdout_of(out.get_output()), "no runners\n");

    // runners show: every field and the history.
    let out = op.run(&["runners", "show", &name])?.assert().success();
    let text = stdout_of(out.get_output());
    for expected in [
        "github runner id",
        "installation",
        "next attempt",
        "history:",
    ] {
        assert!(text.contains(expected), "{expected} missing: {text}");
    }
    for status in ["pending_create", "creating", "running"] {
        assert!(text.lines().any(|l| l.contains(status)), "{status}: {text}");
    }
    let out = op
        .run(&["runners", "show", &name, "--json"])?
        .assert()
        .success();
    let json = json_of(out.get_output())?;
    assert_eq!(json["name"], name.as_str());
    assert_eq!(json["labels"], serde_json::json!(LABELS));
    let history = json["history"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        history.first().map(|h| &h["status"]),
        Some(&Value::from("pending_create"))
    );
    assert!(history.iter().any(|h| h["status"] == "running"), "{json}");

    let out = op.run(&["runners", "show", "eph-nope"])?.assert().code(4);
    assert!(stderr_of(out.get_output()).contains("no runner named eph-nope"));

    // pools: limits from the configuration, counts from the table.
    let out = op.run_with_config(&["pools"])?.assert().success();
    let text = stdout_of(out.get_output());
    let row = text
        .lines()
        .find(|l| l.starts_with("linux-x64"))
        .unwrap_or_default();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        &cells[..9],
        ["linux-x64", "10", "0", "1", "1", "0", "1", "0", "0"],
        "{text}"
    );
    assert!(row.ends_with("running 1"), "{text}");
    let out = op.run_with_config(&["pools", "--json"])?.assert().success();
    let json = json_of(out.get_output())?;
    let pool = &json["pools"][0];
    assert_eq!(pool["name"], "linux-x64");
    assert_eq!(pool["max_runners"], 10);
    assert_eq!(pool["slots_used"], 1);
    assert_eq!(pool["by_status"]["running"], 1);
    assert_eq!(pool["active"], 1);
    assert_eq!(pool["queued_jobs"], 0);
    assert_eq!(pool["stopped"], 0);

    // jobs list.
    let out = op.run(&["jobs", "list"])?.assert().success();
    let text = stdout_of(out.get_output());
    let row = text
        .lines()
        .find(|l| l.starts_with(&job_id.to_string()))
        .unwrap_or_default();
    assert!(
        row.contains("in_progress") && row.contains("octo-org/app") && row.contains(&name),
        "{text}"
    );
    let out = op.run(&["jobs", "list", "--json"])?.assert().success();
    let json = json_of(out.get_output())?;
    assert_eq!(json["jobs"][0]["job_id"], job_id);
    assert_eq!(json["jobs"][0]["status"], "in_progress");
    assert_eq!(json["jobs"][0]["runner_name"], name.as_str());
    let out = op
        .run(&["jobs", "list", "--status", "completed", "--json"])?
        .assert()
        .success();
    assert_eq!(json_of(out.get_output())?["jobs"], Value::Array(vec![]));

    // delete: GitHub refuses (422), exit code 3, the job named, nothing changed.
    for force in [false, true] {
        let mut args = vec!["runners", "delete", name.as_str()];
        if force {
            args.push("--force");
        }
        let out = op.run_with_github(&args)?.assert().code(3);
        let err = stderr_of(out.get_output());
        assert!(
            err.contains(&format!("is running job {job_id} of octo-org/app")),
            "{err}"
        );
        assert!(
            err.contains("Cancel the job") && err.contains("wait for it to finish"),
            "{err}"
        );
    }
    let record = p.store.get_runner(&name).await?.expect("record kept");
    assert_eq!(record.status, InstanceStatus::Running);
    let sim = p.sim.snapshot();
    assert_eq!(sim.runners.len(), 1, "still registered on GitHub");
    assert_eq!(sim.counters.jobs_killed, 0);
    Ok(())
}
