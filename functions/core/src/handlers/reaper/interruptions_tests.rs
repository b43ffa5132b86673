//! EC2's events on the in-memory fakes: a spot interruption warning recorded and
//! counted, the termination that follows sending the runner to be deleted with the
//! interruption as its reason, and the next run removing its GitHub registration;
//! events for other instances change nothing.

use super::*;
use crate::handlers::test_support::{message, now, World};
use crate::message::MessageKind;
use crate::metrics::{Captured, Metrics};
use serde_json::json;

fn far() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

/// EC2's spot interruption warning, as the EC2 user guide shows it.
fn warning(instance_id: &str) -> serde_json::Value {
    json!({
        "version": "0",
        "id": "12345678-1234-1234-1234-123456789012",
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": "2025-01-01T12:00:00Z",
        "region": "us-east-2",
        "resources": [format!("arn:aws:ec2:us-east-2:123456789012:instance/{instance_id}")],
        "detail": {"instance-id": instance_id, "instance-action": "terminate"}
    })
}

/// EC2's state-change notification, as the EC2 user guide shows it.
fn state_change(instance_id: &str, state: &str) -> serde_json::Value {
    json!({
        "version": "0",
        "id": "7bf73129-1428-4cd3-a780-95db273d1602",
        "detail-type": "EC2 Instance State-change Notification",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": "2025-01-01T12:02:00Z",
        "region": "us-east-2",
        "resources": [format!("arn:aws:ec2:us-east-2:123456789012:instance/{instance_id}")],
        "detail": {"instance-id": instance_id, "state": state}
    })
}

fn parsed(event: serde_json::Value) -> InstanceEvent {
    InstanceEvent::from_eventbridge(&event)
        .expect("readable")
        .expect("an EC2 event")
}

/// Hands `event` to the reaper, as EventBridge does.
async fn tell(reaper: &Reaper, event: serde_json::Value) -> InstanceEventOutcome {
    reaper
        .on_instance_event(&parsed(event), now())
        .await
        .expect("handled")
}

fn interruptions(captured: &Captured) -> Vec<(String, String, f64)> {
    let documents = captured.documents().expect("valid EMF");
    documents
        .iter()
        .filter_map(|d| {
            let values = d.values(Metric::SpotInterruptions)?;
            Some((
                d.dimension(Dimension::Pool)?.to_owned(),
                d.dimension(Dimension::InstanceType)?.to_owned(),
                values.iter().sum(),
            ))
        })
        .collect()
}

