//! The pipeline on moto + the GitHub simulator while GitHub misbehaves, and what a burst
//! of jobs costs in GitHub API budget.
//!
//! Faults are seeded: a failing run prints its seed, and `EPHEMERA_FAULT_SEED=N` reruns
//! it with the same faults. The default seed makes the scaler's own JIT calls meet 5xx
//! answers too (its 6th, 7th, 9th and 10th), not only the reaper's.

use anyhow::ensure;
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::model::RunnerRecord;
use ephemera_core::ports::{Fleet, InstanceState, RunnerStore};
use ephemera_github::GitHubApp;
use ephemera_tests::pipeline::{Pipeline, PipelineOptions, LABELS};
use ephemera_tests::sim::{RateLimitKind, RateLimitWindow, SimFaults};
use std::collections::HashSet;
use std::time::{Duration, Instant};

const TOKEN_ROUTE: &str = "POST /app/installations/{installation_id}/access_tokens";

fn seed() -> u64 {
    let seed = std::env::var("EPHEMERA_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    eprintln!("GitHub faults seeded with EPHEMERA_FAULT_SEED={seed}");
    seed
}

/// Calls a client made, by endpoint, summed over outcomes (`None`: every endpoint).
fn calls(app: &GitHubApp, endpoint: Option<&str>) -> u64 {
    let all = app.calls();
    let matching = all
        .iter()
        .filter(|c| endpoint.is_none_or(|e| c.endpoint == e));
    matching.map(|c| c.count).sum()
}

fn calls_ending(app: &GitHubApp, outcome: &str) -> u64 {
    app.calls()
        .iter()
        .filter(|c| c.outcome == outcome)
        .map(|c| c.count)
        .sum()
}

/// Creates `count` jobs, one signed `queued` webhook each.
async fn create_jobs(p: &Pipeline, count: usize) -> anyhow::Result<Vec<u64>> {
    let mut jobs = Vec::with_capacity(count);
    for _ in 0..count {
        jobs.push(p.sim.create_job("octo-org", "app", &LABELS, None).await?);
    }
    Ok(jobs)
}

/// Waits until every job has run and every runner record is `deleted` (a creation whose
/// job went to another runner while GitHub failed it is released by the reaper once its
/// creation lease is over, `creation_stalled`); returns the records of the jobs' runners, one per
/// job, in the order of `jobs`.
async fn all_run_and_reaped(
    p: &Pipeline,
    jobs: &[u64],
    limit: Duration,
) -> anyhow::Result<Vec<RunnerRecord>> {
    p.wait_for("every job run and every runner reaped", limit, || async {
        let sim = p.sim.snapshot();
        if !jobs.iter().all(|id| sim.jobs[id].status == "completed") {
            return Ok(None);
        }
        let mut records = Vec::with_capacity(jobs.len());
        for &job_id in jobs {
            match p.runner_for_job(job_id).await? {
                Some(r) if r.status == InstanceStatus::Deleted => records.push(r),
                _ => return Ok(None),
            }
        }
        let far = time::OffsetDateTime::now_utc() + time::Duration::days(1);
        for status in InstanceStatus::ALL {
            if status != InstanceStatus::Deleted
                && !p.store.runners_in_status(status, far, 1).await?.is_empty()
            {
                return Ok(None);
            }
        }
        Ok(Some(records))
    })
    .await
}

/// What a run may have made beyond one runner per job.
#[derive(Clone, Copy, PartialEq)]
enum Spares {
    /// Nothing: one record and one instance per job.
    None,
    /// Instances GitHub never registered a runner for: a creation whose JIT call kept
    /// failing while GitHub gave its job to another runner. Never a registration more.
    NeverRegistered,
}

/// Each job ran once, successfully, on the runner ephemera made for it, and nothing is
/// left anywhere: no live record, no running instance, no runner on GitHub.
async fn assert_one_runner_per_job_and_nothing_left(
    p: &Pipeline,
    jobs: &[u64],
    records: &[RunnerRecord],
    spares: Spares,
) -> anyhow::Result<()> {
    let sim = p.sim.snapshot();
    let mut names = HashSet::new();
    for (job_id, record) in jobs.iter().zip(records) {
        let job = &sim.jobs[job_id];
        ensure!(
            job.conclusion.as_deref() == Some("success"),
            "job {job_id}: {job:?}"
        );
        ensure!(
            job.runner_name.as_deref() == Some(record.name.as_str()),
            "job {job_id} ran on {:?}, not on its own runner {}",
            job.runner_name,
            record.name
        );
        ensure!(
            names.insert(record.name.clone()),
            "runner {} served two jobs",
            record.name
        );
    }
    assert_eq!(sim.counters.jobs_killed, 0, "a busy runner was terminated");
    assert_eq!(
        sim.counters.runners_registered,
        jobs.len() as u64,
        "exactly one registration per job"
    );
    assert!(
        sim.runners.is_empty(),
        "runners left on GitHub: {:?}",
        sim.runners
    );

    let far = time::OffsetDateTime::now_utc() + time::Duration::days(1);
    let mut deleted = 0;
    for status in InstanceStatus::ALL {
        let found = p.store.runners_in_status(status, far, 1000).await?;
        if status == InstanceStatus::Deleted {
            let extra: Vec<_> = found.iter().filter(|r| !names.contains(&r.name)).collect();
            match spares {
                Spares::None => assert!(extra.is_empty(), "records beyond one per job: {extra:?}"),
                Spares::NeverRegistered => assert!(
                    extra.iter().all(|r| r.github_runner_id.is_none()),
                    "a spare record was registered on GitHub: {extra:?}"
                ),
            }
            assert_eq!(found.len(), jobs.len() + extra.len());
            deleted = found.len();
        } else {
            assert!(found.is_empty(), "records left in {status}: {found:?}");
        }
    }
    assert_eq!(p.store.get_pool("linux-x64").await?.slots_used, 0);

    let instances = p.fleet.inner().describe().await?;
    assert_eq!(instances.len(), deleted, "one instance per record");
    for instance in &instances {
        assert_eq!(instance.state, InstanceState::Terminated, "{}", instance.id);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_job_gets_exactly_one_runner_while_github_fails_and_rate_limits() -> anyhow::Result<()>
{
    let started = Instant::now();
    let faults = SimFaults {
        seed: seed(),
        server_error_rate: 0.2,
        rate_limit: Some(RateLimitWindow {
            after_calls: 12,
            duration: Duration::from_secs(2),
            kind: RateLimitKind::Primary,
        }),
        ..SimFaults::default()
    };
    let mut p = Pipeline::start(PipelineOptions {
        github_faults: faults,
        ..PipelineOptions::default()
    })
    .await?;
    let jobs = create_jobs(&p, 10).await?;

    let records = all_run_and_reaped(&p, &jobs, Duration::from_secs(120)).await?;
    p.check_alive()?;
    assert_one_runner_per_job_and_nothing_left(&p, &jobs, &records, Spares::NeverRegistered)
        .await?;

    // The faults did happen, and were survived by retrying.
    let (scaler, reaper) = (&p.scaler_forge, &p.reaper_forge);
    let transient = calls_ending(scaler, "transient") + calls_ending(reaper, "transient");
    let throttled = calls_ending(scaler, "throttled") + calls_ending(reaper, "throttled");
    assert!(transient > 0, "no 5xx was met: {:?}", scaler.calls());
    assert!(throttled > 0, "the rate-limit window was not met");
    eprintln!(
        "10 jobs through 20% 5xx and a rate-limit window in {:?}: scaler {:?}, reaper {:?}",
        started.elapsed(),
        scaler.calls(),
        reaper.calls()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_fifty_jobs_costs_one_token_and_one_call_per_job() -> anyhow::Result<()> {
    const JOBS: usize = 50;
    let started = Instant::now();
    let mut p = Pipeline::start(PipelineOptions {
        max_runners: JOBS as u32,
        ..PipelineOptions::default()
    })
    .await?;
    let jobs = create_jobs(&p, JOBS).await?;

    let records = all_run_and_reaped(&p, &jobs, Duration::from_secs(180)).await?;
    p.check_alive()?;
    assert_one_runner_per_job_and_nothing_left(&p, &jobs, &records, Spares::None).await?;

    // The scaler, a function of its own in Lambda, has its own client.
    let scaler = &p.scaler_forge;
    assert_eq!(
        calls(scaler, Some("access_token")),
        1,
        "one installation token for the whole burst: {:?}",
        scaler.calls()
    );
    assert_eq!(calls(scaler, Some("generate_jitconfig")), JOBS as u64);
    // GitHub may give a runner another job than the one it was launched for; a job whose
    // runner was taken and could not be handed another is queued again and looked up
    // once (`get_job`) before it gets a runner. Those lookups aside, one call per job.
    let mut takers = 0;
    for record in &records {
        let Some(ran) = record.job_id else { continue };
        let launched_for_it = p.store.get_job(ran).await?.and_then(|j| j.launched_runner);
        takers += usize::from(launched_for_it.as_deref() != Some(record.name.as_str()));
    }
    let lookups = calls(scaler, Some("get_job"));
    assert!(
        lookups <= takers as u64,
        "{lookups} job lookups for {takers} runners that took another job: {:?}",
        scaler.calls()
    );
    let per_job = calls(scaler, None) - calls(scaler, Some("access_token")) - lookups;
    assert!(
        per_job <= JOBS as u64,
        "at most one GitHub call per job (the JIT config), made {per_job}: {:?}",
        scaler.calls()
    );
    // Each function fetched one token; nothing else did.
    assert_eq!(calls(&p.reaper_forge, Some("access_token")), 1);
    let sim = p.sim.snapshot();
    assert_eq!(sim.counters.api_calls.get(TOKEN_ROUTE), Some(&2));
    eprintln!(
        "{JOBS} jobs in {:?}: scaler {:?}, reaper {:?}",
        started.elapsed(),
        scaler.calls(),
        p.reaper_forge.calls()
    );
    Ok(())
}
