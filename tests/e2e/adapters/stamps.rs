//! The timeline's stamps in the DynamoDB store against moto: each rides on the write
//! that carries it today (the job's record and moves, the claim, the runner's updates),
//! and the first time written stands where the design says it does.

use ephemera_aws::ResourceNames;
use ephemera_aws::{ensure_resources, sdk_config, AwsSettings, DynamoRunnerStore};
use ephemera_core::model::{GitHubTimes, JobRecord, JobStatus, RunnerRecord};
use ephemera_core::ports::{Claim, Market, RunnerStore, RunnerUpdate};
use ephemera_tests::moto::Moto;
use time::{Duration, OffsetDateTime};

fn at(seconds: i64) -> OffsetDateTime {
    time::macros::datetime!(2026-11-22 10:00:00 UTC) + Duration::seconds(seconds)
}

fn job(github: GitHubTimes) -> JobRecord {
    JobRecord {
        job_id: 1,
        status: JobStatus::Queued,
        pool: "linux".to_owned(),
        owner: "octo".to_owned(),
        repo: "hello".to_owned(),
        run_id: 2,
        installation_id: Some(7),
        labels: vec!["self-hosted".to_owned()],
        runner_name: None,
        launched_runner: None,
        received_at: at(1),
        updated_at: at(1),
        github,
        claimed_at: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_stamp_rides_on_its_write_and_the_first_one_stands() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let resources = ensure_resources(&config, &ResourceNames::for_deployment("eph")).await?;
    let store = DynamoRunnerStore::new(aws_sdk_dynamodb::Client::new(&config), &resources.table);
    let queued = GitHubTimes {
        created_at: Some(at(0)),
        ..GitHubTimes::default()
    };
    store.record_job(&job(queued)).await?;

    let runner = RunnerRecord::new("eph-linux-a".to_owned(), "linux".to_owned(), at(2));
    assert_eq!(store.claim_job(1, &runner, 5).await?, Claim::Claimed);
    let claimed = store.get_job(1).await?.expect("job");
    assert_eq!((claimed.github, claimed.claimed_at), (queued, Some(at(2))));

    // A later body adds its own times and cannot move the queued one.
    let started = GitHubTimes {
        created_at: Some(at(-50)),
        started_at: Some(at(40)),
        completed_at: None,
    };
    store
        .advance_job(&job(started), JobStatus::InProgress, Some("eph-linux-a"))
        .await?;
    let done = GitHubTimes {
        completed_at: Some(at(90)),
        ..started
    };
    store
        .advance_job(&job(done), JobStatus::Completed, Some("eph-linux-a"))
        .await?;
    let stored = store.get_job(1).await?.expect("job");
    assert_eq!(
        stored.github,
        GitHubTimes {
            created_at: Some(at(0)),
            started_at: Some(at(40)),
            completed_at: Some(at(90)),
        }
    );

    // The instance's type and market with its id; the first sighting online stands.
    let launched = RunnerUpdate {
        instance_id: Some("i-1".to_owned()),
        instance_type: Some("m7i.large".to_owned()),
        market: Some(Market::Spot),
        ..RunnerUpdate::default()
    };
    store.update_runner("eph-linux-a", &launched, at(3)).await?;
    for seen in [38, 45] {
        let online = RunnerUpdate {
            online_at: Some(at(seen)),
            ..RunnerUpdate::default()
        };
        store
            .update_runner("eph-linux-a", &online, at(seen))
            .await?;
    }
    let runner = store.get_runner("eph-linux-a").await?.expect("runner");
    assert_eq!(runner.instance_type.as_deref(), Some("m7i.large"));
    assert_eq!(runner.market, Some(Market::Spot));
    assert_eq!(runner.online_at, Some(at(38)));
    Ok(())
}
