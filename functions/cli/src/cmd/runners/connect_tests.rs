//! `runners connect`: the command it builds, when it refuses, and what it finds on PATH.

use super::connect::*;
use crate::exit::REFUSED;
use ephemera_core::config::Config;
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::model::RunnerRecord;
use std::ffi::OsString;
use time::OffsetDateTime;

fn config() -> Config {
    let text = "deployment: eph\ngithub: { app_id: 1 }\npools:\n  \
                - { name: shell, labels: [shell], max_runners: 2, instance_types: [t3.micro], \
                ami: ami-1, ssm_access: true }\n  \
                - { name: plain, labels: [plain], max_runners: 2, instance_types: [t3.micro], \
                ami: ami-1 }\n";
    Config::parse("t.yaml", text).expect("valid")
}

fn runner(pool: &str, status: InstanceStatus, instance: Option<&str>) -> RunnerRecord {
    let mut record = RunnerRecord::new(
        format!("eph-{pool}-abc"),
        pool.to_owned(),
        OffsetDateTime::UNIX_EPOCH,
    );
    record.status = status;
    record.instance_id = instance.map(str::to_owned);
    record
}

#[test]
fn the_command_names_the_instance_and_the_deployments_region_and_profile() {
    let target = SessionTarget {
        instance_id: "i-0abc".into(),
        region: Some("eu-west-1".into()),
        profile: Some("ops".into()),
        endpoint_url: None,
    };
    assert_eq!(
        target.aws_args(),
        [
            "ssm",
            "start-session",
            "--target",
            "i-0abc",
            "--region",
            "eu-west-1",
            "--profile",
            "ops"
        ]
    );
    assert_eq!(
        target.shell_line(),
        "aws ssm start-session --target i-0abc --region eu-west-1 --profile ops"
    );
}

#[test]
fn without_a_region_or_profile_the_command_leaves_them_to_the_aws_cli() {
    let target = SessionTarget {
        instance_id: "i-0abc".into(),
        ..SessionTarget::default()
    };
    assert_eq!(target.shell_line(), "aws ssm start-session --target i-0abc");
}

#[test]
fn a_value_the_shell_would_split_is_quoted() {
    let target = SessionTarget {
        instance_id: "i-0abc".into(),
        profile: Some("my profile's".into()),
        ..SessionTarget::default()
    };
    assert_eq!(
        target.shell_line(),
        r"aws ssm start-session --target i-0abc --profile 'my profile'\''s'"
    );
}

#[test]
fn a_runner_of_a_pool_with_ssm_access_and_an_instance_can_be_connected_to() {
    let config = config();
    for status in [
        InstanceStatus::Running,
        InstanceStatus::Error,
        InstanceStatus::PendingDelete,
    ] {
        let record = runner("shell", status, Some("i-0abc"));
        let instance = session_instance(&record, &config).expect("connectable");
        assert_eq!(instance, "i-0abc", "{status:?}");
    }
}

#[test]
fn a_pool_without_ssm_access_is_refused_with_how_to_turn_it_on() {
    let failure = session_instance(
        &runner("plain", InstanceStatus::Running, Some("i-1")),
        &config(),
    )
    .expect_err("no ssm_access");
    assert_eq!(failure.code, REFUSED);
    let message = failure.error.to_string();
    assert!(
        message.contains("pool plain has no ssm_access"),
        "{message}"
    );
    assert!(message.contains("ssm_access: true"), "{message}");
}

#[test]
fn a_runner_without_an_instance_or_whose_instance_is_gone_is_refused() {
    let config = config();
    let waiting = runner("shell", InstanceStatus::Creating, None);
    let failure = session_instance(&waiting, &config).expect_err("no instance yet");
    assert_eq!(failure.code, REFUSED);
    assert!(failure.error.to_string().contains("no instance yet"));
    for status in [InstanceStatus::Deleting, InstanceStatus::Deleted] {
        let gone = runner("shell", status, Some("i-0abc"));
        let failure = session_instance(&gone, &config).expect_err("gone");
        assert_eq!(failure.code, REFUSED, "{status:?}");
        assert!(failure.error.to_string().contains(status.as_str()));
    }
    let orphan = runner("removed", InstanceStatus::Running, Some("i-0abc"));
    let failure = session_instance(&orphan, &config).expect_err("unknown pool");
    assert!(failure.error.to_string().contains("no longer has"));
}

#[cfg(unix)]
#[test]
fn only_executables_on_path_count() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("ephemera-connect-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let write = |name: &str, mode: u32| {
        let path = dir.join(name);
        std::fs::write(&path, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    };
    write(AWS_CLI, 0o755);
    write(SESSION_PLUGIN, 0o644);
    let path = std::env::join_paths([&dir]).expect("PATH");
    let both = [AWS_CLI, SESSION_PLUGIN];
    assert_eq!(missing_programs(Some(&path), &both), [SESSION_PLUGIN]);
    write(SESSION_PLUGIN, 0o755);
    assert!(missing_programs(Some(&path), &both).is_empty());
    assert_eq!(missing_programs(None, &both), both);
    let elsewhere = OsString::from("/nonexistent-ephemera-dir");
    assert_eq!(missing_programs(Some(&elsewhere), &both), both);
    std::fs::remove_dir_all(&dir).expect("clean up");
}
