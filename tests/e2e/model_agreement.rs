//! The model (`functions/model`) and the emulator pipeline agree on what a job costs:
//! the same small burst through both, calls per job compared operation by operation,
//! named as the emulator's call counter names them.

use ephemera_model::agreement::{calls_per_job, AGREEMENT_JOBS};
use ephemera_tests::pipeline::{Pipeline, PipelineOptions, LABELS};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Calls the SQS event source makes in production (Lambda's poller receives and deletes;
/// here `ephemera local`'s drain loop stands in for it): not the handlers' calls, and
/// not in the model, whose event source is Lambda's.
const EVENT_SOURCE_CALLS: [&str; 4] = [
    "SQS/ReceiveMessage",
    "SQS/DeleteMessage",
    "SQS/DeleteMessageBatch",
    "SQS/ChangeMessageVisibility",
];

/// Calls a scaler process makes once, not per job, which the model does not make: the
/// App's installation token (one mint an hour), and the launch template's and image's
/// root device (read once every 5 minutes, `ephemera-aws`'s image cache). Each must
/// stay at one or two calls in the whole burst, or it is a job's cost after all.
const PROCESS_CALLS: [&str; 3] = [
    "GitHub/access_token",
    "EC2/DescribeLaunchTemplateVersions",
    "EC2/DescribeImages",
];

/// How far the two may differ on one operation, in calls per job. Per job, both take
/// the same path (the handlers are the same code, one scaler invocation at a time in
/// both); what may differ is how messages fall into batches (a CreateFleet and a pool
/// read per batch: Lambda's event source fills batches of up to 10, the drain loop takes
/// what one receive gives) and how many runners come online while the job they took
/// still waits for its own (a hand-over costs two reads and two writes). Over 30 jobs
/// booting over 30 s the two stay within a tenth of a call per job (GetItem 4.87 to 4.93
/// on the emulator, 4.90 in the model; UpdateItem 7.70 to 7.80 against 7.80, also with
/// the machine busy); a missing step or an extra write on every job (1 a job) does not
/// pass.
const TOLERANCE: f64 = 0.34;

/// Messages in the jobs queue: visible, in flight, or delayed (an uncounted client).
async fn queue_depth(p: &Pipeline) -> anyhow::Result<u64> {
    use aws_sdk_sqs::types::QueueAttributeName as Attr;
    let url = p.queue.queue_url().to_owned();
    let attributes = aws_sdk_sqs::Client::new(&p.sdk)
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(Attr::ApproximateNumberOfMessages)
        .attribute_names(Attr::ApproximateNumberOfMessagesNotVisible)
        .attribute_names(Attr::ApproximateNumberOfMessagesDelayed)
        .send()
        .await?;
    Ok(attributes
        .attributes()
        .into_iter()
        .flatten()
        .filter_map(|(_, value)| value.parse::<u64>().ok())
        .sum())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_model_and_the_emulator_agree_on_calls_per_job() -> anyhow::Result<()> {
    let jobs = AGREEMENT_JOBS;
    let options = PipelineOptions {
        // Room for every job: nothing waits for capacity (the model's pool is as large).
        max_runners: jobs,
        // Jobs stay in progress, as at the model's end (every job running, none done).
        job_duration: Duration::from_secs(600),
        // The reaper's calls are its own, not a job's: the model counts them apart.
        reaper_interval: None,
        // Instances come online in an order of their own, as the model's do (and EC2's):
        // most runners take another runner's job, and both worlds pay for the hand-overs.
        boot_spread: ephemera_model::agreement::AGREEMENT_BOOT_SPREAD,
        ..PipelineOptions::default()
    };
    let p = Pipeline::start(options).await?;
    let mut ids = Vec::new();
    for _ in 0..jobs {
        ids.push(p.sim.create_job("octo-org", "app", &LABELS, None).await?);
    }
    p.wait_for(
        "every job in progress and the queue empty",
        Duration::from_secs(60),
        || async {
            let sim = p.sim.snapshot();
            let running = ids.iter().all(|id| sim.jobs[id].status == "in_progress");
            Ok((running && queue_depth(&p).await? == 0).then_some(()))
        },
    )
    .await?;

    let per_job = |count: u64| count as f64 / f64::from(jobs);
    let mut emulator: BTreeMap<String, f64> = BTreeMap::new();
    for (service, operation, count) in p.calls.all() {
        *emulator
            .entry(format!("{service}/{operation}"))
            .or_default() += per_job(count);
    }
    for call in p.scaler_forge.calls() {
        *emulator
            .entry(format!("GitHub/{}", call.endpoint))
            .or_default() += per_job(call.count);
    }
    let excluded: BTreeSet<&str> = EVENT_SOURCE_CALLS
        .iter()
        .chain(PROCESS_CALLS.iter())
        .copied()
        .collect();
    for operation in PROCESS_CALLS {
        let calls = emulator.get(operation).copied().unwrap_or(0.0) * f64::from(jobs);
        assert!(
            calls <= 2.0,
            "{operation}: {calls} calls, not once a process"
        );
    }
    emulator.retain(|operation, _| !excluded.contains(operation.as_str()));
    // The model runs on its own runtime, with simulated time: off this one's threads.
    let model = tokio::task::spawn_blocking(move || calls_per_job(jobs, 7)).await?;

    let operations: BTreeSet<&String> = emulator.keys().chain(model.keys()).collect();
    let mut disagreements = Vec::new();
    for operation in operations {
        let (on_emulator, in_model) = (emulator.get(operation), model.get(operation));
        println!("{operation:<32} emulator {on_emulator:>8.3?}  model {in_model:>8.3?}");
        match (on_emulator, in_model) {
            (Some(a), Some(b)) if (a - b).abs() <= TOLERANCE => {}
            _ => disagreements.push(format!(
                "{operation}: emulator {on_emulator:?}, model {in_model:?}"
            )),
        }
    }
    assert!(
        disagreements.is_empty(),
        "calls per job disagree (tolerance {TOLERANCE}):\n{}",
        disagreements.join("\n")
    );
    Ok(())
}
