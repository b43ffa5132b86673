//! `ephemera jobs show JOB`: one job's timeline (queued, received, claimed, launch
//! requested, instance launched, JIT config stored, JIT config read, online, started,
//! completed, terminated; a runner update between when the host replaced its image's
//! runner) with the gap between each stage, and the runner, its version, instance type,
//! market and cost of what ran it. Two reads of the table (the job's item, its runner's),
//! and a third, of the cached prices, only to price a runner still alive; no other call.

use crate::exit::{Failure, Outcome, NOT_FOUND};
use crate::render::{colour_stdout, gap, or_dash, when, Cell, Table};
use crate::target::{table_command, Deployment, StackArgs, TableArg};
use crate::views::{print_json, runner_version_shown, JobTimelineView};
use clap::Args;
use ephemera_aws::DynamoPriceBook;
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::ports::{PriceBook, RunnerStore};
use ephemera_core::timeline::Stage;
use time::OffsetDateTime;

#[derive(Args, Debug)]
pub struct JobsShowArgs {
    /// The job's id (GitHub's `workflow_job` id, as `jobs list` shows it).
    job: u64,
    /// JSON on stdout: every stage with its time and gap, the runner, instance type and
    /// market.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    stack: StackArgs,
    #[command(flatten)]
    table: TableArg,
}

table_command!(JobsShowArgs, show);

pub async fn show(deployment: &mut Deployment, args: JobsShowArgs) -> Outcome {
    let store = deployment.store().await?;
    deployment
        .progress
        .wait(format!("reading job {}", args.job));
    let Some(job) = store.get_job(args.job).await? else {
        deployment.progress.clear();
        return Err(Failure::msg(NOT_FOUND, format!("no job {}", args.job)));
    };
    // The runner that ran it, or the one launched for it while it waits.
    let runner = match job.runner_name.as_ref().or(job.launched_runner.as_ref()) {
        Some(name) => store.get_runner(name).await?,
        None => None,
    };
    let alive = runner.as_ref().is_some_and(|r| {
        r.instance_id.is_some() && r.cost.is_none() && r.status != InstanceStatus::Deleted
    });
    let prices = if alive {
        let table = deployment.table().await?;
        DynamoPriceBook::new(aws_sdk_dynamodb::Client::new(&deployment.sdk), table)
            .read_prices()
            .await?
    } else {
        Vec::new()
    };
    deployment.progress.clear();
    let view = JobTimelineView::new(&job, runner.as_ref(), &prices, OffsetDateTime::now_utc());
    if args.json {
        print_json(&view)?;
        return Ok(());
    }
    print!("{}", render(&view, colour_stdout()));
    Ok(())
}

