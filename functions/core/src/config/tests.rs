//! Tests of configuration parsing and validation: every error names its field and line.

use super::*;

const GOOD: &str = r#"
deployment: eph
github:
  app_id: 42
pools:
  - name: linux-x64
    labels: [self-hosted, linux, x64]
    max_runners: 5
    instance_types: [m7i.large]
    launch_template: ephemera-runner
    bootstrap_timeout: 15m
"#;

#[test]
fn good_file_parses_with_defaults() {
    let config = Config::parse("good.yaml", GOOD).expect("valid");
    let pool = config.pool("linux-x64").expect("pool");
    assert_eq!(pool.bootstrap_timeout, Duration::from_secs(900));
    assert_eq!(pool.idle_timeout, Duration::from_secs(600));
    assert!(pool.ephemeral);
    assert_eq!(config.github.api_url, "https://api.github.com");
    assert_eq!(config.github.scope, Scope::Org);
    assert_eq!(config.reaper.deleted_ttl, Duration::from_secs(7 * 86400));
}

fn error_of(text: &str) -> ConfigError {
    Config::parse("bad.yaml", text).expect_err("must be rejected")
}

#[test]
fn wrong_type_names_field_and_line() {
    let err = error_of(&GOOD.replace("max_runners: 5", "max_runners: many"));
    assert_eq!(err.field, "pools[0].max_runners");
    assert_eq!(err.line, Some(8));
    assert!(
        err.to_string()
            .starts_with("bad.yaml:8: pools[0].max_runners: "),
        "{err}"
    );
}

#[test]
fn unknown_key_is_rejected() {
    let err = error_of(&GOOD.replace("max_runners: 5", "max_runners: 5\n    max_runner: 6"));
    assert_eq!(err.field, "pools[0].max_runner");
    assert!(err.message.contains("max_runner"), "{err}");
}

#[test]
fn bad_duration_names_field() {
    let err = error_of(&GOOD.replace("15m", "15 minutes"));
    assert_eq!(err.field, "pools[0].bootstrap_timeout");
    assert!(err.message.contains("unknown unit"), "{err}");
}

#[test]
fn min_idle_above_max_is_rejected() {
    let err = error_of(&GOOD.replace("max_runners: 5", "max_runners: 5\n    min_idle: 6"));
    assert_eq!(err.field, "pools[0].min_idle");
}

#[test]
fn missing_image_is_rejected() {
    let err = error_of(&GOOD.replace("    launch_template: ephemera-runner\n", ""));
    assert_eq!(err.field, "pools[0].launch_template");
}

#[test]
fn duplicate_pool_names_are_rejected() {
    let pool = GOOD.split_once("pools:\n").expect("pools").1;
    let err = error_of(&format!("{GOOD}{pool}"));
    assert_eq!(err.field, "pools[1].name");
}

#[test]
fn durations_parse() {
    assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
    assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(604800)));
    assert!(parse_duration("7").is_err());
    assert!(parse_duration("m").is_err());
}

#[test]
fn errors_of_meaning_name_their_line() {
    let err = error_of(&GOOD.replace("max_runners: 5", "max_runners: 5\n    min_idle: 6"));
    assert_eq!(err.line, Some(9));
    assert!(
        err.to_string()
            .starts_with("bad.yaml:9: pools[0].min_idle: 6 is above"),
        "{err}"
    );
    let pool = GOOD.split_once("pools:\n").expect("pools").1;
    let err = error_of(&format!("{GOOD}{pool}"));
    assert_eq!(err.line, Some(12), "{err}");
}

#[test]
fn unknown_key_and_bad_duration_have_a_line() {
    let err = error_of(&GOOD.replace("max_runners: 5", "max_runners: 5\n    max_runner: 6"));
    assert_eq!(err.line, Some(9), "{err}");
    let err = error_of(&GOOD.replace("15m", "15 minutes"));
    assert_eq!(err.line, Some(11), "{err}");
    assert!(
        err.message.starts_with("\"15 minutes\" has unknown unit"),
        "{err}"
    );
}

const TWO_POOLS: &str = r#"
deployment: eph
github:
  app_id: 42
pools:
  - name: FIRST
    labels: [LABELS_A]
    max_runners: 5
    instance_types: [m7i.large]
    launch_template: ephemera-runner
  - name: SECOND
    labels: [LABELS_B]
    max_runners: 5
    instance_types: [m7i.large]
    launch_template: ephemera-runner
"#;

fn two_pools(a: &str, b: &str) -> String {
    TWO_POOLS
        .replace("FIRST", "general")
        .replace("SECOND", "special")
        .replace("LABELS_A", a)
        .replace("LABELS_B", b)
}

#[test]
fn a_pool_behind_an_earlier_superset_is_unreachable() {
    let text = two_pools("linux, x64, gpu", "Linux, self-hosted, X64");
    let errors = Config::check("bad.yaml", &text).expect_err("shadowed");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].field, "pools[1].labels");
    assert_eq!(errors[0].line, Some(12));
    assert!(
        errors[0].message.contains("can never get a job"),
        "{errors:?}"
    );
    // The functions still run with it: one unreachable pool must not stop the others.
    assert!(Config::parse("bad.yaml", &text).is_ok());
}

