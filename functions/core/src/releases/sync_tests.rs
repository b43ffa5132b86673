//! The sync step against the fakes: a new release copied and pointed at, a 304 that
//! copies nothing, a wrong sum that publishes nothing, the pipelines started once.

use super::*;
use crate::memory::{FakeImagePipelines, FakeRunnerReleases, MemoryRunnerBucket};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use time::macros::datetime;
use time::OffsetDateTime;
use tokio::time::Instant;

const NOW: OffsetDateTime = datetime!(2026-11-27 12:00 UTC);

struct World {
    releases: Arc<FakeRunnerReleases>,
    bucket: MemoryRunnerBucket,
    pipelines: Arc<FakeImagePipelines>,
    sync: RunnerSync,
}

fn world() -> World {
    let releases = Arc::new(FakeRunnerReleases::default());
    let bucket = MemoryRunnerBucket::default();
    let pipelines = Arc::new(FakeImagePipelines::of(&["arn:x64", "arn:arm64"]));
    let sync = RunnerSync {
        releases: releases.clone(),
        bucket: Arc::new(bucket.clone()),
        pipelines: pipelines.clone(),
    };
    World {
        releases,
        bucket,
        pipelines,
        sync,
    }
}

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Publishes `version` with a tarball per arch; `notes_x64` overrides the x64 sum.
fn publish(world: &World, version: &str, notes_x64: Option<&str>) -> (Vec<u8>, Vec<u8>) {
    let x64 = format!("x64 tarball {version}").repeat(3000).into_bytes();
    let arm64 = format!("arm64 tarball {version}").repeat(3000).into_bytes();
    let x64_sum = notes_x64.map_or_else(|| sha(&x64), str::to_owned);
    let notes = format!(
        "- <!-- BEGIN SHA linux-x64 -->{x64_sum}<!-- END SHA linux-x64 -->\n\
         - <!-- BEGIN SHA linux-arm64 -->{}<!-- END SHA linux-arm64 -->\n",
        sha(&arm64)
    );
    let names = [tarball_name("x64", version), tarball_name("arm64", version)];
    world.releases.publish(
        version,
        &notes,
        &[(names[0].as_str(), &x64), (names[1].as_str(), &arm64)],
    );
    (x64, arm64)
}

fn later() -> Instant {
    Instant::now() + std::time::Duration::from_secs(60)
}

#[tokio::test]
async fn a_new_release_is_copied_checked_and_pointed_at_last() {
    let world = world();
    let (x64, arm64) = publish(&world, "2.337.0", None);
    let outcome = world.sync.run(NOW, later()).await;
    assert_eq!(outcome.published, vec!["x64", "arm64"]);
    assert_eq!(outcome.errors, 0);
    let bucket = &world.bucket;
    assert_eq!(
        bucket.object(&tarball_key("x64", "2.337.0")),
        Some(x64.clone())
    );
    assert_eq!(bucket.object(&tarball_key("arm64", "2.337.0")), Some(arm64));
    assert_eq!(
        bucket.object(&sum_key("x64", "2.337.0")),
        Some(sum_file("x64", "2.337.0", &sha(&x64)).into_bytes())
    );
    assert_eq!(
        bucket.object(&latest_key("x64")),
        Some(format!("2.337.0 {}\n", sha(&x64)).into_bytes())
    );
    assert_eq!(
        world.pipelines.started(),
        vec![
            ("arn:x64".into(), "runner-2.337.0".into()),
            ("arn:arm64".into(), "runner-2.337.0".into())
        ]
    );
}

#[tokio::test]
async fn the_next_check_waits_an_hour_and_a_304_copies_nothing() {
    let world = world();
    publish(&world, "2.337.0", None);
    world.sync.run(NOW, later()).await;
    let soon = world
        .sync
        .run(NOW + time::Duration::minutes(59), later())
        .await;
    assert!(!soon.checked, "no check within the hour");
    assert_eq!(world.releases.calls(), (1, 0, 2));
    let outcome = world.sync.run(NOW + CHECK_INTERVAL, later()).await;
    assert!(outcome.checked && outcome.not_modified);
    assert_eq!(world.releases.calls(), (2, 1, 2), "a 304 and no download");
    assert_eq!(
        world.pipelines.started().len(),
        2,
        "no pipeline started again"
    );
}

#[tokio::test]
async fn a_later_release_replaces_the_pointer_and_starts_the_pipelines_again() {
    let world = world();
    publish(&world, "2.337.0", None);
    world.sync.run(NOW, later()).await;
    let (x64, _) = publish(&world, "2.338.0", None);
    let outcome = world.sync.run(NOW + CHECK_INTERVAL, later()).await;
    assert_eq!(outcome.published, vec!["x64", "arm64"]);
    assert_eq!(
        world.bucket.object(&latest_key("x64")),
        Some(format!("2.338.0 {}\n", sha(&x64)).into_bytes())
    );
    assert_eq!(world.pipelines.started().len(), 4);
    assert_eq!(
        world.bucket.superseded(),
        vec![
            tarball_key("x64", "2.337.0"),
            sum_key("x64", "2.337.0"),
            tarball_key("arm64", "2.337.0"),
            sum_key("arm64", "2.337.0")
        ]
    );
}

#[tokio::test]
async fn a_wrong_published_sum_publishes_nothing_of_that_arch_and_starts_no_pipeline() {
    let world = world();
    publish(&world, "2.337.0", Some(&"0".repeat(64)));
    let outcome = world.sync.run(NOW, later()).await;
    assert_eq!(outcome.published, vec!["arm64"]);
    assert_eq!(outcome.errors, 1);
    assert_eq!(world.bucket.object(&tarball_key("x64", "2.337.0")), None);
    assert_eq!(world.bucket.object(&sum_key("x64", "2.337.0")), None);
    assert_eq!(world.bucket.object(&latest_key("x64")), None);
    assert_eq!(world.bucket.uploads_aborted(), 1);
    assert!(world.pipelines.started().is_empty());
    // The next check, an hour on, reads the release whole again (no ETag kept).
    let again = world.sync.run(NOW + CHECK_INTERVAL, later()).await;
    assert!(!again.not_modified);
    assert_eq!(again.errors, 1);
}

#[tokio::test]
async fn a_run_out_of_time_publishes_nothing_and_retries_soon() {
    let world = world();
    publish(&world, "2.337.0", None);
    let outcome = world.sync.run(NOW, Instant::now()).await;
    assert!(outcome.published.is_empty());
    assert_eq!(outcome.errors, 2);
    assert!(world.bucket.object(&latest_key("x64")).is_none());
    let retried = world.sync.run(NOW + RETRY_AFTER_FAILURE, later()).await;
    assert_eq!(retried.published, vec!["x64", "arm64"]);
}
