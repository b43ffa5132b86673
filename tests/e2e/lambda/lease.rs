//! One reaper at a time, on moto: two runs started together race for the lease item;
//! one does the work, the other does nothing, and the lease is free again afterwards.

use ephemera_core::handlers::reaper::Reaper;
use ephemera_tests::pipeline::{Pipeline, PipelineOptions};
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::time::Instant;

#[tokio::test]
async fn of_two_reapers_started_together_only_one_works() -> anyhow::Result<()> {
    let p = Pipeline::start(PipelineOptions {
        reaper_interval: None,
        drain_queue: false,
        ..PipelineOptions::default()
    })
    .await?;
    let reaper = || {
        Reaper::new(
            p.config.clone(),
            p.store.clone(),
            p.fleet.clone(),
            p.reaper_forge.clone(),
            Arc::new(p.jit_configs()),
            p.queue.clone(),
        )
        .with_lease(p.store.clone())
    };
    let (first, second) = (reaper(), reaper());
    let now = OffsetDateTime::now_utc();
    let deadline = Instant::now() + Duration::from_secs(60);
    let (a, b) = tokio::join!(first.run(now, deadline), second.run(now, deadline));
    let (a, b) = (a?, b?);
    println!("first: {a:?}\nsecond: {b:?}");
    assert!(
        a.another_run_held_the_lease != b.another_run_held_the_lease,
        "exactly one of the two runs works"
    );
    // The lease was given back: the next scheduled run works.
    let next = reaper()
        .run(
            OffsetDateTime::now_utc(),
            Instant::now() + Duration::from_secs(60),
        )
        .await?;
    assert!(!next.another_run_held_the_lease);
    Ok(())
}
