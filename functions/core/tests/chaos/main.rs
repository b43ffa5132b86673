//! The chaos suite: seeded random schedules of webhooks, handler runs, crashes and
//! provider faults over the webhook-to-reaper flow on the in-memory fakes, with the
//! invariants checked after every step and once the world has settled.
//!
//! Each schedule (see `schedule.rs`) draws a pool (max_runners 1–4, spot or not, the
//! queued check or not; in about a third of schedules `min_idle` 1–2 warm runners, which
//! the reaper reserves and the scaler creates from `warm` messages; in a quarter static
//! runners, which run one job after another) and 40–90 steps: GitHub queues and cancels
//! jobs; its webhooks are delivered out of order, twice, or lost — every attempt in the
//! App's deliveries log, which the reaper's redelivery sweep reads and from which it asks
//! for redeliveries (themselves delivered, or lost, later); some jobs' `queued` is refused
//! at every first delivery, and a tenth of the schedules are one such job alone, so that
//! only the sweep can bring them to ephemera; some `in_progress` and `completed` events
//! are never sent at all, so that only the reaper's rules can settle their jobs; the
//! scaler runs on SQS batches (redelivered when it fails or crashes, dead-lettered after
//! 4 receives — then redriven by the operator once faults are off, as the DLQ alarm
//! asks — sometimes delivered to two scalers at once, sometimes redelivered after
//! success); the reaper runs alone or at the same time as scalers; any run may crash
//! before its n-th external call; GitHub answers 5xx, rate limits or 403; EC2 has no
//! spot or on-demand capacity, throttles, launches fewer than asked, fails terminations;
//! the table, SSM and SQS fail calls; runner agents boot, and GitHub gives queued jobs to
//! ANY idle runner, warm ones included. Time is simulated.
//!
//! In a spot pool, EC2 reclaims a running job's instance now and then (`interrupt.rs`),
//! warning the reaper first or not: GitHub fails the job, and a re-run the reaper asks
//! for becomes a queued job of the run's next attempt.
//!
//! In about a third of the ephemeral schedules the pool keeps `stopped` instances: hosts
//! prepare and power off into `stopped` (or fail to, and stay up), jobs take them and
//! start them, with crashes drawn at the stopped pool's named calls (the take, the JIT
//! write, StartInstances, the refill's launch, ModifyInstanceAttribute and `prepare`
//! item, the reaper's reset to `terminate`), refused starts, failed shutdown changes and
//! lost stopped instances; no instance may be started for two jobs, and no stopped
//! instance may hold a JIT config but one a take is starting.
//!
//! Invariants (`invariants.rs`), read from the fakes' state: after every step, no job
//! bound to two runners and no queued job with two runners launched for it, no pool above
//! `max_runners` (slot counter, live records holding a slot, runners online on live
//! instances), the slot counter equal to the live records holding a slot, and no busy
//! runner's instance terminated (an interruption is EC2's doing, not ephemera's), at most
//! one re-run per workflow run and only of a job interrupted after a warning; with faults off the world must come to rest within four
//! simulated hours (no job, webhook or queue message left waiting), with no live
//! instance, GitHub runner, JIT config, live record or slot left but a warm pool's runners
//! (exactly `min_idle` of them, running, idle and online), every job ran exactly once (or
//! was cancelled while queued), and every job has a job item that says what GitHub says
//! of it (`completed`, never left `queued` or `in_progress`). So that this cannot pass
//! without the sweep at work, a run of many schedules must see jobs, lone ones included,
//! that reached ephemera only by a redelivery the sweep asked for.
//!
//! Rerun: `EPHEMERA_CHAOS_SEED=1234 cargo test -p ephemera-core --test chaos` runs seed
//! 1234 alone and prints its trace; `EPHEMERA_CHAOS_SCHEDULES=N` runs N schedules from
//! the first seed (default: 250 from seed 1), so `EPHEMERA_CHAOS_SEED=1000
//! EPHEMERA_CHAOS_SCHEDULES=1500` runs seeds 1000 to 2499; `make chaos-sweep SEEDS=N
//! FROM=M` runs a long sweep on an optimized build (50,000 seeds in under three minutes).
//! A failure prints its seed, the violated invariant, the steps that led there and the
//! world's state.
//!
//! To see the suite fail, apply a deliberate break from `tests/chaos/breaks/`, e.g.
//! `git apply functions/core/tests/chaos/breaks/skip-slot-reservation.patch` (or
//! `skip-busy-check`, `skip-redelivery`, `skip-job-settling`, `rerun-any-failed-job`,
//! `skip-take-condition`), run
//! the suite, and
//! `git apply -R` it.

