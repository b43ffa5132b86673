//! The invariants, read from the fakes' own state — the table, EC2, GitHub's runners,
//! the JIT config, the queue — never from what the handlers report they did.
//!
//! [`check_always`] holds after every step, faults and crashes included;
//! [`check_not_stuck`] holds in the settling, once the reaper has run a few times with
//! faults off; [`check_settled`] holds once the world has settled with faults off (where
//! a pool with `min_idle` keeps exactly that many warm runners, idle and ready, a pool
//! with `stopped` exactly that many stopped instances, and nothing else).

use crate::world::{JobState, World};
use ephemera_core::config::PoolConfig;
use ephemera_core::lifecycle::{InstanceStatus, RunnerStatus, CREATE_LEASE};
use ephemera_core::model::{JobStatus, RunnerRecord};
use ephemera_core::ports::{InstanceState, ShutdownBehaviour};
use ephemera_core::sizing::SizingRequest;
use std::collections::BTreeMap;
use std::time::Duration;
use time::OffsetDateTime;

fn live_records(world: &World) -> Vec<RunnerRecord> {
    let records = world.store.runners().into_iter();
    records.filter(|r| r.status.is_live()).collect()
}

/// Names of the keys that occur more than once, with who shares them.
fn shared<K: Ord + std::fmt::Debug>(pairs: impl Iterator<Item = (K, String)>) -> Option<String> {
    let mut by_key: BTreeMap<K, Vec<String>> = BTreeMap::new();
    for (key, who) in pairs {
        by_key.entry(key).or_default().push(who);
    }
    by_key
        .into_iter()
        .find(|(_, who)| who.len() > 1)
        .map(|(key, who)| format!("{key:?}: {}", who.join(", ")))
}

/// What must hold after every step.
pub fn check_always(world: &World) -> Result<(), String> {
    if let Some(breach) = world.take_breaches().into_iter().next() {
        return Err(breach);
    }
    check_reruns(world)?;
    let live = live_records(world);
    for pool in &world.config.pools {
        check_pool(world, &pool.name, pool.runner_cap(), &live)?;
        check_vcpus(pool, &live)?;
    }
    // A runner GitHub shows busy before its `in_progress` is handled is marked active by
    // the reaper with the job it was launched for, which GitHub may have given to another
    // runner; such a record is not bound to that job, it just has not heard yet.
    let running_elsewhere = world.runners_running_other_jobs(&live);
    let bound = live
        .iter()
        .filter(|r| r.runner_status == RunnerStatus::Active)
        .filter(|r| !running_elsewhere.contains(&r.name))
        .filter_map(|r| Some((r.job_id?, r.name.clone())));
    if let Some(both) = shared(bound) {
        return Err(format!("a job is bound to two runners: job {both}"));
    }
    let jobs = world.store.jobs();
    let claims = jobs
        .iter()
        .filter(|j| j.status == JobStatus::Queued)
        .filter_map(|j| Some((j.runner_name.clone()?, j.job_id.to_string())));
    if let Some(both) = shared(claims) {
        return Err(format!(
            "one runner is claimed by two queued jobs: runner {both}"
        ));
    }
    let queued: Vec<u64> = jobs
        .iter()
        .filter(|j| j.status == JobStatus::Queued)
        .map(|j| j.job_id)
        .collect();
    // A record whose runner GitHub shows running another job is not waiting for the job
    // it names either, so it is no second runner launched for it. The scaler hears that
    // GitHub gave a runner another job from that job's `in_progress`, hands the runner's
    // own job on (to the taken job's runner, or freed for a new one) and only then binds
    // the runner to the job it took; a delivery that fails in between (a table call, the
    // re-queue refused) leaves the record naming its old job until the retry, while that
    // job already has its next runner. Counting it flagged that hand-over as a double
    // launch (chaos seed 1528); a runner busy with another job cannot serve this one.
    let waiting_for_a_job = live.iter().filter(|r| !running_elsewhere.contains(&r.name));
    let waiting_for_a_job = waiting_for_a_job.filter(|r| {
        matches!(
            r.status,
            InstanceStatus::PendingCreate
                | InstanceStatus::Creating
                | InstanceStatus::Starting
                | InstanceStatus::Running
        ) && matches!(r.runner_status, RunnerStatus::Pending | RunnerStatus::Idle)
    });
    let launched_for = waiting_for_a_job
        .filter_map(|r| Some((r.job_id?, r.name.clone())))
        .filter(|(job, _)| queued.contains(job));
    if let Some(both) = shared(launched_for) {
        return Err(format!(
            "a queued job has two runners launched for it: job {both}"
        ));
    }
    let instances = live
        .iter()
        .filter_map(|r| Some((r.instance_id.clone()?, r.name.clone())));
    if let Some(both) = shared(instances) {
        return Err(format!(
            "one instance is claimed by two live records: {both}"
        ));
    }
    check_stopped_hold_no_config(world, &live)
}

