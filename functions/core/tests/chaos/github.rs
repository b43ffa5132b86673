//! GitHub and the runner agent, played on the world's fakes: jobs are created and
//! cancelled, webhooks wait in an outbox until the schedule delivers (or loses, or
//! duplicates) them, each attempt logged in the App's deliveries log as GitHub keeps it
//! (a lost one as a failed attempt: 502, 503, or 0 when the endpoint cannot be reached),
//! and GitHub never sends a failed event again unless the redelivery sweep asks, under a
//! new delivery id with the event's guid. Instances read their JIT config and bring their
//! runner online, and GitHub hands each queued job to ANY idle runner with matching
//! labels — not necessarily the one launched for it, or a warm runner launched for none.
//! An ephemeral runner runs one job, then GitHub removes it and its instance powers off;
//! a static runner runs one job after another until ephemera removes it.

use crate::rng::Rng;
use crate::world::{Event, GitHub, JobState, World, INSTALLATION, OWNER, POOL, REPO};
use ephemera_core::message::{JobAttempt, MessageKind, QueueMessage, VERSION};
use ephemera_core::ports::{ForgeJobState, HookDelivery, InstanceState};
use secrecy::ExposeSecret;
use std::time::Duration;
use time::OffsetDateTime;

/// How likely each step of the agent is to happen on one tick (when not eager).
const BOOT_CHANCE: u64 = 70;
const TAKE_CHANCE: u64 = 75;
/// How likely a stopped pool's host is to fail its prepare phase, in a hundred.
const PREPARE_FAILS: u64 = 10;

/// What GitHub shows for an attempt the endpoint refused or never answered, by turns.
const REFUSED: [u16; 3] = [502, 503, 0];
/// What the webhook function answers an event it queued.
const ACCEPTED: u16 = 200;

impl GitHub {
    /// A new event for GitHub to deliver, with its own guid.
    pub fn event(
        &mut self,
        kind: MessageKind,
        job_id: u64,
        runner: Option<(String, u64)>,
    ) -> Event {
        self.next_guid += 1;
        Event {
            kind,
            job_id,
            runner,
            labels: self.job_labels.get(&job_id).cloned().unwrap_or_default(),
            guid: format!("guid-{}", self.next_guid),
            redelivery: false,
            conclusion: None,
        }
    }
}

/// How one delivery step goes.
pub struct Delivery {
    /// The attempt fails (the endpoint refuses it, or cannot be reached).
    pub lose: bool,
    /// The event is delivered, and kept to be delivered again later.
    pub duplicate: bool,
    /// GitHub drops an `in_progress` or `completed` event without any attempt (webhooks
    /// are not guaranteed): it is in no deliveries log, so nothing can redeliver it.
    pub unsent: bool,
}

impl World {
    /// GitHub queues a new job and sends its `queued` webhook (sometimes twice: the same
    /// event delivered two times). `refused`: every first delivery of that `queued`
    /// fails, so that only the redelivery sweep can bring the job to ephemera.
    pub fn new_job(&self, twice: bool, refused: bool) -> u64 {
        let mut github = self.github();
        github.next_job += 1;
        let job_id = github.next_job;
        let sized = self.config.pools[0].sizing.accept;
        github.job_labels.insert(job_id, job_labels(job_id, sized));
        let event = github.event(MessageKind::Queued, job_id, None);
        github.jobs.insert(job_id, JobState::Queued);
        if refused {
            github.queued_refused.insert(job_id);
        }
        if twice {
            github.outbox.push(event.clone());
        }
        github.outbox.push(event);
        drop(github);
        self.forge.set_job_state(job_id, ForgeJobState::Queued);
        let mut stats = self.stats();
        stats.jobs += 1;
        stats.queued_refused += u64::from(refused);
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
        let event = github.event(MessageKind::Completed, job_id, None);
        github.jobs.insert(job_id, JobState::Cancelled);
        github.outbox.push(event);
        drop(github);
        self.forge.set_job_state(job_id, ForgeJobState::Completed);
        self.stats().cancelled += 1;
        Some(job_id)
    }

