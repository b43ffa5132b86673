//! What an operator reads: the EMF metric documents the handlers write through one job
//! (valid CloudWatch EMF, with the expected names, units, dimensions and values), and
//! logs in which no secret ever appears.

use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::metrics::{Dimension, EmfDocument, Metric, Metrics};
use ephemera_tests::pipeline::{Pipeline, PipelineOptions, DEPLOYMENT, LABELS, WEBHOOK_SECRET};
use ephemera_tests::sim::body::encode_jit_config;
use ephemera_tests::sim::state::SimRunner;
use std::collections::BTreeMap;
use std::time::Duration;

const POOL: &str = "linux-x64";
const LIMIT: Duration = Duration::from_secs(60);

/// Runs one job until its runner is deleted; returns the job and every runner GitHub
/// knew meanwhile.
async fn one_job_to_the_end(p: &Pipeline) -> anyhow::Result<(u64, Vec<SimRunner>)> {
    let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    let mut seen = BTreeMap::new();
    p.wait_for("the job's runner to be deleted", LIMIT, || {
        for runner in p.sim.snapshot().runners.into_values() {
            seen.insert(runner.id, runner);
        }
        async move {
            Ok(p.runner_for_job(job_id)
                .await?
                .filter(|r| r.status == InstanceStatus::Deleted))
        }
    })
    .await?;
    Ok((job_id, seen.into_values().collect()))
}

/// The sum of `metric` over the documents whose dimensions include `with`.
pub(crate) fn total(documents: &[EmfDocument], metric: Metric, with: &[(Dimension, &str)]) -> f64 {
    documents
        .iter()
        .filter(|d| {
            with.iter()
                .all(|&(dim, value)| d.dimension(dim) == Some(value))
        })
        .filter_map(|d| d.values(metric))
        .flatten()
        .sum()
}