#[test]
fn a_general_pool_before_a_specific_one_is_fine() {
    let text = two_pools("linux, x64", "linux, x64, gpu");
    assert!(Config::check("good.yaml", &text).is_ok());
    let text = two_pools("linux, x64", "linux, arm64");
    assert!(Config::check("good.yaml", &text).is_ok());
}

#[test]
fn every_problem_of_meaning_is_reported_at_once() {
    let text = two_pools("linux", "linux")
        .replace("special", "general")
        .replace("max_runners: 5\n    instance_types: [m7i.large]\n    launch_template: ephemera-runner\n  -", "max_runners: 0\n    instance_types: [m7i.large]\n    launch_template: ephemera-runner\n  -");
    let errors = Config::check("bad.yaml", &text).expect_err("bad");
    let fields: Vec<(&str, Option<usize>)> =
        errors.iter().map(|e| (e.field.as_str(), e.line)).collect();
    assert_eq!(
        fields,
        [
            ("pools[0].max_runners", Some(8)),
            ("pools[1].name", Some(11)),
            ("pools[1].labels", Some(12)),
        ]
    );
}

#[test]
fn min_idle_without_warm_owner_is_loaded_but_fails_validation() {
    let text = GOOD.replace("max_runners: 5", "max_runners: 5\n    min_idle: 2");
    let config = Config::parse("warm.yaml", &text).expect("the functions load it");
    let pool = config.pool("linux-x64").expect("pool");
    assert_eq!(
        pool.warm_scope(Scope::Org),
        None,
        "so no warm runner launches"
    );
    let errors = Config::check("warm.yaml", &text).expect_err("validate refuses it");
    assert_eq!(errors[0].field, "pools[0].warm_owner");
    assert_eq!(errors[0].line, Some(6), "the pool's line: {}", errors[0]);

    let owned = text.replace("min_idle: 2", "min_idle: 2\n    warm_owner: acme");
    let config = Config::check("warm.yaml", &owned).expect("valid");
    let pool = config.pool("linux-x64").expect("pool");
    assert_eq!(pool.warm_scope(Scope::Org), Some(("acme".to_owned(), None)));
    let per_repo = owned.replace("app_id: 42", "app_id: 42\n  scope: repo");
    let errors = Config::check("warm.yaml", &per_repo).expect_err("needs a repository");
    assert_eq!(errors[0].field, "pools[0].warm_repo");
    let with_repo = per_repo.replace("warm_owner: acme", "warm_owner: acme\n    warm_repo: app");
    let config = Config::check("warm.yaml", &with_repo).expect("valid");
    assert_eq!(
        config
            .pool("linux-x64")
            .and_then(|p| p.warm_scope(Scope::Repo)),
        Some(("acme".to_owned(), Some("app".to_owned())))
    );
}

#[test]
fn durations_and_numbers_out_of_range_name_their_field() {
    let text = GOOD.replace(
        "bootstrap_timeout: 15m",
        "bootstrap_timeout: 0s\n    idle_timeout: 31d",
    ) + "reaper:\n  deleted_ttl: 3000000d\n  stuck_deleting: 2d\n  orphan_grace: 30s\n";
    let text = text
        .replace("max_runners: 5", "max_runners: 4000000000")
        .replace("app_id: 42", "app_id: 0");
    let errors = Config::check("big.yaml", &text).expect_err("out of range");
    let found: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        found,
        [
            "big.yaml:4: github.app_id: must be the App's id, above 0",
            "big.yaml:14: reaper.deleted_ttl: must be between 1s and 3650d, not 3000000d",
            "big.yaml:15: reaper.stuck_deleting: must be between 1s and 1d, not 2d",
            "big.yaml:16: reaper.orphan_grace: must be between 2m and 1d, not 30s",
            "big.yaml:8: pools[0].max_runners: must be at most 100000, not 4000000000",
            "big.yaml:11: pools[0].bootstrap_timeout: must be between 1s and 1d, not 0s",
            "big.yaml:12: pools[0].idle_timeout: must be between 1s and 30d, not 31d",
        ]
    );
}

#[test]
fn a_duration_too_long_for_any_clock_is_an_error_not_a_panic() {
    let err = error_of(&GOOD.replace("15m", "300000000000000d"));
    assert_eq!(err.field, "pools[0].bootstrap_timeout");
    assert_eq!(err.line, Some(11), "{err}");
    assert!(err.message.contains("far too long"), "{err}");
}

#[test]
fn a_tab_in_the_indentation_names_its_line() {
    let err = error_of(&GOOD.replace("    max_runners: 5", "\tmax_runners: 5"));
    assert_eq!(err.line, Some(8), "{err}");
    assert!(!err.field.contains('?'), "{err}");
    assert!(err.message.contains("tab"), "{err}");
}