    /// Makes one delivery of one waiting webhook, chosen at random (so out of order), as
    /// `how` says: a lost attempt fails, as does a first delivery of a refused job's
    /// `queued`; a duplicate is delivered and kept for another delivery later; an unsent
    /// `in_progress` or `completed` is dropped with no attempt. Every attempt goes in
    /// the deliveries log the redelivery sweep reads. Returns what happened, for the
    /// trace.
    pub fn deliver(&self, rng: &mut Rng, how: Delivery, now: OffsetDateTime) -> String {
        let Delivery {
            lose,
            duplicate,
            unsent,
        } = how;
        let mut github = self.github();
        if github.outbox.is_empty() {
            return "no webhook waiting".to_owned();
        }
        let at = rng.index(github.outbox.len());
        let event = github.outbox[at].clone();
        if unsent && event.kind != MessageKind::Queued && !event.redelivery {
            github.outbox.remove(at);
            drop(github);
            self.stats().events_unsent += 1;
            return format!(
                "webhook {:?} job {} ({}) never sent",
                event.kind, event.job_id, event.guid
            );
        }
        if lose || !duplicate {
            github.outbox.remove(at);
        }
        drop(github);
        let what = if event.redelivery {
            "redelivery of webhook"
        } else {
            "webhook"
        };
        let (id, status) = self.attempt(&event, lose, now);
        if status != ACCEPTED {
            return format!(
                "{what} {:?} job {} ({}) lost: delivery {id} answered {status}",
                event.kind, event.job_id, event.guid
            );
        }
        if duplicate {
            self.stats().deliveries_duplicated += 1;
        }
        let dup = if duplicate {
            " (a copy comes again)"
        } else {
            ""
        };
        format!(
            "{what} {:?} job {} ({}) delivered as {id}{dup}",
            event.kind, event.job_id, event.guid
        )
    }

    /// Delivers every waiting webhook, in order (quiescence): none is lost but the first
    /// deliveries of a refused job's `queued`.
    pub fn deliver_all(&self, now: OffsetDateTime) {
        let events: Vec<Event> = std::mem::take(&mut self.github().outbox);
        for event in events {
            self.attempt(&event, false, now);
        }
    }

    /// GitHub sends delivery `id`'s event again, as the sweep asked (a new delivery with
    /// the same guid, made when the schedule delivers it).
    pub fn redeliver(&self, id: u64) {
        let mut github = self.github();
        let Some(event) = github.attempts.get(&id).cloned() else {
            return;
        };
        github.outbox.push(Event {
            redelivery: true,
            ..event
        });
        drop(github);
        self.stats().redeliveries_asked += 1;
    }

    /// One attempt at delivering `event`, logged as GitHub logs it; a delivered one
    /// reaches the queue as the webhook function sends it. Returns the delivery's id and
    /// the status the endpoint answered.
    fn attempt(&self, event: &Event, lose: bool, now: OffsetDateTime) -> (u64, u16) {
        let mut github = self.github();
        let refused = lose
            || (event.kind == MessageKind::Queued
                && !event.redelivery
                && github.queued_refused.contains(&event.job_id));
        github.next_delivery += 1;
        let id = github.next_delivery;
        let status = if refused {
            REFUSED[(id % REFUSED.len() as u64) as usize]
        } else {
            ACCEPTED
        };
        github.attempts.insert(id, event.clone());
        self.deliveries.record(HookDelivery {
            id,
            guid: event.guid.clone(),
            event: "workflow_job".to_owned(),
            action: Some(action(event.kind).to_owned()),
            status_code: status,
            delivered_at: now,
            redelivery: event.redelivery,
        });
        if refused {
            drop(github);
            self.stats().deliveries_lost += 1;
            return (id, status);
        }
        let first_queued =
            event.kind == MessageKind::Queued && github.queued_delivered.insert(event.job_id);
        let still_queued = github.jobs.get(&event.job_id) == Some(&JobState::Queued);
        drop(github);
        let mut stats = self.stats();
        if event.redelivery {
            stats.redeliveries_delivered += 1;
            stats.recovered_by_sweep += u64::from(first_queued && still_queued);
        }
        drop(stats);
        let run = self.run_of(event.job_id);
        self.queue.push(&webhook_message(event, run, now));
        (id, status)
    }

    /// One tick of every runner agent and of GitHub's job assignment. `eager` makes
    /// every instance boot and every idle runner take a job at once (quiescence).
    pub fn agent_tick(&self, rng: &mut Rng, now: OffsetDateTime, eager: bool) {
        self.sync_runs();
        self.finish_jobs(now);
        self.lose_dead_instances();
        self.boot_instances(rng, now, eager);
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
            let event = github.event(
                MessageKind::Completed,
                job_id,
                Some((runner.clone(), runner_id)),
            );
            github.jobs.insert(
                job_id,
                JobState::Completed {
                    runner: runner.clone(),
                },
            );
            github.outbox.push(event);
            let instance = github
                .booted
                .iter()
                .find(|(_, id)| **id == runner_id)
                .map(|(instance, _)| instance.clone());
            self.forge.set_job_state(job_id, ForgeJobState::Completed);
            if self.ephemeral() {
                self.forge.deregister(runner_id);
                // The host powers off; its shutdown behaviour (the launch template's
                // `terminate`, set back from `stop` for a stopped pool's host) ends it.
                if let Some(instance) = instance {
                    self.fleet.power_off(&instance);
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
                let event = github.event(
                    MessageKind::Completed,
                    job_id,
                    Some((runner.clone(), runner_id)),
                );
                github.outbox.push(event);
                self.forge.set_job_state(job_id, ForgeJobState::Completed);
                self.breach(format!(
                    "job {job_id} was killed: the instance {instance} of busy runner {runner} is gone"
                ));
            }
        }
    }

