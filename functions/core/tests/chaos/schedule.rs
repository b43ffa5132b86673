//! One seeded schedule: a pool with random settings, a few jobs (in some schedules one
//! job alone), and a random sequence of steps — webhooks delivered late, twice or never
//! (some jobs' `queued` refused at every first delivery, so that only the reaper's
//! redelivery sweep can bring them to ephemera), scaler and reaper runs (some crashing
//! before their n-th external call, some at the same time), runner agents at work, provider
//! faults switched on and off, time passing — with every invariant checked after every
//! step; then faults off and the world left to settle, and the settled invariants checked.

use crate::github::Delivery;
use crate::invariants::{check_always, check_not_stuck, check_settled};
use crate::invoke::{run_all, Ended, Invocation, ReaperHandle};
use crate::rng::Rng;
use crate::world::{Stats, World, OWNER, POOL, STORE_OPS};
use ephemera_core::config::Config;
use ephemera_core::memory::{CrashPoint, FleetFailure, ForgeFailure, StoreOp};
use ephemera_core::ports::{InstanceState, Market};
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;

/// Simulated minutes the world gets to settle before the leak checks, at most.
const SETTLE_ROUNDS: u32 = 240;

/// A violated invariant, with where and how the schedule got there.
#[derive(Debug)]
pub struct Failure {
    pub seed: u64,
    pub step: usize,
    pub invariant: String,
    pub trace: Vec<String>,
    pub state: String,
}

pub struct Schedule {
    seed: u64,
    rng: Rng,
    /// Draws which jobs' `queued` is refused, and which events are never sent.
    refusals: Rng,
    /// One job alone, its `queued` refused: nothing but the sweep can bring it.
    lone_job: bool,
    /// Draws the spot interruptions.
    interruptions: Rng,
    /// The pool's `stopped`, and the stream its crashes, faults and hours are drawn from.
    stopped: u32,
    stopped_rng: Rng,
    world: Arc<World>,
    reaper: ReaperHandle,
    started: OffsetDateTime,
    now: OffsetDateTime,
    step: usize,
    trace: Vec<String>,
}

/// Runs the schedule of `seed` on its own single-threaded runtime with paused time.
pub fn run(seed: u64) -> Result<Stats, Failure> {
    run_with(seed, false)
}

/// [`run`], with the take's condition broken when `break_take` (the suite's own test
/// that its invariants catch two jobs taking one stopped instance).
pub fn run_with(seed: u64, break_take: bool) -> Result<Stats, Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let schedule = Schedule::new(seed);
        schedule
            .world
            .break_take_condition
            .store(break_take, std::sync::atomic::Ordering::SeqCst);
        schedule.play().await
    })
}

/// Seeds the stream the refused `queued` deliveries and the events never sent are drawn
/// from, apart from the main one (whose draws it leaves as they were).
const REFUSAL_STREAM: u64 = 0x5245_4655_5345_4421;
/// How many jobs in a hundred have every first delivery of their `queued` refused.
const REFUSED_JOBS: u64 = 15;
/// How many `in_progress` and `completed` events in a hundred GitHub never sends (no
/// attempt, nothing to redeliver): only the reaper's rules can make up for them.
const UNSENT_EVENTS: u64 = 10;
/// How many schedules in a hundred are one job alone, its `queued` refused.
const LONE_JOB_SCHEDULES: u64 = 10;

/// Seeds the stream the warm-pool settings are drawn from, apart from the main one: a seed
/// whose pool keeps no warm runner and is ephemeral names the schedule it named before
/// warm pools were drawn.
const WARM_STREAM: u64 = 0x5741_524D_504F_4F4C;

/// Seeds the stream spot interruptions are drawn from, apart from the main one (whose
/// draws it leaves as they were).
const INTERRUPTION_STREAM: u64 = 0x5350_4f54_494e_5452;
/// How likely a tick of the runner agents is to come with a spot interruption, in a
/// hundred, and how many of those are warned of first.
const INTERRUPTIONS: u64 = 25;
const WARNED: u64 = 75;

/// Seeds the stream a stopped pool is drawn from (its size and age, its crashes at named
/// calls, its faults, its hours passing), apart from the main one: a seed whose pool keeps
/// no stopped instances names the schedule it named before stopped pools were drawn.
const STOPPED_STREAM: u64 = 0x5354_4f50_5045_4421;
/// How many ephemeral schedules in a hundred keep stopped instances (1–2).
const STOPPED_POOLS: u64 = 35;
/// How many steps in a hundred of a stopped pool's schedule are an hour or so of
/// ordinary work ([`Schedule::quiet_hour`]).
const QUIET_HOURS: u64 = 1;
/// How many crashes in a hundred of a stopped pool's schedule are drawn at a named call
/// of the stopped pool's paths instead of after a number of calls.
const NAMED_CRASHES: u64 = 60;