#[test]
fn eventbridge_events_are_read_as_ec2_documents_them() {
    let event = parsed(warning("i-0b662ef9931388ba0"));
    assert_eq!(event.instance_id, "i-0b662ef9931388ba0");
    assert_eq!(
        event.kind,
        InstanceEventKind::SpotInterruptionWarning {
            action: "terminate".to_owned()
        }
    );
    assert_eq!(event.at, time::macros::datetime!(2025-01-01 12:00 UTC));
    let event = parsed(state_change("i-abcd1111", "terminated"));
    assert_eq!(
        event.kind,
        InstanceEventKind::StateChange {
            state: "terminated".to_owned()
        }
    );
    // The schedule's event, and other sources, are not EC2's.
    let schedule = json!({"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}});
    assert_eq!(InstanceEvent::from_eventbridge(&schedule), Ok(None));
    assert_eq!(InstanceEvent::from_eventbridge(&json!({})), Ok(None));
    let mut broken = warning("i-1");
    broken["detail"] = json!({"instance-action": "terminate"});
    assert_eq!(
        InstanceEvent::from_eventbridge(&broken),
        Err("EC2 Spot Instance Interruption Warning: no detail.instance-id".to_owned())
    );
}

#[tokio::test(start_paused = true)]
async fn an_interrupted_runner_is_recorded_counted_and_removed_from_github_once_gone() {
    let world = World::new(5);
    let (metrics, captured) = Metrics::capture("eph");
    let reaper = world.reaper().with_metrics(metrics);
    let runner = world.running_runner(1).await;
    let instance_id = runner.instance_id.clone().expect("launched");
    assert!(world.forge.runner_named(&runner.name).is_some());

    let outcome = tell(&reaper, warning(&instance_id)).await;
    assert_eq!(
        outcome,
        InstanceEventOutcome::WarningRecorded {
            runner: runner.name.clone()
        }
    );
    let record = world.store.runner(&runner.name).expect("record");
    assert_eq!(
        record.interrupted_at,
        Some(time::macros::datetime!(2025-01-01 12:00:00 UTC)),
        "the warning's time"
    );
    assert_eq!(
        record.status,
        InstanceStatus::Running,
        "still running its job"
    );
    let instance_type = record.instance_type.clone().unwrap_or("unknown".to_owned());
    assert_eq!(
        interruptions(&captured),
        [(record.pool.clone(), instance_type, 1.0)]
    );

    // EC2 reclaims it: the record goes to be deleted, saying why.
    world
        .fleet
        .set_state(&instance_id, crate::ports::InstanceState::Terminated);
    let outcome = tell(&reaper, state_change(&instance_id, "terminated")).await;
    assert_eq!(
        outcome,
        InstanceEventOutcome::SentToDelete {
            runner: runner.name.clone()
        }
    );
    let record = world.store.runner(&runner.name).expect("record");
    assert_eq!(record.status, InstanceStatus::PendingDelete);
    assert_eq!(
        record.reason.as_deref(),
        Some("spot interruption: EC2 reclaimed the instance")
    );
    // The next run removes the registration and the record.
    reaper.run(now(), far()).await.expect("run");
    assert!(
        world.forge.runner_named(&runner.name).is_none(),
        "left on GitHub"
    );
    let record = world.store.runner(&runner.name).expect("kept as deleted");
    assert_eq!(record.status, InstanceStatus::Deleted);
}

#[tokio::test(start_paused = true)]
async fn a_termination_without_a_warning_says_so_and_other_events_change_nothing() {
    let world = World::new(5);
    let reaper = world.reaper();
    let runner = world.running_runner(1).await;
    let instance_id = runner.instance_id.clone().expect("launched");
    let other = tell(&reaper, warning("i-not-ours")).await;
    assert_eq!(other, InstanceEventOutcome::NotOurs);
    let stopping = tell(&reaper, state_change(&instance_id, "shutting-down")).await;
    assert_eq!(
        stopping,
        InstanceEventOutcome::Nothing {
            runner: runner.name.clone()
        }
    );
    assert_eq!(world.store.runner(&runner.name).expect("record"), runner);

    tell(&reaper, state_change(&instance_id, "terminated")).await;
    let record = world.store.runner(&runner.name).expect("record");
    assert_eq!(record.status, InstanceStatus::PendingDelete);
    assert_eq!(
        record.reason.as_deref(),
        Some("instance terminated outside ephemera (EC2 reported it terminated)")
    );
    // Reported again while the record is on its way out, it changes nothing.
    let again = tell(&reaper, state_change(&instance_id, "terminated")).await;
    assert_eq!(
        again,
        InstanceEventOutcome::Nothing {
            runner: runner.name.clone()
        }
    );
}

#[tokio::test(start_paused = true)]
async fn a_job_failed_by_the_interruption_before_ec2_reports_it_keeps_the_reason() {
    let world = World::new(5);
    let reaper = world.reaper();
    let runner = world.running_runner(1).await;
    let instance_id = runner.instance_id.clone().expect("launched");
    tell(&reaper, warning(&instance_id)).await;
    // GitHub fails the job as the host goes down: its `completed` comes first.
    world
        .scaler()
        .handle(
            &message(MessageKind::Completed, 1, Some(&runner.name)),
            now(),
        )
        .await
        .expect("handled");
    let record = world.store.runner(&runner.name).expect("record");
    assert_eq!(record.status, InstanceStatus::PendingDelete);
    assert_eq!(
        record.reason.as_deref(),
        Some("job 1 ended by a spot interruption: EC2 reclaimed the instance")
    );
    let late = tell(&reaper, state_change(&instance_id, "terminated")).await;
    assert_eq!(
        late,
        InstanceEventOutcome::Nothing {
            runner: runner.name.clone()
        }
    );
}

#[tokio::test(start_paused = true)]
async fn an_event_finds_its_runner_by_instance_and_by_status_only_when_that_fails() {
    use crate::memory::StoreOp;
    let world = World::new(5);
    let reaper = world.reaper();
    let runner = world.running_runner(1).await;
    let instance_id = runner.instance_id.clone().expect("launched");
    // Every read of the status index refused: the instance index finds the runner.
    world.store.fail(StoreOp::RunnersInStatus, 1_000);
    let outcome = tell(&reaper, warning(&instance_id)).await;
    assert_eq!(
        outcome,
        InstanceEventOutcome::WarningRecorded {
            runner: runner.name.clone()
        }
    );
    let foreign = tell(&reaper, warning("i-not-ours")).await;
    assert_eq!(foreign, InstanceEventOutcome::NotOurs);
    world.store.fail(StoreOp::RunnersInStatus, 0);
    // The instance index unreadable (still being built after a stack update added it):
    // the live records are read by status instead.
    world.store.fail(StoreOp::RunnersOnInstance, 1);
    let outcome = tell(&reaper, state_change(&instance_id, "terminated")).await;
    assert_eq!(
        outcome,
        InstanceEventOutcome::SentToDelete {
            runner: runner.name.clone()
        }
    );
}
