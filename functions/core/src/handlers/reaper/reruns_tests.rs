//! The re-run of an interrupted job on the fakes, from the failed job's `completed` to
//! the re-run's on-demand launch: asked once, only once its workflow run completed, and
//! never for a job that failed for another reason.

use super::*;
use crate::handlers::scaler::Scaler;
use crate::handlers::test_support::{config_with, message, now, World};
use crate::memory::{FakeWorkflowRuns, MemoryReruns};
use crate::message::{JobConclusion, MessageKind, QueueMessage};
use crate::rerun::{RerunState, RunKey, RERUN_KEPT, RERUN_PATIENCE};

fn far() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

fn minutes(m: i64) -> OffsetDateTime {
    now() + time::Duration::minutes(m)
}

/// A world of one spot pool (with `extra` pool lines), its re-runs and GitHub's runs.
struct Rig {
    world: World,
    reruns: Arc<MemoryReruns>,
    runs: Arc<FakeWorkflowRuns>,
}

impl Rig {
    fn new(extra: &str) -> Rig {
        let mut world = World::new(5);
        world.config = config_with(5, &format!("    spot: true\n{extra}"));
        Rig {
            world,
            reruns: Arc::new(MemoryReruns::new()),
            runs: Arc::new(FakeWorkflowRuns::new()),
        }
    }

    fn scaler(&self) -> Arc<Scaler> {
        self.world
            .scaler_with(crate::handlers::scaler::ScalerCapabilities {
                reruns: Some(self.reruns.clone()),
                ..crate::handlers::scaler::ScalerCapabilities::none()
            })
    }

    fn reaper(&self) -> Reaper {
        self.world.reaper().with_reruns(Reruns {
            store: self.reruns.clone(),
            runs: self.runs.clone(),
        })
    }

    /// Job `job`'s runner, running it, then: a spot interruption warning when
    /// `interrupted`, and the job's `completed` with `conclusion`. Returns the runner.
    async fn job_ends(&self, job: u64, interrupted: bool, conclusion: JobConclusion) -> String {
        let runner = self.world.running_runner(job).await;
        let scaler = self.scaler();
        let in_progress = message(MessageKind::InProgress, job, Some(&runner.name));
        scaler.handle(&in_progress, now()).await.expect("bound");
        if interrupted {
            let instance_id = runner.instance_id.clone().expect("instance");
            let warning = InstanceEvent {
                kind: InstanceEventKind::SpotInterruptionWarning {
                    action: "terminate".into(),
                },
                instance_id,
                at: now(),
            };
            self.reaper()
                .on_instance_event(&warning, now())
                .await
                .expect("recorded");
        }
        let mut completed = message(MessageKind::Completed, job, Some(&runner.name));
        completed.attempt.conclusion = Some(conclusion);
        scaler
            .handle(&completed, minutes(2))
            .await
            .expect("handled");
        runner.name
    }
}

fn run_of(job: u64) -> RunKey {
    let m = message(MessageKind::Queued, job, None);
    RunKey {
        owner: m.owner,
        repo: m.repo,
        run_id: m.run_id,
    }
}

/// The re-run's `queued` job: a new job id, the same run, the next attempt.
fn rerun_job(of: u64, new_job: u64) -> QueueMessage {
    let mut queued = message(MessageKind::Queued, new_job, None);
    queued.run_id = run_of(of).run_id;
    queued.attempt.run_attempt = 2;
    queued
}

#[tokio::test]
async fn an_interrupted_job_is_rerun_once_when_its_run_completes_and_the_rerun_goes_on_demand() {
    let rig = Rig::new("");
    let runner = rig.job_ends(1, true, JobConclusion::Failure).await;
    let run = run_of(1);
    let wanted = rig.reruns.all();
    assert_eq!(wanted.len(), 1, "{wanted:?}");
    assert_eq!((wanted[0].job_id, wanted[0].state), (1, RerunState::Wanted));
    // The run's other jobs still run: GitHub would refuse, so nothing is asked.
    rig.runs.set(&run, false, 1);
    let reaper = rig.reaper();
    let report = reaper.run(minutes(3), far()).await.expect("run");
    assert_eq!(report.reruns_asked, 0);
    assert!(rig.runs.reruns().is_empty());
    // Completed: asked once, however many runs follow.
    rig.runs.set(&run, true, 1);
    let report = reaper.run(minutes(5), far()).await.expect("run");
    assert_eq!(report.reruns_asked, 1);
    for m in [6, 7, 60] {
        reaper.run(minutes(m), far()).await.expect("run");
    }
    assert_eq!(rig.runs.reruns(), vec![(run.clone(), 1)]);
    let record = rig.world.store.runner(&runner).expect("kept");
    assert!(
        record.history.iter().any(|h| h
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("re-run after its spot interruption"))),
        "{:?}",
        record.history
    );
    // The re-run's job launches on-demand; a first attempt of the pool still on spot.
    let scaler = rig.scaler();
    scaler
        .handle(&rerun_job(1, 50), minutes(8))
        .await
        .expect("up");
    scaler
        .handle(&message(MessageKind::Queued, 51, None), minutes(8))
        .await
        .expect("up");
    let markets: Vec<Market> = rig
        .world
        .fleet
        .launch_requests()
        .iter()
        .map(|r| r.market)
        .collect();
    assert_eq!(
        markets[1..],
        [Market::OnDemand, Market::Spot],
        "{markets:?}"
    );
    let rerun_runner = rig
        .world
        .store
        .runners()
        .into_iter()
        .find(|r| r.job_id == Some(50));
    assert_eq!(rerun_runner.and_then(|r| r.market), Some(Market::OnDemand));
    // Queued again from its record (its launch lost), the re-run still goes on-demand.
    let mut record = crate::handlers::test_support::job(52);
    record.run_id = run.run_id;
    let again = QueueMessage::queued_again(&record, "lost");
    scaler.handle(&again, minutes(8)).await.expect("up");
    let last = rig.world.fleet.launch_requests().pop().expect("launched");
    assert_eq!(last.market, Market::OnDemand);
    // Kept a day for the re-run's jobs, then forgotten.
    reaper
        .run(minutes(5) + RERUN_KEPT, far())
        .await
        .expect("run");
    assert!(rig.reruns.all().is_empty());
}

