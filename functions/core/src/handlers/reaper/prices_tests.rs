//! Pricing on the in-memory fakes: prices read once a day, never per job, and each
//! deleted runner's cost written with its deletion and counted once in `JobCost`.

use super::*;
use crate::handlers::scaler::Handled;
use crate::handlers::test_support::{message, now, World};
use crate::memory::{FakePriceList, MemoryPriceBook};
use crate::message::MessageKind;
use crate::metrics::Dimension;
use crate::ports::Market;
use std::time::Duration;

fn far() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

/// A world whose price list offers m7i.large in both markets.
fn priced() -> (World, Arc<MemoryPriceBook>, Arc<FakePriceList>) {
    let list = Arc::new(FakePriceList::new("us-east-1"));
    list.offer("m7i.large", Market::OnDemand, 100_800);
    list.offer("m7i.large", Market::Spot, 36_000);
    (World::new(5), Arc::new(MemoryPriceBook::new()), list)
}

fn reaper(world: &World, book: &Arc<MemoryPriceBook>, list: &Arc<FakePriceList>) -> Reaper {
    world.reaper().with_pricing(book.clone(), list.clone())
}

/// Runs job `job` to completion; its runner waits in `pending_delete`.
async fn finished_job(world: &World, job: u64) -> String {
    let scaler = world.scaler();
    let Handled::RunnerUp(name) = scaler
        .handle(&message(MessageKind::Queued, job, None), now())
        .await
        .expect("up")
    else {
        panic!("no runner")
    };
    scaler
        .handle(&message(MessageKind::Completed, job, Some(&name)), now())
        .await
        .expect("completed");
    name
}

#[tokio::test(start_paused = true)]
async fn prices_are_read_once_a_day_and_never_per_job() {
    let (world, book, list) = priced();
    let reaper = reaper(&world, &book, &list);
    let first = reaper.run(now(), far()).await.expect("run");
    assert_eq!(first.prices_read, 2, "both markets of the pool's type");
    assert_eq!(book.prices().len(), 2);
    for job in 1..=3 {
        finished_job(&world, job).await;
    }
    let later = now() + time::Duration::hours(23);
    let second = reaper.run(later, far()).await.expect("run");
    assert_eq!((second.deleted, second.prices_read), (3, 0));
    assert_eq!(list.reads().len(), 2, "no read within a day, none per job");
    let next_day = now() + time::Duration::hours(24);
    assert_eq!(
        reaper.run(next_day, far()).await.expect("run").prices_read,
        2
    );
}

#[tokio::test(start_paused = true)]
async fn a_new_container_reads_the_cache_not_the_price_list() {
    let (world, book, list) = priced();
    reaper(&world, &book, &list)
        .run(now(), far())
        .await
        .expect("run");
    let fresh_container = reaper(&world, &book, &list);
    let report = fresh_container
        .run(now() + time::Duration::hours(1), far())
        .await
        .expect("run");
    assert_eq!(report.prices_read, 0);
    assert_eq!(list.reads().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_deletion_writes_the_cost_and_counts_it_once() {
    let (world, book, list) = priced();
    let (metrics, captured) = crate::metrics::Metrics::capture("ci");
    let reaper = reaper(&world, &book, &list).with_metrics(metrics);
    reaper.run(now(), far()).await.expect("run");
    let name = finished_job(&world, 7).await;
    let runner = world.store.runner(&name).expect("record");
    let market = runner.market.expect("market recorded at launch");
    reaper
        .run(now() + time::Duration::minutes(30), far())
        .await
        .expect("run");
    let deleted = world.store.runner(&name).expect("kept as deleted");
    let cost = deleted.cost.expect("priced at deletion");
    let per_hour = if market == Market::Spot {
        36_000
    } else {
        100_800
    };
    assert_eq!(cost.usd_micros_per_hour, Some(per_hour));
    assert_eq!(cost.usd_micros, Some(per_hour / 2));
    assert_eq!(cost.seconds, 1800);
    let documents = captured.documents().expect("valid EMF");
    let costs: Vec<_> = documents
        .iter()
        .filter_map(|d| {
            Some((
                d.values(Metric::JobCost)?,
                d.dimension(Dimension::Repository)?,
            ))
        })
        .collect();
    assert_eq!(costs.len(), 1, "one JobCost per job");
    assert_eq!(costs[0].0, &[per_hour as f64 / 2e6][..]);
    assert!(costs[0].1.contains('/'), "owner/name: {}", costs[0].1);
}

#[tokio::test(start_paused = true)]
async fn a_type_not_offered_is_recorded_without_a_price() {
    let world = World::new(5);
    let book = Arc::new(MemoryPriceBook::new());
    let list = Arc::new(FakePriceList::new("eu-south-2"));
    let reaper = reaper(&world, &book, &list);
    reaper.run(now(), far()).await.expect("run");
    assert!(book
        .prices()
        .iter()
        .all(|p| p.usd_micros_per_hour.is_none()));
    let name = finished_job(&world, 8).await;
    reaper
        .run(now() + time::Duration::minutes(5), far())
        .await
        .expect("run");
    let cost = world
        .store
        .runner(&name)
        .and_then(|r| r.cost)
        .expect("cost");
    assert_eq!(cost.usd_micros, None);
    assert_eq!(
        cost.unpriced.as_deref(),
        Some("no price: m7i.large not offered in eu-south-2")
    );
}

#[tokio::test(start_paused = true)]
async fn a_failing_price_list_leaves_the_cache_and_the_deletions_alone() {
    let (world, book, list) = priced();
    list.fail(true);
    let reaper = reaper(&world, &book, &list);
    let name = finished_job(&world, 9).await;
    let report = reaper.run(now(), far()).await.expect("run");
    assert_eq!((report.deleted, report.prices_read), (1, 0));
    assert!(book.prices().is_empty());
    let cost = world
        .store
        .runner(&name)
        .and_then(|r| r.cost)
        .expect("cost");
    assert_eq!(
        cost.unpriced.as_deref(),
        Some("no price: m7i.large not read yet")
    );
    assert_eq!(
        list.reads().len(),
        1,
        "the first failure stops the run's reads"
    );

    list.fail(false);
    let soon = now() + time::Duration::minutes(10);
    assert_eq!(reaper.run(soon, far()).await.expect("run").prices_read, 0);
    assert_eq!(
        list.reads().len(),
        1,
        "no read within the wait after a failure"
    );
    let later = now() + time::Duration::minutes(15);
    assert_eq!(reaper.run(later, far()).await.expect("run").prices_read, 2);
}
