//! The configuration parser and validator: any text gives a config or errors that name
//! a place, never a panic; and a config that passes has durations and numbers that
//! cannot overflow the timestamps and counters the functions compute from them.

use super::{corpus, mutated, settings};
use ephemera_core::config::{ranges, Config};
use ephemera_core::OffsetDateTime;
use proptest::prelude::*;

/// Checks one text the way `ephemera config validate` and the functions do.
fn check(text: &str) {
    let lines = text.lines().count() + 1;
    let loaded = Config::parse("fuzz.yaml", text);
    match Config::check("fuzz.yaml", text) {
        Ok(config) => {
            assert!(loaded.is_ok(), "validate accepts what the functions refuse");
            usable(&config);
        }
        Err(errors) => {
            assert!(!errors.is_empty());
            for error in &errors {
                assert!(!error.message.is_empty(), "{error}");
                assert!(!error.field.contains('?'), "an unplaced field: {error}");
                assert!(
                    error.line.is_none_or(|l| (1..=lines).contains(&l)),
                    "{error}"
                );
            }
        }
    }
    if let Ok(config) = loaded {
        usable(&config);
    }
}

/// What the reaper and scaler compute from an accepted config does not overflow.
fn usable(config: &Config) {
    let far = OffsetDateTime::from_unix_timestamp(4_102_444_800).expect("2100-01-01");
    for duration in [config.reaper.deleted_ttl, config.reaper.stuck_deleting] {
        assert!(far
            .checked_add(duration.try_into().expect("fits"))
            .is_some());
    }
    for pool in &config.pools {
        assert!(pool.max_runners >= 1 && u64::from(pool.max_runners) <= *ranges::MAX_RUNNERS.end());
        assert!(pool.min_idle <= pool.max_runners);
        for duration in [pool.bootstrap_timeout, pool.idle_timeout] {
            assert!(far
                .checked_add(duration.try_into().expect("fits"))
                .is_some());
        }
    }
}

#[test]
fn every_corpus_file_is_checked_without_panicking() {
    for (name, bytes) in corpus("config") {
        let text = String::from_utf8(bytes).unwrap_or_else(|_| panic!("{name}: not UTF-8"));
        check(&text);
    }
}

/// A duration as an operator might mistype it.
fn duration_text() -> impl Strategy<Value = String> {
    prop_oneof![
        (
            any::<u64>(),
            prop::sample::select(vec!["s", "m", "h", "d", "", "x", " d"])
        )
            .prop_map(|(n, unit)| format!("{n}{unit}")),
        (
            0u64..100_000,
            prop::sample::select(vec!["s", "m", "h", "d"])
        )
            .prop_map(|(n, unit)| format!("{n}{unit}")),
        "[ -~]{0,12}",
    ]
}

/// A number as an operator might mistype it.
fn number_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<u64>().prop_map(|n| n.to_string()),
        (0u64..200_000).prop_map(|n| n.to_string()),
        "-?[0-9]{1,25}",
        Just("1.5".to_owned()),
    ]
}

proptest! {
    #![proptest_config(settings("tests/fuzz/regressions/config.txt"))]

    #[test]
    fn any_text_is_checked_without_panicking(text in "(?s).{0,400}") {
        check(&text);
    }

    #[test]
    fn mutated_corpus_files_are_checked_without_panicking(bytes in mutated("config")) {
        check(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn any_duration_or_number_is_accepted_in_range_or_refused_by_name(
        bootstrap in duration_text(),
        idle in duration_text(),
        ttl in duration_text(),
        stuck in duration_text(),
        max in number_text(),
        min in number_text(),
        app_id in number_text(),
    ) {
        let text = format!(
            "deployment: eph\ngithub:\n  app_id: {app_id}\npools:\n  - name: p\n    labels: [linux]\n    \
             max_runners: {max}\n    min_idle: {min}\n    warm_owner: acme\n    instance_types: [t3.micro]\n    \
             ami: ami-1\n    bootstrap_timeout: {bootstrap}\n    idle_timeout: {idle}\nreaper:\n  \
             deleted_ttl: {ttl}\n  stuck_deleting: {stuck}\n"
        );
        check(&text);
        if let Err(errors) = Config::check("fuzz.yaml", &text) {
            for error in errors {
                prop_assert!(error.line.is_some(), "{}", error);
                prop_assert!(!error.field.is_empty(), "{}", error);
            }
        }
    }
}
