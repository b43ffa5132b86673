//! Stamps: a job carried through the scaler leaves every stage it learns on the job's
//! record and its runner's, and GitHub's wait and the runner's boot in the metrics.

use super::testing::*;
use super::*;
use crate::handlers::test_support::{message, now, World};
use crate::message::MessageKind;
use crate::metrics::{Metric, Metrics};
use crate::model::GitHubTimes;
use crate::timeline::{Stage, Timeline};
use time::Duration;

#[tokio::test]
async fn a_job_through_the_scaler_is_stamped_at_every_stage_it_learns() {
    let world = World::new(5);
    let (metrics, captured) = Metrics::capture("eph");
    let scaler = world.scaler_with(ScalerCapabilities {
        metrics: metrics.clone(),
        ..ScalerCapabilities::none()
    });
    let created = now() - Duration::seconds(3);
    let started = now() + Duration::seconds(20);
    let completed = now() + Duration::seconds(50);
    let with_times = |kind, runner: Option<&str>, github| crate::message::QueueMessage {
        github,
        ..message(kind, 9, runner)
    };
    let queued = GitHubTimes {
        created_at: Some(created),
        ..GitHubTimes::default()
    };
    let name = match scaler
        .handle(&with_times(MessageKind::Queued, None, queued), now())
        .await
    {
        Ok(Handled::RunnerUp(name)) => name,
        other => panic!("no runner: {other:?}"),
    };
    let running = GitHubTimes {
        started_at: Some(started),
        ..queued
    };
    let later = now() + Duration::seconds(21);
    let in_progress = with_times(MessageKind::InProgress, Some(&name), running);
    scaler.handle(&in_progress, later).await.expect("bound");
    let done = GitHubTimes {
        completed_at: Some(completed),
        ..running
    };
    let completed_message = with_times(MessageKind::Completed, Some(&name), done);
    scaler
        .handle(&completed_message, later + Duration::seconds(30))
        .await
        .expect("released");

    let job = world.store.job(9).expect("job");
    assert_eq!(job.github, done);
    let claimed = job.claimed_at.expect("claimed");
    assert!(claimed >= now() && claimed - now() < Duration::seconds(1));
    let runner = world.store.runner(&name).expect("runner");
    assert_eq!(runner.online_at, Some(started), "online by GitHub's start");
    let pool = &world.config.pools[0];
    assert_eq!(runner.instance_type.as_ref(), pool.instance_types.first());
    let market = if pool.spot {
        crate::ports::Market::Spot
    } else {
        crate::ports::Market::OnDemand
    };
    assert_eq!(runner.market, Some(market));
    let timeline = Timeline::of(&job, Some(&runner));
    assert_eq!(
        timeline.missing(),
        [Stage::InstanceLaunched, Stage::JitRead, Stage::Terminated],
        "all but the reaper's, which it learns when it deletes the runner"
    );
    assert!(timeline.out_of_order().is_empty());

    metrics.flush();
    let documents = captured.documents().expect("valid EMF");
    let values = |metric| -> Vec<f64> {
        documents
            .iter()
            .filter_map(|d| d.values(metric))
            .flatten()
            .copied()
            .collect()
    };
    assert_eq!(values(Metric::QueueToStartSeconds), [23.0]);
    assert_eq!(values(Metric::BootSeconds), [20.0]);
}

#[tokio::test]
async fn the_first_sighting_online_stands() {
    let world = World::new(5);
    let name = up(&world, 4).await;
    let scaler = world.scaler();
    let started = |s| GitHubTimes {
        started_at: Some(now() + Duration::seconds(s)),
        ..GitHubTimes::default()
    };
    for s in [10, 5] {
        let in_progress = crate::message::QueueMessage {
            github: started(s),
            ..message(MessageKind::InProgress, 4, Some(&name))
        };
        scaler
            .handle(&in_progress, now() + Duration::seconds(30))
            .await
            .expect("bound");
    }
    let runner = world.store.runner(&name).expect("runner");
    assert_eq!(runner.online_at, Some(now() + Duration::seconds(10)));
}

#[tokio::test]
async fn a_start_given_to_the_second_never_puts_online_before_the_jit_config() {
    let world = World::new(5);
    let name = up(&world, 4).await;
    let stored = crate::timeline::jit_stored_at(&world.store.runner(&name).expect("runner"))
        .expect("JIT config stored");
    // GitHub truncates: its start reads earlier than the runner could have been online.
    let in_progress = crate::message::QueueMessage {
        github: GitHubTimes {
            started_at: Some(stored - Duration::milliseconds(700)),
            ..GitHubTimes::default()
        },
        ..message(MessageKind::InProgress, 4, Some(&name))
    };
    world
        .scaler()
        .handle(&in_progress, stored + Duration::seconds(2))
        .await
        .expect("bound");
    let runner = world.store.runner(&name).expect("runner");
    assert_eq!(runner.online_at, Some(stored));
}
