//! GitHub and the runner agent, played on the world's fakes: jobs are created and
//! cancelled, webhooks wait in an outbox until the schedule delivers (or loses, or
//! duplicates) them, instances read their JIT config and bring their runner online, and
//! GitHub hands each queued job to ANY idle runner with matching labels — not
//! necessarily the one launched for it, or a warm runner launched for none. An ephemeral
//! runner runs one job, then GitHub removes it and its instance powers off; a static
//! runner runs one job after another until ephemera removes it.

use crate::rng::Rng;
use crate::world::{Event, JobState, World, INSTALLATION, OWNER, POOL, REPO};
use ephemera_core::message::{MessageKind, QueueMessage, VERSION};
use ephemera_core::ports::{ForgeJobState, InstanceState};
use secrecy::ExposeSecret;
use std::time::Duration;
use time::OffsetDateTime;

/// How likely each step of the agent is to happen on one tick (when not eager).
const BOOT_CHANCE: u64 = 70;
const TAKE_CHANCE: u64 = 75;

impl World {
    /// GitHub queues a new job and sends its `queued` webhook (sometimes twice).
    pub fn new_job(&self, twice: bool) -> u64 {
        let mut github = self.github();
        github.next_job += 1;
        let job_id = github.next_job;
        github.jobs.insert(job_id, JobState::Queued);
        let event = Event {
            kind: MessageKind::Queued,
            job_id,
            runner: None,
        };
        if twice {
            github.outbox.push(event.clone());
        }
        github.outbox.push(event);
        drop(github);
        self.forge.set_job_state(job_id, ForgeJobState::Queued);
        self.stats().jobs += 1;
        job_id
    }

    /// Cancels a queued job, if there is one; GitHub sends `completed` with no runner.
    pub fn cancel_job(&self, rng: &mut Rng) -> Option<u64> {
        let mut github = self.github();
        let queued: Vec<u64> = github
            .jobs
            .iter()
            .filter(|(_, state)| **state == JobState::Queued)
            .map(|(id, _)| *id)
            .collect();
        if queued.is_empty() {
            return None;
        }
        let job_id = queued[rng.index(queued.len())];
        github.jobs.insert(job_id, JobState::Cancelled);
        github.outbox.push(Event {
            kind: MessageKind::Completed,
            job_id,
            runner: None,
        });
        drop(github);
        self.forge.set_job_state(job_id, ForgeJobState::Completed);
        self.stats().cancelled += 1;
        Some(job_id)
    }

    /// Delivers one waiting webhook, chosen at random (so out of order): `lose` drops it
    /// (but the last copy of a job's `queued` is always delivered once: a job ephemera
    /// never hears of is not its to serve), `duplicate` delivers it and keeps a copy for
    /// later. Returns what happened, for the trace.
    pub fn deliver(
        &self,
        rng: &mut Rng,
        lose: bool,
        duplicate: bool,
        now: OffsetDateTime,
    ) -> String {
        let mut github = self.github();
        if github.outbox.is_empty() {
            return "no webhook waiting".to_owned();
        }
        let at = rng.index(github.outbox.len());
        let event = github.outbox[at].clone();
        let copies = github
            .outbox
            .iter()
            .filter(|e| e.kind == event.kind && e.job_id == event.job_id)
            .count();
        let may_lose = event.kind != MessageKind::Queued
            || copies > 1
            || github.queued_delivered.contains(&event.job_id);
        if lose && may_lose {
            github.outbox.remove(at);
            self.stats().deliveries_lost += 1;
            return format!("webhook {:?} job {} lost", event.kind, event.job_id);
        }
        if !duplicate {
            github.outbox.remove(at);
        } else {
            self.stats().deliveries_duplicated += 1;
        }
        if event.kind == MessageKind::Queued {
            github.queued_delivered.insert(event.job_id);
        }
        github.next_delivery += 1;
        let message = webhook_message(&event, github.next_delivery, now);
        drop(github);
        self.queue.push(&message);
        let dup = if duplicate {
            " (a copy comes again)"
        } else {
            ""
        };
        format!(
            "webhook {:?} job {} delivered{dup}",
            event.kind, event.job_id
        )
    }

