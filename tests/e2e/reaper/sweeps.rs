//! Sweeps end to end: orphan instances (never another deployment's or an untagged one),
//! orphan GitHub runners (never anyone else's), drifted pool counters, and what one run
//! reads from a table full of history.

use super::*;
use aws_sdk_dynamodb::types::AttributeValue;
use ephemera_aws::Ec2Fleet;
use ephemera_core::ports::{
    Fleet, FleetRequest, InstanceState, Launcher, Market, RunnerStore, TemplateVersion,
};
use ephemera_tests::pipeline::{PipelineOptions, LABELS};
use ephemera_tests::plant::write_runners;
use ephemera_tests::sim::state::RunnerScope as SimScope;

fn by_hand() -> PipelineOptions {
    PipelineOptions {
        reaper_interval: None,
        ..PipelineOptions::default()
    }
}

fn one_instance() -> FleetRequest {
    FleetRequest {
        pool: POOL.to_owned(),
        count: 1,
        launch_template: "eph-runner".to_owned(),
        template_version: TemplateVersion::Stack,
        ami: None,
        instance_types: vec!["t3.micro".to_owned()],
        subnets: Vec::new(),
        market: Market::OnDemand,
        spot_allocation: Default::default(),
        shape: None,
        root_volume: None,
    }
}

