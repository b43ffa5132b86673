//! Spot interruptions and the re-runs they lead to, played on the world's fakes: EC2
//! reclaims the instance of a spot runner in the middle of its job — after warning the
//! reaper two minutes ahead, or without a word — and GitHub fails the job; GitHub's
//! workflow runs follow their jobs, and a re-run the reaper asks for becomes a new
//! queued job of the run's next attempt.

use crate::invoke::ReaperHandle;
use crate::rng::Rng;
use crate::world::{JobState, World, OWNER, REPO};
use ephemera_core::handlers::reaper::{InstanceEvent, InstanceEventKind};
use ephemera_core::message::{JobConclusion, MessageKind};
use ephemera_core::ports::{ForgeJobState, InstanceState, Market};
use ephemera_core::rerun::RunKey;
use time::OffsetDateTime;

impl World {
    /// The workflow run and attempt of `job_id`.
    pub fn run_of(&self, job_id: u64) -> (u64, u32) {
        let github = self.github();
        github
            .rerun_jobs
            .get(&job_id)
            .copied()
            .unwrap_or((1000 + job_id, 1))
    }

    /// GitHub's side of the workflow runs: each re-run it accepted becomes a queued job
    /// of the next attempt (its `queued` webhook waits in the outbox), then each run
    /// shows its latest attempt's job, completed once that job ended.
    pub fn sync_runs(&self) {
        let accepted = self.runs.reruns();
        let mut github = self.github();
        for (run, old_job) in accepted.iter().skip(github.reruns_made) {
            github.next_job += 1;
            let job_id = github.next_job;
            let labels = github.job_labels.get(old_job).cloned().unwrap_or_default();
            github.job_labels.insert(job_id, labels);
            let attempt = github.rerun_jobs.get(old_job).map_or(1, |(_, a)| *a) + 1;
            github.rerun_jobs.insert(job_id, (run.run_id, attempt));
            github.jobs.insert(job_id, JobState::Queued);
            let event = github.event(MessageKind::Queued, job_id, None);
            github.outbox.push(event);
            self.forge.set_job_state(job_id, ForgeJobState::Queued);
            let mut stats = self.stats();
            stats.jobs += 1;
            stats.reruns += 1;
        }
        github.reruns_made = accepted.len();
        let mut latest: std::collections::BTreeMap<u64, (u32, bool)> = Default::default();
        for (job_id, state) in &github.jobs {
            let (run_id, attempt) = github
                .rerun_jobs
                .get(job_id)
                .copied()
                .unwrap_or((1000 + job_id, 1));
            let ended = !matches!(state, JobState::Queued | JobState::Running { .. });
            let held = latest.entry(run_id).or_insert((attempt, ended));
            if attempt > held.0 {
                *held = (attempt, ended);
            }
        }
        drop(github);
        for (run_id, (attempt, ended)) in latest {
            self.runs.set(&run_key(run_id), ended, attempt);
        }
    }

    /// EC2 reclaims the instance of a running job's spot runner, if there is one: the
    /// reaper is warned first when `warn` (and told of the termination after, at
    /// random); GitHub fails the job and sends its `completed`. Returns what happened.
    pub async fn interrupt(
        &self,
        rng: &mut Rng,
        reaper: &ReaperHandle,
        now: OffsetDateTime,
        warn: bool,
    ) -> String {
        let Some((job_id, runner, runner_id, instance)) = self.spot_job_running(rng) else {
            return "no job running on spot to interrupt".to_owned();
        };
        let event = |kind| InstanceEvent {
            kind,
            instance_id: instance.clone(),
            at: now,
        };
        // The warning reaches the reaper's function on its own, outside any run.
        reaper.switch.disarm();
        let warned = warn
            && reaper
                .reaper
                .on_instance_event(
                    &event(InstanceEventKind::SpotInterruptionWarning {
                        action: "terminate".to_owned(),
                    }),
                    now,
                )
                .await
                .is_ok();
        {
            let mut github = self.github();
            github.booted.remove(&instance);
            github.jobs.insert(
                job_id,
                JobState::Interrupted {
                    runner: runner.clone(),
                },
            );
            if warned {
                github.warned.insert(job_id);
            }
            let mut completed = github.event(
                MessageKind::Completed,
                job_id,
                Some((runner.clone(), runner_id)),
            );
            completed.conclusion = Some(JobConclusion::Failure);
            github.outbox.push(completed);
        }
        self.forge.set_busy(runner_id, false);
        self.forge.set_online(runner_id, false);
        self.forge.set_job_state(job_id, ForgeJobState::Completed);
        self.fleet.set_state(&instance, InstanceState::Terminated);
        let told = warned && rng.chance(50);
        if told {
            let terminated = event(InstanceEventKind::StateChange {
                state: "terminated".to_owned(),
            });
            let _ = reaper.reaper.on_instance_event(&terminated, now).await;
        }
        if rng.chance(20) {
            // GitHub re-runs the job but its answer is lost: never asked again.
            self.runs.lose_answers(1);
        }
        let mut stats = self.stats();
        stats.interrupted += 1;
        stats.interruptions_warned += u64::from(warned);
        format!(
            "EC2 reclaims spot instance {instance} under job {job_id} ({runner}){}{}",
            if warned {
                ", warned first"
            } else {
                ", no warning"
            },
            if told { ", termination reported" } else { "" }
        )
    }

    /// A job running on a booted spot runner: (job, runner, its GitHub id, instance).
    fn spot_job_running(&self, rng: &mut Rng) -> Option<(u64, String, u64, String)> {
        let github = self.github();
        let running: Vec<(u64, String, u64, String)> = github
            .jobs
            .iter()
            .filter_map(|(job_id, state)| match state {
                JobState::Running {
                    runner, runner_id, ..
                } => {
                    let instance = github
                        .booted
                        .iter()
                        .find(|(_, id)| *id == runner_id)
                        .map(|(instance, _)| instance.clone())?;
                    Some((*job_id, runner.clone(), *runner_id, instance))
                }
                _ => None,
            })
            .filter(|(_, runner, _, _)| {
                self.store
                    .runner(runner)
                    .is_some_and(|r| r.market == Some(Market::Spot))
            })
            .collect();
        drop(github);
        (!running.is_empty()).then(|| running[rng.index(running.len())].clone())
    }
}

fn run_key(run_id: u64) -> RunKey {
    RunKey {
        owner: OWNER.to_owned(),
        repo: REPO.to_owned(),
        run_id,
    }
}
