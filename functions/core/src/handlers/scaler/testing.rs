//! What the scaler's test files share: a runner brought up for a job, a batch of
//! `queued` messages, a configuration with given labels.

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
