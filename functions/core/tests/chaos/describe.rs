//! The world in words, printed with a failure (the failed webhook deliveries included),
//! and whether (or why not) it has come to rest.

use crate::world::{JobState, World};

/// Records, jobs, instances, GitHub runners, JIT configs and the queue, one per line.
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
        if r.prepare {
            let moves: Vec<String> = r
                .history
                .iter()
                .filter_map(|h| {
                    let at = h.at - time::macros::datetime!(2026-11-22 10:00:00 UTC);
                    Some(format!(
                        "t+{}s {} ({})",
                        at.whole_seconds(),
                        h.status?,
                        h.reason.as_deref().unwrap_or("")
                    ))
                })
                .collect();
            lines.push(format!(
                "  stopped pool record's moves: {}",
                moves.join("; ")
            ));
        }
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
    lines.push(format!("JIT config: {:?}", world.jit_store.instance_ids()));
    let deliveries = world.deliveries.deliveries();
    let failed: Vec<String> = deliveries
        .iter()
        .filter(|d| !d.delivered())
        .map(|d| format!("{} {} {:?} {}", d.id, d.guid, d.action, d.status_code))
        .collect();
    lines.push(format!(
        "deliveries: {} made, {} redeliveries asked; failed: {}",
        deliveries.len(),
        world.deliveries.redelivered().len(),
        failed.join(", ")
    ));
    lines.push(format!(
        "queue: {} waiting, {} dead-lettered",
        world.queue.waiting(),
        world.queue.dead_letters().len()
    ));
    lines.join("\n")
}

/// Why the world is not at rest yet, or `None` once it is: nothing live anywhere but the
/// warm runners of pools with `min_idle`, nothing waiting, every job over.
pub fn unsettled(world: &World) -> Option<String> {
    let jobs_left: Vec<u64> = world
        .github()
        .jobs
        .iter()
        .filter(|(_, state)| matches!(state, JobState::Queued | JobState::Running { .. }))
        .map(|(id, _)| *id)
        .collect();
    if !jobs_left.is_empty() {
        return Some(format!("jobs queued or running on GitHub: {jobs_left:?}"));
    }
    let webhooks = world.github().outbox.len();
    if webhooks > 0 {
        return Some(format!("{webhooks} webhooks not delivered"));
    }
    let waiting = world.queue.waiting();
    if waiting > 0 {
        return Some(format!("{waiting} messages still in the queue"));
    }
    crate::invariants::check_at_rest(world)
        .and_then(|()| crate::invariants::check_job_records_follow_github(world))
        .err()
}
