//! The rules of a stopped pool's records: a prepared instance seen stopped is recorded
//! `stopped`; one that never stops, a stopped one past `stopped_max_age`, and one whose
//! instance is gone are sent to be deleted; a stopped instance is alive, not gone.

use super::tests::{minutes, record};
use super::*;
use crate::handlers::test_support::{config_with, now};

fn in_state(id: &str, state: InstanceState) -> Instance {
    Instance {
        id: id.to_owned(),
        state,
        pool: None,
        launched_at: Some(now()),
        image_id: None,
    }
}

fn verdict_of(
    status: InstanceStatus,
    ec2: Option<InstanceState>,
    after: Duration,
) -> Option<Verdict> {
    let config = config_with(5, "    stopped: 2\n    stopped_max_age: 2d\n");
    let live = vec![record("eph-linux-s", status, RunnerStatus::Pending)];
    let instances: Vec<Instance> = ec2
        .map(|state| in_state("i-eph-linux-s", state))
        .into_iter()
        .collect();
    verdicts(&config, &live, Some(&instances), &[], now() + after)
        .into_iter()
        .map(|(_, verdict)| verdict)
        .next()
}

#[test]
fn a_preparing_instance_seen_stopped_is_recorded_stopped() {
    use InstanceStatus::*;
    let stopped = Some(InstanceState::Stopped);
    assert_eq!(
        verdict_of(Preparing, stopped, minutes(1)),
        Some(Verdict::Prepared)
    );
    let running = Some(InstanceState::Running);
    assert_eq!(
        verdict_of(Preparing, running, minutes(5)),
        None,
        "still preparing"
    );
}

#[test]
fn a_preparing_instance_that_never_stops_is_replaced_after_the_bootstrap_timeout() {
    let running = Some(InstanceState::Running);
    assert_eq!(
        verdict_of(InstanceStatus::Preparing, running, minutes(21)),
        Some(Verdict::Clean(Cleanup::PrepareTimeout))
    );
}

#[test]
fn a_stopped_instance_is_kept_until_stopped_max_age_then_replaced() {
    let stopped = Some(InstanceState::Stopped);
    assert_eq!(
        verdict_of(InstanceStatus::Stopped, stopped, minutes(47 * 60)),
        None
    );
    assert_eq!(
        verdict_of(InstanceStatus::Stopped, stopped, minutes(49 * 60)),
        Some(Verdict::Clean(Cleanup::StoppedStale))
    );
}

#[test]
fn a_stopped_pool_record_whose_instance_is_gone_is_sent_to_be_deleted() {
    use InstanceStatus::*;
    for status in [Preparing, Stopped, Starting] {
        let terminated = Some(InstanceState::Terminated);
        assert_eq!(
            verdict_of(status, terminated, minutes(3)),
            Some(Verdict::Clean(Cleanup::InstanceGone)),
            "{status}"
        );
        assert_eq!(
            verdict_of(status, None, minutes(3)),
            Some(Verdict::Clean(Cleanup::InstanceGone)),
            "{status}: no such instance"
        );
        assert_eq!(
            verdict_of(status, None, minutes(1)),
            None,
            "{status}: within the grace"
        );
    }
}

#[tokio::test]
async fn a_reaper_run_records_a_prepared_instance_stopped_and_a_stale_one_for_deletion() {
    use crate::handlers::test_support::World;
    let mut world = World::new(5);
    world.config = config_with(5, "    stopped: 2\n    stopped_max_age: 1d\n");
    let mut prepared = record(
        "eph-linux-p",
        InstanceStatus::Preparing,
        RunnerStatus::Pending,
    );
    prepared.job_id = None;
    let mut stale = record(
        "eph-linux-old",
        InstanceStatus::Stopped,
        RunnerStatus::Pending,
    );
    stale.job_id = None;
    stale.created_at = now() - minutes(25 * 60);
    for (record, id) in [(prepared, "i-eph-linux-p"), (stale, "i-eph-linux-old")] {
        world.store.put_runner(record);
        world
            .fleet
            .put_instance(in_state(id, InstanceState::Stopped));
    }
    world
        .store
        .set_slots_used(crate::handlers::test_support::POOL, 2);
    let far = tokio::time::Instant::now() + Duration::from_secs(3600);
    world
        .reaper()
        .run(now() + minutes(1), far)
        .await
        .expect("run");
    let status = |name: &str| world.store.runner(name).map(|r| r.status);
    assert_eq!(status("eph-linux-p"), Some(InstanceStatus::Stopped));
    assert_ne!(
        status("eph-linux-old"),
        Some(InstanceStatus::Stopped),
        "replaced"
    );
}

#[test]
fn a_take_left_starting_past_its_lease_is_a_stalled_creation() {
    let config = config_with(5, "    stopped: 2\n");
    let mut taken = record(
        "eph-linux-s",
        InstanceStatus::Starting,
        RunnerStatus::Pending,
    );
    taken.job_id = Some(7);
    let instances = [in_state("i-eph-linux-s", InstanceState::Stopped)];
    let live = vec![taken];
    let at = |m| verdicts(&config, &live, Some(&instances), &[], now() + minutes(m));
    assert!(at(0).is_empty(), "within the lease");
    let late: Vec<_> = at(2).into_iter().map(|(_, v)| v).collect();
    assert_eq!(late, [Verdict::StalledCreation]);
}

/// Chaos seed 136731: a take died after StartInstances; its host resumed, its runner came
/// online and took the job, and the record stayed `starting` for ever (`creation_stalled`
/// is only for a runner still pending). Past the lease it is recorded `running`.
#[tokio::test]
async fn a_take_that_died_after_its_start_is_recorded_running_once_its_runner_is_online() {
    use crate::handlers::test_support::World;
    let mut world = World::new(5);
    world.config = config_with(5, "    stopped: 1\n");
    let mut taken = record(
        "eph-linux-s",
        InstanceStatus::Starting,
        RunnerStatus::Active,
    );
    taken.job_id = Some(7);
    world.store.put_runner(taken);
    world
        .fleet
        .put_instance(in_state("i-eph-linux-s", InstanceState::Running));
    world
        .store
        .set_slots_used(crate::handlers::test_support::POOL, 1);
    let far = tokio::time::Instant::now() + Duration::from_secs(3600);
    world
        .reaper()
        .run(now() + minutes(2), far)
        .await
        .expect("run");
    let record = world.store.runner("eph-linux-s").expect("record");
    assert_eq!(record.status, InstanceStatus::Running);
    assert_eq!(record.job_id, Some(7));
}
