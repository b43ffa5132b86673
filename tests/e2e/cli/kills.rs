//! 50 jobs through the real `ephemera local` binary while it is killed with SIGKILL at
//! drawn moments and started again 1–3 s later, 4 times, and then while the webhook
//! endpoint refuses every delivery for 2 minutes: every job runs exactly once, every job
//! record ends `completed`, nothing is left (instances, GitHub runners, JIT configs, live
//! records, slots, dead letters), no busy runner is terminated, and the test never asks
//! GitHub to redeliver (the reaper's sweep does).

use super::local_world::{Leftovers, LocalOptions, LocalWorld};
use ephemera_tests::moto::free_port;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const JOBS_WHILE_KILLED: usize = 40;
const JOBS_WHILE_REFUSED: usize = 10;
const KILLS: usize = 4;
const REFUSAL: Duration = Duration::from_secs(120);
/// From the end of the refusal until the world must have settled.
const SETTLE_LIMIT: Duration = Duration::from_secs(420);

fn config_yaml() -> anyhow::Result<String> {
    let example = std::fs::read_to_string(ephemera_tests::pipeline::workspace_path(
        "infra/config.example.yaml",
    ))?;
    // Room for a wave of 20; runners whose job another took reaped after 30 s idle; an
    // instance launched by a process killed before it recorded the launch reaped as an
    // orphan after the shortest grace (2 min) instead of 10.
    let yaml = example
        .replace("max_runners: 10", "max_runners: 20")
        .replace("idle_timeout: 10m", "idle_timeout: 30s")
        .replace("deleted_ttl: 7d", "deleted_ttl: 7d\n  orphan_grace: 2m");
    anyhow::ensure!(yaml.contains("max_runners: 20") && yaml.contains("idle_timeout: 30s"));
    anyhow::ensure!(yaml.contains("orphan_grace: 2m"), "{yaml}");
    Ok(yaml)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_jobs_survive_four_sigkills_and_two_minutes_of_refused_webhooks() -> anyhow::Result<()>
{
    let seed: u64 = std::env::var("EPHEMERA_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(18);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut world = LocalWorld::start(LocalOptions {
        config_yaml: Some(config_yaml()?),
        job_duration: Duration::from_secs(2),
        ..LocalOptions::default()
    })
    .await?;
    let labels: Vec<String> = world.config.pools[0].labels.clone();
    let pools: Vec<String> = world.config.pools.iter().map(|p| p.name.clone()).collect();
    let started = Instant::now();

    // 40 jobs over 20 s; meanwhile 4 kills at drawn moments in the first 30 s.
    let mut kill_at: Vec<Duration> = (0..KILLS)
        .map(|_| Duration::from_millis(rng.random_range(1_000..30_000)))
        .collect();
    kill_at.sort();
    let mut jobs = Vec::new();
    let mut kills = Vec::new();
    for i in 0..JOBS_WHILE_KILLED {
        let label_refs: Vec<&str> = labels.iter().map(String::as_str).collect();
        jobs.push(
            world
                .sim
                .create_job("octo-org", "app", &label_refs, None)
                .await?,
        );
        let next = Duration::from_millis(500 * (i as u64 + 1));
        while kills.len() < KILLS && kill_at[kills.len()] <= next {
            tokio::time::sleep(kill_at[kills.len()].saturating_sub(started.elapsed())).await;
            world.kill().await?;
            let down = Duration::from_millis(rng.random_range(1_000..=3_000));
            tokio::time::sleep(down).await;
            world.spawn().await?;
            kills.push((started.elapsed(), down));
        }
        tokio::time::sleep(next.saturating_sub(started.elapsed())).await;
    }
    while kills.len() < KILLS {
        world.kill().await?;
        let down = Duration::from_millis(rng.random_range(1_000..=3_000));
        tokio::time::sleep(down).await;
        world.spawn().await?;
        kills.push((started.elapsed(), down));
    }
    println!("seed {seed}: killed at {kills:?}");

    // The endpoint refuses for 2 minutes (the process keeps running: its reaper sweeps,
    // and its asks fail too); 10 more jobs are queued meanwhile.
    let refused_from = started.elapsed();
    let refusal_began = time::OffsetDateTime::now_utc();
    world
        .sim
        .set_webhook_url(format!("http://127.0.0.1:{}/webhook", free_port()?));
    for _ in 0..JOBS_WHILE_REFUSED {
        let label_refs: Vec<&str> = labels.iter().map(String::as_str).collect();
        jobs.push(
            world
                .sim
                .create_job("octo-org", "app", &label_refs, None)
                .await?,
        );
        tokio::time::sleep(REFUSAL / (2 * JOBS_WHILE_REFUSED as u32)).await;
    }
    tokio::time::sleep((refused_from + REFUSAL).saturating_sub(started.elapsed())).await;
    world.sim.set_webhook_url(world.webhook_url());
    let refused_until = started.elapsed();
    let refusal_ended = time::OffsetDateTime::now_utc();
    let failed_in_refusal = world
        .sim
        .snapshot()
        .deliveries
        .values()
        .filter(|d| !d.succeeded())
        .filter(|d| (refusal_began..=refusal_ended).contains(&d.delivered_at))
        .count();
    println!("refused {failed_in_refusal} deliveries from {refused_from:?} to {refused_until:?}");

    // Every job runs and the world settles, with nothing the test does.
    let aws = world.aws().await;
    let deadline = Instant::now() + SETTLE_LIMIT;
    let left = loop {
        let sim = world.sim.snapshot();
        let done = jobs.iter().all(|id| sim.jobs[id].status == "completed");
        let left = aws.leftovers(&pools).await?;
        let completed: BTreeSet<u64> = aws.completed_jobs().await?.into_iter().collect();
        let recorded = jobs.iter().all(|id| completed.contains(id));
        if done && recorded && sim.runners.is_empty() && left == Leftovers::default() {
            break left;
        }
        if Instant::now() > deadline {
            let waiting: Vec<(u64, String)> = jobs
                .iter()
                .filter(|id| sim.jobs[*id].status != "completed")
                .map(|id| (*id, sim.jobs[id].status.clone()))
                .collect();
            for (id, _) in waiting.iter().take(3) {
                let tag = format!("\"id\":{id},");
                let tried: Vec<(u64, bool, u16, &str)> = sim
                    .deliveries
                    .values()
                    .filter(|d| d.payload.contains(&tag))
                    .map(|d| (d.id, d.redelivery, d.status_code, d.action.as_str()))
                    .collect();
                println!("job {id}: deliveries {tried:?}");
            }
            println!("dead letters: {:?}", aws.dead_letters().await?);
            anyhow::bail!(
                "not settled {SETTLE_LIMIT:?} after the refusal: jobs not completed {waiting:?}, \
                 job records completed {}/{}, GitHub runners {}, left {left:?}; log:\n{}",
                jobs.iter().filter(|id| completed.contains(id)).count(),
                jobs.len(),
                sim.runners.len(),
                world.log()
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    println!(
        "settled {:?} after the refusal ended, {left:?}",
        started.elapsed() - refused_until
    );

    let sim = world.sim.snapshot();
    for id in &jobs {
        assert_eq!(
            sim.jobs[id].conclusion.as_deref(),
            Some("success"),
            "job {id}"
        );
    }
    assert_eq!(sim.counters.jobs_killed, 0, "a busy runner was terminated");
    let redelivered = sim
        .deliveries
        .values()
        .filter(|d| d.redelivery && d.succeeded())
        .count();
    assert!(failed_in_refusal > 0, "the refusal refused nothing");
    assert!(
        redelivered > 0,
        "nothing was redelivered: {failed_in_refusal} failed"
    );
    println!(
        "runners registered {}, redelivered {redelivered}, failed deliveries {}",
        sim.counters.runners_registered,
        sim.deliveries.values().filter(|d| !d.succeeded()).count()
    );
    world.kill().await?;
    Ok(())
}