mod describe;
mod gate;
mod github;
mod interrupt;
mod invariants;
mod invoke;
mod queue;
mod rng;
mod schedule;
mod world;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

const DEFAULT_SCHEDULES: u64 = 250;
/// Jobs brought to ephemera only by the redelivery sweep, at least, per schedule run
/// (about 0.8 in the first 250 seeds, 0.7 over 100,000), and lone such jobs (about 0.07).
const SWEEP_RECOVERIES_PER_SCHEDULE: f64 = 0.4;
const LONE_RECOVERIES_PER_SCHEDULE: f64 = 0.02;
/// Spot interruptions of a running job, and re-runs of interrupted jobs, at least, per
/// schedule run (see the summary line for what a run drew).
const INTERRUPTIONS_PER_SCHEDULE: f64 = 0.15;
const RERUNS_PER_SCHEDULE: f64 = 0.05;
/// Seeds the broken take's test may run through until one catches it.
const BREAK_SEEDS: u64 = 250;
/// Failures shown in full; the others are listed by seed.
const SHOWN: usize = 1;

/// Seed 179108: job 1's `queued` was dead-lettered after four batches that all crashed
/// before its job item was written, so no rule of the reaper could see it; the DLQ alarm
/// surfaces it and the operator's redrive brings it back.
#[test]
fn a_queued_message_dead_lettered_before_its_job_was_recorded_runs_after_the_redrive() {
    let stats = seed_passes(179_108);
    assert!(stats.dead_lettered > 0, "nothing was dead-lettered");
}

/// Seed 347853: a lone job cancelled while queued, every webhook of it refused, and the
/// deliveries list unreadable for 52 minutes: the sweep's first ask came late in the
/// event's hour and failed; its item still follows GitHub once the endpoint is back.
#[test]
fn a_lone_job_first_seen_failed_late_in_its_hour_still_gets_its_item() {
    let stats = seed_passes(347_853);
    assert!(stats.redeliveries_asked > 2, "{stats:?}");
}

/// Seeds 396028 and 480173: a lone job whose `queued` was refused while the deliveries
/// list could not be read for more than an hour; the first sweep that reads it finds it.
#[test]
fn a_lone_job_refused_while_the_deliveries_were_unreadable_for_an_hour_runs() {
    for seed in [396_028, 480_173] {
        let stats = seed_passes(seed);
        assert_eq!(stats.lone_jobs_recovered, 1, "seed {seed}: {stats:?}");
    }
}

