//! Unrouted means ours, end to end in the strict world: a hosted job (`ubuntu-latest`)
//! leaves no item, no metric and no log line above debug, and a job whose sizing labels
//! break its pool's policy is unrouted with the reason, which `jobs list --status
//! unrouted` shows; and a job asking `cpu=8, ram=32` runs on a runner of a matching type,
//! registered with its sizing labels. A disk EC2 cannot boot is unrouted naming its rule,
//! a disk below the image's snapshot is raised to it, and a job on an arm64 image runs on
//! an arm64 type (the strict layer refuses each launch EC2 would).

use super::{stdout_of, Operator};
use ephemera_aws::DynamoUnroutedJobs;
use ephemera_core::metrics::{Metric, Metrics};
use ephemera_core::ports::UnroutedJobs;
use ephemera_core::unrouted::UnroutedJob;
use ephemera_tests::moto::ARM64_IMAGE as ARM_IMAGE;
use ephemera_tests::pipeline::{Pipeline, PipelineOptions, DEPLOYMENT};
use serde_json::Value;
use std::time::Duration;

/// A label no other test uses, to find this test's lines among every test's logs.
const HOSTED_MARKER: &str = "hosted-e2e-5f1c";

async fn recorded(p: &Pipeline, table: &str, job_id: u64) -> anyhow::Result<UnroutedJob> {
    let unrouted = DynamoUnroutedJobs::new(aws_sdk_dynamodb::Client::new(&p.sdk), table);
    p.wait_for("the unrouted record", Duration::from_secs(30), || async {
        Ok(unrouted
            .list_unrouted()
            .await?
            .into_iter()
            .find(|j| j.job_id == job_id))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosted_job_leaves_no_item_no_metric_and_no_log_line_above_debug() -> anyhow::Result<()> {
    ephemera_tests::logs::capture();
    let (metrics, captured) = Metrics::capture(DEPLOYMENT);
    let p = Pipeline::start(PipelineOptions {
        reaper_interval: None,
        metrics,
        ..PipelineOptions::default()
    })
    .await?;
    let op = Operator::new(&p)?;
    let puts = || p.calls.count("DynamoDB", "PutItem");
    let before = puts();
    // The simulator answers once the webhook has: the job has been handled on return.
    let hosted = p
        .sim
        .create_job("octo-org", "site", &["ubuntu-latest", HOSTED_MARKER], None)
        .await?;
    assert_eq!(puts(), before, "a hosted job cost a write");

    // A typo in runs-on is ours, and is recorded: the same path, seen to write.
    let typo = p
        .sim
        .create_job("octo-org", "app", &["self-hosted", "linx"], None)
        .await?;
    let record = recorded(&p, &op.table, typo).await?;
    assert_eq!(record.reason, "no pool has all of its labels");
    assert!(puts() > before, "the unrouted job's write was not counted");

    let unrouted = DynamoUnroutedJobs::new(aws_sdk_dynamodb::Client::new(&p.sdk), &op.table);
    let listed = unrouted.list_unrouted().await?;
    assert!(listed.iter().all(|j| j.job_id != hosted), "{listed:?}");

    let documents = captured.documents().map_err(anyhow::Error::msg)?;
    let unrouted_by_repo: Vec<&str> = documents
        .iter()
        .filter(|d| d.values(Metric::JobsUnrouted).is_some())
        .filter_map(|d| d.dimension(ephemera_core::metrics::Dimension::Repository))
        .collect();
    assert_eq!(unrouted_by_repo, ["octo-org/app"]);

    let logs = ephemera_tests::logs::captured();
    let lines: Vec<&str> = logs.lines().filter(|l| l.contains(HOSTED_MARKER)).collect();
    assert!(
        lines.iter().any(|l| l.contains("DEBUG")),
        "the hosted job's debug line was not captured: {lines:#?}"
    );
    let loud: Vec<&&str> = lines
        .iter()
        .filter(|l| {
            ["INFO", "WARN", "ERROR"]
                .iter()
                .any(|level| l.contains(level))
        })
        .collect();
    assert!(loud.is_empty(), "{loud:#?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_over_the_sizing_policy_is_unrouted_with_the_reason() -> anyhow::Result<()> {
    let p = Pipeline::start(PipelineOptions {
        reaper_interval: None,
        pool_extra: "    sizing: { accept: true, max_vcpus_per_runner: 16 }\n".to_owned(),
        ..PipelineOptions::default()
    })
    .await?;
    let op = Operator::new(&p)?;
    let job_id = p
        .sim
        .create_job(
            "octo-org",
            "app",
            &["self-hosted", "linux", "ephemera.cpu=64"],
            None,
        )
        .await?;
    let record = recorded(&p, &op.table, job_id).await?;
    assert!(
        record.reason.contains("ephemera.cpu=64") && record.reason.contains("limit of 16"),
        "{record:?}"
    );

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
        row.contains("unrouted") && row.contains("ephemera.cpu=64"),
        "{text}"
    );
    assert!(
        text.contains(&format!("job {job_id}: {}", record.reason)),
        "{text}"
    );

    let out = op
        .run(&["jobs", "list", "--status", "unrouted", "--json"])?
        .assert()
        .success();
    let json: Value = serde_json::from_slice(&out.get_output().stdout)?;
    let jobs = json["jobs"].as_array().cloned().unwrap_or_default();
    let job = jobs.iter().find(|j| j["job_id"] == job_id).expect("listed");
    assert_eq!(job["status"], "unrouted");
    assert_eq!(job["reason"], record.reason.as_str());
    // Nothing was launched for it.
    assert_eq!(p.calls.count("EC2", "CreateFleet"), 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_asking_8_vcpus_and_32_gib_runs_on_a_matching_type_registered_with_its_labels(
) -> anyhow::Result<()> {
    let p = Pipeline::start(PipelineOptions {
        reaper_interval: None,
        pool_extra:
            "    sizing: { accept: true, max_vcpus_per_runner: 16, families: [m7i, m7a] }\n"
                .to_owned(),
        ..PipelineOptions::default()
    })
    .await?;
    let labels = ["self-hosted", "linux", "ephemera.cpu=8", "ephemera.ram=32"];
    let job_id = p.sim.create_job("octo-org", "app", &labels, None).await?;
    let runner = p
        .wait_for(
            "a runner to take the sized job",
            Duration::from_secs(90),
            || async {
                let sim = p.sim.snapshot();
                let name = sim.jobs[&job_id].runner_name.clone();
                Ok(name.and_then(|name| sim.runners.values().find(|r| r.name == name).cloned()))
            },
        )
        .await?;
    p.wait_for(
        "the sized job to complete",
        Duration::from_secs(90),
        || async { Ok((p.sim.snapshot().jobs[&job_id].status == "completed").then_some(())) },
    )
    .await?;
    for label in ["ephemera.cpu=8", "ephemera.ram=32"] {
        assert!(
            runner.labels.iter().any(|l| l == label),
            "{:?}",
            runner.labels
        );
    }
    let instance_id = runner.instance_id.clone().expect("the runner's instance");
    let ec2 = aws_sdk_ec2::Client::new(&p.sdk);
    let described = ec2
        .describe_instances()
        .instance_ids(&instance_id)
        .send()
        .await?;
    let launched = described
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .find_map(|i| i.instance_type())
        .map(|t| t.as_str().to_owned());
    assert!(
        matches!(launched.as_deref(), Some("m7i.2xlarge" | "m7a.2xlarge")),
        "{launched:?}"
    );
    Ok(())
}

/// The instance of the runner that took `job_id`, once it took it.
async fn instance_that_took(p: &Pipeline, job_id: u64) -> anyhow::Result<String> {
    let runner = p
        .wait_for(
            "a runner to take the sized job",
            Duration::from_secs(90),
            || async {
                let sim = p.sim.snapshot();
                let name = sim.jobs[&job_id].runner_name.clone();
                Ok(name.and_then(|name| sim.runners.values().find(|r| r.name == name).cloned()))
            },
        )
        .await?;
    Ok(runner.instance_id.clone().expect("the runner's instance"))
}

/// Once `job_id` completed.
async fn completed(p: &Pipeline, job_id: u64) -> anyhow::Result<()> {
    p.wait_for(
        "the sized job to complete",
        Duration::from_secs(90),
        || async { Ok((p.sim.snapshot().jobs[&job_id].status == "completed").then_some(())) },
    )
    .await
}

async fn described(
    p: &Pipeline,
    instance_id: &str,
) -> anyhow::Result<aws_sdk_ec2::types::Instance> {
    let ec2 = aws_sdk_ec2::Client::new(&p.sdk);
    let described = ec2
        .describe_instances()
        .instance_ids(instance_id)
        .send()
        .await?;
    let instance = described
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .next()
        .cloned();
    Ok(instance.expect("the instance"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_asking_a_disk_ec2_cannot_boot_is_unrouted_naming_the_label_and_the_rule(
) -> anyhow::Result<()> {
    let p = Pipeline::start(PipelineOptions {
        reaper_interval: None,
        pool_extra: "    sizing: { accept: true }\n".to_owned(),
        ..PipelineOptions::default()
    })
    .await?;
    let op = Operator::new(&p)?;
    let cases = [
        ("ephemera.disk=100:io2", "only with provisioned IOPS"),
        ("ephemera.disk=500:st1", "cannot boot from a st1 volume"),
        ("ephemera.disk=2000:standard", "from 1 to 1024 GiB"),
    ];
    for (label, rule) in cases {
        let job_id = p
            .sim
            .create_job("octo-org", "app", &["self-hosted", "linux", label], None)
            .await?;
        let record = recorded(&p, &op.table, job_id).await?;
        assert!(
            record.reason.contains(label) && record.reason.contains(rule),
            "{label}: {record:?}"
        );
    }
    assert_eq!(
        p.calls.count("EC2", "CreateFleet"),
        0,
        "nothing reached EC2"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_below_the_images_snapshot_runs_with_the_snapshots_size() -> anyhow::Result<()> {
    let p = Pipeline::start(PipelineOptions {
        reaper_interval: None,
        pool_extra: "    sizing: { accept: true }\n".to_owned(),
        ..PipelineOptions::default()
    })
    .await?;
    let labels = ["self-hosted", "linux", "ephemera.disk=10"];
    // Long enough to read the volume before the runner's instance goes with the job.
    let long = Some(Duration::from_secs(30));
    let job_id = p.sim.create_job("octo-org", "app", &labels, long).await?;
    let instance = described(&p, &instance_that_took(&p, job_id).await?).await?;
    let root = instance.root_device_name().expect("a root device");
    let volume_id = instance
        .block_device_mappings()
        .iter()
        .find(|m| m.device_name() == Some(root))
        .and_then(|m| m.ebs()?.volume_id())
        .expect("the root volume");
    let ec2 = aws_sdk_ec2::Client::new(&p.sdk);
    let volumes = ec2.describe_volumes().volume_ids(volume_id).send().await?;
    // moto's images have a 15 GiB root snapshot; EC2 refuses a smaller root volume.
    assert_eq!(volumes.volumes()[0].size(), Some(15));
    completed(&p, job_id).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sized_job_on_an_arm_image_runs_on_an_instance_type_of_that_architecture(
) -> anyhow::Result<()> {
    let p = Pipeline::start(PipelineOptions {
        reaper_interval: None,
        pool_extra: format!(
            "    sizing: {{ accept: true, images: {{ graviton: {ARM_IMAGE} }} }}\n"
        ),
        ..PipelineOptions::default()
    })
    .await?;
    let labels = [
        "self-hosted",
        "linux",
        "ephemera.image=graviton",
        "ephemera.cpu=2",
    ];
    let job_id = p.sim.create_job("octo-org", "app", &labels, None).await?;
    let instance = described(&p, &instance_that_took(&p, job_id).await?).await?;
    completed(&p, job_id).await?;
    assert_eq!(instance.image_id(), Some(ARM_IMAGE));
    let launched = instance.instance_type().cloned().expect("a type");
    let ec2 = aws_sdk_ec2::Client::new(&p.sdk);
    let types = ec2
        .describe_instance_types()
        .instance_types(launched.clone())
        .send()
        .await?;
    let architectures: Vec<String> = types
        .instance_types()
        .iter()
        .flat_map(|t| {
            t.processor_info()
                .map(|p| p.supported_architectures().to_vec())
                .unwrap_or_default()
        })
        .map(|a| a.as_str().to_owned())
        .collect();
    assert!(
        architectures.iter().any(|a| a == "arm64"),
        "{launched:?}: {architectures:?}"
    );
    Ok(())
}
