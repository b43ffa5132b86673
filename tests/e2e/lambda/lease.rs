//! One reaper at a time, on moto: two reapers assembled as the deployment's are (the
//! Lambda function's and `ephemera local`'s, `ephemera_aws::assembly`) race for the
//! lease item when started together; one does the work, the other does nothing, and
//! the lease is free again afterwards. A deployment reaper assembled without its lease
//! fails this test.

use ephemera_aws::assembly::WebhookApp;
use ephemera_tests::pipeline::{Pipeline, PipelineOptions};
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
        let webhook_app = WebhookApp::of(p.reaper_forge.clone());
        p.deployment().reaper(p.reaper_forge.clone(), webhook_app)
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
