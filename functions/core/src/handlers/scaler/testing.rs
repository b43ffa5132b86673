//! What the scaler's test files share: a runner brought up for a job, a batch of
//! `queued` messages, a configuration with given labels, a runner left in creation.

use super::*;
use crate::handlers::test_support::{message, now, World, POOL};
use crate::message::MessageKind;

pub(super) async fn up(world: &World, job: u64) -> String {
    match world
        .scaler()
        .handle(&message(MessageKind::Queued, job, None), now())
        .await
    {
        Ok(Handled::RunnerUp(name)) => name,
        other => panic!("no runner for job {job}: {other:?}"),
    }
}

pub(super) fn batch(jobs: impl IntoIterator<Item = u64>) -> Vec<BatchItem> {
    jobs.into_iter()
        .map(|job| BatchItem {
            message_id: format!("m{job}"),
            body: message(MessageKind::Queued, job, None).encode(),
        })
        .collect()
}

pub(super) fn world_config_text(labels: &str) -> String {
    format!(
        "deployment: eph\ngithub: {{ app_id: 1 }}\npools:\n  - {{ name: {POOL}, labels: {labels}, \
         max_runners: 5, instance_types: [m7i.large], launch_template: eph-runner }}\n"
    )
}

/// Job 2's runner B was claimed and its record written in `status`, then its delivery
/// died; `launched` also names B as the runner launched for job 2. Returns B's name.
pub(super) fn b_claimed_for_job_2(
    world: &World,
    status: crate::lifecycle::InstanceStatus,
    launched: bool,
) -> String {
    let mut runner_b = crate::model::RunnerRecord::new("eph-linux-b".into(), "linux".into(), now());
    runner_b.labels = world.config.pools[0].labels.clone();
    runner_b.job_id = Some(2);
    runner_b.status = status;
    world.store.put_runner(runner_b.clone());
    let mut job_2 = crate::model::JobRecord::from_message(
        &message(MessageKind::Queued, 2, None),
        crate::model::JobStatus::Queued,
        now(),
    );
    job_2.runner_name = Some(runner_b.name.clone());
    if launched {
        job_2.launched_runner = Some(runner_b.name.clone());
    }
    world.store.put_job(job_2);
    runner_b.name
}

/// Runner A, up for job 1, takes job 2, which never got a runner: job 1 is sent again.
/// Returns A's name and that one message.
pub(super) async fn a_takes_job_2_without_a_runner(
    world: &World,
    scaler: &Arc<Scaler>,
) -> (String, crate::message::QueueMessage) {
    let runner_a = up(world, 1).await;
    scaler
        .handle(&message(MessageKind::InProgress, 2, Some(&runner_a)), now())
        .await
        .expect("handled");
    let mut sent = world.queue.take();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!((sent[0].kind, sent[0].job_id), (MessageKind::Queued, 1));
    (runner_a, sent.remove(0))
}