/// A JIT config is never on an instance of the stopped pool (its record `preparing` or
/// `stopped`), and never on a stopped instance but one a take is starting (its record
/// `starting` with the job, or being replaced after a failed start): a stopped instance
/// holds no secret while it waits, and none meant for another job.
fn check_stopped_hold_no_config(world: &World, live: &[RunnerRecord]) -> Result<(), String> {
    use InstanceStatus::*;
    for instance_id in world.jit_store.instance_ids() {
        let record = live
            .iter()
            .find(|r| r.instance_id.as_deref() == Some(instance_id.as_str()));
        let stopped = world
            .fleet
            .instance(&instance_id)
            .is_some_and(|i| i.state == InstanceState::Stopped);
        match record {
            Some(r) if matches!(r.status, Preparing | Stopped) => {
                return Err(format!(
                    "record {} ({}) is in the stopped pool, but its instance {instance_id} holds a JIT config",
                    r.name, r.status
                ))
            }
            Some(r)
                if stopped
                    && !(matches!(r.status, Starting | PendingDelete | Deleting)
                        && r.job_id.is_some()) =>
            {
                return Err(format!(
                    "stopped instance {instance_id} holds a JIT config, but no take is starting it (record {} {} job {:?})",
                    r.name, r.status, r.job_id
                ))
            }
            None if stopped => {
                return Err(format!(
                    "stopped instance {instance_id} holds a JIT config and no live record names it"
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// The margin past a rule's timeout within which the reaper, running every minute with
/// faults off, must have moved a record on.
const REAPER_MARGIN: Duration = Duration::from_secs(3 * 60);

/// With faults off and the reaper at work, no record stays in `preparing` past its pool's
/// `bootstrap_timeout` (`prepare_timeout`), nor in `starting` past the creation lease
/// (`creation_stalled` resumes or releases it), by more than [`REAPER_MARGIN`].
pub fn check_not_stuck(world: &World, now: OffsetDateTime) -> Result<(), String> {
    for record in live_records(world) {
        let Some(pool) = world.config.pool(&record.pool) else {
            continue;
        };
        let (since, bound) = match record.status {
            InstanceStatus::Preparing => (record.created_at, pool.bootstrap_timeout),
            InstanceStatus::Starting => (record.updated_at, CREATE_LEASE),
            _ => continue,
        };
        if now - since > bound + REAPER_MARGIN {
            return Err(format!(
                "record {} still {} after {} with faults off (its bound {}s)",
                record.name,
                record.status,
                now - since,
                bound.as_secs()
            ));
        }
    }
    Ok(())
}

/// Never above `max_vcpus`: the live records holding a slot, each counted at the most
/// vCPUs its launch may have (a sized runner its shape's maximum, any other the
/// policy's `max_vcpus_per_runner`).
fn check_vcpus(pool: &PoolConfig, live: &[RunnerRecord]) -> Result<(), String> {
    let Some(max_vcpus) = pool.max_vcpus else {
        return Ok(());
    };
    let most = |record: &RunnerRecord| {
        SizingRequest::from_labels(&record.labels)
            .ok()
            .flatten()
            .and_then(|request| ephemera_core::sizing::launch::shape(pool, &request))
            .map_or(pool.sizing.max_vcpus_per_runner, |shape| shape.vcpus_max)
    };
    let vcpus: u32 = live
        .iter()
        .filter(|r| r.pool == pool.name && r.slot_held)
        .map(most)
        .sum();
    if vcpus > max_vcpus {
        return Err(format!(
            "pool {} above max_vcpus {max_vcpus}: live records may have {vcpus} vCPUs",
            pool.name
        ));
    }
    Ok(())
}

/// Never above the pool's runner cap (`max_runners`, and `max_vcpus` in runners): the slot counter, the live records holding a slot, the
/// runners online on live instances; and the counter equals the slots the records hold.
fn check_pool(world: &World, pool: &str, max: u32, live: &[RunnerRecord]) -> Result<(), String> {
    let counter = world.store.slots_used(pool);
    if counter > max {
        return Err(format!(
            "pool {pool} above max_runners {max}: slot counter at {counter}"
        ));
    }
    let holding = live
        .iter()
        .filter(|r| r.pool == pool && r.slot_held)
        .count() as u32;
    if holding > max {
        return Err(format!(
            "pool {pool} above max_runners {max}: {holding} live records hold a slot"
        ));
    }
    if counter != holding {
        return Err(format!(
            "pool {pool}: slot counter at {counter} but {holding} live records hold a slot"
        ));
    }
    let online: Vec<u64> = world
        .forge
        .runners()
        .into_iter()
        .filter(|r| r.online)
        .map(|r| r.id)
        .collect();
    let booted = world.github().booted.clone();
    let serving = world
        .fleet
        .live_instances()
        .into_iter()
        .filter(|i| i.pool.as_deref() == Some(pool))
        .filter(|i| booted.get(&i.id).is_some_and(|id| online.contains(id)))
        .count() as u32;
    if serving > max {
        return Err(format!(
            "pool {pool} above max_runners {max}: {serving} runners online on live instances"
        ));
    }
    Ok(())
}

/// What must hold once the world has settled: nothing leaked but each pool's `min_idle`
/// warm runners, every job ran exactly once (or was cancelled before it ran), and every
/// job item says what GitHub says of its job.
pub fn check_settled(world: &World) -> Result<(), String> {
    check_at_rest(world)?;
    check_jobs_served(world)?;
    check_job_records_follow_github(world)
}

/// Every job GitHub queued has a job item in the table, and the item says what GitHub
/// says of the job: `queued` while it waits, `in_progress` while it runs, `completed`
/// once it is over (ran, cancelled or failed) — none stays `queued` or `in_progress`
/// after GitHub shows it finished.
pub fn check_job_records_follow_github(world: &World) -> Result<(), String> {
    let records: BTreeMap<u64, JobStatus> = world
        .store
        .jobs()
        .into_iter()
        .map(|job| (job.job_id, job.status))
        .collect();
    let mut wrong = Vec::new();
    for (job_id, state) in world.github().jobs.iter() {
        let expected = match state {
            JobState::Queued => JobStatus::Queued,
            JobState::Running { .. } => JobStatus::InProgress,
            JobState::Completed { .. }
            | JobState::Failed { .. }
            | JobState::Interrupted { .. }
            | JobState::Cancelled => JobStatus::Completed,
        };
        match records.get(job_id) {
            Some(status) if *status == expected => {}
            Some(status) => wrong.push(format!("{job_id} ({status}, GitHub: {expected})")),
            None => wrong.push(format!("{job_id} (no item, GitHub: {expected})")),
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "job items not following GitHub's status: {}",
            wrong.join(", ")
        ))
    }
}

/// Nothing left live but each pool's warm runners: exactly `min_idle` of them, each
/// `running` and idle, on a live instance, online on GitHub and not busy. Every other
/// instance, GitHub runner, JIT config, live record or slot is a leak.
pub fn check_at_rest(world: &World) -> Result<(), String> {
    let live = live_records(world);
    // The candidates: idle running records of pools that keep warm runners. How many,
    // and whether each really is a ready runner, is checked below, once the leaks are.
    let warm: Vec<&RunnerRecord> = live
        .iter()
        .filter(|r| r.status == InstanceStatus::Running && r.runner_status == RunnerStatus::Idle)
        .filter(|r| world.config.pool(&r.pool).is_some_and(|p| p.min_idle > 0))
        .collect();
    // And the stopped pools' instances, ready to be taken (each checked below).
    let stopped: Vec<&RunnerRecord> = live
        .iter()
        .filter(|r| r.prepare && r.status == InstanceStatus::Stopped && r.job_id.is_none())
        .collect();
    let kept = |id: &String| {
        warm.iter()
            .chain(&stopped)
            .any(|r| r.instance_id.as_ref() == Some(id))
    };
    let leaked: Vec<String> = world
        .fleet
        .live_instances()
        .into_iter()
        .map(|i| i.id)
        .filter(|id| !kept(id))
        .collect();
    if !leaked.is_empty() {
        return Err(format!("instances leaked: {}", leaked.join(", ")));
    }
    let runners: Vec<String> = world
        .forge
        .runners()
        .into_iter()
        .filter(|g| {
            !warm
                .iter()
                .any(|r| r.github_runner_id == Some(g.id) && r.name == g.name)
        })
        .map(|g| g.name)
        .collect();
    if !runners.is_empty() {
        return Err(format!("GitHub runners leaked: {}", runners.join(", ")));
    }
    let waiting = world.jit_store.instance_ids();
    if !waiting.is_empty() {
        return Err(format!("JIT config leaked: {}", waiting.join(", ")));
    }
    let left: Vec<String> = live
        .iter()
        .filter(|r| !warm.iter().chain(&stopped).any(|w| w.name == r.name))
        .map(|r| format!("{} ({})", r.name, r.status))
        .collect();
    if !left.is_empty() {
        return Err(format!("live records left: {}", left.join(", ")));
    }
    for pool in &world.config.pools {
        let kept: Vec<&&RunnerRecord> = warm.iter().filter(|r| r.pool == pool.name).collect();
        let names: Vec<&str> = kept.iter().map(|r| r.name.as_str()).collect();
        if kept.len() != pool.min_idle as usize {
            return Err(format!(
                "pool {}: {} idle runners left after settling, min_idle {}: {}",
                pool.name,
                kept.len(),
                pool.min_idle,
                names.join(", ")
            ));
        }
        for record in kept {
            check_ready(world, record)?;
        }
        let ready: Vec<&&RunnerRecord> = stopped.iter().filter(|r| r.pool == pool.name).collect();
        if ready.len() != pool.stopped as usize {
            return Err(format!(
                "pool {}: {} stopped instances left after settling, stopped {}",
                pool.name,
                ready.len(),
                pool.stopped
            ));
        }
        for record in &ready {
            check_stopped_ready(world, record)?;
        }
        let counter = world.store.slots_used(&pool.name);
        let held = warm
            .iter()
            .chain(&stopped)
            .filter(|r| r.pool == pool.name && r.slot_held)
            .count();
        let kept = names.len() + ready.len();
        if counter as usize != kept || held != kept {
            return Err(format!(
                "pool {}: slot counter at {counter}, {held} slots held, with {} warm runners and {} stopped instances left",
                pool.name,
                names.len(),
                ready.len()
            ));
        }
    }
    Ok(())
}

/// A warm runner left after settling serves: its instance is live and its runner is
/// online on GitHub, not busy.
fn check_ready(world: &World, record: &RunnerRecord) -> Result<(), String> {
    let instance_live = record
        .instance_id
        .as_ref()
        .is_some_and(|id| world.fleet.live_instances().iter().any(|i| &i.id == id));
    let online = record.github_runner_id.is_some_and(|id| {
        world
            .forge
            .runners()
            .iter()
            .any(|g| g.id == id && g.online && !g.busy)
    });
    if instance_live && online {
        Ok(())
    } else {
        Err(format!(
            "warm runner {} is not ready after settling: instance live {instance_live}, online and not busy on GitHub {online}",
            record.name
        ))
    }
}

/// A stopped instance left after settling is ready to be taken: its instance stopped, its
/// shutdown behaviour back to `terminate` (so that its job's end terminates it), on
/// demand, and no GitHub runner registered for it.
fn check_stopped_ready(world: &World, record: &RunnerRecord) -> Result<(), String> {
    let instance = record.instance_id.as_deref();
    let state = instance
        .and_then(|id| world.fleet.instance(id))
        .map(|i| i.state);
    let behaviour = instance.map(|id| world.fleet.shutdown_behaviour(id));
    let on_demand = record.market == Some(ephemera_core::ports::Market::OnDemand);
    if state == Some(InstanceState::Stopped)
        && behaviour == Some(ShutdownBehaviour::Terminate)
        && on_demand
        && record.github_runner_id.is_none()
    {
        Ok(())
    } else {
        Err(format!(
            "stopped instance {} ({instance:?}) is not ready after settling: state {state:?}, shutdown behaviour {behaviour:?}, market {:?}, GitHub runner {:?}",
            record.name, record.market, record.github_runner_id
        ))
    }
}

/// At most one re-run per workflow run, and only of a job interrupted after a warning.
fn check_reruns(world: &World) -> Result<(), String> {
    let asked = world.runs.reruns();
    if let Some(twice) = shared(asked.iter().map(|(run, job)| (run.run_id, job.to_string()))) {
        return Err(format!("a workflow run was re-run twice: run {twice}"));
    }
    let github = world.github();
    match asked.iter().find(|(_, job)| !github.warned.contains(job)) {
        Some((run, job)) => Err(format!(
            "job {job} (run {}) was re-run, but no interruption it was warned of failed it",
            run.run_id
        )),
        None => Ok(()),
    }
}

/// Every job ran exactly once (GitHub gave it to one runner, which finished it), or was
/// cancelled while queued and never ran.
fn check_jobs_served(world: &World) -> Result<(), String> {
    let github = world.github();
    for (job_id, state) in github.jobs.iter() {
        let runs = github.runs.get(job_id).copied().unwrap_or(0);
        match state {
            JobState::Completed { .. } | JobState::Interrupted { .. } if runs == 1 => {}
            JobState::Cancelled if runs == 0 => {}
            JobState::Completed { .. } | JobState::Interrupted { .. } | JobState::Cancelled => {
                return Err(format!("job {job_id} ({state:?}) ran {runs} times"))
            }
            JobState::Queued => return Err(format!("job {job_id} never ran")),
            JobState::Running { runner, .. } => {
                return Err(format!(
                    "job {job_id} still running on {runner} after settling"
                ))
            }
            JobState::Failed { runner } => {
                return Err(format!("job {job_id} failed: its runner {runner} was lost"))
            }
        }
    }
    Ok(())
}
