//! The scaler on moto + the simulator: spot capacity errors fall back to on-demand; a
//! poison message fails alone and is dead-lettered; and what a batch costs in AWS calls.
//! (The 200-job burst is in `burst`.)

use ephemera_core::lifecycle::InstanceStatus;
use ephemera_tests::pipeline::{Pipeline, PipelineOptions, LABELS};
use std::collections::BTreeMap;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spot_capacity_error_falls_back_to_on_demand_and_says_so() -> anyhow::Result<()> {
    ephemera_tests::logs::capture();
    let options = PipelineOptions {
        pool_extra: "    spot: true\n".to_owned(),
        ..PipelineOptions::default()
    };
    let p = Pipeline::start(options).await?;
    p.fleet.fail_spot(1);
    let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    let runner = p
        .wait_for(
            "the runner to be running",
            Duration::from_secs(60),
            || async {
                Ok(p.runner_for_job(job_id)
                    .await?
                    .filter(|r| r.instance_id.is_some() && r.status != InstanceStatus::Creating))
            },
        )
        .await?;
    let instance_id = runner.instance_id.expect("instance");
    let ec2 = aws_sdk_ec2::Client::new(&p.sdk);
    let described = ec2
        .describe_instances()
        .instance_ids(&instance_id)
        .send()
        .await?;
    let instance = described.reservations()[0].instances()[0].clone();
    assert_eq!(
        instance.instance_lifecycle(),
        None,
        "an on-demand instance (spot would say so)"
    );
    assert_eq!(
        p.fleet.launch_calls(),
        2,
        "one spot request, one on-demand fallback"
    );
    let logs = ephemera_tests::logs::captured();
    assert!(
        logs.contains("spot capacity unavailable; falling back to on-demand"),
        "the fallback is logged"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_message_fails_alone_in_a_batch_of_ten_and_reaches_the_dlq() -> anyhow::Result<()> {
    let options = PipelineOptions {
        drain_queue: false,
        // The calls counted are the scaler's: the reaper (which lists instances every
        // run) stays off; the jobs run without it.
        reaper_interval: None,
        ..PipelineOptions::default()
    };
    let mut p = Pipeline::start(options).await?;
    let mut jobs = Vec::new();
    for _ in 0..9 {
        jobs.push(p.sim.create_job("octo-org", "app", &LABELS, None).await?);
    }
    let sqs = aws_sdk_sqs::Client::new(&p.sdk);
    sqs.send_message()
        .queue_url(p.queue.queue_url())
        .message_body("{\"v\": 1, \"kind\": \"bogus\"}")
        .send()
        .await?;
    p.wait_for(
        "ten messages in the queue",
        Duration::from_secs(30),
        || async { Ok((p.queue.approximate_depth().await? == 10).then_some(())) },
    )
    .await?;
    p.calls.reset();
    p.start_draining();

    p.wait_for(
        "the nine jobs to complete",
        Duration::from_secs(60),
        || async {
            let sim = p.sim.snapshot();
            Ok(jobs
                .iter()
                .all(|id| sim.jobs[id].conclusion.as_deref() == Some("success"))
                .then_some(()))
        },
    )
    .await?;
    // Nine runners of one pool in one batch: one CreateFleet asks for all nine. (Under
    // load a runner may take a job other than its own before that job's runner is free
    // to take its place; the job left over is queued again and launched in a later
    // batch, so a later request may follow.)
    let sizes = p.fleet.launch_sizes();
    assert_eq!(sizes.first(), Some(&9), "launch requests: {sizes:?}");
    assert_eq!(
        p.calls.count("EC2", "CreateFleet"),
        u64::from(p.fleet.launch_calls()),
        "one CreateFleet per launch request, no fallback: {:?}",
        p.calls.all()
    );
    assert_eq!(
        p.calls.count("EC2", "DescribeInstances"),
        0,
        "no DescribeInstances on the launch path"
    );

    let dlq_url = sqs
        .get_queue_url()
        .queue_name(format!("{}-jobs-dlq", ephemera_tests::pipeline::DEPLOYMENT))
        .send()
        .await?;
    let dlq_url = dlq_url.queue_url().unwrap_or_default().to_owned();
    let dead = p
        .wait_for(
            "the poison message in the DLQ",
            Duration::from_secs(90),
            || async {
                let got = sqs
                    .receive_message()
                    .queue_url(&dlq_url)
                    .max_number_of_messages(10)
                    .send()
                    .await?;
                Ok(got
                    .messages()
                    .first()
                    .and_then(|m| m.body())
                    .map(str::to_owned))
            },
        )
        .await?;
    assert!(dead.contains("bogus"));
    let mut by_operation = BTreeMap::new();
    for (service, operation, n) in p.calls.all() {
        by_operation.insert(format!("{service}:{operation}"), n);
    }
    println!("calls for a batch of 9 jobs + 1 poison message: {by_operation:?}");
    Ok(())
}