#[tokio::test]
async fn a_job_that_failed_for_another_reason_or_succeeded_is_never_rerun() {
    let rig = Rig::new("");
    rig.job_ends(1, false, JobConclusion::Failure).await;
    rig.job_ends(2, true, JobConclusion::Success).await;
    assert!(rig.reruns.all().is_empty());
    // A later attempt of those runs is not a re-run of ours: spot as usual.
    rig.scaler()
        .handle(&rerun_job(1, 60), minutes(3))
        .await
        .expect("up");
    let last = rig.world.fleet.launch_requests().pop().expect("launched");
    assert_eq!(last.market, Market::Spot);
}

#[tokio::test]
async fn a_pool_that_does_not_rerun_interrupted_jobs_records_nothing() {
    let rig = Rig::new("    rerun_interrupted: false\n");
    rig.job_ends(1, true, JobConclusion::Cancelled).await;
    assert!(rig.reruns.all().is_empty());
}

#[tokio::test]
async fn two_reapers_ask_once_and_a_lost_answer_is_never_asked_again() {
    let rig = Rig::new("");
    rig.job_ends(1, true, JobConclusion::Failure).await;
    let run = run_of(1);
    rig.runs.set(&run, true, 1);
    rig.runs.lose_answers(1);
    let (a, b) = (rig.reaper(), rig.reaper());
    let (one, two) = tokio::join!(
        a.ask_reruns(minutes(3), far()),
        b.ask_reruns(minutes(3), far())
    );
    assert_eq!(one + two, 0, "the answer was lost");
    assert_eq!(rig.runs.reruns().len(), 1);
    // GitHub did re-run it; the run completes again: still never asked twice.
    rig.runs.set(&run, true, 2);
    a.ask_reruns(minutes(10), far()).await;
    assert_eq!(rig.runs.reruns().len(), 1);
}

#[tokio::test]
async fn a_run_unknown_to_github_or_rerun_by_someone_else_is_never_asked() {
    let rig = Rig::new("");
    rig.job_ends(1, true, JobConclusion::Failure).await;
    rig.job_ends(2, true, JobConclusion::Failure).await;
    // GitHub does not know run 1 yet (a 404 on the re-run, a refusal that did nothing);
    // run 2 was re-run by a person already.
    rig.runs.set(&run_of(2), true, 2);
    let reaper = rig.reaper();
    assert_eq!(reaper.ask_reruns(minutes(3), far()).await, 0);
    let states: Vec<RerunState> = rig.reruns.all().iter().map(|r| r.state).collect();
    assert_eq!(
        states,
        [
            RerunState::GaveUp(minutes(3)),
            RerunState::GaveUp(minutes(3))
        ],
        "run 1 unknown to GitHub, run 2 re-run already"
    );
    assert!(rig.runs.reruns().is_empty());
}

#[tokio::test]
async fn a_run_that_never_completes_is_given_up_with_a_note() {
    let rig = Rig::new("");
    let runner = rig.job_ends(1, true, JobConclusion::Failure).await;
    rig.runs.set(&run_of(1), false, 1);
    let (metrics, captured) = crate::metrics::Metrics::capture("eph");
    let reaper = rig.reaper().with_metrics(metrics);
    reaper.ask_reruns(minutes(3), far()).await;
    let late = minutes(3) + RERUN_PATIENCE;
    reaper.ask_reruns(late, far()).await;
    rig.runs.set(&run_of(1), true, 1);
    reaper
        .ask_reruns(late + time::Duration::minutes(1), far())
        .await;
    assert!(rig.runs.reruns().is_empty());
    assert_eq!(rig.reruns.all()[0].state, RerunState::GaveUp(late));
    let record = rig.world.store.runner(&runner).expect("kept");
    assert!(record.history.iter().any(|h| h
        .reason
        .as_deref()
        .is_some_and(|r| r.contains("not re-run"))));
    reaper.metrics.flush();
    let documents = captured.documents().expect("valid EMF");
    let given_up: f64 = documents
        .iter()
        .filter(|d| d.dimension(Dimension::Outcome) == Some("given_up"))
        .filter_map(|d| d.values(Metric::InterruptedJobsRerun))
        .flatten()
        .sum();
    assert_eq!(given_up, 1.0);
}

#[tokio::test]
async fn a_refused_rerun_waits_a_minute_and_is_asked_again() {
    let rig = Rig::new("");
    rig.job_ends(1, true, JobConclusion::Failure).await;
    let run = run_of(1);
    rig.runs.set(&run, true, 1);
    rig.runs.refuse_reruns(1);
    let reaper = rig.reaper();
    assert_eq!(reaper.ask_reruns(minutes(3), far()).await, 0);
    let entry = rig.reruns.all().remove(0);
    assert_eq!(
        entry.state,
        RerunState::Wanted,
        "back to wait after the 403"
    );
    assert_eq!(entry.next_check_at, minutes(4));
    assert_eq!(reaper.ask_reruns(minutes(3), far()).await, 0, "not due yet");
    assert_eq!(reaper.ask_reruns(minutes(4), far()).await, 1);
    assert_eq!(rig.runs.reruns(), vec![(run, 1)]);
}
