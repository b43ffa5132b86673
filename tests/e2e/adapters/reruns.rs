//! The wanted re-runs in the runners table, against moto through the real SDK: one entry
//! per workflow run, every move conditional on the state read (so of two reapers only
//! one marks an entry asked), entries read back as written, and forgotten.

use ephemera_aws::reruns::DynamoReruns;
use ephemera_aws::{ensure_resources, sdk_config, AwsSettings, ResourceNames};
use ephemera_core::ports::RerunStore;
use ephemera_core::rerun::{Rerun, RerunState, RunKey};
use ephemera_tests::moto::Moto;
use time::{Duration, OffsetDateTime};

fn wanted(run_id: u64, job_id: u64, at: OffsetDateTime) -> Rerun {
    Rerun {
        run: RunKey {
            owner: "octo-org".into(),
            repo: "app".into(),
            run_id,
        },
        job_id,
        run_attempt: 1,
        installation_id: Some(7),
        pool: "linux".into(),
        runner: "eph-linux-abc".into(),
        wanted_at: at,
        state: RerunState::Wanted,
        next_check_at: at,
    }
}

#[tokio::test]
async fn one_entry_per_run_and_only_the_move_from_the_state_read_holds() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let resources = ensure_resources(&config, &ResourceNames::for_deployment("eph")).await?;
    let reruns = DynamoReruns::new(aws_sdk_dynamodb::Client::new(&config), &resources.table);
    let now = OffsetDateTime::now_utc().replace_nanosecond(0)?;

    assert!(reruns.reruns().await?.is_empty());
    let first = wanted(10, 1, now);
    assert!(reruns.want_rerun(&first).await?);
    assert!(
        !reruns.want_rerun(&wanted(10, 2, now)).await?,
        "a second job of the same run is not recorded"
    );
    assert!(reruns.want_rerun(&wanted(11, 3, now)).await?);
    assert_eq!(reruns.rerun_of(&first.run).await?, Some(first.clone()));
    assert_eq!(reruns.reruns().await?.len(), 2);

    // Two reapers read `wanted`; only the first mark holds.
    let asked = RerunState::Asked(now + Duration::minutes(1));
    let later = now + Duration::minutes(1);
    assert!(
        reruns
            .move_rerun(&first.run, RerunState::Wanted, asked, later)
            .await?
    );
    let other = RerunState::Asked(now + Duration::minutes(2));
    assert!(
        !reruns
            .move_rerun(&first.run, RerunState::Wanted, other, later)
            .await?
    );
    let read = reruns.rerun_of(&first.run).await?.expect("entry");
    assert_eq!((read.state, read.next_check_at), (asked, later));
    // A refusal puts it back, conditional on the mark it made.
    assert!(
        reruns
            .move_rerun(&first.run, asked, RerunState::Wanted, later)
            .await?
    );
    assert!(
        !reruns
            .move_rerun(&first.run, asked, RerunState::Wanted, later)
            .await?
    );

    reruns.forget_rerun(&first.run).await?;
    reruns.forget_rerun(&first.run).await?;
    assert_eq!(reruns.rerun_of(&first.run).await?, None);
    let unknown = RunKey {
        run_id: 99,
        ..first.run.clone()
    };
    assert!(
        !reruns
            .move_rerun(&unknown, RerunState::Wanted, asked, later)
            .await?
    );
    assert_eq!(reruns.reruns().await?.len(), 1);
    Ok(())
}