    /// Live instances read their JIT config (deleting it) and bring their runner online;
    /// a stopped pool's host that finds its `prepare` item prepares and powers off (or,
    /// now and then, fails to prepare and stays up); a stopped instance does nothing.
    fn boot_instances(&self, rng: &mut Rng, now: OffsetDateTime, eager: bool) {
        for instance in self.fleet.live_instances() {
            let known = {
                let github = self.github();
                github.booted.contains_key(&instance.id)
                    || github.duds.contains(&instance.id)
                    || github.prepare_failed.contains(&instance.id)
            };
            if known
                || instance.state == InstanceState::Stopped
                || !(eager || rng.chance(BOOT_CHANCE))
            {
                continue;
            }
            if self.jit_store.prepared(&instance.id) {
                self.prepare_host(&instance.id, rng, eager);
                continue;
            }
            let Some((_, config)) = self.jit_store.take(&instance.id, now) else {
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

    /// A stopped pool's host with its `prepare` item: it prepares and powers off, which
    /// stops it (its shutdown behaviour was set to `stop` before the item was written);
    /// one in [`PREPARE_FAILS`] fails (not when `eager`) and stays up, as the bootstrap
    /// does on a failed prepare, for the reaper's `prepare_timeout`.
    fn prepare_host(&self, instance_id: &str, rng: &mut Rng, eager: bool) {
        if !eager && rng.chance(PREPARE_FAILS) {
            self.github().prepare_failed.insert(instance_id.to_owned());
            self.stats().prepares_failed += 1;
            return;
        }
        self.fleet.power_off(instance_id);
        let state = self.fleet.instance(instance_id).map(|i| i.state);
        if state != Some(InstanceState::Stopped) {
            self.breach(format!(
                "prepared host {instance_id} powered off into {state:?}, not stopped: its shutdown behaviour was not stop"
            ));
        }
        self.stats().hosts_prepared += 1;
    }

    /// GitHub gives each queued job to a random idle runner whose registered labels
    /// cover the job's (a sized job's sizing labels are on its own runners only).
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
            let wanted = github.job_labels.get(&job_id).cloned().unwrap_or_default();
            let registered = self.forge.jit_requests();
            let covers = |name: &str| {
                registered
                    .iter()
                    .rev()
                    .find(|r| r.name == name)
                    .is_some_and(|r| ephemera_core::routing::runner_takes(&r.labels, &wanted))
            };
            let idle: Vec<(u64, String)> = self
                .forge
                .runners()
                .into_iter()
                .filter(|r| r.online && !r.busy && !github.used.contains(&r.id))
                .filter(|r| covers(&r.name))
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
            *github.runs.entry(job_id).or_default() += 1;
            let event = github.event(
                MessageKind::InProgress,
                job_id,
                Some((runner.clone(), runner_id)),
            );
            github.outbox.push(event);
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

/// The action of a `workflow_job` event of `kind`, as the deliveries log shows it.
fn action(kind: MessageKind) -> &'static str {
    match kind {
        MessageKind::Queued => "queued",
        MessageKind::InProgress => "in_progress",
        MessageKind::Completed => "completed",
        MessageKind::Warm => "warm",
    }
}

/// The queue message the webhook function makes of a delivery (its delivery id is the
/// event's `X-GitHub-Delivery` guid, the same for every attempt).
fn webhook_message(event: &Event, run: (u64, u32), now: OffsetDateTime) -> QueueMessage {
    QueueMessage {
        v: VERSION,
        kind: event.kind,
        delivery_id: event.guid.clone(),
        job_id: event.job_id,
        run_id: run.0,
        pool: POOL.to_owned(),
        labels: event.labels.clone(),
        repo: REPO.to_owned(),
        owner: OWNER.to_owned(),
        installation_id: Some(INSTALLATION),
        runner_name: event.runner.as_ref().map(|(name, _)| name.clone()),
        runner_id: event.runner.as_ref().map(|(_, id)| *id),
        received_at: now,
        github: Default::default(),
        attempt: JobAttempt {
            run_attempt: run.1,
            conclusion: event.conclusion,
        },
    }
}

/// A job's `runs-on`: the pool's labels and, where the pool accepts sizing, for two jobs
/// in three a size (drawn from the job id, so the schedule's draws stay as they were).
fn job_labels(job_id: u64, sized: bool) -> Vec<String> {
    let mut labels: Vec<String> = ["self-hosted", "linux", "x64"].map(String::from).to_vec();
    let size: &[&str] = match (sized, job_id % 3) {
        (true, 1) => &["ephemera.cpu=8"],
        (true, 2) => &["ephemera.cpu=4-16", "ephemera.ram=8"],
        _ => &[],
    };
    labels.extend(size.iter().map(|l| l.to_string()));
    labels
}
