//! Tests of [`SeveralApps`]: registrations spread over the Apps whose pace has room, an
//! App that GitHub rate-limits set aside while the others carry on, and every other
//! call spread as well.

use super::*;
use crate::memory::{FakeForge, ForgeFailure};

const A: u64 = 42;
const B: u64 = 43;

fn scope() -> RunnerScope {
    RunnerScope {
        installation_id: Some(1),
        owner: "acme".into(),
        repo: None,
    }
}

fn request(n: usize) -> JitRequest {
    JitRequest {
        name: format!("eph-linux-{n}"),
        labels: vec!["linux".into()],
        runner_group: "Default".into(),
        work_folder: "_work".into(),
    }
}

/// Two Apps, each allowed `burst` registrations at once and one a minute after.
fn two_apps(burst: f64) -> (Arc<FakeForge>, Arc<FakeForge>, SeveralApps) {
    let (a, b) = (Arc::new(FakeForge::new()), Arc::new(FakeForge::new()));
    let apps: Vec<(u64, Arc<dyn Forge>)> = vec![(A, a.clone()), (B, b.clone())];
    let several = SeveralApps::new(apps, |_| Arc::new(RegistrationPace::new(1.0 / 60.0, burst)));
    (a, b, several)
}

async fn register(several: &SeveralApps, count: usize) -> Vec<Result<JitConfig, ForgeError>> {
    let mut answers = Vec::new();
    for n in 0..count {
        answers.push(several.generate_jit_config(&scope(), &request(n)).await);
    }
    answers
}

#[tokio::test(start_paused = true)]
async fn registrations_go_to_every_app_in_turn() {
    let (a, b, several) = two_apps(100.0);
    let answers = register(&several, 10).await;
    assert!(answers.iter().all(Result::is_ok));
    assert_eq!(a.calls().generate_jit_config, 5);
    assert_eq!(b.calls().generate_jit_config, 5);
    assert_eq!(several.app_ids(), vec![A, B]);
}

#[tokio::test(start_paused = true)]
async fn an_app_whose_pace_has_no_room_is_passed_over() {
    let (a, b, several) = two_apps(5.0);
    // App A's pace spent by registrations elsewhere in this process.
    for _ in 0..5 {
        several.lanes[0].registrations.take(Duration::ZERO).unwrap();
    }
    let answers = register(&several, 5).await;
    assert!(answers.iter().all(Result::is_ok));
    assert_eq!(a.calls().generate_jit_config, 0);
    assert_eq!(b.calls().generate_jit_config, 5);
}

#[tokio::test(start_paused = true)]
async fn a_rate_limited_app_is_set_aside_until_its_wait_is_over_and_the_other_carries_on() {
    let (a, b, several) = two_apps(100.0);
    a.fail_next_with(1, ForgeFailure::Throttled);
    let answers = register(&several, 6).await;
    assert!(
        answers.iter().all(Result::is_ok),
        "the refused one went to B"
    );
    assert_eq!(
        a.calls().generate_jit_config,
        1,
        "one refused call, then set aside"
    );
    assert!(a.runners().is_empty());
    assert_eq!(b.runners().len(), 6);
    // GitHub's wait (60 s for the fake) over: A registers again.
    tokio::time::advance(Duration::from_secs(61)).await;
    register(&several, 4).await;
    assert_eq!(a.runners().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn with_every_app_out_of_room_a_registration_is_throttled_until_the_soonest() {
    let (a, b, several) = two_apps(2.0);
    let answers = register(&several, 5).await;
    assert_eq!(answers.iter().filter(|r| r.is_ok()).count(), 4);
    match &answers[4] {
        Err(ForgeError::Throttled {
            retry_after: Some(wait),
        }) => assert!(*wait > DEFAULT_MAX_WAIT && *wait <= Duration::from_secs(60)),
        other => panic!("expected a throttle, got {other:?}"),
    }
    assert_eq!(a.calls().generate_jit_config, 2);
    assert_eq!(b.calls().generate_jit_config, 2);
}

#[tokio::test(start_paused = true)]
async fn with_every_app_rate_limited_the_registration_is_throttled() {
    let (a, b, several) = two_apps(100.0);
    a.fail_next_with(1, ForgeFailure::Throttled);
    b.fail_next_with(1, ForgeFailure::Throttled);
    let answer = several.generate_jit_config(&scope(), &request(0)).await;
    assert!(matches!(
        answer,
        Err(ForgeError::Throttled {
            retry_after: Some(_)
        })
    ));
    assert_eq!(
        a.calls().generate_jit_config + b.calls().generate_jit_config,
        2
    );
}

#[tokio::test(start_paused = true)]
async fn other_calls_go_to_every_app_and_skip_one_rate_limited() {
    let (a, b, several) = two_apps(100.0);
    for _ in 0..4 {
        several.list_runners(&scope()).await.unwrap();
    }
    assert_eq!((a.calls().list_runners, b.calls().list_runners), (2, 2));
    // A's next call is refused: B answers it, and A is skipped for GitHub's wait.
    a.fail_next_with(1, ForgeFailure::Throttled);
    for job in 0..4 {
        several
            .job_state(Some(1), "acme", "app", job)
            .await
            .unwrap();
    }
    assert_eq!(a.calls().job_state, 1);
    assert_eq!(b.calls().job_state, 4);
    // A's registrations are not its core bucket: they still go to it.
    register(&several, 2).await;
    assert_eq!(a.calls().generate_jit_config, 1);
}

#[tokio::test(start_paused = true)]
async fn an_answer_other_than_a_rate_limit_is_the_answer() {
    let (a, b, several) = two_apps(100.0);
    a.fail_next_with(1, ForgeFailure::Rejected);
    let first = several.generate_jit_config(&scope(), &request(0)).await;
    assert!(matches!(first, Err(ForgeError::Rejected { .. })));
    assert_eq!(
        b.calls().generate_jit_config,
        0,
        "a refusal is not retried elsewhere"
    );
    assert_eq!(a.calls().generate_jit_config, 1);
}
