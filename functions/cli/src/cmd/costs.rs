//! `ephemera costs --since 7d`: what the deployment's instances cost over a period,
//! summed by the repository of the job each ran and by pool. Read from the deleted
//! runner records (the `deleted` partition of the status index), each carrying the cost
//! the reaper wrote with its deletion; nothing scans the table and nothing reads a
//! price. A period can reach back only as far as deleted records are kept
//! (`reaper.deleted_ttl`, 7 days by default).
//!
//! A stopped pool's instances are billed as EC2 bills them: their compute only while they
//! ran, their root volume while they waited stopped (`STOPPED-HOURS`, `VOLUMES`), both in
//! `COST`.

use crate::exit::Outcome;
use crate::render::{colour_stdout, Table};
use crate::target::{table_command, Deployment, StackArgs, TableArg};
use crate::views::print_json;
use clap::Args;
use ephemera_core::costs::{sum_since, CostSum, CostSums};
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::prices::{usd, usd_f64};
use serde::Serialize;
use std::collections::BTreeMap;
use time::{Duration, OffsetDateTime};

#[derive(Args, Debug)]
pub struct CostsArgs {
    /// The period, back from now: whole days (`7d`) or hours (`12h`).
    #[arg(long, value_name = "PERIOD", default_value = "7d", value_parser = period)]
    since: Duration,
    /// JSON on stdout: `{"since": ..., "total": {...}, "by_repository": {...},
    /// "by_pool": {...}}`, amounts in USD.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    stack: StackArgs,
    #[command(flatten)]
    table: TableArg,
}

table_command!(CostsArgs, costs);

/// `Nd` or `Nh`, N a whole number from 1.
pub fn period(text: &str) -> Result<Duration, String> {
    let bad = || format!("{text:?} is not a period: give whole days or hours, as 7d or 12h");
    let split = text.len().checked_sub(1).ok_or_else(bad)?;
    let (number, unit) = text.split_at(split);
    let count: i64 = number.parse().ok().filter(|&n| n > 0).ok_or_else(bad)?;
    match unit {
        "d" if count <= 3650 => Ok(Duration::days(count)),
        "h" if count <= 3650 * 24 => Ok(Duration::hours(count)),
        _ => Err(bad()),
    }
}

/// One repository's or pool's sum, in JSON.
#[derive(Serialize)]
struct SumView {
    runners: u64,
    usd: f64,
    /// Runners with no price known, left out of `usd`.
    unpriced: u64,
    instance_seconds: u64,
    /// Seconds a stopped pool's instances waited stopped.
    stopped_seconds: u64,
    /// Their root volumes' cost while stopped, in USD (included in `usd`).
    stopped_volumes_usd: f64,
}

impl From<&CostSum> for SumView {
    fn from(sum: &CostSum) -> SumView {
        SumView {
            runners: sum.runners,
            usd: usd_f64(sum.usd_micros),
            unpriced: sum.unpriced,
            instance_seconds: sum.seconds,
            stopped_seconds: sum.stopped_seconds,
            stopped_volumes_usd: usd_f64(sum.volume_usd_micros),
        }
    }
}

#[derive(Serialize)]
struct CostsView {
    #[serde(with = "time::serde::rfc3339")]
    since: OffsetDateTime,
    total: SumView,
    by_repository: BTreeMap<String, SumView>,
    by_pool: BTreeMap<String, SumView>,
}

pub async fn costs(deployment: &mut Deployment, args: CostsArgs) -> Outcome {
    let store = deployment.store().await?;
    deployment.progress.wait("reading deleted runners");
    let runners = store.list_runners(&[InstanceStatus::Deleted]).await?;
    deployment.progress.clear();
    let since = OffsetDateTime::now_utc() - args.since;
    let sums = sum_since(&runners, since);
    if args.json {
        let by = |map: &BTreeMap<String, CostSum>| {
            map.iter()
                .map(|(k, v)| (k.clone(), SumView::from(v)))
                .collect()
        };
        print_json(&CostsView {
            since,
            total: SumView::from(&sums.total),
            by_repository: by(&sums.by_repository),
            by_pool: by(&sums.by_pool),
        })?;
        return Ok(());
    }
    print!("{}", render(&sums, colour_stdout()));
    Ok(())
}

