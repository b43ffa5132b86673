//! The runner copy in the strict world: the simulator publishes a runner release; the
//! next scheduled reaper run, assembled as the deployment's (`ephemera_aws::assembly`)
//! and calling AWS as ReaperRole, puts each arch's tarball, its `.sha256` and
//! `latest-<arch>` into the bucket and starts both image pipelines (the strict layer
//! records the StartImagePipelineExecution calls); the run an hour later asks GitHub
//! conditionally, gets 304, downloads nothing and starts nothing; a later release
//! replaces the pointer and tags the old tarball for the lifecycle rule. A release whose notes
//! give a wrong sum publishes nothing. A runner host's role reads `runner/` and not the
//! sync's mark. The next job's host runs the release the bucket took.

use ephemera_aws::assembly::{RunnerCopy, WebhookApp};
use ephemera_aws::image_pipelines::ImageBuilderPipelines;
use ephemera_aws::runner_bucket::S3RunnerBucket;
use ephemera_core::handlers::reaper::Reaper;
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_tests::pipeline::{Pipeline, PipelineOptions, DEPLOYMENT, LABELS};
use ephemera_tests::sim::HostRunnerPlay;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::time::Instant;

/// The bucket's name as the strict layer resolves RunnerBucket without a stack in moto.
const BUCKET: &str = "eph-runnerbucket-not-created";
const PIPELINES: [&str; 2] = [
    "arn:aws:imagebuilder:us-east-1:123456789012:image-pipeline/eph-runner-x86",
    "arn:aws:imagebuilder:us-east-1:123456789012:image-pipeline/eph-runner-arm",
];

/// The operator's view of the bucket: an object's bytes, or None.
async fn object(s3: &aws_sdk_s3::Client, key: &str) -> Option<Vec<u8>> {
    let answer = s3.get_object().bucket(BUCKET).key(key).send().await.ok()?;
    Some(answer.body.collect().await.ok()?.into_bytes().to_vec())
}

/// The deployment's reaper with the runner copy, calling AWS as ReaperRole of a stack
/// given both pipelines.
async fn reaper_with_copy(p: &Pipeline) -> anyhow::Result<Reaper> {
    let parameters =
        json!({ "DeploymentName": DEPLOYMENT, "ImagePipelineArns": PIPELINES.join(",") });
    let settings = p
        .moto
        .principal_settings("ReaperRole", parameters, None)
        .await?;
    let sdk = ephemera_aws::sdk_config(&settings).await;
    let mut deployment = p.deployment();
    deployment.runner_copy = Some(RunnerCopy {
        bucket: Arc::new(S3RunnerBucket::new(&sdk, BUCKET.to_owned())),
        pipelines: Arc::new(ImageBuilderPipelines::new(&sdk, &PIPELINES.join(","))),
    });
    let webhook_app = WebhookApp::of(p.reaper_forge.clone());
    Ok(deployment.reaper(p.reaper_forge.clone(), webhook_app))
}

async fn started_pipelines(p: &Pipeline) -> anyhow::Result<Vec<Value>> {
    let url = format!("{}/strict-api/imagebuilder/executions", p.moto.endpoint);
    Ok(reqwest::get(url).await?.json().await?)
}

async fn run(reaper: &Reaper, at: OffsetDateTime) -> anyhow::Result<Value> {
    let report = reaper
        .run(at, Instant::now() + Duration::from_secs(50))
        .await?;
    println!("reaper run at {at}: {:?}", report.runner_release);
    Ok(serde_json::to_value(report.runner_release)?)
}

async fn started(p: &Pipeline) -> anyhow::Result<(Reaper, aws_sdk_s3::Client)> {
    let admin =
        ephemera_aws::sdk_config(&ephemera_aws::AwsSettings::emulator(&p.moto.endpoint)).await;
    let s3 = ephemera_aws::runner_bucket::s3_client(&admin);
    s3.create_bucket().bucket(BUCKET).send().await?;
    Ok((reaper_with_copy(p).await?, s3))
}

