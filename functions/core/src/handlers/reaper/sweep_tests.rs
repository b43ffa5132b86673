//! The sweeps on the in-memory fakes: orphan instances and GitHub runners, registrations
//! whose id was never recorded, lost queued jobs, the warm pool of static runners, and
//! drifted pool counters.

use super::*;
use crate::handlers::scaler::Handled;
use crate::handlers::test_support::{config_with, message, now, World, POOL};
use crate::lifecycle::RunnerStatus;
use crate::message::MessageKind;
use crate::model::HistoryEntry;

fn far() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

fn minutes(n: u64) -> Duration {
    Duration::from_secs(60 * n)
}

fn instance(id: &str, launched_at: OffsetDateTime) -> Instance {
    Instance {
        id: id.to_owned(),
        state: InstanceState::Running,
        pool: Some(POOL.to_owned()),
        launched_at: Some(launched_at),
        image_id: None,
    }
}

#[tokio::test(start_paused = true)]
async fn orphan_instance_is_terminated_once_seen_in_two_runs_and_young_ones_are_kept() {
    let world = World::new(5);
    world.fleet.launch_at(now());
    let runner = world.running_runner(1).await;
    world
        .fleet
        .put_instance(instance("i-orphan", now() - minutes(30)));
    world.fleet.put_instance(instance("i-young", now()));
    let jit = crate::ports::JitConfig {
        runner_id: 9,
        encoded: secrecy::SecretString::from("jit"),
    };
    world
        .jit_store
        .put("i-orphan", "lost", &jit)
        .await
        .expect("put");
    let reaper = world.reaper();
    let first = reaper.run(now() + minutes(1), far()).await.expect("run");
    assert_eq!(first.orphans_reaped, 0, "a first sighting only suspects");
    let second = reaper.run(now() + minutes(2), far()).await.expect("run");
    assert_eq!(second.orphans_reaped, 1, "{second:?}");
    let state = |id: &str| world.fleet.instance(id).map(|i| i.state);
    assert_eq!(state("i-orphan"), Some(InstanceState::Terminated));
    assert!(
        world.jit_store.get("i-orphan").is_none(),
        "orphan's JIT config left"
    );
    assert_eq!(state("i-young"), Some(InstanceState::Running));
    let own = runner.instance_id.expect("instance");
    assert_ne!(
        state(&own),
        Some(InstanceState::Terminated),
        "a claimed instance"
    );
}