/// The invariants can fail: with the table's take blind to its `status = stopped`
/// condition (the gate puts a taken record back to `stopped` before each take), two jobs
/// take one instance in some schedule of a stopped pool, and the suite says so.
#[test]
fn a_take_blind_to_its_stopped_condition_is_caught() {
    let caught = (1..=BREAK_SEEDS).find(|seed| {
        schedule::run_with(*seed, true)
            .is_err_and(|failure| failure.invariant.contains("started for two jobs"))
    });
    if std::env::var("EPHEMERA_CHAOS_COUNT_BREAKS").is_ok() {
        let failures: Vec<String> = (1..=BREAK_SEEDS)
            .filter_map(|seed| schedule::run_with(seed, true).err())
            .map(|failure| format!("seed {}: {}", failure.seed, failure.invariant))
            .collect();
        eprintln!(
            "{} of {BREAK_SEEDS} broken schedules failed:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
    assert!(
        caught.is_some(),
        "no schedule of seeds 1 to {BREAK_SEEDS} caught two jobs taking one stopped instance"
    );
}

fn seed_passes(seed: u64) -> world::Stats {
    match schedule::run(seed) {
        Ok(stats) => stats,
        Err(failure) => panic!(
            "seed {seed} violated an invariant at step {}: {}\n{}",
            failure.step,
            failure.invariant,
            failure.trace.join("\n")
        ),
    }
}

fn env_number(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    Some(
        text.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, not {text:?}")),
    )
}

#[test]
fn seeded_chaos_schedules_keep_every_invariant() {
    let seed = env_number("EPHEMERA_CHAOS_SEED");
    let count = env_number("EPHEMERA_CHAOS_SCHEDULES").unwrap_or(if seed.is_some() {
        1
    } else {
        DEFAULT_SCHEDULES
    });
    let first = seed.unwrap_or(1);
    let started = Instant::now();
    let mut failures = Vec::new();
    let mut totals = world::Stats::default();
    for seed in first..first + count {
        match catch_unwind(AssertUnwindSafe(|| schedule::run(seed))) {
            Ok(Ok(stats)) => add(&mut totals, &stats),
            Ok(Err(failure)) => failures.push(failure),
            Err(panic) => failures.push(schedule::Failure {
                seed,
                step: 0,
                invariant: format!("the schedule panicked: {}", panic_text(&panic)),
                trace: Vec::new(),
                state: String::new(),
            }),
        }
    }
    eprintln!(
        "chaos: {count} schedules from seed {first} in {:.1?}: {} failed; {totals:?}",
        started.elapsed(),
        failures.len()
    );
    if failures.is_empty() {
        check_sweep_recovered(count, &totals);
        check_interruptions_rerun(count, &totals);
        check_stopped_pools_exercised(count, &totals);
        return;
    }
    let mut report = String::new();
    for failure in failures.iter().take(SHOWN) {
        report.push_str(&format!(
            "\nseed {} violated an invariant at step {}: {}\nrerun: EPHEMERA_CHAOS_SEED={} cargo test -p ephemera-core --test chaos\n--- steps\n{}\n--- world\n{}\n",
            failure.seed,
            failure.step,
            failure.invariant,
            failure.seed,
            failure.trace.join("\n"),
            failure.state
        ));
    }
    for failure in failures.iter().skip(SHOWN) {
        report.push_str(&format!(
            "seed {} (step {}): {}\n",
            failure.seed, failure.step, failure.invariant
        ));
    }
    panic!(
        "{} of {count} chaos schedules failed:{report}",
        failures.len()
    );
}

/// A run of many schedules must have drawn jobs that only the redelivery sweep could
/// bring to ephemera, and seen the sweep bring them.
fn check_sweep_recovered(count: u64, totals: &world::Stats) {
    let least = (count as f64 * SWEEP_RECOVERIES_PER_SCHEDULE) as u64;
    assert!(
        totals.recovered_by_sweep >= least,
        "{count} schedules saw {} jobs reach ephemera only by a redelivery the sweep asked for, fewer than {least}",
        totals.recovered_by_sweep
    );
    let least = (count as f64 * LONE_RECOVERIES_PER_SCHEDULE) as u64;
    assert!(
        totals.lone_jobs_recovered >= least,
        "{count} schedules saw {} lone jobs reach ephemera only by a redelivery the sweep asked for, fewer than {least}",
        totals.lone_jobs_recovered
    );
}

/// A run of many schedules must have drawn spot interruptions, warned of and not, and
/// seen interrupted jobs re-run.
fn check_interruptions_rerun(count: u64, totals: &world::Stats) {
    let least = (count as f64 * INTERRUPTIONS_PER_SCHEDULE) as u64;
    assert!(
        totals.interrupted >= least && totals.interruptions_warned < totals.interrupted,
        "{count} schedules drew {} spot interruptions ({} warned of), fewer than {least} or all warned",
        totals.interrupted,
        totals.interruptions_warned
    );
    let least = (count as f64 * RERUNS_PER_SCHEDULE) as u64;
    assert!(
        totals.reruns >= least,
        "{count} schedules saw {} interrupted jobs re-run, fewer than {least}",
        totals.reruns
    );
}

/// A run of many schedules must have drawn stopped pools, and in them seen hosts prepare
/// and stop, jobs take and start them, refused starts, and each of the reaper's rules on
/// stopped pool records at work (each at least `rate` per schedule run).
fn check_stopped_pools_exercised(count: u64, totals: &world::Stats) {
    let seen = [
        ("stopped pools", totals.stopped_pools, 0.1),
        ("hosts prepared and stopped", totals.hosts_prepared, 0.4),
        (
            "`instance_stopped` moves",
            totals.rule_instance_stopped,
            0.4,
        ),
        (
            "stopped instances started for their job",
            totals.starts,
            0.2,
        ),
        (
            "crashes drawn at the stopped pool's named calls",
            totals.named_crashes,
            0.4,
        ),
        (
            "`prepare_timeout` replacements",
            totals.rule_prepare_timeout,
            0.02,
        ),
        (
            "`stopped_stale` replacements",
            totals.rule_stopped_stale,
            0.004,
        ),
        (
            "`instance_gone` of stopped pool records",
            totals.rule_instance_gone,
            0.008,
        ),
        ("takes fallen back to a launch", totals.takes_failed, 0.008),
        ("StartInstances refused", totals.starts_refused, 0.004),
    ];
    for (what, seen, rate) in seen {
        let least = (count as f64 * rate) as u64;
        assert!(
            seen >= least,
            "{count} schedules saw {seen} {what}, fewer than {least}"
        );
    }
}

fn add(totals: &mut world::Stats, stats: &world::Stats) {
    totals.jobs += stats.jobs;
    totals.ran += stats.ran;
    totals.cancelled += stats.cancelled;
    totals.taken_by_other_runner += stats.taken_by_other_runner;
    totals.taken_by_warm_runner += stats.taken_by_warm_runner;
    totals.warm_pools += stats.warm_pools;
    totals.static_pools += stats.static_pools;
    totals.deliveries_lost += stats.deliveries_lost;
    totals.deliveries_duplicated += stats.deliveries_duplicated;
    totals.events_unsent += stats.events_unsent;
    totals.redeliveries_asked += stats.redeliveries_asked;
    totals.redeliveries_delivered += stats.redeliveries_delivered;
    totals.queued_refused += stats.queued_refused;
    totals.recovered_by_sweep += stats.recovered_by_sweep;
    totals.schedules_recovered_by_sweep += stats.schedules_recovered_by_sweep;
    totals.lone_jobs += stats.lone_jobs;
    totals.lone_jobs_recovered += stats.lone_jobs_recovered;
    totals.crashes += stats.crashes;
    totals.faults += stats.faults;
    totals.concurrent_runs += stats.concurrent_runs;
    totals.dead_lettered += stats.dead_lettered;
    totals.interrupted += stats.interrupted;
    totals.interruptions_warned += stats.interruptions_warned;
    totals.reruns += stats.reruns;
    totals.stopped_pools += stats.stopped_pools;
    totals.hosts_prepared += stats.hosts_prepared;
    totals.prepares_failed += stats.prepares_failed;
    totals.starts += stats.starts;
    totals.starts_repeated += stats.starts_repeated;
    totals.starts_refused += stats.starts_refused;
    totals.stopped_lost += stats.stopped_lost;
    totals.named_crashes += stats.named_crashes;
    totals.rule_instance_stopped += stats.rule_instance_stopped;
    totals.rule_prepare_timeout += stats.rule_prepare_timeout;
    totals.rule_stopped_stale += stats.rule_stopped_stale;
    totals.rule_instance_gone += stats.rule_instance_gone;
    totals.takes_failed += stats.takes_failed;
    totals.takes_released += stats.takes_released;
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "(no message)".to_owned())
}
