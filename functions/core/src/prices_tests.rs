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
        usd_micros_per_gib_month: None,
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

/// A stopped pool's runner launched at `AT` with 100 GiB of gp3: prepared and recorded
/// `stopped` 2 minutes later, taken 10 hours after that.
fn stopped_then_taken() -> RunnerRecord {
    let mut runner = launched(Market::OnDemand);
    runner.prepare = true;
    runner.root_volume_gib = Some(100);
    runner.root_volume_type = Some("gp3".into());
    let stopped = AT + Duration::minutes(2);
    runner.note(HistoryEntry::status(stopped, InstanceStatus::Stopped, None));
    let taken = stopped + Duration::hours(10);
    runner.note(HistoryEntry::status(taken, InstanceStatus::Starting, None));
    runner
}

#[test]
fn a_stopped_instance_is_billed_its_volume_while_stopped_not_its_compute() {
    let mut volume = price("ebs:gp3", Market::OnDemand, None, AT);
    volume.usd_micros_per_gib_month = Some(80_000);
    let prices = [
        price("m7i.large", Market::OnDemand, Some(100_800), AT),
        volume,
    ];
    // Ends 30 minutes after the take: 2 min preparing + 30 min running billed as compute.
    let end = AT + Duration::minutes(2) + Duration::hours(10) + Duration::minutes(30);
    let cost = cost_of(&stopped_then_taken(), end, &prices, None).expect("an instance");
    assert_eq!(cost.stopped_seconds, 36_000);
    assert_eq!(cost.seconds, 32 * 60, "compute: not the stopped hours");
    // 100 GiB at 0.08 USD a GiB-month for 10 of a 30-day month's 720 hours.
    let volume = 100 * 80_000 * 36_000 / (30 * 86_400);
    assert_eq!(volume, 111_111);
    assert_eq!(cost.volume_usd_micros, Some(volume));
    assert_eq!(
        cost.usd_micros,
        Some(cost_micros(32 * 60, 100_800) + volume)
    );
}

#[test]
fn a_stopped_instance_never_taken_is_stopped_until_its_end_and_an_unread_volume_price_is_none() {
    let mut runner = stopped_then_taken();
    runner
        .history
        .retain(|e| e.status != Some(InstanceStatus::Starting));
    let prices = [price("m7i.large", Market::OnDemand, Some(100_800), AT)];
    let end = AT + Duration::minutes(2) + Duration::hours(1);
    let cost = cost_of(&runner, end, &prices, None).expect("an instance");
    assert_eq!(cost.stopped_seconds, 3600);
    assert_eq!(cost.seconds, 120);
    assert_eq!(
        cost.volume_usd_micros, None,
        "no gp3 price read: unknown, not zero"
    );
    assert_eq!(cost.usd_micros, Some(cost_micros(120, 100_800)));
    assert_eq!(
        volume_key_of(&runner).as_deref(),
        Some("ebs:gp3"),
        "the reaper reads its price"
    );
    assert_eq!(volume_key_of(&launched(Market::Spot)), None);
}

#[test]
fn a_volume_type_is_read_on_demand_only() {
    let types = BTreeSet::from(["ebs:gp3".to_owned(), "m7i.large".to_owned()]);
    let read = to_read(&[], &types, AT);
    assert_eq!(
        read,
        vec![
            ("ebs:gp3".to_owned(), Market::OnDemand),
            ("m7i.large".to_owned(), Market::OnDemand),
            ("m7i.large".to_owned(), Market::Spot),
        ]
    );
}