/// The named calls a scaler may crash at (before the call, or once it returned): the
/// take's transaction, the JIT write and StartInstances; the refill's launch, its
/// ModifyInstanceAttribute and its `prepare` item.
const SCALER_POINTS: [(&str, &str); 6] = [
    ("RunnerStore", "take_stopped"),
    ("JitConfigStore", "put"),
    ("Launcher", "start"),
    ("Launcher", "launch"),
    ("Launcher", "set_shutdown_behaviour"),
    ("JitConfigStore", "put_prepare"),
];
/// The named calls the reaper may crash at: its reset of a stopped instance to
/// `terminate`, the moves of records, the refill's reservation and message.
const REAPER_POINTS: [(&str, &str); 5] = [
    ("Fleet", "set_shutdown_behaviour"),
    ("RunnerStore", "transition"),
    ("RunnerStore", "reserve_runner"),
    ("JobQueue", "send"),
    ("Fleet", "terminate"),
];

/// Seeds the stream the sizing policy is drawn from, apart from the main one: a seed
/// whose pool accepts no sizing names the schedule it named before sized jobs were drawn.
const SIZING_STREAM: u64 = 0x5349_5A49_4E47_2121;

fn config(rng: &mut Rng, seed: u64) -> Arc<Config> {
    let max_runners = rng.between(1, 4);
    let spot = rng.chance(50);
    let check_queued = rng.chance(25);
    let mut warm_rng = Rng::new(seed ^ WARM_STREAM);
    let min_idle = if warm_rng.chance(35) {
        warm_rng.between(1, max_runners.min(2))
    } else {
        0
    };
    let ephemeral = !warm_rng.chance(25);
    let mut stopped_rng = Rng::new(seed ^ STOPPED_STREAM);
    let stopped = if ephemeral && min_idle < max_runners && stopped_rng.chance(STOPPED_POOLS) {
        stopped_rng.between(1, (max_runners - min_idle).min(2))
    } else {
        0
    };
    let warm = if min_idle > 0 || stopped > 0 {
        format!("    min_idle: {min_idle}\n    warm_owner: {OWNER}\n")
    } else {
        String::new()
    };
    let stopped_setting = match stopped {
        0 => String::new(),
        // Now and then an hour's age: `stopped_stale` replaces them within a schedule.
        _ if stopped_rng.chance(40) => format!("    stopped: {stopped}\n    stopped_max_age: 1h\n"),
        _ => format!("    stopped: {stopped}\n"),
    };
    let mut sizing_rng = Rng::new(seed ^ SIZING_STREAM);
    // A sizing pool keeps its warm and stopped runners below its runner cap (config
    // validate's rule), so that its vCPUs cap it above them.
    let kept = min_idle + stopped;
    let sizing = if sizing_rng.chance(50) && kept < max_runners {
        // 16 vCPUs a runner at most; the pool's vCPUs cap it above its warm runners.
        let max_vcpus = 16 * sizing_rng.between(kept + 1, max_runners);
        format!("    max_vcpus: {max_vcpus}\n    sizing: {{ accept: true, max_vcpus_per_runner: 16 }}\n")
    } else {
        String::new()
    };
    let text = format!(
        "deployment: eph
github: {{ app_id: 1 }}
pools:
  - name: {POOL}
    labels: [self-hosted, linux, x64]
    max_runners: {max_runners}
    instance_types: [m7i.large]
    launch_template: eph-runner
    spot: {spot}
    check_queued: {check_queued}
    ephemeral: {ephemeral}
    bootstrap_timeout: 10m
    idle_timeout: 5m
{warm}{stopped_setting}{sizing}"
    );
    Arc::new(Config::parse("chaos.yaml", &text).expect("valid chaos config"))
}

