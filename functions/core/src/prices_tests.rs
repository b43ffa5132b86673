use super::*;
use crate::lifecycle::InstanceStatus;
use crate::model::HistoryEntry;
use time::macros::datetime;

const AT: OffsetDateTime = datetime!(2026-11-22 10:00:00 UTC);

fn price(
    instance_type: &str,
    market: Market,
    per_hour: Option<u64>,
    read_at: OffsetDateTime,
) -> Price {
    Price {
        region: "us-east-1".into(),
        instance_type: instance_type.into(),
        market,
        usd_micros_per_hour: per_hour,
        read_at,
    }
}

/// A runner launched at `AT` on an m7i.large in `market`.
fn launched(market: Market) -> RunnerRecord {
    let mut runner = RunnerRecord::new("eph-linux-a".into(), "linux".into(), AT);
    runner.note(HistoryEntry::status(AT, InstanceStatus::Creating, None));
    runner.instance_id = Some("i-1".into());
    runner.instance_type = Some("m7i.large".into());
    runner.market = Some(market);
    runner
}

#[test]
fn an_hour_costs_the_hourly_price_and_a_second_its_3600th() {
    assert_eq!(cost_micros(3600, 100_800), 100_800);
    assert_eq!(cost_micros(7200, 100_800), 201_600);
    assert_eq!(cost_micros(90, 100_800), 2_520);
}

#[test]
fn a_short_life_is_billed_the_60_second_minimum() {
    assert_eq!(cost_micros(5, 100_800), cost_micros(60, 100_800));
    assert_eq!(cost_micros(60, 100_800), 1_680);
}

#[test]
fn the_cost_runs_from_the_launch_request_to_the_termination() {
    let prices = [price("m7i.large", Market::OnDemand, Some(100_800), AT)];
    let end = AT + Duration::seconds(1800);
    let cost = cost_of(
        &launched(Market::OnDemand),
        end,
        &prices,
        Some("o/r".into()),
    )
    .expect("an instance was launched");
    assert_eq!(cost.seconds, 1800);
    assert_eq!(cost.usd_micros, Some(50_400));
    assert_eq!(cost.usd_micros_per_hour, Some(100_800));
    assert_eq!(cost.unpriced, None);
    assert_eq!(cost.repository.as_deref(), Some("o/r"));
}

#[test]
fn spot_is_priced_from_the_spot_entry_not_the_on_demand_one() {
    let prices = [
        price("m7i.large", Market::OnDemand, Some(100_800), AT),
        price("m7i.large", Market::Spot, Some(36_000), AT),
    ];
    let cost = cost_of(
        &launched(Market::Spot),
        AT + Duration::hours(1),
        &prices,
        None,
    );
    assert_eq!(cost.and_then(|c| c.usd_micros), Some(36_000));
}

#[test]
fn a_type_not_offered_has_no_price_and_says_where() {
    let prices = [price("m7i.large", Market::OnDemand, None, AT)];
    let cost = cost_of(
        &launched(Market::OnDemand),
        AT + Duration::hours(1),
        &prices,
        None,
    )
    .expect("an instance was launched");
    assert_eq!(cost.usd_micros, None);
    assert_eq!(
        cost.unpriced.as_deref(),
        Some("no price: m7i.large not offered in us-east-1")
    );
}

#[test]
fn an_unread_price_is_unknown_never_zero() {
    let cost = cost_of(
        &launched(Market::OnDemand),
        AT + Duration::hours(1),
        &[],
        None,
    )
    .expect("an instance was launched");
    assert_eq!(cost.usd_micros, None);
    assert_eq!(
        cost.unpriced.as_deref(),
        Some("no price: m7i.large not read yet")
    );
}

#[test]
fn a_runner_that_never_had_an_instance_costs_nothing_to_report() {
    let mut runner = launched(Market::OnDemand);
    runner.instance_id = None;
    assert_eq!(cost_of(&runner, AT + Duration::hours(1), &[], None), None);
}

#[test]
fn prices_are_read_again_only_after_a_day() {
    let fresh = price("m7i.large", Market::OnDemand, Some(1), AT);
    assert!(!fresh.is_stale(AT + Duration::hours(23)));
    assert!(fresh.is_stale(AT + Duration::hours(24)));
}

#[test]
fn only_missing_and_stale_prices_are_read_missing_first() {
    let types = BTreeSet::from(["m7i.large".to_owned(), "m7i.2xlarge".to_owned()]);
    let cached = [
        price(
            "m7i.large",
            Market::OnDemand,
            Some(1),
            AT - Duration::hours(25),
        ),
        price("m7i.large", Market::Spot, Some(1), AT - Duration::hours(1)),
    ];
    let wanted = to_read(&cached, &types, AT);
    assert_eq!(
        wanted,
        vec![
            ("m7i.2xlarge".to_owned(), Market::OnDemand),
            ("m7i.2xlarge".to_owned(), Market::Spot),
            ("m7i.large".to_owned(), Market::OnDemand),
        ]
    );
    let all_fresh = merge(
        &cached,
        vec![
            price("m7i.large", Market::OnDemand, Some(2), AT),
            price("m7i.2xlarge", Market::OnDemand, None, AT),
            price("m7i.2xlarge", Market::Spot, None, AT),
        ],
    );
    assert_eq!(all_fresh.len(), 4);
    assert!(to_read(&all_fresh, &types, AT + Duration::hours(1)).is_empty());
}

#[test]
fn reads_per_run_are_bounded() {
    let types: BTreeSet<String> = (0..20).map(|i| format!("m7i.t{i}")).collect();
    assert_eq!(to_read(&[], &types, AT).len(), PRICE_READS_PER_RUN);
}

#[test]
fn dollars_show_four_decimals() {
    assert_eq!(usd(50_400), "$0.0504");
    assert_eq!(usd(1_234_567), "$1.2346");
    assert_eq!(usd(0), "$0.0000");
}
