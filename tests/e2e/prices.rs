//! Prices and each job's cost, end to end through the real SDK against moto behind the
//! strict layer, which answers the Price List Query API and the spot price history from
//! recorded answers (`tests/fixtures/prices/`): the reaper reads each price once (no call
//! again within a day, none per job), a job run end to end is priced on `jobs show`,
//! `ephemera costs --since 7d` sums by repository and pool, and a region that does not
//! offer the type shows "no price", never zero.

use crate::cli::{stdout_of, Operator};
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::ports::{Market, PriceBook, PriceList};
use ephemera_core::prices::{cost_micros, usd_f64};
use ephemera_tests::moto::Moto;
use ephemera_tests::pipeline::{counted_pricing, Pipeline, PipelineOptions, LABELS};
use serde_json::Value;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(90);
const OWNER: &str = "octo-org";
/// t3.micro in us-east-1, as recorded: on demand, and the dearest zone's spot price.
const ON_DEMAND: u64 = 10_400;
const SPOT: u64 = 3_500;

/// Waits until every job of `jobs` has completed and its runner is deleted, running the
/// reaper when the pipeline does not.
async fn until_deleted(p: &Pipeline, jobs: &[u64], reap: bool) -> anyhow::Result<()> {
    p.wait_for("every job's runner deleted", LIMIT, || async {
        if reap {
            p.reap_once().await?;
        }
        for &job_id in jobs {
            let deleted = p
                .runner_for_job(job_id)
                .await?
                .filter(|r| r.status == InstanceStatus::Deleted);
            if deleted.is_none() {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await
}

fn price_calls(p: &Pipeline) -> (u64, u64) {
    (
        p.calls.count("Pricing", "GetProducts"),
        p.calls.count("EC2", "DescribeSpotPriceHistory"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reaper_reads_prices_once_and_not_again_within_a_day() -> anyhow::Result<()> {
    let p = Pipeline::start(PipelineOptions {
        priced_in: Some("us-east-1"),
        reaper_interval: None,
        ..PipelineOptions::default()
    })
    .await?;
    let first = p.reap_once().await?;
    assert_eq!(first.prices_read, 2, "the pool's type, in both markets");
    assert_eq!(price_calls(&p), (1, 1));

    let mut jobs = Vec::new();
    for _ in 0..3 {
        jobs.push(p.sim.create_job(OWNER, "app", &LABELS, None).await?);
    }
    until_deleted(&p, &jobs, true).await?;
    assert_eq!(price_calls(&p), (1, 1), "no price read per job");

    let table =
        ephemera_aws::ResourceNames::for_deployment(ephemera_tests::pipeline::DEPLOYMENT).table;
    let (book, _) = counted_pricing(&p.sdk, &Default::default(), &table, "us-east-1");
    let cached = book.read_prices().await?;
    let price = |market| {
        cached
            .iter()
            .find(|c| c.instance_type == "t3.micro" && c.market == market)
            .and_then(|c| c.usd_micros_per_hour)
    };
    assert_eq!(price(Market::OnDemand), Some(ON_DEMAND));
    assert_eq!(price(Market::Spot), Some(SPOT), "the dearest zone's");

    let next_day = time::OffsetDateTime::now_utc() + time::Duration::hours(25);
    assert_eq!(p.reap_at(next_day).await?.prices_read, 2);
    assert_eq!(price_calls(&p), (2, 2));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_run_end_to_end_is_priced_and_costs_sums_it_by_repository_and_pool(
) -> anyhow::Result<()> {
    let p = Pipeline::start(PipelineOptions {
        priced_in: Some("us-east-1"),
        ..PipelineOptions::default()
    })
    .await?;
    p.reap_once().await?;
    let mut jobs = Vec::new();
    for repo in ["app", "app", "lib"] {
        jobs.push(p.sim.create_job(OWNER, repo, &LABELS, None).await?);
    }
    until_deleted(&p, &jobs, false).await?;

    let mut expected = std::collections::BTreeMap::<&str, u64>::new();
    for (&job_id, repo) in jobs.iter().zip(["app", "app", "lib"]) {
        let runner = p.runner_for_job(job_id).await?.expect("its runner");
        let cost = runner.cost.clone().expect("priced at its deletion");
        let per_hour = match runner.market {
            Some(Market::Spot) => SPOT,
            _ => ON_DEMAND,
        };
        assert_eq!(cost.usd_micros_per_hour, Some(per_hour));
        assert_eq!(cost.usd_micros, Some(cost_micros(cost.seconds, per_hour)));
        assert!(cost.seconds >= 60, "EC2's minimum: {cost:?}");
        assert_eq!(
            cost.repository.as_deref(),
            Some(format!("{OWNER}/{repo}").as_str())
        );
        *expected.entry(repo).or_default() += cost.usd_micros.unwrap_or_default();
    }

    let op = Operator::new(&p)?;
    let job = jobs[0].to_string();
    let out = op.run(&["jobs", "show", &job])?.assert().success();
    let text = stdout_of(out.get_output());
    let cost = text
        .lines()
        .find(|l| l.starts_with("cost "))
        .unwrap_or_default();
    assert!(
        cost.contains(" $0.") && cost.contains("launch requested → terminated"),
        "{text}"
    );
    let out = op
        .run(&["jobs", "show", &job, "--json"])?
        .assert()
        .success();
    let json: Value = serde_json::from_slice(&out.get_output().stdout)?;
    assert!(json["cost"].as_f64().is_some_and(|c| c > 0.0), "{json}");
    assert_eq!(json["cost_until"], "terminated");

    let out = op
        .run(&["costs", "--since", "7d", "--json"])?
        .assert()
        .success();
    let sums: Value = serde_json::from_slice(&out.get_output().stdout)?;
    let app = &sums["by_repository"][format!("{OWNER}/app")];
    assert_eq!(app["runners"], 2, "{sums}");
    assert_eq!(
        app["usd"].as_f64(),
        Some(usd_f64(expected["app"])),
        "{sums}"
    );
    let lib = &sums["by_repository"][format!("{OWNER}/lib")];
    assert_eq!(
        lib["usd"].as_f64(),
        Some(usd_f64(expected["lib"])),
        "{sums}"
    );
    assert_eq!(sums["by_pool"]["linux-x64"]["runners"], 3, "{sums}");
    assert_eq!(sums["total"]["unpriced"], 0, "{sums}");
    let out = op.run(&["costs", "--since", "7d"])?.assert().success();
    let text = stdout_of(out.get_output());
    assert!(
        text.contains("REPOSITORY") && text.contains(&format!("{OWNER}/lib")),
        "{text}"
    );
    assert!(
        text.contains("POOL") && text.contains("linux-x64"),
        "{text}"
    );

    let out = op.run(&["costs", "--since", "7x"])?.assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(stderr.contains("--since"), "{stderr}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_that_does_not_offer_the_type_shows_no_price() -> anyhow::Result<()> {
    let p = Pipeline::start(PipelineOptions {
        priced_in: Some("eu-south-2"),
        ..PipelineOptions::default()
    })
    .await?;
    p.reap_once().await?;
    let job_id = p.sim.create_job(OWNER, "app", &LABELS, None).await?;
    until_deleted(&p, &[job_id], false).await?;
    let runner = p.runner_for_job(job_id).await?.expect("its runner");
    let cost = runner.cost.expect("a cost, without a figure");
    assert_eq!(cost.usd_micros, None);

    let op = Operator::new(&p)?;
    let out = op
        .run(&["jobs", "show", &job_id.to_string()])?
        .assert()
        .success();
    let text = stdout_of(out.get_output());
    let line = text
        .lines()
        .find(|l| l.starts_with("cost "))
        .unwrap_or_default();
    assert!(
        line.ends_with(" no price: t3.micro not offered in eu-south-2"),
        "{text}"
    );
    let out = op
        .run(&["costs", "--since", "1h", "--json"])?
        .assert()
        .success();
    let sums: Value = serde_json::from_slice(&out.get_output().stdout)?;
    assert_eq!(sums["total"]["unpriced"], 1, "{sums}");
    assert_eq!(sums["total"]["usd"].as_f64(), Some(0.0), "{sums}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_answers_give_each_regions_prices_through_the_sdk() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let sdk = ephemera_aws::sdk_config(&ephemera_aws::AwsSettings::emulator(&moto.endpoint)).await;
    let calls = Default::default();
    let (_, east) = counted_pricing(&sdk, &calls, "unused", "us-east-1");
    let (_, south) = counted_pricing(&sdk, &calls, "unused", "eu-south-2");
    assert_eq!(
        east.hourly_price("m7i.large", Market::OnDemand).await?,
        Some(100_800)
    );
    assert_eq!(
        east.hourly_price("m7i.2xlarge", Market::OnDemand).await?,
        Some(403_200)
    );
    assert_eq!(
        east.hourly_price("m7i.large", Market::Spot).await?,
        Some(41_200)
    );
    assert_eq!(
        east.hourly_price("m7i.metal-48xl", Market::OnDemand)
            .await?,
        None
    );
    assert_eq!(
        south.hourly_price("m7i.large", Market::OnDemand).await?,
        None
    );
    assert_eq!(south.hourly_price("m7i.large", Market::Spot).await?, None);
    // A stopped pool's root volume: the GB-month price of its EBS type.
    assert_eq!(east.volume_price("gp3").await?, Some(80_000));
    assert_eq!(east.volume_price("io2").await?, None, "no recorded io2");
    assert_eq!(south.volume_price("gp3").await?, None);
    Ok(())
}