impl Schedule {
    fn new(seed: u64) -> Schedule {
        let mut rng = Rng::new(seed);
        let config = config(&mut rng, seed);
        let pool = &config.pools[0];
        let stopped = pool.stopped;
        let setting = format!(
            "pool max_runners {}, spot {}, check_queued {}, min_idle {}, stopped {} (max age {:?}), ephemeral {}, sizing {}, max_vcpus {:?}",
            pool.max_runners,
            pool.spot,
            pool.check_queued,
            pool.min_idle,
            pool.stopped,
            pool.stopped_max_age,
            pool.ephemeral,
            pool.sizing.accept,
            pool.max_vcpus
        );
        let world = World::new(config);
        let mut refusals = Rng::new(seed ^ REFUSAL_STREAM);
        let lone_job = refusals.chance(LONE_JOB_SCHEDULES);
        let setting = if lone_job {
            format!("{setting}; one job alone, every first delivery of its queued refused")
        } else {
            setting
        };
        let started = time::macros::datetime!(2026-11-22 10:00:00 UTC);
        world.fleet.launch_at(started);
        world.queue.set_now(started);
        Schedule {
            seed,
            rng,
            refusals,
            lone_job,
            interruptions: Rng::new(seed ^ INTERRUPTION_STREAM),
            stopped,
            // Not the stream the pool was drawn from: its draws start anew here.
            stopped_rng: Rng::new(seed ^ STOPPED_STREAM ^ 1),
            reaper: ReaperHandle::new(&world),
            world,
            started,
            now: started,
            step: 0,
            trace: vec![setting],
        }
    }

    async fn play(mut self) -> Result<Stats, Failure> {
        let steps = self.rng.between(40, 90) as usize;
        let mut jobs_left = self.rng.between(2, 10);
        if self.lone_job {
            jobs_left = 1;
        }
        for _ in 0..steps {
            self.step += 1;
            let what = if self.stopped > 0 && self.stopped_rng.chance(QUIET_HOURS) {
                self.quiet_hour().await?
            } else {
                self.one_step(&mut jobs_left).await
            };
            self.note(what);
            self.check(check_always)?;
            let pause = self.rng.between(0, 20);
            self.advance(Duration::from_secs(pause));
        }
        self.settle().await?;
        self.check(check_settled)?;
        self.world.stats().dead_lettered = self.world.queue.dead_lettered();
        let pool = &self.world.config.pools[0];
        self.world.stats().warm_pools = u64::from(pool.min_idle > 0);
        self.world.stats().static_pools = u64::from(!pool.ephemeral);
        self.world.stats().stopped_pools = u64::from(pool.stopped > 0);
        self.world.count_stopped_moves();
        {
            let mut stats = self.world.stats();
            stats.schedules_recovered_by_sweep = u64::from(stats.recovered_by_sweep > 0);
        }
        if self.lone_job {
            let mut stats = self.world.stats();
            stats.lone_jobs = u64::from(stats.jobs > 0);
            stats.lone_jobs_recovered = u64::from(stats.recovered_by_sweep > 0);
        }
        let stats = self.world.stats().clone();
        Ok(stats)
    }

    fn advance(&mut self, by: Duration) {
        self.now += by;
        self.world.fleet.launch_at(self.now);
        self.world.queue.set_now(self.now);
    }

    fn note(&mut self, what: String) {
        let elapsed = self.now - self.started;
        let at = format!(
            "{}m{:02}s",
            elapsed.whole_minutes(),
            elapsed.whole_seconds() % 60
        );
        self.trace
            .push(format!("step {:>3} t+{at:>7}  {what}", self.step));
    }

    fn check(&self, invariant: impl Fn(&World) -> Result<(), String>) -> Result<(), Failure> {
        invariant(&self.world).map_err(|violated| Failure {
            seed: self.seed,
            step: self.step,
            invariant: violated,
            trace: self.trace.clone(),
            state: crate::describe::world(&self.world),
        })
    }

    fn crash_point(&mut self, percent: u64) -> Option<usize> {
        self.rng
            .chance(percent)
            .then(|| self.rng.between(0, 16) as usize)
    }

    /// A crash after a number of calls ([`Self::crash_point`]) or, in a stopped pool's
    /// schedule, now and then at one of `points` instead (before the call or after it).
    fn crash(
        &mut self,
        percent: u64,
        points: &[(&'static str, &'static str)],
    ) -> (Option<usize>, Option<CrashPoint>) {
        let after = self.crash_point(percent);
        if self.stopped == 0 {
            return (after, None);
        }
        let named = match after {
            Some(_) => self.stopped_rng.chance(NAMED_CRASHES),
            None => self.stopped_rng.chance(8),
        };
        if !named {
            return (after, None);
        }
        let (port, name) = points[self.stopped_rng.index(points.len())];
        let point = CrashPoint {
            port,
            name,
            after: self.stopped_rng.chance(50),
        };
        self.world.stats().named_crashes += 1;
        (None, Some(point))
    }