fn samples(documents: &[EmfDocument], metric: Metric) -> Vec<f64> {
    documents
        .iter()
        .filter_map(|d| d.values(metric))
        .flatten()
        .copied()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_job_writes_valid_emf_documents_with_the_expected_values() -> anyhow::Result<()> {
    let (metrics, captured) = Metrics::capture(DEPLOYMENT);
    let p = Pipeline::start(PipelineOptions {
        metrics,
        priced_in: Some("us-east-1"),
        ..PipelineOptions::default()
    })
    .await?;
    p.reap_once().await?;
    one_job_to_the_end(&p).await?;
    // The reaper flushes at the end of the run that deleted the runner.
    p.wait_for("the deletion to be counted", LIMIT, || async {
        let documents = captured.documents().map_err(anyhow::Error::msg)?;
        Ok((total(&documents, Metric::RunnersDeleted, &[]) > 0.0).then_some(()))
    })
    .await?;

    // Every line is a valid EMF document (the `_aws` block, members, units, limits).
    let documents = captured.documents().map_err(anyhow::Error::msg)?;
    assert!(!documents.is_empty(), "no metrics written");
    for document in &documents {
        assert_eq!(document.dimension(Dimension::Deployment), Some(DEPLOYMENT));
        assert!(document.timestamp > 1_700_000_000_000, "{document:?}");
        for (name, unit) in &document.units {
            let metric = Metric::ALL
                .into_iter()
                .find(|m| m.name() == name)
                .unwrap_or_else(|| panic!("unknown metric {name}"));
            assert_eq!(metric.unit(), unit, "{name}");
            let expected: Vec<Vec<String>> = vec![metric
                .dimensions()
                .iter()
                .map(|d| d.name().to_owned())
                .collect()];
            assert_eq!(document.dimension_sets, expected, "{name}");
        }
    }
    let pool = [(Dimension::Pool, POOL)];
    assert_eq!(total(&documents, Metric::JobsQueued, &pool), 1.0);
    assert_eq!(total(&documents, Metric::RunnersLaunched, &pool), 1.0);
    assert_eq!(total(&documents, Metric::LaunchFailures, &pool), 0.0);
    let launched_after = samples(&documents, Metric::QueuedToLaunched);
    assert_eq!(launched_after.len(), 1, "{launched_after:?}");
    assert!(
        (0.0..60_000.0).contains(&launched_after[0]),
        "{launched_after:?}"
    );
    let online_after = samples(&documents, Metric::QueuedToOnline);
    assert_eq!(online_after.len(), 1, "{online_after:?}");
    assert!(
        online_after[0] >= launched_after[0],
        "online before launched"
    );
    // GitHub's queued → started, and the runner's launch → online, in seconds.
    let queue_to_start = samples(&documents, Metric::QueueToStartSeconds);
    assert_eq!(queue_to_start.len(), 1, "{queue_to_start:?}");
    assert!(
        (0.0..60.0).contains(&queue_to_start[0]),
        "{queue_to_start:?}"
    );
    let boot = samples(&documents, Metric::BootSeconds);
    assert_eq!(boot.len(), 1, "{boot:?}");
    assert!((0.0..60.0).contains(&boot[0]), "{boot:?}");
    let graceful = [(Dimension::Pool, POOL), (Dimension::Mode, "graceful")];
    assert_eq!(total(&documents, Metric::RunnersDeleted, &graceful), 1.0);
    let forced = [(Dimension::Pool, POOL), (Dimension::Mode, "forced")];
    assert_eq!(total(&documents, Metric::RunnersDeleted, &forced), 0.0);
    // The job's cost, once, in USD, by its repository: at least EC2's 60-second minimum
    // at t3.micro's lower recorded price (spot).
    let cost = samples(&documents, Metric::JobCost);
    assert_eq!(cost.len(), 1, "{cost:?}");
    let least = ephemera_core::prices::cost_micros(60, 3_500);
    assert!(cost[0] >= ephemera_core::prices::usd_f64(least), "{cost:?}");
    let app = [(Dimension::Repository, "octo-org/app")];
    assert_eq!(total(&documents, Metric::JobCost, &app), cost[0]);
    assert!(
        documents
            .iter()
            .any(|d| d.values(Metric::RunnersByStatus).is_some()
                && d.dimension(Dimension::Status) == Some("running")),
        "the reaper's gauge of runners by status"
    );
    let jit_ok = [
        (Dimension::Endpoint, "generate_jitconfig"),
        (Dimension::Outcome, "ok"),
    ];
    assert_eq!(total(&documents, Metric::GitHubCalls, &jit_ok), 1.0);
    assert!(
        !samples(&documents, Metric::GitHubRateLimitRemaining).is_empty(),
        "the simulator sends x-ratelimit-remaining"
    );
    // Each bucket by the App that spent it (the one App here).
    let app = ephemera_tests::pipeline::APP_ID.to_string();
    assert!(
        documents
            .iter()
            .filter(|d| d.values(Metric::GitHubRateLimitRemaining).is_some())
            .all(|d| d.dimension(Dimension::App) == Some(app.as_str())),
        "GitHubRateLimitRemaining by App"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_appears_in_any_log_line_or_metric() -> anyhow::Result<()> {
    ephemera_tests::logs::capture();
    let (metrics, captured) = Metrics::capture(DEPLOYMENT);
    let p = Pipeline::start(PipelineOptions {
        metrics,
        priced_in: Some("us-east-1"),
        ..PipelineOptions::default()
    })
    .await?;
    p.reap_once().await?;
    let (job_id, runners) = one_job_to_the_end(&p).await?;

    // Every secret that went through the pipeline: the webhook secret (signatures), the
    // App's private key (JWTs), the installation tokens (every GitHub call) and the
    // runners' JIT configs (GitHub → scaler → JIT table → instance).
    let key = std::fs::read_to_string(ephemera_tests::pipeline::workspace_path(
        "tests/fixtures/github-app-test-key.pem",
    ))?;
    let key_line = key
        .lines()
        .find(|l| !l.starts_with("-----"))
        .expect("a PEM body");
    let mut secrets = vec![WEBHOOK_SECRET.to_owned(), key_line.to_owned()];
    let sim = p.sim.snapshot();
    assert!(!sim.tokens.is_empty(), "no installation token was issued");
    secrets.extend(sim.tokens.keys().cloned());
    assert!(!runners.is_empty(), "no runner was seen");
    secrets.extend(runners.iter().map(|r| encode_jit_config(r, "_work")));

    let logs = ephemera_tests::logs::captured();
    assert!(
        logs.contains("runner deleted"),
        "the logs were not captured"
    );
    // The reaper flushes its metrics when its run ends, after the deletion's write.
    let metric_lines = p
        .wait_for("the job's cost among the metrics", LIMIT, || async {
            let lines = captured.lines().join("\n");
            Ok(lines.contains("\"JobCost\"").then_some(lines))
        })
        .await?;
    // What an operator prints of the job: its timeline and cost, as text and as JSON.
    let op = crate::cli::Operator::new(&p)?;
    let job = job_id.to_string();
    let mut timeline = String::new();
    for json in [false, true] {
        let args: &[&str] = if json {
            &["jobs", "show", &job, "--json"]
        } else {
            &["jobs", "show", &job]
        };
        let out = op.run(args)?.assert().success();
        timeline.push_str(&String::from_utf8_lossy(&out.get_output().stdout));
    }
    // And its cost, on the job and summed over the period.
    for args in [
        &["costs", "--since", "1h"][..],
        &["costs", "--since", "1h", "--json"],
    ] {
        let out = op.run(args)?.assert().success();
        timeline.push_str(&String::from_utf8_lossy(&out.get_output().stdout));
    }
    assert!(
        timeline.contains("launch_requested")
            && timeline.contains("launch requested → terminated")
            && timeline.contains("\"cost_until\": \"terminated\"")
            && timeline.contains("by_repository")
            && timeline.contains("REPOSITORY"),
        "{timeline}"
    );

    let readable = tags_and_user_data(&p).await?;
    assert!(
        p.waiting_jit_configs().await?.is_empty(),
        "a JIT config was left in the table"
    );
    for secret in &secrets {
        let shown: String = secret.chars().take(6).collect();
        assert!(
            !readable.contains(secret.as_str()),
            "a secret ({shown}…) is in an instance's tags or user data"
        );
    }
    for secret in &secrets {
        let shown: String = secret.chars().take(6).collect();
        assert!(
            !logs.contains(secret.as_str()),
            "a secret ({shown}…) was logged"
        );
        assert!(
            !metric_lines.contains(secret.as_str()),
            "a secret ({shown}…) is in a metric"
        );
        assert!(
            !timeline.contains(secret.as_str()),
            "a secret ({shown}…) is in the job's timeline"
        );
    }
    Ok(())
}

/// Every tag value and the user data of the deployment's instances, which many principals
/// can read (`ec2:DescribeInstances`, `ec2:DescribeInstanceAttribute`).
async fn tags_and_user_data(p: &Pipeline) -> anyhow::Result<String> {
    use base64::Engine;
    use ephemera_core::ports::Fleet;
    let ec2 = aws_sdk_ec2::Client::new(&p.sdk);
    let mut readable = String::new();
    let instances = p.fleet.inner().describe().await?;
    assert!(!instances.is_empty(), "no instance was launched");
    for instance in instances {
        let described = ec2
            .describe_instances()
            .instance_ids(&instance.id)
            .send()
            .await?;
        for found in described.reservations().iter().flat_map(|r| r.instances()) {
            for tag in found.tags() {
                readable.push_str(tag.value().unwrap_or_default());
                readable.push('\n');
            }
        }
        let user_data = ec2
            .describe_instance_attribute()
            .instance_id(&instance.id)
            .attribute(aws_sdk_ec2::types::InstanceAttributeName::UserData)
            .send()
            .await?;
        if let Some(encoded) = user_data.user_data().and_then(|u| u.value()) {
            let decoded = base64::engine::general_purpose::STANDARD.decode(encoded)?;
            readable.push_str(&String::from_utf8_lossy(&decoded));
            readable.push_str(encoded);
        }
    }
    Ok(readable)
}
