//! Workflow runs through ephemera's client: a run's state follows its latest attempt's
//! jobs, a job's re-run is refused (403) while its run is in progress and accepted (201)
//! once it completed, making a queued job of the next attempt; a re-run of a superseded
//! attempt is refused too. Recorded for `make conformance`.

use super::client::client;
use super::config;
use ephemera_core::ports::ForgeError;
use ephemera_core::ports::WorkflowRuns;
use ephemera_core::rerun::{RunKey, RunState};
use ephemera_tests::sim;

#[tokio::test]
async fn a_job_is_rerun_only_once_its_run_completed() -> anyhow::Result<()> {
    let sim = sim::start(config("eph")).await?;
    let app = client(&sim);
    let labels = ["self-hosted", "linux", "x64"];
    let a = sim.create_job("acme", "app", &labels, None).await?;
    let b = sim.create_job("acme", "app", &labels, None).await?;
    let run_id = sim.with_state(|s| {
        let run_id = s.jobs[&a].run_id;
        let job_a = s.jobs.get_mut(&a).expect("a");
        job_a.status = "completed".into();
        job_a.conclusion = Some("failure".into());
        let job_b = s.jobs.get_mut(&b).expect("b");
        job_b.run_id = run_id;
        job_b.status = "in_progress".into();
        run_id
    });
    let run = RunKey {
        owner: "acme".into(),
        repo: "app".into(),
        run_id,
    };
    let state = app.run_state(None, &run).await?;
    assert_eq!(
        state,
        Some(RunState {
            completed: false,
            run_attempt: 1
        })
    );
    let refused = app.rerun_job(None, &run, a).await;
    assert!(
        matches!(refused, Err(ForgeError::Rejected { status: 403, .. })),
        "{refused:?}"
    );

    sim.with_state(|s| {
        let job_b = s.jobs.get_mut(&b).expect("b");
        job_b.status = "completed".into();
        job_b.conclusion = Some("success".into());
    });
    assert!(app.run_state(None, &run).await?.expect("run").completed);
    app.rerun_job(None, &run, a).await?;
    let state = sim.snapshot();
    let rerun = state
        .jobs
        .values()
        .find(|j| j.run_id == run_id && j.run_attempt == 2)
        .expect("the re-run's job");
    assert_eq!((rerun.status.as_str(), rerun.labels.len()), ("queued", 3));
    assert_eq!(
        app.run_state(None, &run).await?,
        Some(RunState {
            completed: false,
            run_attempt: 2
        })
    );
    // The first attempt's job is superseded: asking again is refused.
    let again = app.rerun_job(None, &run, a).await;
    assert!(
        matches!(again, Err(ForgeError::Rejected { status: 403, .. })),
        "{again:?}"
    );
    let unknown = RunKey { run_id: 1, ..run };
    assert_eq!(app.run_state(None, &unknown).await?, None);
    assert_eq!(sim.snapshot().counters.jobs_rerun, 1);
    Ok(())
}