    async fn one_step(&mut self, jobs_left: &mut u64) -> String {
        let roll = self.rng.between(0, 99);
        match roll {
            0..=11 if *jobs_left > 0 => {
                *jobs_left -= 1;
                let twice = self.rng.chance(20);
                let refused = self.lone_job || self.refusals.chance(REFUSED_JOBS);
                let job = self.world.new_job(twice, refused);
                format!(
                    "GitHub queues job {job}{}{}",
                    if twice { " (webhook sent twice)" } else { "" },
                    if refused {
                        " (every first delivery of its queued refused)"
                    } else {
                        ""
                    }
                )
            }
            0..=33 => {
                let lose = self.rng.chance(12);
                let duplicate = self.rng.chance(10);
                let unsent = self.refusals.chance(UNSENT_EVENTS);
                let how = Delivery {
                    lose,
                    duplicate,
                    unsent,
                };
                self.world.deliver(&mut self.rng, how, self.now)
            }
            34..=51 => self.scalers(1, false).await,
            52..=59 => self.reaper_run().await,
            60..=67 => {
                let scalers = self.rng.between(1, 2) as usize;
                self.scalers(scalers, true).await
            }
            68..=81 => {
                self.world.agent_tick(&mut self.rng, self.now, false);
                if !self.interruptions.chance(INTERRUPTIONS) {
                    return "runner agents tick".to_owned();
                }
                let warn = self.interruptions.chance(WARNED);
                let what = self
                    .world
                    .interrupt(&mut self.interruptions, &self.reaper, self.now, warn)
                    .await;
                format!("runner agents tick; {what}")
            }
            82..=87 => self.fault(),
            88..=89 => {
                self.world.heal();
                "faults healed".to_owned()
            }
            90..=91 => match self.world.cancel_job(&mut self.rng) {
                Some(job) => format!("GitHub cancels queued job {job}"),
                None => "nothing to cancel".to_owned(),
            },
            _ => {
                let by = Duration::from_secs(self.rng.between(30, 480));
                self.advance(by);
                format!("time passes: {}s", by.as_secs())
            }
        }
    }

    /// `count` scalers on freshly received batches (and, `with_reaper`, the reaper) at
    /// once; sometimes SQS hands one message to two of them.
    async fn scalers(&mut self, count: usize, with_reaper: bool) -> String {
        let mut invocations = Vec::new();
        let mut shown = Vec::new();
        for i in 0..count {
            let batch = self.rng.between(1, 10) as usize;
            let mut received = self.world.queue.receive(batch, &mut self.rng);
            if i == 1 && self.rng.chance(30) {
                if let Some(Invocation::Scaler {
                    received: first, ..
                }) = invocations.first()
                {
                    received.extend(first.first().cloned());
                }
            }
            let (crash_after, crash_at) =
                self.crash(if with_reaper { 15 } else { 20 }, &SCALER_POINTS);
            let lose_deletes = self.rng.chance(8);
            shown.push(format!(
                "scaler[{}{}{}]",
                received
                    .iter()
                    .map(|s| format!("{:?} {}", s.message.kind, s.message.job_id))
                    .collect::<Vec<_>>()
                    .join(", "),
                crash_text(crash_after, crash_at).map_or(String::new(), |c| format!("; {c}")),
                if lose_deletes { "; deletes lost" } else { "" },
            ));
            invocations.push(Invocation::Scaler {
                received,
                crash_after,
                crash_at,
                lose_deletes,
            });
        }
        if with_reaper && self.rng.chance(70) {
            let (crash_after, crash_at) = self.crash(15, &REAPER_POINTS);
            shown.push(format!(
                "reaper[{}]",
                crash_text(crash_after, crash_at).unwrap_or_else(|| "whole run".to_owned())
            ));
            invocations.push(Invocation::Reaper {
                crash_after,
                crash_at,
            });
        }
        if invocations.len() > 1 {
            self.world.stats().concurrent_runs += 1;
        }
        let ended = run_all(&self.world, &self.reaper, invocations, self.now).await;
        format!("{} -> {}", shown.join(" | "), self.outcomes(&ended))
    }

    async fn reaper_run(&mut self) -> String {
        let (crash_after, crash_at) = self.crash(20, &REAPER_POINTS);
        let invocations = vec![Invocation::Reaper {
            crash_after,
            crash_at,
        }];
        let ended = run_all(&self.world, &self.reaper, invocations, self.now).await;
        let how = crash_text(crash_after, crash_at).unwrap_or_else(|| "whole run".to_owned());
        format!("reaper[{how}] -> {}", self.outcomes(&ended))
    }

