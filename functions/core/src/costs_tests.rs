use super::*;
use crate::model::{HistoryEntry, Market};
use time::macros::datetime;
use time::Duration;

const AT: OffsetDateTime = datetime!(2026-11-22 10:00:00 UTC);

fn runner(name: &str, pool: &str) -> RunnerRecord {
    let mut runner = RunnerRecord::new(name.into(), pool.into(), AT);
    runner.note(HistoryEntry::status(AT, InstanceStatus::Creating, None));
    runner.instance_id = Some(format!("i-{name}"));
    runner.instance_type = Some("m7i.large".into());
    runner.market = Some(Market::OnDemand);
    runner.status = InstanceStatus::Running;
    runner
}

fn deleted(name: &str, pool: &str, repository: &str, usd_micros: Option<u64>) -> RunnerRecord {
    let mut runner = runner(name, pool);
    runner.status = InstanceStatus::Deleted;
    runner.updated_at = AT + Duration::hours(1);
    runner.cost = Some(JobCost {
        seconds: 3600,
        usd_micros_per_hour: usd_micros,
        usd_micros,
        unpriced: usd_micros
            .is_none()
            .then(|| "no price: m7i.large not offered in eu-south-2".to_owned()),
        repository: Some(repository.to_owned()),
        stopped_seconds: 0,
        volume_usd_micros: None,
    });
    runner
}

fn on_demand_price() -> Vec<Price> {
    vec![Price {
        region: "us-east-1".into(),
        instance_type: "m7i.large".into(),
        market: Market::OnDemand,
        usd_micros_per_hour: Some(100_800),
        usd_micros_per_gib_month: None,
        read_at: AT,
    }]
}

#[test]
fn a_deleted_runner_shows_the_cost_written_at_its_deletion() {
    let runner = deleted("a", "linux", "o/r", Some(100_800));
    let shown = shown(Some(&runner), &[], AT + Duration::days(2));
    assert_eq!(shown.until, Some(CostUntil::Terminated));
    assert_eq!(
        shown.note,
        "$0.1008 (m7i.large on_demand at $0.1008/h, 3600 s, launch requested → terminated)"
    );
}

#[test]
fn a_live_runner_shows_its_cost_so_far_from_the_cached_price() {
    let runner = runner("a", "linux");
    let shown = shown(
        Some(&runner),
        &on_demand_price(),
        AT + Duration::minutes(30),
    );
    assert_eq!(shown.until, Some(CostUntil::Now));
    assert_eq!(shown.cost.and_then(|c| c.usd_micros), Some(50_400));
    assert!(shown.note.starts_with("$0.0504 so far ("), "{}", shown.note);
    assert!(
        shown.note.ends_with("launch requested → now)"),
        "{}",
        shown.note
    );
}

#[test]
fn an_unknown_price_is_labelled_never_zero() {
    let runner = deleted("a", "linux", "o/r", None);
    let shown = shown(Some(&runner), &on_demand_price(), AT);
    assert_eq!(shown.note, "no price: m7i.large not offered in eu-south-2");
    assert_eq!(shown.cost.and_then(|c| c.usd_micros), None);
    let mut unpriced = deleted("b", "linux", "o/r", None);
    unpriced.cost = None;
    assert!(shown_note(&unpriced).starts_with("not priced"));
    assert!(shown_note(&runner_without_instance()).starts_with("no instance yet"));
}

fn shown_note(runner: &RunnerRecord) -> String {
    shown(Some(runner), &[], AT).note
}

fn runner_without_instance() -> RunnerRecord {
    let mut runner = runner("c", "linux");
    runner.instance_id = None;
    runner
}

#[test]
fn costs_are_summed_by_repository_and_pool_over_the_period() {
    let mut old = deleted("old", "linux", "o/a", Some(1_000_000));
    old.updated_at = AT - Duration::days(8);
    let runners = vec![
        deleted("a", "linux", "o/a", Some(100_800)),
        deleted("b", "linux", "o/b", Some(50_000)),
        deleted("c", "big", "o/a", Some(400_000)),
        deleted("d", "big", "o/b", None),
        runner("alive", "linux"),
        old,
    ];
    let sums = sum_since(&runners, AT - Duration::days(7));
    assert_eq!(sums.total.runners, 4);
    assert_eq!(sums.total.usd_micros, 550_800);
    assert_eq!(sums.total.unpriced, 1);
    assert_eq!(sums.by_repository["o/a"].usd_micros, 500_800);
    assert_eq!(sums.by_repository["o/b"].usd_micros, 50_000);
    assert_eq!(sums.by_repository["o/b"].unpriced, 1);
    assert_eq!(sums.by_pool["linux"].usd_micros, 150_800);
    assert_eq!(sums.by_pool["big"].usd_micros, 400_000);
    assert_eq!(sums.by_pool["big"].runners, 2);
}

#[test]
fn a_stopped_pools_volume_time_and_cost_are_summed_by_pool() {
    let mut stopped = deleted("eph-linux-s", "linux", "o/r", Some(1_000));
    if let Some(cost) = stopped.cost.as_mut() {
        cost.stopped_seconds = 36_000;
        cost.volume_usd_micros = Some(111_111);
    }
    let plain = deleted("eph-linux-p", "linux", "o/r", Some(2_000));
    let sums = sum_since(&[stopped, plain], AT - Duration::days(7));
    let pool = &sums.by_pool["linux"];
    assert_eq!((pool.runners, pool.usd_micros), (2, 3_000));
    assert_eq!(
        (pool.stopped_seconds, pool.volume_usd_micros),
        (36_000, 111_111)
    );
    assert_eq!(sums.total.stopped_seconds, 36_000);
}
