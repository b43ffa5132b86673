//! A job's timeline, end to end: a burst of jobs through the simulator, on moto behind
//! the strict layer, leaves every job with every stamp set and in order (EC2's launch
//! time and the instance's JIT read among them, kept when the reaper deletes the runner),
//! and `ephemera jobs show` prints them (`--json` too); `jobs list` has the wait column.

use crate::cli::{stdout_of, Operator};
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::ports::RunnerStore;
use ephemera_core::timeline::{Stage, Timeline};
use ephemera_tests::pipeline::{Pipeline, PipelineOptions, LABELS};
use serde_json::Value;
use std::time::Duration;

const BURST: usize = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_leaves_every_job_stamped_in_order_and_jobs_show_prints_it() -> anyhow::Result<()> {
    let p = Pipeline::start(PipelineOptions {
        reaper_interval: Some(Duration::from_secs(1)),
        ..PipelineOptions::default()
    })
    .await?;
    let mut jobs = Vec::new();
    for _ in 0..BURST {
        jobs.push(p.sim.create_job("octo-org", "app", &LABELS, None).await?);
    }
    p.wait_for(
        "every job completed and its runner deleted",
        Duration::from_secs(240),
        || async {
            for &job_id in &jobs {
                let done = p
                    .runner_for_job(job_id)
                    .await?
                    .filter(|r| r.status == InstanceStatus::Deleted);
                if done.is_none() || p.sim.snapshot().jobs[&job_id].status != "completed" {
                    return Ok(None);
                }
            }
            Ok(Some(()))
        },
    )
    .await?;

    for &job_id in &jobs {
        let job = p.store.get_job(job_id).await?.expect("recorded");
        let runner = p.runner_for_job(job_id).await?.expect("its runner");
        let timeline = Timeline::of(&job, Some(&runner));
        assert!(
            timeline.missing().is_empty(),
            "job {job_id} lacks {:?}: {timeline:?}",
            timeline.missing()
        );
        assert!(
            timeline.out_of_order().is_empty(),
            "job {job_id}: {:?} out of order: {timeline:?}",
            timeline.out_of_order()
        );
        assert!(runner.instance_type.is_some() && runner.market.is_some());
        let launched = timeline
            .at(Stage::InstanceLaunched)
            .expect("EC2's launch time");
        let read = timeline.at(Stage::JitRead).expect("the instance's read");
        assert!(
            launched.unix_timestamp() <= read.unix_timestamp(),
            "{timeline:?}"
        );
    }

    let op = Operator::new(&p)?;
    let job_id = jobs[0].to_string();
    let out = op.run(&["jobs", "show", &job_id])?.assert().success();
    let text = stdout_of(out.get_output());
    for stage in Stage::ALL.into_iter().filter(|s| !s.only_when_present()) {
        let row = text
            .lines()
            .find(|l| l.starts_with(&format!("{} ", stage.as_str())))
            .unwrap_or_default();
        assert!(row.contains("Z "), "stage {stage:?} has no time in\n{text}");
        assert!(
            row.contains(stage.label()),
            "stage {stage:?} unnamed in\n{text}"
        );
    }
    assert!(text.contains("instance launched (EC2)"), "{text}");
    let cost = text
        .lines()
        .find(|l| l.starts_with("cost "))
        .unwrap_or_default();
    // This pipeline's reaper keeps no prices: the cost says so, never a figure.
    assert!(
        cost.ends_with(" not priced (deleted while the reaper kept no prices)"),
        "{text}"
    );
    assert!(text.contains("(queued → started)"), "{text}");

    let out = op
        .run(&["jobs", "show", &job_id, "--json"])?
        .assert()
        .success();
    let json: Value = serde_json::from_slice(&out.get_output().stdout)?;
    let stages = json["stages"].as_array().cloned().unwrap_or_default();
    let always = Stage::ALL.iter().filter(|s| !s.only_when_present());
    assert_eq!(
        stages.len(),
        always.count(),
        "a current image: no runner update"
    );
    assert!(stages.iter().all(|s| s["at"].is_string()), "{json}");
    let names: Vec<&str> = stages.iter().filter_map(|s| s["stage"].as_str()).collect();
    let in_place = [
        "launch_requested",
        "instance_launched",
        "jit_stored",
        "jit_read",
        "online",
    ];
    assert!(names.windows(5).any(|w| w == in_place), "{names:?}");
    assert_eq!(json["out_of_order"], serde_json::json!([]));
    assert!(json["wait_seconds"].as_f64().is_some_and(|w| w >= 0.0));
    assert_eq!(json["cost"], Value::Null);

    let out = op
        .run(&["jobs", "list", "--status", "completed"])?
        .assert()
        .success();
    let listed = stdout_of(out.get_output());
    assert!(listed.lines().next().unwrap_or_default().contains("WAIT"));

    op.run(&["jobs", "show", "1"])?.assert().code(4);
    Ok(())
}