    fn outcomes(&self, ended: &[Ended]) -> String {
        let shown: Vec<String> = ended
            .iter()
            .map(|end| match end {
                Ended::Scaler { failed } if failed.is_empty() => "ok".to_owned(),
                Ended::Scaler { failed } => format!("{} failed", failed.len()),
                Ended::Reaper { error: None } => "ok".to_owned(),
                Ended::Reaper { error: Some(err) } => format!("error: {err}"),
                Ended::Crashed => {
                    self.world.stats().crashes += 1;
                    "crashed".to_owned()
                }
            })
            .collect();
        shown.join(" | ")
    }

    /// Switches one provider fault on.
    fn fault(&mut self) -> String {
        self.world.stats().faults += 1;
        if self.stopped > 0 && self.stopped_rng.chance(50) {
            return self.stopped_fault();
        }
        let world = &self.world;
        let times = self.rng.between(1, 4) as u32;
        match self.rng.between(0, 10) {
            0 => {
                world.forge.fail_next_with(times, ForgeFailure::Transient);
                world.deliveries.fail_next(times);
                format!("GitHub answers 5xx to the next {times} calls (and deliveries calls)")
            }
            1 => {
                world.forge.fail_next_with(times, ForgeFailure::Throttled);
                format!("GitHub rate-limits the next {times} calls")
            }
            2 => {
                world
                    .fleet
                    .fail_market_with(Market::Spot, Some(FleetFailure::CapacityUnavailable));
                "EC2 has no spot capacity".to_owned()
            }
            3 => {
                world
                    .fleet
                    .fail_market_with(Market::OnDemand, Some(FleetFailure::CapacityUnavailable));
                "EC2 has no on-demand capacity".to_owned()
            }
            4 => {
                world.fleet.fail_launch_with(Some(FleetFailure::Throttled));
                "EC2 throttles launches".to_owned()
            }
            5 => {
                let cap = times - 1;
                world.fleet.cap_launches(Some(cap));
                format!("EC2 launches at most {cap} instances a request")
            }
            6 => {
                world.fleet.fail_terminate_times(times);
                world.fleet.fail_describe_times(times / 2);
                format!("EC2 fails the next {times} terminations")
            }
            7 => {
                let op = STORE_OPS[self.rng.index(STORE_OPS.len())];
                world.store.fail(op, times.min(2));
                format!("the table fails the next {} {op:?} calls", times.min(2))
            }
            8 => {
                world.jit_store.fail_next(times.min(2));
                format!("SSM fails the next {} calls", times.min(2))
            }
            9 => {
                world.queue.fail_sends(true);
                "SQS refuses sends".to_owned()
            }
            _ => {
                world.forge.fail_next_with(1, ForgeFailure::Rejected);
                "GitHub refuses the next call (403)".to_owned()
            }
        }
    }

    /// One fault of a stopped pool's calls: StartInstances refused for capacity, the
    /// shutdown behaviour's changes failing, the table's take failing, or EC2 losing a
    /// stopped instance.
    fn stopped_fault(&mut self) -> String {
        let world = &self.world;
        let times = self.stopped_rng.between(1, 4) as u32;
        match self.stopped_rng.between(0, 3) {
            0 => {
                world
                    .fleet
                    .fail_start_with(Some(FleetFailure::CapacityUnavailable));
                "EC2 refuses StartInstances (InsufficientInstanceCapacity)".to_owned()
            }
            1 => {
                world.fleet.fail_shutdown_changes(times);
                format!("EC2 fails the next {times} ModifyInstanceAttribute calls")
            }
            2 => {
                world.store.fail(StoreOp::TakeStopped, times.min(2));
                format!("the table fails the next {} takes", times.min(2))
            }
            _ => {
                let stopped: Vec<String> = world
                    .fleet
                    .live_instances()
                    .into_iter()
                    .filter(|i| i.state == InstanceState::Stopped)
                    .map(|i| i.id)
                    .collect();
                if stopped.is_empty() {
                    return "EC2 has no stopped instance to lose".to_owned();
                }
                let lost = &stopped[self.stopped_rng.index(stopped.len())];
                world.fleet.set_state(lost, InstanceState::Terminated);
                world.stats().stopped_lost += 1;
                format!("EC2 loses stopped instance {lost}")
            }
        }
    }