    /// Delivers every waiting webhook, in order (quiescence).
    pub fn deliver_all(&self, now: OffsetDateTime) {
        let events: Vec<Event> = std::mem::take(&mut self.github().outbox);
        for event in events {
            let mut github = self.github();
            if event.kind == MessageKind::Queued {
                github.queued_delivered.insert(event.job_id);
            }
            github.next_delivery += 1;
            let message = webhook_message(&event, github.next_delivery, now);
            drop(github);
            self.queue.push(&message);
        }
    }

    /// One tick of every runner agent and of GitHub's job assignment. `eager` makes
    /// every instance boot and every idle runner take a job at once (quiescence).
    pub fn agent_tick(&self, rng: &mut Rng, now: OffsetDateTime, eager: bool) {
        self.finish_jobs(now);
        self.lose_dead_instances();
        self.boot_instances(rng, eager);
        self.assign_jobs(rng, now, eager);
    }

    /// Jobs whose time is up complete; an ephemeral runner then leaves GitHub and its
    /// instance powers off, a static one is idle again.
    fn finish_jobs(&self, now: OffsetDateTime) {
        let mut github = self.github();
        let done: Vec<(u64, String, u64)> = github
            .jobs
            .iter()
            .filter_map(|(id, state)| match state {
                JobState::Running {
                    runner,
                    runner_id,
                    ends_at,
                } if *ends_at <= now => Some((*id, runner.clone(), *runner_id)),
                _ => None,
            })
            .collect();
        for (job_id, runner, runner_id) in done {
            github.jobs.insert(
                job_id,
                JobState::Completed {
                    runner: runner.clone(),
                },
            );
            github.outbox.push(Event {
                kind: MessageKind::Completed,
                job_id,
                runner: Some((runner, runner_id)),
            });
            let instance = github
                .booted
                .iter()
                .find(|(_, id)| **id == runner_id)
                .map(|(instance, _)| instance.clone());
            self.forge.set_job_state(job_id, ForgeJobState::Completed);
            if self.ephemeral() {
                self.forge.deregister(runner_id);
                if let Some(instance) = instance {
                    self.fleet.set_state(&instance, InstanceState::Terminated);
                }
            } else {
                self.forge.set_busy(runner_id, false);
            }
            self.stats().ran += 1;
        }
    }

    /// Runners whose instance is gone go offline; a job running there fails.
    fn lose_dead_instances(&self) {
        let live: Vec<String> = self
            .fleet
            .live_instances()
            .into_iter()
            .map(|i| i.id)
            .collect();
        let mut github = self.github();
        let dead: Vec<(String, u64)> = github
            .booted
            .iter()
            .filter(|(instance, _)| !live.contains(instance))
            .map(|(instance, id)| (instance.clone(), *id))
            .collect();
        for (instance, runner_id) in dead {
            github.booted.remove(&instance);
            self.forge.set_online(runner_id, false);
            let running = github.jobs.iter().find_map(|(id, state)| match state {
                JobState::Running {
                    runner,
                    runner_id: on,
                    ..
                } if *on == runner_id => Some((*id, runner.clone())),
                _ => None,
            });
            if let Some((job_id, runner)) = running {
                self.forge.set_busy(runner_id, false);
                github.jobs.insert(
                    job_id,
                    JobState::Failed {
                        runner: runner.clone(),
                    },
                );
                github.outbox.push(Event {
                    kind: MessageKind::Completed,
                    job_id,
                    runner: Some((runner.clone(), runner_id)),
                });
                self.forge.set_job_state(job_id, ForgeJobState::Completed);
                self.breach(format!(
                    "job {job_id} was killed: the instance {instance} of busy runner {runner} is gone"
                ));
            }
        }
    }

