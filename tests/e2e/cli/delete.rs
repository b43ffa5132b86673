//! `runners delete --force` on a runner whose job is over: GitHub lets it go, the record
//! is marked for the reaper, and one reaper run takes it to `deleted`.

use super::{stderr_of, stdout_of, Operator};
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::ports::{InstanceState, RunnerStore};
use ephemera_tests::pipeline::{Pipeline, PipelineOptions, LABELS};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_delete_reaches_deleted_after_the_reaper_runs() -> anyhow::Result<()> {
    let options = PipelineOptions {
        reaper_interval: None,
        ..PipelineOptions::default()
    };
    let p = Pipeline::start(options).await?;
    let op = Operator::new(&p)?;
    let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    let runner = p
        .wait_for(
            "the runner to finish its job",
            Duration::from_secs(60),
            || async {
                Ok(p.runner_for_job(job_id)
                    .await?
                    .filter(|r| r.status == InstanceStatus::PendingDelete))
            },
        )
        .await?;
    let name = runner.name.as_str();

    let out = op
        .run_with_github(&["runners", "delete", name, "--force"])?
        .assert()
        .success();
    let text = stdout_of(out.get_output());
    assert!(
        text.contains("pending_force_delete (operator --force)"),
        "{text}"
    );
    let err = stderr_of(out.get_output());
    assert!(err.contains("from GitHub"), "each step is shown: {err}");
    let marked = p.store.get_runner(name).await?.expect("record");
    assert_eq!(marked.status, InstanceStatus::PendingForceDelete);
    assert_eq!(marked.reason.as_deref(), Some("operator --force"));

    let report = p.reap_once().await?;
    assert_eq!(report.deleted, 1, "{report:?}");
    let deleted = p.store.get_runner(name).await?.expect("record");
    assert_eq!(deleted.status, InstanceStatus::Deleted);
    let instance_id = deleted.instance_id.clone().expect("instance");
    assert_eq!(
        p.instance_state(&instance_id).await?,
        Some(InstanceState::Terminated)
    );

    let out = op.run(&["runners", "show", name])?.assert().success();
    let text = stdout_of(out.get_output());
    assert!(
        text.contains("operator --force") && text.contains("deleted"),
        "{text}"
    );
    let out = op
        .run(&["runners", "list", "--status", "deleted"])?
        .assert()
        .success();
    assert!(stdout_of(out.get_output()).contains(name));

    let out = op
        .run_with_github(&["runners", "delete", name])?
        .assert()
        .code(6);
    assert!(stderr_of(out.get_output()).contains("already deleted"));
    let out = op
        .run_with_github(&["runners", "delete", "eph-nope"])?
        .assert()
        .code(4);
    assert!(stderr_of(out.get_output()).contains("no runner named eph-nope"));
    Ok(())
}