    /// An hour or so of ordinary work, faults left as they are, so that stopped
    /// instances age past a `stopped_max_age` of an hour: every five minutes the
    /// webhooks waiting are delivered, scalers drain the queue, the agents tick and the
    /// reaper runs, with the invariants checked after each. (Time does not jump: an hour
    /// with no reaper run is longer than the redelivery sweep's lookback, past which a
    /// failed event is given up by design.)
    async fn quiet_hour(&mut self) -> Result<String, Failure> {
        let slices = self.stopped_rng.between(6, 18);
        for _ in 0..slices {
            self.advance(Duration::from_secs(300));
            self.world.deliver_all(self.now);
            for _ in 0..20 {
                let received = self.world.queue.receive(10, &mut self.rng);
                if received.is_empty() {
                    break;
                }
                let invocation = Invocation::Scaler {
                    received,
                    crash_after: None,
                    crash_at: None,
                    lose_deletes: false,
                };
                run_all(&self.world, &self.reaper, vec![invocation], self.now).await;
            }
            self.world.agent_tick(&mut self.rng, self.now, false);
            let reaper = vec![Invocation::Reaper {
                crash_after: None,
                crash_at: None,
            }];
            run_all(&self.world, &self.reaper, reaper, self.now).await;
            self.check(check_always)?;
        }
        Ok(format!(
            "{} minutes of ordinary work: webhooks delivered, queue drained, agents and reaper every 5 minutes",
            slices * 5
        ))
    }

    /// Faults off; webhooks delivered, the queue drained, agents, reaper, a minute at a
    /// time, until the world is clean; not clean after [`SETTLE_ROUNDS`] minutes fails.
    /// A dead-lettered message is the operator's to act on, as the product documents: the
    /// DLQ alarm fires and the operator redrives the queue. Only what reached the
    /// dead-letter queue comes back, so a message dropped anywhere else still leaves its
    /// job unserved, and the settled invariants fail.
    fn redrive_dead_letters(&mut self) {
        let redriven = self.world.queue.redrive();
        if redriven > 0 {
            self.note(format!(
                "DLQ alarm: the operator redrives {redriven} messages (ephemera jobs dlq redrive)"
            ));
        }
    }

    async fn settle(&mut self) -> Result<(), Failure> {
        self.world.heal();
        self.step += 1;
        self.note("faults off; settling".to_owned());
        for round in 0..SETTLE_ROUNDS {
            self.redrive_dead_letters();
            self.world.deliver_all(self.now);
            for _ in 0..50 {
                let received = self.world.queue.receive(10, &mut self.rng);
                if received.is_empty() {
                    break;
                }
                let invocation = Invocation::Scaler {
                    received,
                    crash_after: None,
                    crash_at: None,
                    lose_deletes: false,
                };
                run_all(&self.world, &self.reaper, vec![invocation], self.now).await;
            }
            self.world.agent_tick(&mut self.rng, self.now, true);
            let reaper = vec![Invocation::Reaper {
                crash_after: None,
                crash_at: None,
            }];
            run_all(&self.world, &self.reaper, reaper, self.now).await;
            self.check(check_always)?;
            // A few reaper runs with faults off: its timeouts hold every record in
            // `preparing` or `starting` to a bound from here on.
            if round >= 3 {
                let now = self.now;
                self.check(|world| check_not_stuck(world, now))?;
            }
            if crate::describe::unsettled(&self.world).is_none() {
                self.note(format!("settled after {round} minutes"));
                return Ok(());
            }
            self.advance(Duration::from_secs(60));
        }
        self.note(format!("not settled after {SETTLE_ROUNDS} minutes"));
        // A world that never comes to rest is a failure of its own, whatever is left in
        // it: a message deferred for ever, a job never served, a record never cleaned.
        self.check(|world| match crate::describe::unsettled(world) {
            Some(why) => Err(format!(
                "not settled after {SETTLE_ROUNDS} minutes with faults off: {why}"
            )),
            None => Ok(()),
        })
    }
}

/// How a drawn crash reads in the trace.
fn crash_text(after: Option<usize>, at: Option<CrashPoint>) -> Option<String> {
    match (after, at) {
        (_, Some(point)) => Some(format!(
            "crash {} {}.{}",
            if point.after { "after" } else { "before" },
            point.port,
            point.name
        )),
        (Some(n), None) => Some(format!("crash before call {}", n + 1)),
        (None, None) => None,
    }
}