#[tokio::test(start_paused = true)]
async fn orphan_github_runners_of_this_deployment_are_removed_and_no_others() {
    let world = World::new(5);
    let runner = world.running_runner(2).await;
    let scope = crate::model::scope_of(&runner);
    world.forge.register(&scope, "eph-linux-orphan0001");
    world.forge.register(&scope, "other-linux-someone1");
    world.forge.register(&scope, "ephemeral-linux-abc");
    let online = world.forge.register(&scope, "eph-linux-online0001");
    world.forge.set_online(online, true);
    let busy = world.forge.register(&scope, "eph-linux-busyrunner");
    world.forge.set_busy(busy, true);
    let report = world.reaper().run(now(), far()).await.expect("run");
    assert_eq!(report.orphans_reaped, 1, "{report:?}");
    let names: Vec<String> = world.forge.runners().into_iter().map(|r| r.name).collect();
    assert!(!names.contains(&"eph-linux-orphan0001".to_owned()));
    for kept in [
        runner.name.as_str(),
        "other-linux-someone1",
        "ephemeral-linux-abc",
        "eph-linux-online0001",
        "eph-linux-busyrunner",
    ] {
        assert!(
            names.contains(&kept.to_owned()),
            "{kept} removed: {names:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn registration_whose_id_was_never_recorded_is_found_by_name_when_deleting() {
    let world = World::new(5);
    let runner = world.running_runner(3).await;
    // As if the scaler died after registering and before recording the id.
    let mut lost_id = runner.clone();
    lost_id.github_runner_id = None;
    lost_id.status = InstanceStatus::PendingDelete;
    world.store.put_runner(lost_id);
    assert!(world.forge.runner_named(&runner.name).is_some());
    let report = world.reaper().run(now(), far()).await.expect("run");
    assert_eq!(report.deleted, 1, "{report:?}");
    assert!(
        world.forge.runner_named(&runner.name).is_none(),
        "leaked on GitHub"
    );
}

#[tokio::test(start_paused = true)]
async fn queued_job_without_runner_is_queued_again_while_github_says_queued() {
    let world = World::new(5);
    let scaler = world.scaler();
    // The `queued` was seen and recorded, then the launch was lost: no claim, no runner.
    let job = crate::model::JobRecord {
        job_id: 11,
        status: crate::model::JobStatus::Queued,
        pool: POOL.to_owned(),
        owner: "octo-org".into(),
        repo: "app".into(),
        run_id: 111,
        installation_id: Some(5),
        labels: vec!["self-hosted".into(), "linux".into()],
        runner_name: None,
        launched_runner: None,
        received_at: now(),
        updated_at: now(),
        github: Default::default(),
        claimed_at: None,
    };
    world.store.put_job(job);
    world.forge.set_job_state(11, ForgeJobState::Queued);
    let reaper = world.reaper();
    let early = reaper.run(now() + minutes(1), far()).await.expect("run");
    assert_eq!(early.requeued, 0, "within the grace");
    let report = reaper.run(now() + minutes(4), far()).await.expect("run");
    assert_eq!(report.requeued, 1, "{report:?}");
    let sent = world.queue.take();
    assert_eq!(sent.len(), 1);
    assert_eq!((sent[0].kind, sent[0].job_id), (MessageKind::Queued, 11));
    // Not again until its recheck is due.
    let soon = reaper.run(now() + minutes(5), far()).await.expect("run");
    assert_eq!(soon.requeued, 0);
    // The message is handled and a runner serves it: nothing more to do.
    assert!(matches!(
        scaler.handle(&sent[0], now() + minutes(5)).await,
        Ok(Handled::RunnerUp(_))
    ));
    let later = reaper.run(now() + minutes(10), far()).await.expect("run");
    assert_eq!(later.requeued, 0);
    assert!(world.queue.sent().is_empty());
}

#[tokio::test(start_paused = true)]
async fn queued_job_that_moved_on_unseen_is_advanced_not_queued() {
    let world = World::new(5);
    let runner = world.running_runner(12).await;
    // Its runner never came online and is cleaned; GitHub ran the job elsewhere.
    world.forge.set_job_state(12, ForgeJobState::Completed);
    let report = world
        .reaper()
        .run(now() + minutes(21), far())
        .await
        .expect("run");
    assert_eq!((report.deleted, report.requeued), (1, 0), "{report:?}");
    assert_eq!(
        world.store.runner(&runner.name).map(|r| r.status),
        Some(InstanceStatus::Deleted)
    );
    assert_eq!(
        world.store.job(12).map(|j| j.status),
        Some(crate::model::JobStatus::Completed)
    );
    assert!(world.queue.sent().is_empty());
}

/// A static runner record, running and idle since `idle_since`.
fn static_idle(name: &str, idle_since: OffsetDateTime) -> RunnerRecord {
    let mut record = RunnerRecord::new(name.to_owned(), POOL.to_owned(), idle_since);
    record.status = InstanceStatus::Running;
    record.runner_status = RunnerStatus::Idle;
    record.ephemeral = false;
    record.owner = "octo-org".into();
    record.instance_id = Some(format!("i-{name}"));
    record
        .history
        .push(HistoryEntry::runner_status(idle_since, RunnerStatus::Idle));
    record
}

#[tokio::test(start_paused = true)]
async fn idle_static_runners_past_idle_timeout_go_but_min_idle_are_kept() {
    let world = World {
        config: config_with(5, "    ephemeral: false\n    min_idle: 1\n"),
        ..World::new(5)
    };
    for (name, idle_for) in [
        ("eph-linux-a", 30),
        ("eph-linux-b", 20),
        ("eph-linux-c", 15),
    ] {
        let record = static_idle(name, now() - minutes(idle_for));
        let instance_id = record.instance_id.clone().expect("instance");
        world
            .fleet
            .put_instance(instance(&instance_id, now() - minutes(60)));
        world.store.put_runner(record);
    }
    world.store.set_slots_used(POOL, 3);
    let report = world.reaper().run(now(), far()).await.expect("run");
    assert_eq!(
        (report.sent_to_delete, report.deleted),
        (2, 2),
        "{report:?}"
    );
    let status = |name: &str| world.store.runner(name).map(|r| r.status);
    assert_eq!(status("eph-linux-a"), Some(InstanceStatus::Deleted));
    assert_eq!(status("eph-linux-b"), Some(InstanceStatus::Deleted));
    assert_eq!(
        status("eph-linux-c"),
        Some(InstanceStatus::Running),
        "min_idle kept"
    );
}

#[tokio::test(start_paused = true)]
async fn drifted_counter_is_repaired_once_settled_and_seen_twice() {
    let world = World::new(5);
    world.running_runner(13).await;
    world.store.set_slots_used(POOL, 3);
    let reaper = world.reaper();
    // The claim just touched the counter: not settled, never repaired.
    for _ in 0..2 {
        let report = reaper.run(now() + minutes(1), far()).await.expect("run");
        assert_eq!(report.counters_repaired, 0);
    }
    let first = reaper.run(now() + minutes(3), far()).await.expect("run");
    assert_eq!(first.counters_repaired, 0, "first sighting");
    let second = reaper.run(now() + minutes(4), far()).await.expect("run");
    assert_eq!(second.counters_repaired, 1, "{second:?}");
    assert_eq!(world.store.slots_used(POOL), 1);
}

#[tokio::test(start_paused = true)]
async fn counter_changed_between_sightings_is_not_repaired() {
    let world = World::new(5);
    world.running_runner(14).await;
    world.store.set_slots_used(POOL, 3);
    let reaper = world.reaper();
    reaper.run(now() + minutes(3), far()).await.expect("run");
    world.store.set_slots_used(POOL, 4);
    let report = reaper.run(now() + minutes(4), far()).await.expect("run");
    assert_eq!(report.counters_repaired, 0);
    assert_eq!(world.store.slots_used(POOL), 4);
}

#[tokio::test(start_paused = true)]
async fn idle_runner_is_not_kept_for_its_job_once_github_ran_that_job_elsewhere_unseen() {
    let world = World::new(5);
    let runner = world.running_runner(13).await;
    world
        .forge
        .set_online(runner.github_runner_id.expect("registered"), true);
    let reaper = world.reaper();
    reaper.run(now() + minutes(1), far()).await.expect("run");
    // GitHub gave job 13 to another runner; its `in_progress` and `completed` were lost.
    world.forge.set_job_state(13, ForgeJobState::Completed);
    reaper.run(now() + minutes(5), far()).await.expect("run");
    assert_eq!(
        world.store.job(13).map(|j| j.status),
        Some(crate::model::JobStatus::Completed),
        "the item follows GitHub once its runner has idled past the grace"
    );
    reaper.run(now() + minutes(12), far()).await.expect("run");
    assert_eq!(
        world.store.runner(&runner.name).map(|r| r.status),
        Some(InstanceStatus::Deleted),
        "idle past idle_timeout with no queued job left"
    );
}

#[tokio::test(start_paused = true)]
async fn full_pool_idle_runner_is_not_kept_for_a_job_cancelled_unseen() {
    let world = World::new(1);
    let runner = world.running_runner(14).await;
    world
        .forge
        .set_online(runner.github_runner_id.expect("registered"), true);
    let reaper = world.reaper();
    reaper.run(now(), far()).await.expect("run");
    // Job 14 is cancelled; job 15 was recorded, then cancelled too, its `completed` lost.
    world
        .scaler()
        .handle(&message(MessageKind::Completed, 14, None), now())
        .await
        .expect("completed");
    world.store.put_job(crate::model::JobRecord {
        job_id: 15,
        status: crate::model::JobStatus::Queued,
        pool: POOL.to_owned(),
        owner: "octo-org".into(),
        repo: "app".into(),
        run_id: 115,
        installation_id: Some(5),
        labels: vec!["self-hosted".into(), "linux".into()],
        runner_name: None,
        launched_runner: None,
        received_at: now(),
        updated_at: now(),
        github: Default::default(),
        claimed_at: None,
    });
    world.forge.set_job_state(15, ForgeJobState::Completed);
    // The pool is full with the idle runner, which `ephemeral_idle` keeps while job 15 is queued.
    reaper.run(now() + minutes(4), far()).await.expect("run");
    assert_eq!(
        world.store.job(15).map(|j| j.status),
        Some(crate::model::JobStatus::Completed),
        "a job queued beside a runner idle past the grace is looked up, pool full or not"
    );
    reaper.run(now() + minutes(12), far()).await.expect("run");
    assert_eq!(
        world.store.runner(&runner.name).map(|r| r.status),
        Some(InstanceStatus::Deleted)
    );
    assert_eq!(world.store.slots_used(POOL), 0);
}

/// Chaos seed 100652: `max_runners: 1, stopped: 1`. A job's runner timed out and was
/// deleted, its claim left naming it; the stopped instance held the pool's one slot, so
/// the pool counted as full and the job was never queued again, though a take needs no
/// slot.
/// A pool of one slot, held by a stopped instance, and job 16 queued with its claim
/// naming a runner that is gone; the job's extra labels, if any.
fn pool_full_of_stopped_and_a_dead_claim(extra: &str, job_labels: &[&str]) -> World {
    let mut world = World::new(1);
    world.config = config_with(1, &format!("    stopped: 1\n{extra}"));
    let stopped = "eph-linux-stopped1";
    put_stopped_pool_record(
        &world,
        stopped,
        InstanceStatus::Stopped,
        InstanceState::Stopped,
        None,
    );
    let labels: Vec<&str> = ["self-hosted", "linux"]
        .iter()
        .chain(job_labels)
        .copied()
        .collect();
    put_claimed_job(&world, 16, &labels, "eph-linux-timedout");
    world
}

/// A stopped pool's record `name` in `status` (holding the pool's one slot so far), with
/// its instance in `state`; taken for `job_id`, if given.
fn put_stopped_pool_record(
    world: &World,
    name: &str,
    status: InstanceStatus,
    state: InstanceState,
    job_id: Option<u64>,
) {
    let instance_id = format!("i-{}", name.trim_start_matches("eph-linux-"));
    let mut record = RunnerRecord::new(name.to_owned(), POOL.to_owned(), now());
    record.status = status;
    record.prepare = true;
    record.slot_held = true;
    record.job_id = job_id;
    record.instance_id = Some(instance_id.clone());
    world.store.put_runner(record);
    world.store.set_slots_used(POOL, 1);
    world.fleet.put_instance(Instance {
        id: instance_id,
        state,
        pool: Some(POOL.to_owned()),
        launched_at: Some(now()),
        image_id: None,
    });
}

/// Job `job_id` queued on GitHub and in the table, with `labels`, claimed by `runner`.
fn put_claimed_job(world: &World, job_id: u64, labels: &[&str], runner: &str) {
    world.store.put_job(crate::model::JobRecord {
        job_id,
        status: crate::model::JobStatus::Queued,
        pool: POOL.to_owned(),
        owner: "octo-org".into(),
        repo: "app".into(),
        run_id: 100 + job_id,
        installation_id: Some(5),
        labels: labels.iter().map(|l| l.to_string()).collect(),
        runner_name: Some(runner.to_owned()),
        launched_runner: Some(runner.to_owned()),
        received_at: now(),
        updated_at: now(),
        github: Default::default(),
        claimed_at: Some(now()),
    });
    world.forge.set_job_state(job_id, ForgeJobState::Queued);
}

#[tokio::test(start_paused = true)]
async fn queued_job_of_a_pool_full_of_stopped_instances_is_queued_again() {
    let world = pool_full_of_stopped_and_a_dead_claim("", &[]);
    let report = world
        .reaper()
        .run(now() + minutes(4), far())
        .await
        .expect("run");
    assert_eq!(report.requeued, 1, "{report:?}");
    let sent = world.queue.take();
    assert!(
        sent.iter()
            .any(|m| (m.kind, m.job_id) == (MessageKind::Queued, 16)),
        "{sent:?}"
    );
    // Its next delivery takes the stopped instance.
    let queued = sent.iter().find(|m| m.job_id == 16).expect("queued again");
    assert!(matches!(
        world.scaler().handle(queued, now() + minutes(4)).await,
        Ok(Handled::RunnerUp(name)) if name == "eph-linux-stopped1"
    ));
}

/// Chaos seed 101581: a take crashed after StartInstances, its record left `starting`
/// with the job's claim; the lost-job rule took the claim for a dead one, dropped it and
/// queued the job again, and a second runner was launched for it.
#[tokio::test(start_paused = true)]
async fn queued_job_whose_take_is_starting_is_not_queued_again() {
    let mut world = World::new(5);
    world.config = config_with(5, "    stopped: 1\n");
    let taken = "eph-linux-taken1";
    put_stopped_pool_record(
        &world,
        taken,
        InstanceStatus::Starting,
        InstanceState::Pending,
        Some(17),
    );
    put_claimed_job(&world, 17, &["self-hosted", "linux"], taken);
    let report = world
        .reaper()
        .run(now() + minutes(4), far())
        .await
        .expect("run");
    assert_eq!(report.requeued, 0, "{report:?}");
    let job = world.store.job(17).expect("job");
    assert_eq!(
        job.runner_name.as_deref(),
        Some("eph-linux-taken1"),
        "the take keeps the job's claim"
    );
}

/// A sized job cannot take a stopped instance (prepared in the pool's own shape): its full
/// pool stays full for it, and the scaler keeps it in line as for any full pool.
#[tokio::test(start_paused = true)]
async fn sized_job_of_a_pool_full_of_stopped_instances_is_not_queued_again() {
    let world = pool_full_of_stopped_and_a_dead_claim(
        "    sizing: { accept: true, max_vcpus_per_runner: 16 }\n",
        &["ephemera.cpu=8"],
    );
    let report = world
        .reaper()
        .run(now() + minutes(4), far())
        .await
        .expect("run");
    assert_eq!(report.requeued, 0, "{report:?}");
}
