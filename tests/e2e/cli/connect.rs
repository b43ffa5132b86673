//! `runners connect` on a runner with an instance: with a fake `aws` and a fake
//! `session-manager-plugin` alone on PATH, the session command runs with the runner's
//! instance and the deployment's region; without the plugin, the command is printed and
//! the plugin named; a pool without `ssm_access`, and an unknown runner, are refused.

use super::{config_yaml, stderr_of, stdout_of, Operator, Scratch};
use ephemera_core::lifecycle::InstanceStatus;
use ephemera_tests::pipeline::{Pipeline, PipelineOptions, DEPLOYMENT, LABELS};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

/// An executable shell script `name` in `dir` that writes its arguments, one a line, to
/// `name.args` beside it.
fn fake_program(dir: &Path, name: &str) -> anyhow::Result<()> {
    let record = dir.join(format!("{name}.args"));
    let script = format!(
        "#!/bin/sh\nfor arg in \"$@\"; do printf '%s\\n' \"$arg\"; done > '{}'\n",
        record.display()
    );
    let path = dir.join(name);
    std::fs::write(&path, script)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_runs_the_session_command_or_prints_it_when_the_plugin_is_missing(
) -> anyhow::Result<()> {
    let options = PipelineOptions {
        job_duration: Duration::from_secs(120),
        reaper_interval: None,
        ..PipelineOptions::default()
    };
    let p = Pipeline::start(options).await?;
    let op = Operator::new(&p)?;
    let job_id = p.sim.create_job("octo-org", "app", &LABELS, None).await?;
    let runner = p
        .wait_for("the runner's instance", Duration::from_secs(60), || async {
            Ok(p.runner_for_job(job_id)
                .await?
                .filter(|r| r.status == InstanceStatus::Running && r.instance_id.is_some()))
        })
        .await?;
    let (name, instance) = (
        runner.name.as_str(),
        runner.instance_id.clone().unwrap_or_default(),
    );

    // The pipeline's own configuration: its pool has no ssm_access.
    let out = op
        .run_with_config(&["runners", "connect", name])?
        .assert()
        .code(6);
    let err = stderr_of(out.get_output());
    assert!(
        err.contains("has no ssm_access") && err.contains("ssm_access: true"),
        "{err}"
    );
    let out = op
        .run_with_config(&["runners", "connect", "eph-nope"])?
        .assert()
        .code(4);
    assert!(stderr_of(out.get_output()).contains("no runner named eph-nope"));

    let scratch = Scratch::new()?;
    let with_ssm = config_yaml(DEPLOYMENT, &p.sim.url) + "    ssm_access: true\n";
    let config = scratch.write("ssm.yaml", &with_ssm)?;
    let tools = scratch.0.join("tools");
    std::fs::create_dir_all(&tools)?;
    fake_program(&tools, "aws")?;
    let connect = |path: &Path| -> anyhow::Result<assert_cmd::Command> {
        let mut command = op.run(&["runners", "connect", name])?;
        command.arg("--config").arg(&config).env("PATH", path);
        Ok(command)
    };

    // Without the plugin: the command, and what is missing; nothing runs.
    let out = connect(&tools)?.assert().code(1);
    let expected = format!(
        "aws ssm start-session --target {instance} --region us-east-1 --endpoint-url {}",
        p.moto.endpoint
    );
    assert_eq!(stdout_of(out.get_output()).trim(), expected);
    let err = stderr_of(out.get_output());
    assert!(err.contains("not on PATH: session-manager-plugin"), "{err}");
    assert!(
        !tools.join("aws.args").exists(),
        "aws ran without the plugin"
    );

    // With both: the session command runs, as printed.
    fake_program(&tools, "session-manager-plugin")?;
    connect(&tools)?.assert().success();
    let args = std::fs::read_to_string(tools.join("aws.args"))?;
    let args: Vec<&str> = args.lines().collect();
    assert_eq!(
        args,
        [
            "ssm",
            "start-session",
            "--target",
            instance.as_str(),
            "--region",
            "us-east-1",
            "--endpoint-url",
            p.moto.endpoint.as_str()
        ]
    );

    // --print prints it even when it could run.
    std::fs::remove_file(tools.join("aws.args"))?;
    let mut print = connect(&tools)?;
    let out = print.arg("--print").assert().success();
    assert_eq!(stdout_of(out.get_output()).trim(), expected);
    assert!(!tools.join("aws.args").exists());
    Ok(())
}