    /// Live instances read their JIT config (deleting it) and bring their runner online.
    fn boot_instances(&self, rng: &mut Rng, eager: bool) {
        for instance in self.fleet.live_instances() {
            let known = {
                let github = self.github();
                github.booted.contains_key(&instance.id) || github.duds.contains(&instance.id)
            };
            if known || !(eager || rng.chance(BOOT_CHANCE)) {
                continue;
            }
            let Some((_, config)) = self.secrets.take(&instance.id) else {
                continue;
            };
            let runner_id = parse_runner_id(config.expose_secret());
            let registered =
                runner_id.is_some_and(|id| self.forge.runners().iter().any(|r| r.id == id));
            let mut github = self.github();
            match runner_id {
                Some(id) if registered => {
                    self.forge.set_online(id, true);
                    github.booted.insert(instance.id.clone(), id);
                    self.fleet.set_state(&instance.id, InstanceState::Running);
                }
                _ => {
                    github.duds.insert(instance.id.clone());
                }
            }
        }
    }

    /// GitHub gives each queued job to a random idle runner (any of them: all carry the
    /// pool's labels).
    fn assign_jobs(&self, rng: &mut Rng, now: OffsetDateTime, eager: bool) {
        let queued: Vec<u64> = {
            let github = self.github();
            let mut queued: Vec<u64> = github
                .jobs
                .iter()
                .filter(|(_, state)| **state == JobState::Queued)
                .map(|(id, _)| *id)
                .collect();
            rng.shuffle(&mut queued);
            queued
        };
        for job_id in queued {
            if !(eager || rng.chance(TAKE_CHANCE)) {
                continue;
            }
            let mut github = self.github();
            let idle: Vec<(u64, String)> = self
                .forge
                .runners()
                .into_iter()
                .filter(|r| r.online && !r.busy && !github.used.contains(&r.id))
                .map(|r| (r.id, r.name))
                .collect();
            if idle.is_empty() {
                return;
            }
            let (runner_id, runner) = idle[rng.index(idle.len())].clone();
            let minutes = rng.between(1, 12);
            if self.ephemeral() {
                github.used.insert(runner_id);
            }
            github.last_job.insert(runner.clone(), job_id);
            github.jobs.insert(
                job_id,
                JobState::Running {
                    runner: runner.clone(),
                    runner_id,
                    ends_at: now + Duration::from_secs(60 * minutes),
                },
            );
            github.outbox.push(Event {
                kind: MessageKind::InProgress,
                job_id,
                runner: Some((runner.clone(), runner_id)),
            });
            drop(github);
            self.forge.set_busy(runner_id, true);
            self.forge.set_job_state(job_id, ForgeJobState::InProgress);
            match self.store.runner(&runner).map(|r| r.job_id) {
                Some(None) => self.stats().taken_by_warm_runner += 1,
                Some(Some(launched_for)) if launched_for != job_id => {
                    self.stats().taken_by_other_runner += 1;
                }
                _ => {}
            }
        }
    }
}

/// The fake's JIT config reads `jit:<runner id>:<name>`.
fn parse_runner_id(config: &str) -> Option<u64> {
    config.strip_prefix("jit:")?.split(':').next()?.parse().ok()
}

/// The queue message the webhook function makes of a delivery.
fn webhook_message(event: &Event, delivery: u64, now: OffsetDateTime) -> QueueMessage {
    QueueMessage {
        v: VERSION,
        kind: event.kind,
        delivery_id: format!("delivery-{delivery}"),
        job_id: event.job_id,
        run_id: 1000 + event.job_id,
        pool: POOL.to_owned(),
        labels: vec!["self-hosted".into(), "linux".into(), "x64".into()],
        repo: REPO.to_owned(),
        owner: OWNER.to_owned(),
        installation_id: Some(INSTALLATION),
        runner_name: event.runner.as_ref().map(|(name, _)| name.clone()),
        runner_id: event.runner.as_ref().map(|(_, id)| *id),
        received_at: now,
    }
}
