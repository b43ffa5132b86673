//! Errors that say what to do next: GitHub's 404 for an installation names the App and
//! the force-delete that does not need GitHub; AWS errors name service, operation,
//! code and message once; a missing table is named, and missing credentials say what to
//! set.

use super::{ephemera, stderr_of, stdout_of, Operator, Scratch};
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_core::ports::RunnerStore;
use ephemera_tests::pipeline::{Pipeline, PipelineOptions};
use ephemera_tests::plant::write_runners;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_say_what_failed_once_and_what_to_do() -> anyhow::Result<()> {
    let options = PipelineOptions {
        reaper_interval: None,
        drain_queue: false,
        ..PipelineOptions::default()
    };
    let p = Pipeline::start(options).await?;
    let op = Operator::new(&p)?;

    // A runner of an owner the App is no longer installed on (GitHub: 404 on the
    // installation's token).
    write_runners(
        &p.sdk,
        &op.table,
        "eph-gone",
        "linux-x64",
        InstanceStatus::Running,
        1,
        |_, r| {
            r.owner = "elsewhere".to_owned();
            r.installation_id = Some(999);
            r.github_runner_id = Some(5);
        },
    )
    .await?;
    let name = "eph-gone-000000";
    let out = op
        .run_with_github(&["runners", "delete", name, "--force"])?
        .assert()
        .code(5);
    let err = stderr_of(out.get_output());
    assert!(
        err.contains("the GitHub App is not installed on elsewhere (installation 999)"),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "ephemera runners delete {name} --force --no-github"
        )),
        "{err}"
    );
    let record = p.store.get_runner(name).await?.expect("record");
    assert_eq!(record.status, InstanceStatus::Running, "nothing changed");

    let out = op
        .run_with_github(&["runners", "delete", name, "--no-github"])?
        .assert()
        .code(2);
    assert!(stderr_of(out.get_output()).contains("--force"));
    let out = op
        .run_with_github(&["runners", "delete", name, "--force", "--no-github"])?
        .assert()
        .success();
    assert!(stdout_of(out.get_output()).contains("pending_force_delete"));
    let record = p.store.get_runner(name).await?.expect("record");
    assert_eq!(record.status, InstanceStatus::PendingForceDelete);

    // AWS errors: one line, service, operation, code and message, no SDK structs.
    let out = op
        .run_without_table(&["runners", "list", "--table", "nope"])?
        .assert()
        .code(1);
    let missing_table = stderr_of(out.get_output());
    assert!(
        missing_table.starts_with("error: table nope (from --table) does not exist: ")
            && missing_table.contains(
                "DynamoDB Query: ResourceNotFoundException: Requested resource not found\n"
            ),
        "{missing_table}"
    );
    let out = op
        .run_without_table(&["pools", "--stack", "nope"])?
        .assert()
        .code(1);
    let missing_stack = stderr_of(out.get_output());
    assert!(
        missing_stack.contains(
            "CloudFormation DescribeStacks: ValidationError: Stack with id nope does not exist"
        ),
        "{missing_stack}"
    );
    for err in [&missing_table, &missing_stack] {
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(
            !err.contains("Error {") && !err.contains("service error"),
            "{err}"
        );
        let code = if err.contains("ResourceNotFound") {
            "ResourceNotFoundException"
        } else {
            "ValidationError"
        };
        assert_eq!(err.matches(code).count(), 1, "said once: {err}");
    }
    Ok(())
}

#[test]
fn missing_credentials_say_what_to_set() -> anyhow::Result<()> {
    let scratch = Scratch::new()?;
    let nowhere = scratch.0.join("none");
    let out = ephemera()?
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_WEB_IDENTITY_TOKEN_FILE")
        .env_remove("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
        .env_remove("AWS_CONTAINER_CREDENTIALS_FULL_URI")
        .env("HOME", &scratch.0)
        .env("AWS_CONFIG_FILE", &nowhere)
        .env("AWS_SHARED_CREDENTIALS_FILE", &nowhere)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .args(["pools", "--stack", "ephemera", "--region", "us-east-1"])
        .args(["--endpoint-url", "http://127.0.0.1:9"])
        .assert()
        .code(1);
    let err = stderr_of(out.get_output());
    assert!(
        err.contains("CloudFormation DescribeStacks: no AWS credentials found: set AWS_PROFILE"),
        "{err}"
    );
    assert!(
        !err.contains("Attempted") && err.lines().count() == 1,
        "{err}"
    );
    Ok(())
}
