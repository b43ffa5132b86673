//! The re-run's decisions, as pure functions of its entry, its run and the time.

use super::*;
use time::macros::datetime;

const NOW: OffsetDateTime = datetime!(2026-01-01 12:00 UTC);

fn wanted(minutes_ago: i64) -> Rerun {
    Rerun {
        run: RunKey {
            owner: "o".into(),
            repo: "r".into(),
            run_id: 9,
        },
        job_id: 1,
        run_attempt: 1,
        installation_id: None,
        pool: "linux".into(),
        runner: "eph-linux-a".into(),
        wanted_at: NOW - time::Duration::minutes(minutes_ago),
        state: RerunState::Wanted,
        next_check_at: NOW - time::Duration::minutes(minutes_ago),
    }
}

#[test]
fn a_wanted_rerun_is_read_when_due_and_given_up_after_the_patience() {
    assert_eq!(next_step(&wanted(1), NOW), Step::ReadRun);
    let not_due = Rerun {
        next_check_at: NOW + time::Duration::seconds(1),
        ..wanted(1)
    };
    assert_eq!(next_step(&not_due, NOW), Step::Wait);
    assert_eq!(next_step(&wanted(24 * 60), NOW), Step::GiveUp);
}

#[test]
fn a_done_rerun_is_kept_a_day_then_forgotten() {
    for done in [RerunState::Asked, RerunState::GaveUp] {
        let recent = Rerun {
            state: done(NOW - time::Duration::hours(23)),
            ..wanted(2000)
        };
        assert_eq!(next_step(&recent, NOW), Step::Wait);
        let old = Rerun {
            state: done(NOW - time::Duration::hours(24)),
            ..wanted(2000)
        };
        assert_eq!(next_step(&old, NOW), Step::Forget);
    }
}

#[test]
fn only_a_completed_run_at_the_failed_attempt_is_asked() {
    let run = |completed, run_attempt| RunState {
        completed,
        run_attempt,
    };
    assert_eq!(verdict(1, Some(&run(true, 1))), RunVerdict::Ask);
    assert_eq!(verdict(1, Some(&run(false, 1))), RunVerdict::Wait);
    assert!(matches!(
        verdict(1, Some(&run(true, 2))),
        RunVerdict::Never(_)
    ));
    assert!(matches!(verdict(1, None), RunVerdict::Never(_)));
}
