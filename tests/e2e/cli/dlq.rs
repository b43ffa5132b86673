//! `jobs dlq list | redrive` on the pipeline's dead-letter queue: listing reads without
//! consuming, redrive refuses without a confirmation it cannot ask for, and with `--yes`
//! puts every body back on the jobs queue unchanged.

use super::{stderr_of, stdout_of, Operator};
use ephemera_core::message::{MessageKind, QueueMessage, VERSION};
use ephemera_core::model::{JobRecord, JobStatus};
use ephemera_core::ports::RunnerStore;
use ephemera_tests::pipeline::{Pipeline, PipelineOptions, DEPLOYMENT, LABELS};
use serde_json::Value;
use std::collections::BTreeSet;
use time::OffsetDateTime;

fn message(job_id: u64) -> QueueMessage {
    QueueMessage {
        v: VERSION,
        kind: MessageKind::Queued,
        delivery_id: format!("d-{job_id}"),
        job_id,
        run_id: 1,
        pool: "linux-x64".to_owned(),
        labels: LABELS.iter().map(|l| l.to_string()).collect(),
        repo: "app".to_owned(),
        owner: "octo-org".to_owned(),
        installation_id: Some(1),
        runner_name: None,
        runner_id: None,
        received_at: OffsetDateTime::now_utc(),
        github: Default::default(),
        attempt: Default::default(),
    }
}

/// Every body in `url`, each made visible again.
async fn bodies(sqs: &aws_sdk_sqs::Client, url: &str) -> anyhow::Result<BTreeSet<String>> {
    let mut found = BTreeSet::new();
    for _ in 0..5 {
        let got = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .visibility_timeout(5)
            .send()
            .await?;
        for m in got.messages() {
            found.insert(m.body().unwrap_or_default().to_owned());
            sqs.change_message_visibility()
                .queue_url(url)
                .receipt_handle(m.receipt_handle().unwrap_or_default())
                .visibility_timeout(0)
                .send()
                .await?;
        }
    }
    Ok(found)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_lettered_jobs_are_listed_without_consuming_and_redriven_with_confirmation(
) -> anyhow::Result<()> {
    let options = PipelineOptions {
        drain_queue: false,
        reaper_interval: None,
        ..PipelineOptions::default()
    };
    let p = Pipeline::start(options).await?;
    let op = Operator::new(&p)?;
    let sqs = aws_sdk_sqs::Client::new(&p.sdk);
    let dlq = ephemera_aws::sqs::queue_url(&sqs, &format!("{DEPLOYMENT}-jobs-dlq")).await?;
    let queue = p.queue.queue_url().to_owned();

    // A job the scaler recorded, one it never did, and a body no build reads.
    let now = OffsetDateTime::now_utc();
    p.store
        .record_job(&JobRecord {
            job_id: 101,
            status: JobStatus::Queued,
            pool: "linux-x64".to_owned(),
            owner: "octo-org".to_owned(),
            repo: "app".to_owned(),
            run_id: 1,
            installation_id: Some(1),
            labels: LABELS.iter().map(|l| l.to_string()).collect(),
            runner_name: None,
            launched_runner: None,
            received_at: now,
            updated_at: now,
            github: Default::default(),
            claimed_at: None,
        })
        .await?;
    let sent: BTreeSet<String> = [
        message(101).encode(),
        message(102).encode(),
        "{\"v\": 1, \"kind\": \"bogus\"}".to_owned(),
    ]
    .into();
    for body in &sent {
        sqs.send_message()
            .queue_url(&dlq)
            .message_body(body)
            .send()
            .await?;
    }

    let out = op
        .run(&["jobs", "dlq", "list", "--queue-url", &queue])?
        .assert()
        .success();
    let text = stdout_of(out.get_output());
    assert!(text.contains("3 message(s)"), "{text}");
    let row = |job: &str| {
        text.lines()
            .find(|l| l.starts_with(job))
            .unwrap_or_default()
            .to_owned()
    };
    for job in ["101", "102"] {
        let row = row(job);
        assert!(
            row.contains("octo-org/app") && row.contains("self-hosted,linux,x64"),
            "{text}"
        );
    }
    assert!(
        row("101").contains("job queued, no runner launched"),
        "{text}"
    );
    assert!(row("102").contains("no job record"), "{text}");
    assert!(text.contains("unreadable message"), "{text}");

    // Nothing consumed, and all visible again at once: a second listing sees all three.
    let out = op
        .run(&["jobs", "dlq", "list", "--queue-url", &queue, "--json"])?
        .assert()
        .success();
    let json: Value = serde_json::from_slice(&out.get_output().stdout)?;
    let messages = json["messages"].as_array().cloned().unwrap_or_default();
    assert_eq!(messages.len(), 3, "{json}");
    assert_eq!(json["dead_letter_queue"], dlq.as_str());
    let job = messages
        .iter()
        .find(|m| m["job_id"] == 101)
        .expect("job 101 listed");
    assert_eq!(job["repo"], "octo-org/app");
    assert_eq!(job["kind"], "queued");
    assert_eq!(job["labels"], serde_json::json!(LABELS));
    assert!(job["receives"].is_u64(), "{job}");
    assert_eq!(bodies(&sqs, &dlq).await?, sent);

    // No terminal to ask on and no --yes: refused, exit code 2, nothing moved.
    let out = op
        .run_without_table(&["jobs", "dlq", "redrive", "--queue-url", &queue])?
        .assert()
        .code(2);
    let err = stderr_of(out.get_output());
    assert!(
        err.contains("--yes") && err.contains("not a terminal"),
        "{err}"
    );
    assert_eq!(bodies(&sqs, &dlq).await?, sent);
    assert!(bodies(&sqs, &queue).await?.is_empty());

    let out = op
        .run_without_table(&["jobs", "dlq", "redrive", "--queue-url", &queue, "--yes"])?
        .assert()
        .success();
    assert!(stdout_of(out.get_output()).contains("redriven 3 message(s)"));
    assert!(bodies(&sqs, &dlq).await?.is_empty());
    assert_eq!(bodies(&sqs, &queue).await?, sent, "bodies unchanged");

    let out = op
        .run(&["jobs", "dlq", "list", "--queue-url", &queue])?
        .assert()
        .success();
    assert!(stdout_of(out.get_output()).contains("empty"));
    Ok(())
}