#[test]
fn check_reports_every_unknown_key_and_type_error_but_not_their_consequences() {
    let text = GOOD
        .replace("app_id: 42", "app_id: 42\n  colour: red")
        .replace("max_runners: 5", "max_runners: [5]")
        .replace(
            "bootstrap_timeout: 15m",
            "bootstrap_timeout: 15 minutes\n    spot: yes please",
        );
    let errors = Config::check("bad.yaml", &text).expect_err("four problems");
    let found: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        found,
        [
            "bad.yaml:5: github.colour: unknown field `colour`, expected one of `app_id`, \
             `api_url`, `scope`, `more_apps`",
            "bad.yaml:9: pools[0].max_runners: invalid type: list, expected an integer of 0 or more",
            "bad.yaml:12: pools[0].bootstrap_timeout: \"15 minutes\" has unknown unit \" minutes\" \
             (use s, m, h or d)",
            "bad.yaml:13: pools[0].spot: invalid type: string \"yes please\", expected a boolean",
        ]
    );
    // What the functions load stops at the first.
    assert_eq!(error_of(&text).field, "github.colour");
}

#[test]
fn a_pool_without_stopped_keeps_none_and_no_schedule() {
    let config = Config::parse("good.yaml", GOOD).expect("valid");
    let pool = config.pool("linux-x64").expect("pool");
    assert_eq!(pool.stopped, 0);
    assert_eq!(pool.stopped_schedule, None);
    assert_eq!(pool.min_idle_schedule, None);
    assert_eq!(pool.stopped_max_age, Duration::from_secs(7 * 86400));
}

#[test]
fn a_stopped_pool_with_schedules_parses() {
    let text = GOOD.replace(
        "max_runners: 5",
        "max_runners: 5\n    warm_owner: acme\n    stopped: 2\n    stopped_max_age: 3d\n    stopped_schedule: \
         { days: [mon, tue, wed, thu, fri], from: \"08:00\", to: \"18:00\", utc_offset: \"+01:00\" }\n    \
         min_idle_schedule: { days: [sat], from: \"10:00\", to: \"12:00\" }",
    );
    let config = Config::check("good.yaml", &text).expect("valid");
    let pool = config.pool("linux-x64").expect("pool");
    assert_eq!(pool.stopped, 2);
    assert_eq!(pool.stopped_max_age, Duration::from_secs(3 * 86400));
    let schedule = pool.stopped_schedule.as_ref().expect("a schedule");
    assert_eq!(schedule.utc_offset.as_deref(), Some("+01:00"));
    assert!(pool.min_idle_schedule.is_some());
}

#[test]
fn stopped_without_warm_owner_is_loaded_but_fails_validation() {
    let text = GOOD.replace("max_runners: 5", "max_runners: 5\n    stopped: 2");
    let config = Config::parse("stopped.yaml", &text).expect("the functions load it");
    let pool = config.pool("linux-x64").expect("pool");
    assert_eq!(pool.warm_scope(Scope::Org), None, "so none is prepared");
    let errors = Config::check("stopped.yaml", &text).expect_err("validate refuses it");
    assert_eq!(errors[0].field, "pools[0].warm_owner");
    assert!(errors[0].message.contains("stopped"), "{}", errors[0]);
    let owned = text.replace("stopped: 2", "stopped: 2\n    warm_owner: acme");
    Config::check("stopped.yaml", &owned).expect("valid");
}

#[test]
fn stopped_and_min_idle_above_max_runners_is_rejected() {
    let text = GOOD.replace(
        "max_runners: 5",
        "max_runners: 5\n    stopped: 4\n    min_idle: 2\n    warm_owner: acme",
    );
    let err = error_of(&text);
    assert_eq!(err.field, "pools[0].stopped");
    assert_eq!(err.line, Some(9), "{err}");
    assert!(err.message.contains("above max_runners"), "{err}");
}

#[test]
fn a_bad_schedule_names_each_field_and_line() {
    let text = GOOD.replace(
        "max_runners: 5",
        "max_runners: 5\n    stopped: 1\n    stopped_schedule:\n      days: [monday]\n      \
         from: \"8am\"\n      to: \"18:00\"\n      utc_offset: Europe/Berlin\n    warm_owner: acme",
    );
    let errors = Config::check("bad.yaml", &text).expect_err("must be rejected");
    let fields: Vec<_> = errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "pools[0].stopped_schedule.days",
            "pools[0].stopped_schedule.from",
            "pools[0].stopped_schedule.utc_offset",
        ]
    );
    assert_eq!(errors[1].line, Some(12), "{}", errors[1]);
}

#[test]
fn stopped_max_age_out_of_range_is_rejected() {
    let text = GOOD.replace("max_runners: 5", "max_runners: 5\n    stopped_max_age: 90d");
    assert_eq!(error_of(&text).field, "pools[0].stopped_max_age");
}
