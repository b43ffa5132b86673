//! One installation token for the whole deployment, through the real `ephemera local`
//! binary: the world's process (webhook and scaler) mints it, a second process (the
//! reaper) started later finds it in the table and mints none; a reaper started again
//! over a shelved token that has expired never presents it to GitHub and mints anew.

use super::local_world::{LocalOptions, LocalWorld};
use super::Scratch;
use ephemera_aws::token_shelf::{token_key, DynamoTokenShelf};
use ephemera_aws::{AwsSettings, ResourceNames};
use ephemera_core::ports::{SharedToken, TokenShelf};
use ephemera_tests::sim::IssuedToken;
use secrecy::{ExposeSecret, SecretString};
use std::time::{Duration, Instant};

const MINTS: &str = "POST /app/installations/{installation_id}/access_tokens";
/// The simulator's only installation.
const INSTALLATION: u64 = 1;

fn mints(world: &LocalWorld) -> u64 {
    world
        .sim
        .snapshot()
        .counters
        .api_calls
        .get(MINTS)
        .copied()
        .unwrap_or(0)
}

/// Runs `count` jobs and waits (at most 90 s) until GitHub shows them completed and the
/// reaper has deleted every runner (which asks GitHub to remove it: a token).
async fn run_jobs(world: &LocalWorld, count: usize, logs: &str) -> anyhow::Result<()> {
    let jobs = world.create_jobs(count).await?;
    let pools: Vec<String> = world.config.pools.iter().map(|p| p.name.clone()).collect();
    let aws = world.aws().await;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let state = world.sim.snapshot();
        let done = jobs.iter().all(|id| state.jobs[id].status == "completed");
        if done && aws.leftovers(&pools).await?.live_records.is_empty() {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "jobs {jobs:?} not all completed with their runners removed: {:?}; logs:\n{logs}\n{}",
            jobs.iter()
                .map(|id| &state.jobs[id].status)
                .collect::<Vec<_>>(),
            world.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_minted_by_one_process_is_used_by_another_and_an_expired_one_never(
) -> anyhow::Result<()> {
    let world = LocalWorld::start(LocalOptions {
        only: vec!["webhook", "scaler"],
        ..LocalOptions::default()
    })
    .await?;
    let scratch = Scratch::new()?;
    let reaper_log = scratch.0.join("reaper.log");
    let sdk = ephemera_aws::sdk_config(&AwsSettings::emulator(&world.moto.endpoint)).await;
    let table = ResourceNames::for_deployment(&world.config.deployment).table;
    let shelf = DynamoTokenShelf::new(aws_sdk_dynamodb::Client::new(&sdk), &table);
    let app_id = world.config.github.app_id;

    // The scaler's process registers a runner: one mint, shelved.
    let mut reaper = world.spawn_other(&["reaper"], &reaper_log)?;
    let logs = || std::fs::read_to_string(&reaper_log).unwrap_or_default();
    run_jobs(&world, 2, &logs()).await?;
    assert_eq!(mints(&world), 1, "both processes, one token");
    let shelved = shelf.read(app_id, INSTALLATION).await?.expect("shelved");
    assert!(world
        .sim
        .snapshot()
        .tokens
        .contains_key(shelved.token.expose_secret()));

    // An expired token on the shelf (one GitHub issued, whose hour is over): a reaper
    // started now must not present it.
    reaper.start_kill()?;
    reaper.wait().await?;
    let expired = SharedToken {
        token: SecretString::from("ghs_expired_on_the_shelf".to_owned()),
        expires_at: time::OffsetDateTime::now_utc() - time::Duration::minutes(1),
    };
    world.sim.with_state(|state| {
        state.tokens.insert(
            expired.token.expose_secret().to_owned(),
            IssuedToken {
                installation_id: INSTALLATION,
                app_id: ephemera_tests::pipeline::APP_ID,
                expires_at: expired.expires_at,
            },
        )
    });
    aws_sdk_dynamodb::Client::new(&sdk)
        .delete_item()
        .table_name(&table)
        .key(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S(token_key(app_id, INSTALLATION)),
        )
        .send()
        .await?;
    shelf.shelve(app_id, INSTALLATION, &expired).await?;
    let _reaper = world.spawn_other(&["reaper"], &reaper_log)?;
    run_jobs(&world, 1, &logs()).await?;
    assert_eq!(mints(&world), 2, "the reaper minted its own");
    let reaper_said = logs();
    assert!(
        !reaper_said.contains("token refused"),
        "the expired token was presented:\n{reaper_said}"
    );
    let now_shelved = shelf.read(app_id, INSTALLATION).await?.expect("shelved");
    assert_ne!(
        now_shelved.token.expose_secret(),
        expired.token.expose_secret(),
        "the fresh token replaced the expired one"
    );
    Ok(())
}
