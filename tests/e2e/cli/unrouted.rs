//! A job no pool takes (a `runs-on` typo) leaves a record the operator can list:
//! `jobs list --status unrouted`, with its labels.

use super::{stdout_of, Operator};
use ephemera_aws::DynamoUnroutedJobs;
use ephemera_core::ports::UnroutedJobs;
use ephemera_tests::pipeline::{Pipeline, PipelineOptions};
use serde_json::Value;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_no_pool_takes_is_listed_as_unrouted() -> anyhow::Result<()> {
    let options = PipelineOptions {
        reaper_interval: None,
        ..PipelineOptions::default()
    };
    let p = Pipeline::start(options).await?;
    let op = Operator::new(&p)?;
    let job_id = p
        .sim
        .create_job("octo-org", "app", &["self-hosted", "linx", "x64"], None)
        .await?;
    let unrouted = DynamoUnroutedJobs::new(aws_sdk_dynamodb::Client::new(&p.sdk), &op.table);
    p.wait_for("the unrouted record", Duration::from_secs(30), || async {
        Ok(unrouted
            .list_unrouted()
            .await?
            .into_iter()
            .find(|j| j.job_id == job_id))
    })
    .await?;

    let out = op
        .run(&["jobs", "list", "--status", "unrouted"])?
        .assert()
        .success();
    let text = stdout_of(out.get_output());
    let row = text
        .lines()
        .find(|l| l.starts_with(&job_id.to_string()))
        .unwrap_or_default();
    assert!(
        row.contains("unrouted")
            && row.contains("octo-org/app")
            && row.contains("self-hosted,linx,x64"),
        "{text}"
    );
    assert!(text.contains("no pool has all of these labels"), "{text}");

    let out = op
        .run(&["jobs", "list", "--status", "queued,unrouted", "--json"])?
        .assert()
        .success();
    let json: Value = serde_json::from_slice(&out.get_output().stdout)?;
    let jobs = json["jobs"].as_array().cloned().unwrap_or_default();
    let job = jobs.iter().find(|j| j["job_id"] == job_id).expect("listed");
    assert_eq!(job["status"], "unrouted");
    assert_eq!(job["pool"], "");
    assert_eq!(job["repo"], "octo-org/app");
    assert_eq!(
        job["labels"],
        serde_json::json!(["self-hosted", "linx", "x64"])
    );

    // Not among the jobs listed by default, nor under a pool.
    let out = op.run(&["jobs", "list"])?.assert().success();
    assert!(!stdout_of(out.get_output()).contains("unrouted"));
    let out = op
        .run(&[
            "jobs",
            "list",
            "--status",
            "unrouted",
            "--pool",
            "linux-x64",
        ])?
        .assert()
        .success();
    assert_eq!(stdout_of(out.get_output()), "no jobs\n");
    Ok(())
}
