//! The reaper's reconciliation rules on moto + the GitHub simulator: each situation is
//! made to happen (a crash, a lost webhook, a leak), then shown to converge within the
//! stated number of reaper runs. The reaper is driven by hand (`reap_at`), with a
//! simulated `now` to pass timeouts without waiting.

mod crash;
mod reconcile;
mod rules;
mod stolen;
mod stopped;
mod sweeps;
mod warm;

use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::message::{MessageKind, QueueMessage, VERSION};
use ephemera_core::model::RunnerRecord;
use ephemera_tests::pipeline::Pipeline;
use std::time::Duration;
use time::OffsetDateTime;

const LIMIT: Duration = Duration::from_secs(60);
const POOL: &str = "linux-x64";

fn minutes(n: u64) -> Duration {
    Duration::from_secs(60 * n)
}

fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

/// Waits until the runner claimed by `job_id` is in `status` (and returns it).
async fn runner_in(
    p: &Pipeline,
    job_id: u64,
    status: InstanceStatus,
) -> anyhow::Result<RunnerRecord> {
    let what = format!("the runner of job {job_id} to be {status}");
    p.wait_for(&what, LIMIT, || async move {
        Ok(p.runner_for_job(job_id)
            .await?
            .filter(|r| r.status == status))
    })
    .await
}

/// The runner record named `name`, which must exist.
async fn record(p: &Pipeline, name: &str) -> anyhow::Result<RunnerRecord> {
    use ephemera_core::ports::RunnerStore;
    p.store
        .get_runner(name)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no record {name}"))
}

/// Makes webhooks from the simulator go nowhere (lost deliveries).
fn lose_webhooks(p: &Pipeline) -> anyhow::Result<()> {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}/webhook", closed.local_addr()?);
    drop(closed);
    p.sim.set_webhook_url(url);
    Ok(())
}

/// The `queued` message of `job_id`, as the queue hands it to the scaler (`source` names
/// the delivery).
fn queued_message(source: &str, job_id: u64, run_id: u64) -> QueueMessage {
    QueueMessage {
        v: VERSION,
        kind: MessageKind::Queued,
        delivery_id: format!("{source}-{job_id}"),
        job_id,
        run_id,
        pool: POOL.to_owned(),
        labels: ephemera_tests::pipeline::LABELS
            .iter()
            .map(|l| l.to_string())
            .collect(),
        repo: "app".into(),
        owner: "octo-org".into(),
        installation_id: None,
        runner_name: None,
        runner_id: None,
        received_at: now(),
        github: Default::default(),
        attempt: Default::default(),
    }
}