/// The text of `costs`: a table by repository, one by pool, and the total.
pub fn render(sums: &CostSums, colour: bool) -> String {
    if sums.total.runners == 0 {
        return "no runner deleted in the period has a cost\n".to_owned();
    }
    // The stopped pool's columns only when some runner waited stopped.
    let stopped = sums.total.stopped_seconds > 0;
    let table = |title: &'static str, map: &BTreeMap<String, CostSum>| {
        let mut columns = vec![title, "RUNNERS", "INSTANCE-HOURS"];
        if stopped {
            columns.extend(["STOPPED-HOURS", "VOLUMES"]);
        }
        columns.extend(["COST", "UNPRICED"]);
        let mut table = Table::new(&columns);
        for (key, sum) in map {
            let mut row = vec![
                key.as_str().into(),
                sum.runners.to_string().into(),
                format!("{:.2}", sum.seconds as f64 / 3600.0).into(),
            ];
            if stopped {
                row.push(format!("{:.2}", sum.stopped_seconds as f64 / 3600.0).into());
                row.push(usd(sum.volume_usd_micros).into());
            }
            row.push(usd(sum.usd_micros).into());
            row.push(sum.unpriced.to_string().into());
            table.row(row);
        }
        table.render(colour)
    };
    let mut text = table("REPOSITORY", &sums.by_repository);
    text.push('\n');
    text.push_str(&table("POOL", &sums.by_pool));
    text.push_str(&format!(
        "\ntotal: {} over {} runners (an estimate: instance time, and a stopped pool's \
         volumes while stopped; no other EBS volume time or data transfer; see \
         docs/operating.md)\n",
        usd(sums.total.usd_micros),
        sums.total.runners
    ));
    if sums.total.unpriced > 0 {
        text.push_str(&format!(
            "{} runners have no price (a type the region does not offer, or prices not \
             read yet) and are left out of the sums\n",
            sums.total.unpriced
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_are_whole_days_or_hours() {
        assert_eq!(period("7d"), Ok(Duration::days(7)));
        assert_eq!(period("12h"), Ok(Duration::hours(12)));
        for bad in ["", "d", "7", "0d", "-1d", "7w", "1.5d", "99999d"] {
            assert!(period(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn the_text_has_both_tables_the_total_and_the_unpriced() {
        let mut sums = CostSums::default();
        let sum = CostSum {
            runners: 2,
            usd_micros: 150_800,
            unpriced: 1,
            seconds: 7200,
            ..CostSum::default()
        };
        sums.by_repository.insert("o/a".into(), sum.clone());
        sums.by_pool.insert("linux".into(), sum.clone());
        sums.total = sum;
        let text = render(&sums, false);
        assert!(
            text.contains("REPOSITORY") && text.contains("o/a"),
            "{text}"
        );
        assert!(text.contains("POOL") && text.contains("linux"), "{text}");
        assert!(text.contains("$0.1508") && text.contains("2.00"), "{text}");
        assert!(text.contains("total: $0.1508 over 2 runners"), "{text}");
        assert!(text.contains("1 runners have no price"), "{text}");
        assert!(!text.contains("STOPPED-HOURS"), "no stopped pool: {text}");
    }

    #[test]
    fn a_stopped_pools_hours_and_volumes_are_shown_by_pool() {
        let mut sums = CostSums::default();
        let stopped = CostSum {
            runners: 1,
            usd_micros: 134_511,
            seconds: 1920,
            stopped_seconds: 36_000,
            volume_usd_micros: 111_111,
            ..CostSum::default()
        };
        sums.by_pool.insert("linux".into(), stopped.clone());
        sums.by_repository.insert("o/a".into(), stopped.clone());
        sums.total = stopped;
        let text = render(&sums, false);
        let pool = text
            .lines()
            .find(|l| l.starts_with("linux"))
            .expect("the pool's row");
        let cells: Vec<&str> = pool.split_whitespace().collect();
        assert_eq!(
            cells,
            ["linux", "1", "0.53", "10.00", "$0.1111", "$0.1345", "0"],
            "{text}"
        );
        assert!(
            text.contains("STOPPED-HOURS") && text.contains("VOLUMES"),
            "{text}"
        );
    }
}