/// EC2's state of `id`, whatever its tags.
async fn state_of(p: &Pipeline, id: &str) -> anyhow::Result<Option<String>> {
    let ec2 = aws_sdk_ec2::Client::new(&p.sdk);
    let output = ec2.describe_instances().instance_ids(id).send().await?;
    Ok(output
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .find_map(|i| {
            i.state()
                .and_then(|s| s.name())
                .map(|n| n.as_str().to_owned())
        }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_instance_is_terminated_in_two_runs_and_no_one_elses_is_touched(
) -> anyhow::Result<()> {
    let p = Pipeline::start(by_hand()).await?;
    // Launched for a runner whose record was never written (a crash right after launch).
    let orphan = p
        .fleet
        .launch(&one_instance())
        .await?
        .instance_ids
        .remove(0);
    let ec2 = aws_sdk_ec2::Client::new(&p.sdk);
    let theirs = Ec2Fleet::new(ec2.clone(), "other")
        .launch(&one_instance())
        .await?
        .instance_ids
        .remove(0);
    let untagged = ec2
        .run_instances()
        .image_id("ami-04681a1dbd79675a5")
        .instance_type(aws_sdk_ec2::types::InstanceType::T3Micro)
        .min_count(1)
        .max_count(1)
        .send()
        .await?
        .instances()[0]
        .instance_id()
        .unwrap_or_default()
        .to_owned();
    let ours: Vec<String> = p
        .fleet
        .inner()
        .describe()
        .await?
        .into_iter()
        .map(|i| i.id)
        .collect();
    assert_eq!(
        ours,
        std::slice::from_ref(&orphan),
        "only the orphan carries our tag"
    );

    let at = now();
    let young = p.reap_at(at).await?;
    assert_eq!(young.orphans_reaped, 0, "within the grace: {young:?}");
    let first = p.reap_at(at + minutes(11)).await?;
    assert_eq!(
        first.orphans_reaped, 0,
        "a first sighting only suspects: {first:?}"
    );
    let second = p.reap_at(at + minutes(12)).await?;
    assert_eq!(second.orphans_reaped, 1, "{second:?}");
    assert_eq!(
        p.instance_state(&orphan).await?,
        Some(InstanceState::Terminated)
    );
    for kept in [&theirs, &untagged] {
        assert_eq!(
            state_of(&p, kept).await?.as_deref(),
            Some("running"),
            "{kept}"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_github_runner_is_removed_in_one_run_and_no_one_elses_is_touched(
) -> anyhow::Result<()> {
    let p = Pipeline::start(by_hand()).await?;
    // One job through, so the reaper has met this organization.
    let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    let done = runner_in(&p, job_id, InstanceStatus::PendingDelete).await?;
    p.reap_at(now()).await?;
    assert_eq!(
        record(&p, &done.name).await?.status,
        InstanceStatus::Deleted
    );
    let scope = SimScope {
        owner: "octo-org".into(),
        repo: None,
    };
    let plant = |name: &str| {
        p.sim.with_state(|s| {
            s.register_runner(scope.clone(), name, Vec::new(), 1)
                .map(|r| r.id)
                .map_err(|e| anyhow::anyhow!("{e:?}"))
        })
    };
    plant("eph-linux-x64-leaked0001")?;
    plant("other-linux-x64-theirs001")?;
    plant("ephemeral-linux-x64-nope1")?;
    let report = p.reap_at(now()).await?;
    assert_eq!(report.orphans_reaped, 1, "{report:?}");
    let names: Vec<String> = p
        .sim
        .snapshot()
        .runners
        .values()
        .map(|r| r.name.clone())
        .collect();
    assert!(
        !names.contains(&"eph-linux-x64-leaked0001".to_owned()),
        "{names:?}"
    );
    for kept in ["other-linux-x64-theirs001", "ephemeral-linux-x64-nope1"] {
        assert!(
            names.contains(&kept.to_owned()),
            "{kept} removed: {names:?}"
        );
    }
    Ok(())
}

/// Sets the pool counter behind the store's back.
async fn set_counter(p: &Pipeline, table: &str, slots_used: u32) -> anyhow::Result<()> {
    aws_sdk_dynamodb::Client::new(&p.sdk)
        .update_item()
        .table_name(table)
        .key("pk", AttributeValue::S(format!("POOL#{POOL}")))
        .update_expression("SET slots_used = :n")
        .expression_attribute_values(":n", AttributeValue::N(slots_used.to_string()))
        .send()
        .await?;
    Ok(())
}

fn table_name() -> String {
    ephemera_aws::provision::ResourceNames::for_deployment("eph").table
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drifted_pool_counter_is_repaired_in_two_runs() -> anyhow::Result<()> {
    let p = Pipeline::start(by_hand()).await?;
    let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    runner_in(&p, job_id, InstanceStatus::PendingDelete).await?;
    p.reap_at(now()).await?;
    set_counter(&p, &table_name(), 3).await?;
    let at = now() + minutes(3);
    let first = p.reap_at(at).await?;
    assert_eq!(first.counters_repaired, 0, "first sighting: {first:?}");
    let second = p.reap_at(at + minutes(1)).await?;
    assert_eq!(second.counters_repaired, 1, "{second:?}");
    assert_eq!(p.store.get_pool(POOL).await?.slots_used, 0);
    Ok(())
}

/// How many `deleted` items the cost test writes: 200 times what the run may read, so a
/// run that scanned the history would fail by far; `make bench` runs the reaper over
/// 100,000 (docs/performance.md, "Reaper").
const HISTORY_ITEMS: usize = 10_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_run_reads_what_is_pending_not_the_history() -> anyhow::Result<()> {
    let p = Pipeline::start(by_hand()).await?;
    let table = table_name();
    let started = std::time::Instant::now();
    write_runners(
        &p.sdk,
        &table,
        "eph-old",
        POOL,
        InstanceStatus::Deleted,
        HISTORY_ITEMS,
        |_, _| {},
    )
    .await?;
    println!(
        "wrote {HISTORY_ITEMS} deleted items in {:?}",
        started.elapsed()
    );
    write_runners(
        &p.sdk,
        &table,
        "eph-linux-x64-pend",
        POOL,
        InstanceStatus::PendingDelete,
        50,
        |_, _| {},
    )
    .await?;
    let before = p.reaper_store.items_read();
    let report = p.reap_at(now()).await?;
    let read = p.reaper_store.items_read() - before;
    println!("one run over {HISTORY_ITEMS} deleted and 50 pending read {read} items: {report:?}");
    assert_eq!(report.deleted, 50, "{report:?}");
    // Each pending record is read at least once; the history is never read.
    assert!(
        (50..=50 * 4).contains(&read),
        "read {read} items for 50 pending"
    );
    Ok(())
}