fn options() -> PipelineOptions {
    PipelineOptions {
        reaper_interval: None,
        drain_queue: false,
        ..PipelineOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_published_release_reaches_the_bucket_and_starts_both_image_pipelines_once(
) -> anyhow::Result<()> {
    let p = Pipeline::start(options()).await?;
    let (reaper, s3) = started(&p).await?;
    let (x64, arm64) = (
        b"x64 runner 2.340.0".repeat(500),
        b"arm64 runner 2.340.0".repeat(500),
    );
    p.sim
        .publish_runner_release("2.340.0", &[("x64", &x64), ("arm64", &arm64)], &[]);

    let now = OffsetDateTime::now_utc();
    let first = run(&reaper, now).await?;
    assert_eq!(first["published"], json!(["x64", "arm64"]), "{first}");
    assert_eq!(first["errors"], json!(0), "{first}");
    for (arch, bytes) in [("x64", &x64), ("arm64", &arm64)] {
        let name = format!("actions-runner-linux-{arch}-2.340.0.tar.gz");
        let sum = hex::encode(Sha256::digest(bytes));
        assert_eq!(
            object(&s3, &format!("runner/{name}")).await.as_ref(),
            Some(bytes)
        );
        assert_eq!(
            object(&s3, &format!("runner/{name}.sha256")).await,
            Some(format!("{sum}  {name}\n").into_bytes())
        );
        assert_eq!(
            object(&s3, &format!("runner/latest-{arch}")).await,
            Some(format!("2.340.0 {sum}\n").into_bytes())
        );
    }
    let executions = started_pipelines(&p).await?;
    let arns: Vec<&str> = executions
        .iter()
        .filter_map(|e| e["imagePipelineArn"].as_str())
        .collect();
    assert_eq!(
        arns, PIPELINES,
        "both pipelines started once: {executions:?}"
    );
    assert_eq!(p.sim.runner_downloads().len(), 2);

    // The next check, an hour on: a conditional request answered 304, nothing else.
    let later = run(&reaper, now + time::Duration::hours(1)).await?;
    assert_eq!(later["not_modified"], json!(true), "{later}");
    assert_eq!(p.sim.runner_downloads().len(), 2, "no new download");
    assert_eq!(
        started_pipelines(&p).await?.len(),
        2,
        "no pipeline started again"
    );
    assert_eq!(p.sim.latest_release_answers().get(&304), Some(&1));

    // A later release replaces the pointer; the old tarball is tagged for expiry.
    let newer = b"x64 runner 2.340.1".repeat(500);
    p.sim
        .publish_runner_release("2.340.1", &[("x64", &newer), ("arm64", &arm64)], &[]);
    let next = run(&reaper, now + time::Duration::hours(2)).await?;
    assert_eq!(next["published"], json!(["x64", "arm64"]), "{next}");
    let tags = s3
        .get_object_tagging()
        .bucket(BUCKET)
        .key("runner/actions-runner-linux-x64-2.340.0.tar.gz")
        .send()
        .await?;
    let superseded = tags
        .tag_set()
        .iter()
        .any(|t| t.key() == "ephemera:superseded" && t.value() == "true");
    assert!(
        superseded,
        "the old x64 tarball is tagged superseded: {tags:?}"
    );

    // A runner host reads the copy, and nothing else of the bucket.
    let host = p
        .moto
        .principal_settings(
            "RunnerRole",
            json!({ "DeploymentName": DEPLOYMENT }),
            Some("i-0123456789abcdef0"),
        )
        .await?;
    let host = ephemera_aws::runner_bucket::s3_client(&ephemera_aws::sdk_config(&host).await);
    let pointer = host
        .get_object()
        .bucket(BUCKET)
        .key("runner/latest-x64")
        .send()
        .await;
    assert!(pointer.is_ok(), "the host reads latest-x64: {pointer:?}");
    let mark = host
        .get_object()
        .bucket(BUCKET)
        .key("sync/runner-release.json")
        .send()
        .await;
    let refused = mark.expect_err("the host may not read the sync's mark");
    assert_eq!(
        refused.raw_response().map(|r| r.status().as_u16()),
        Some(403)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_whose_notes_give_a_wrong_sum_publishes_nothing() -> anyhow::Result<()> {
    let p = Pipeline::start(options()).await?;
    let (reaper, s3) = started(&p).await?;
    let (x64, arm64) = (
        b"x64 runner 2.341.0".repeat(500),
        b"arm64 runner 2.341.0".repeat(500),
    );
    let wrong = "0".repeat(64);
    p.sim.publish_runner_release(
        "2.341.0",
        &[("x64", &x64), ("arm64", &arm64)],
        &[("x64", &wrong), ("arm64", &wrong)],
    );
    let report = run(&reaper, OffsetDateTime::now_utc()).await?;
    assert_eq!(report["published"], json!([]), "{report}");
    assert_eq!(report["errors"], json!(2), "{report}");
    for key in [
        "runner/actions-runner-linux-x64-2.341.0.tar.gz",
        "runner/actions-runner-linux-x64-2.341.0.tar.gz.sha256",
        "runner/latest-x64",
        "runner/latest-arm64",
    ] {
        assert_eq!(object(&s3, key).await, None, "{key} is not in the bucket");
    }
    assert!(
        started_pipelines(&p).await?.is_empty(),
        "no pipeline started"
    );
    Ok(())
}

/// After the scheduled run took a new release into the bucket, the next job's host reads
/// `runner/latest-x64` as its RunnerRole (as bootstrap.sh does at boot), runs that
/// runner, and its record says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_jobs_runner_runs_the_release_the_bucket_took() -> anyhow::Result<()> {
    let p = Pipeline::start(PipelineOptions {
        reaper_interval: None,
        ..PipelineOptions::default()
    })
    .await?;
    let (reaper, _s3) = started(&p).await?;
    p.sim
        .set_host_runner(HostRunnerPlay::baked("2.336.0").from_bucket(BUCKET));
    p.sim.publish_runner_release(
        "2.340.0",
        &[("x64", b"x64 2.340.0"), ("arm64", b"arm64 2.340.0")],
        &[],
    );
    let report = run(&reaper, OffsetDateTime::now_utc()).await?;
    assert_eq!(report["published"], json!(["x64", "arm64"]), "{report}");

    let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    let limit = Duration::from_secs(90);
    p.wait_for("the job's runner to be deleted", limit, || async {
        let _ = reaper
            .run(
                OffsetDateTime::now_utc(),
                Instant::now() + Duration::from_secs(20),
            )
            .await?;
        let runner = p.runner_for_job(job_id).await?;
        let done = p.sim.snapshot().jobs[&job_id].status == "completed";
        Ok(runner.filter(|r| done && r.status == InstanceStatus::Deleted))
    })
    .await?;
    let runner = p.runner_for_job(job_id).await?.expect("its runner");
    let ran = &runner.host_runner;
    assert_eq!(ran.runner_version.as_deref(), Some("2.340.0"), "{runner:?}");
    assert_eq!(ran.runner_image_version.as_deref(), Some("2.336.0"));
    assert!(
        ran.runner_swap_ms.is_some(),
        "the image was behind: {ran:?}"
    );
    Ok(())
}

/// GitHub's limit for unauthenticated requests, 60 an hour per source address, with its
/// headers and its 403: the stock boot's old anonymous read of the release notes meets
/// it from the 61st host behind one address.
#[tokio::test]
async fn the_simulator_refuses_the_61st_unauthenticated_request_of_an_address_in_an_hour(
) -> anyhow::Result<()> {
    let p = Pipeline::start(options()).await?;
    p.sim
        .publish_runner_release("2.340.0", &[("x64", b"x64")], &[]);
    let url = format!("{}/repos/actions/runner/releases/latest", p.sim.url);
    let http = reqwest::Client::builder().user_agent("curl").build()?;
    for n in 1..=60 {
        let answer = http.get(&url).send().await?;
        assert_eq!(answer.status(), 200, "request {n}");
        let remaining = answer.headers()["x-ratelimit-remaining"]
            .to_str()?
            .to_owned();
        assert_eq!(remaining, (60 - n).to_string());
    }
    let refused = http.get(&url).send().await?;
    assert_eq!(refused.status(), 403);
    assert_eq!(refused.headers()["x-ratelimit-limit"], "60");
    assert_eq!(refused.headers()["x-ratelimit-remaining"], "0");
    let body: Value = refused.json().await?;
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("API rate limit exceeded for 127.0.0.1."),
        "{body}"
    );
    // A download is not an API request: never limited.
    let download = format!(
        "{}/actions/runner/releases/download/v2.340.0/actions-runner-linux-x64-2.340.0.tar.gz",
        p.sim.url
    );
    assert_eq!(http.get(&download).send().await?.status(), 200);
    Ok(())
}