/// The text of `jobs show`: the job's fields, then its stages.
pub fn render(view: &JobTimelineView, colour: bool) -> String {
    let mut fields = Table::new(&["FIELD", "VALUE"]);
    let mut field = |name: &'static str, value: Cell| fields.row(vec![name.into(), value]);
    field("job", view.job_id.to_string().into());
    field("status", Cell::status(view.status.as_str()));
    field("pool", view.pool.as_str().into());
    field("repo", view.repo.as_str().into());
    let runner = match (&view.runner_name, view.runner_launched_for_job) {
        (Some(name), true) => name.clone(),
        (Some(name), false) => format!("{name} (launched for another job, or warm)"),
        (None, _) => "-".to_owned(),
    };
    field("runner", runner.into());
    field(
        "runner version",
        runner_version_shown(&view.host_runner).into(),
    );
    field("instance", or_dash(view.instance_id.as_deref()).into());
    field(
        "instance type",
        or_dash(view.instance_type.as_deref()).into(),
    );
    field("market", or_dash(view.market).into());
    field("cost", view.cost_note.as_str().into());
    let wait = view
        .wait_seconds
        .map(|w| gap(time::Duration::seconds_f64(w)));
    field(
        "wait",
        format!("{} (queued → started)", or_dash(wait)).into(),
    );
    let mut text = fields.render(colour);
    let mut stages = Table::new(&["STAGE", "WHAT", "AT", "GAP", "CLOCK"]);
    for stage in &view.stages {
        stages.row(vec![
            stage.stage.into(),
            stage.label.into(),
            or_dash(stage.at.map(when)).into(),
            or_dash(
                stage
                    .gap_seconds
                    .map(|g| gap(time::Duration::seconds_f64(g))),
            )
            .into(),
            stage.source.into(),
        ]);
    }
    text.push_str("\ntimeline:\n");
    text.push_str(&stages.render(colour));
    let stamped = |name: &str| {
        view.stages
            .iter()
            .any(|s| s.stage == name && s.at.is_some())
    };
    let at_deletion = Stage::ALL
        .into_iter()
        .filter(|s| s.learnt_at_deletion() && !s.only_when_present());
    let waiting: Vec<&str> = at_deletion
        .map(Stage::as_str)
        .filter(|name| !stamped(name))
        .collect();
    if !waiting.is_empty() && !stamped(Stage::Terminated.as_str()) {
        text.push_str(&format!(
            "note: {} stamped when the reaper deletes the runner\n",
            waiting.join(" and ")
        ));
    }
    for [earlier, later] in &view.out_of_order {
        text.push_str(&format!(
            "note: {later} is stamped before {earlier} (clocks apart, or a late record)\n"
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use ephemera_core::model::{GitHubTimes, JobRecord, JobStatus, RunnerRecord};
    use ephemera_core::ports::Market;
    use time::macros::datetime;

    #[test]
    fn the_text_has_every_stage_the_runner_and_no_invented_price() {
        let at = datetime!(2026-11-22 10:00:00 UTC);
        let secs = time::Duration::seconds;
        let job = JobRecord {
            job_id: 7,
            status: JobStatus::InProgress,
            pool: "linux".into(),
            owner: "o".into(),
            repo: "r".into(),
            run_id: 8,
            installation_id: None,
            labels: vec![],
            runner_name: Some("eph-linux-a".into()),
            launched_runner: Some("eph-linux-a".into()),
            received_at: at + secs(1),
            updated_at: at,
            github: GitHubTimes {
                created_at: Some(at),
                started_at: Some(at + secs(42)),
                completed_at: None,
            },
            claimed_at: Some(at + secs(2)),
        };
        let mut runner = RunnerRecord::new("eph-linux-a".into(), "linux".into(), at);
        runner.instance_type = Some("m7i.large".into());
        runner.market = Some(Market::Spot);
        runner.instance_id = Some("i-1".into());
        runner.status = ephemera_core::lifecycle::InstanceStatus::Running;
        runner.note(ephemera_core::model::HistoryEntry::status(
            at + secs(3),
            ephemera_core::lifecycle::InstanceStatus::Creating,
            None,
        ));
        let view = JobTimelineView::new(&job, Some(&runner), &[], at + secs(60));
        let text = render(&view, false);
        for stage in Stage::ALL.into_iter().filter(|s| !s.only_when_present()) {
            assert!(text.contains(stage.as_str()), "{stage:?} in\n{text}");
            assert!(text.contains(stage.label()), "{stage:?} in\n{text}");
        }
        assert!(text.contains("instance launched (EC2)"), "{text}");
        assert!(
            text.contains("note: instance_launched and jit_read stamped when the reaper deletes"),
            "{text}"
        );
        assert!(text.contains("eph-linux-a") && text.contains("m7i.large"));
        assert!(text.contains("spot"));
        let cost = text
            .lines()
            .find(|l| l.starts_with("cost "))
            .unwrap_or_default();
        assert!(
            cost.ends_with(" no price: m7i.large not read yet"),
            "{text}"
        );
        assert!(text.contains("42.0s (queued → started)"), "{text}");
        assert_eq!(view.cost, None);
        assert_eq!(view.cost_until, Some("now"));
    }

    #[test]
    fn a_priced_job_shows_its_figure_and_how_it_was_made() {
        let at = datetime!(2026-11-22 10:00:00 UTC);
        let job = JobRecord {
            job_id: 7,
            status: JobStatus::Completed,
            pool: "linux".into(),
            owner: "o".into(),
            repo: "r".into(),
            run_id: 8,
            installation_id: None,
            labels: vec![],
            runner_name: Some("eph-linux-a".into()),
            launched_runner: Some("eph-linux-a".into()),
            received_at: at,
            updated_at: at,
            github: GitHubTimes::default(),
            claimed_at: None,
        };
        let mut runner = RunnerRecord::new("eph-linux-a".into(), "linux".into(), at);
        runner.instance_id = Some("i-1".into());
        runner.instance_type = Some("m7i.large".into());
        runner.market = Some(Market::OnDemand);
        runner.status = ephemera_core::lifecycle::InstanceStatus::Deleted;
        runner.cost = Some(ephemera_core::prices::JobCost {
            seconds: 1800,
            usd_micros_per_hour: Some(100_800),
            usd_micros: Some(50_400),
            unpriced: None,
            repository: Some("o/r".into()),
            stopped_seconds: 0,
            volume_usd_micros: None,
        });
        let view = JobTimelineView::new(&job, Some(&runner), &[], at);
        let text = render(&view, false);
        assert!(
            text.contains(
                "$0.0504 (m7i.large on_demand at $0.1008/h, 1800 s, launch requested → terminated)"
            ),
            "{text}"
        );
        assert_eq!(view.cost, Some(0.0504));
        assert_eq!(view.price_usd_per_hour, Some(0.1008));
        assert_eq!(view.cost_until, Some("terminated"));
    }

    #[test]
    fn a_deleted_runner_shows_its_launch_and_jit_read_in_place() {
        use ephemera_core::lifecycle::InstanceStatus;
        use ephemera_core::model::HistoryEntry;
        let at = datetime!(2026-11-22 10:00:00 UTC);
        let secs = time::Duration::seconds;
        let mut runner = RunnerRecord::new("eph-linux-a".into(), "linux".into(), at);
        runner.note(HistoryEntry::status(
            at + secs(3),
            InstanceStatus::Creating,
            None,
        ));
        runner.note(HistoryEntry::status(
            at + secs(90),
            InstanceStatus::Deleted,
            None,
        ));
        runner.instance_launched_at = Some(at + secs(4));
        runner.jit_read_at = Some(at + secs(31));
        let job = JobRecord {
            job_id: 7,
            status: JobStatus::Completed,
            pool: "linux".into(),
            owner: "o".into(),
            repo: "r".into(),
            run_id: 8,
            installation_id: None,
            labels: vec![],
            runner_name: Some("eph-linux-a".into()),
            launched_runner: Some("eph-linux-a".into()),
            received_at: at + secs(1),
            updated_at: at,
            github: GitHubTimes::default(),
            claimed_at: Some(at + secs(2)),
        };
        let view = JobTimelineView::new(&job, Some(&runner), &[], at + secs(100));
        let text = render(&view, false);
        let row = |stage: Stage| {
            let name = format!("{} ", stage.as_str());
            text.lines()
                .find(|l| l.starts_with(&name))
                .unwrap_or_default()
        };
        assert!(row(Stage::InstanceLaunched).contains("10:00:04Z"), "{text}");
        assert!(row(Stage::InstanceLaunched).trim_end().ends_with("ec2"));
        assert!(row(Stage::JitRead).contains("10:00:31Z"), "{text}");
        assert!(row(Stage::JitRead).trim_end().ends_with("instance"));
        assert!(!text.contains("stamped when the reaper"), "{text}");
        let names: Vec<&str> = view.stages.iter().map(|s| s.stage).collect();
        let place = |name| names.iter().position(|n| *n == name);
        assert!(place("launch_requested") < place("instance_launched"));
        assert!(place("instance_launched") < place("jit_read"));
        assert!(place("jit_read") < place("online"));
        assert_eq!(place("runner_update"), None, "no swap, no stage");
        assert!(text.contains("runner version  -"), "{text}");

        runner.host_runner = ephemera_core::model::HostRunner {
            runner_version: Some("2.337.0".into()),
            runner_image_version: Some("2.336.0".into()),
            runner_swap_ms: Some(5_500),
        };
        let view = JobTimelineView::new(&job, Some(&runner), &[], at + secs(100));
        let text = render(&view, false);
        assert!(
            text.contains("2.337.0 (image had 2.336.0, swapped in 5.5 s)"),
            "{text}"
        );
        let update = text.lines().find(|l| l.starts_with("runner_update "));
        let update = update.unwrap_or_default();
        assert!(update.contains("10:00:25Z"), "{text}");
        assert!(update.trim_end().ends_with("instance"), "{text}");
        let json = serde_json::to_value(&view).expect("serialises");
        assert_eq!(json["runner_version"], "2.337.0");
        assert_eq!(json["runner_swap_ms"], 5500);
    }
}
