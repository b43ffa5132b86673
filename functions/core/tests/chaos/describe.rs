//! The world in words, printed with a failure, and whether it has come to rest.

use crate::world::{JobState, World};

/// Records, jobs, instances, GitHub runners, secrets and the queue, one per line.
pub fn world(world: &World) -> String {
    let mut lines = Vec::new();
    for pool in &world.config.pools {
        lines.push(format!(
            "pool {}: slot counter {}",
            pool.name,
            world.store.slots_used(&pool.name)
        ));
    }
    for r in world.store.runners() {
        lines.push(format!(
            "record {} {} runner {} job {:?} instance {:?} github id {:?} slot {} reason {:?}",
            r.name,
            r.status,
            r.runner_status,
            r.job_id,
            r.instance_id,
            r.github_runner_id,
            r.slot_held,
            r.reason
        ));
    }
    for j in world.store.jobs() {
        lines.push(format!(
            "job record {} {} claimed by {:?}",
            j.job_id, j.status, j.runner_name
        ));
    }
    for (id, state) in world.github().jobs.iter() {
        lines.push(format!("GitHub job {id}: {state:?}"));
    }
    for i in world.fleet.instances() {
        lines.push(format!("instance {} {:?}", i.id, i.state));
    }
    for r in world.forge.runners() {
        lines.push(format!(
            "GitHub runner {} {} online {} busy {}",
            r.id, r.name, r.online, r.busy
        ));
    }
    lines.push(format!("JIT secrets: {:?}", world.secrets.instance_ids()));
    lines.push(format!(
        "queue: {} waiting, {} dead-lettered",
        world.queue.waiting(),
        world.queue.dead_letters().len()
    ));
    lines.join("\n")
}

/// Nothing live anywhere, nothing waiting, every job over.
pub fn is_clean(world: &World) -> bool {
    let github = world.github();
    let jobs_over = github
        .jobs
        .values()
        .all(|state| !matches!(state, JobState::Queued | JobState::Running { .. }));
    jobs_over
        && github.outbox.is_empty()
        && world.queue.waiting() == 0
        && world.fleet.live_instances().is_empty()
        && world.forge.runners().is_empty()
        && world.secrets.instance_ids().is_empty()
        && world.store.runners().iter().all(|r| !r.status.is_live())
}
