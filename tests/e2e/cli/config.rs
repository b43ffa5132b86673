//! `config validate` on broken files (each error names the file, the line and the
//! field) and `config push` into the deployment's SSM parameter on moto.

use super::{config_yaml, ephemera, stderr_of, stdout_of, Scratch};
use ephemera_tests::moto::Moto;
use ephemera_tests::pipeline::DEPLOYMENT;

/// Each broken fixture, and the `FILE:LINE: FIELD: ` its error must start with.
const BROKEN: [(&str, &str); 10] = [
    (
        "unknown-key.yaml",
        ":9: pools[0].max_runner: unknown field `max_runner`",
    ),
    (
        "bad-duration.yaml",
        ":11: pools[0].bootstrap_timeout: \"20 minutes\" has unknown unit",
    ),
    (
        "min-idle-above-max.yaml",
        ":9: pools[0].min_idle: 5 is above max_runners (4)",
    ),
    (
        "duplicate-pool.yaml",
        ":11: pools[1].name: duplicate pool name \"linux-x64\"",
    ),
    (
        "shadowed-pool.yaml",
        ":14: pools[1].labels: pool \"general\" can never get a job: pools[0] (\"gpu\") \
         comes first and has all of its labels",
    ),
    (
        "out-of-range.yaml",
        ":13: reaper.deleted_ttl: must be between 1s and 3650d, not 3000000d",
    ),
    (
        "tab-indent.yaml",
        ":8: pools[0]: found character that cannot start any token: a tab in the indentation",
    ),
    (
        "sizing-policy.yaml",
        ":13: pools[0].sizing.max_vcpus_per_runner: must be from 1 to 1024, not 5000",
    ),
    (
        "ssm-own-template.yaml",
        ":12: pools[0].ssm_access: a pool with ssm_access launches the deployment's \
         eph-runner-ssm template",
    ),
    (
        "wrong-type.yaml",
        ":8: pools[0].max_runners: invalid type: string \"many\"",
    ),
];

#[test]
fn validate_names_file_line_and_field_of_every_broken_file() -> anyhow::Result<()> {
    for (file, expected) in BROKEN {
        let path = format!("tests/fixtures/config/{file}");
        let out = ephemera()?
            .args(["config", "validate", &path])
            .assert()
            .code(7);
        let err = stderr_of(out.get_output());
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.starts_with(&format!("error: {path}{expected}")),
            "{file}: {err}"
        );
        assert!(stdout_of(out.get_output()).is_empty(), "{file}");
    }
    let out = ephemera()?
        .args(["config", "validate", "infra/config.example.yaml"])
        .assert()
        .success();
    assert_eq!(
        stdout_of(out.get_output()),
        "infra/config.example.yaml: valid (deployment ephemera, 1 pool: linux-x64)\n  \
         pool linux-x64: runners register with labels [self-hosted, linux, x64]; it takes a \
         job whose runs-on labels are all among them\n"
    );
    ephemera()?
        .args(["config", "validate", "tests/fixtures/config/missing.yaml"])
        .assert()
        .code(1);
    Ok(())
}

#[test]
fn validate_reports_every_type_error_in_yaml_words() -> anyhow::Result<()> {
    let path = "tests/fixtures/config/three-type-errors.yaml";
    let out = ephemera()?
        .args(["config", "validate", path])
        .assert()
        .code(7);
    let err = stderr_of(out.get_output());
    let expected = [
        ":4: github.app_id: invalid type: string \"forty-two\", expected an integer of 0 or more",
        ":7: pools[0].labels: invalid type: string \"self-hosted\", expected a list",
        ":8: pools[0].max_runners: invalid type: string \"many\", expected an integer of 0 or more",
    ];
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 4, "three errors and the summary: {err}");
    for (line, expected) in lines.iter().zip(expected) {
        assert_eq!(*line, format!("error: {path}{expected}"));
    }
    assert!(lines[3].ends_with("is not valid (3 problems)"), "{err}");
    assert!(!err.contains("u64") && !err.contains("u32") && !err.contains("sequence"));
    Ok(())
}

#[test]
fn validate_names_the_line_of_bytes_that_are_not_utf8() -> anyhow::Result<()> {
    let scratch = Scratch::new()?;
    let file = scratch.0.join("latin1.yaml");
    std::fs::write(&file, b"deployment: eph\ngithub:\n  app_id: 1 # caf\xe9\n")?;
    let out = ephemera()?
        .args(["config", "validate"])
        .arg(&file)
        .assert()
        .code(7);
    let err = stderr_of(out.get_output());
    assert!(
        err.contains(&format!(
            "{}:3: byte 0xe9 at column 18 is not UTF-8",
            file.display()
        )),
        "{err}"
    );
    Ok(())
}

#[test]
fn validate_says_which_spot_pools_rerun_interrupted_jobs() -> anyhow::Result<()> {
    let scratch = Scratch::new()?;
    let base = config_yaml(DEPLOYMENT, "https://api.github.com");
    let spot = scratch.write("spot.yaml", &format!("{base}    spot: true\n"))?;
    let out = ephemera()?
        .args(["config", "validate"])
        .arg(&spot)
        .assert()
        .success();
    let said = stdout_of(out.get_output());
    assert!(
        said.contains(
            "is re-run once, on on-demand (rerun_interrupted; the GitHub App needs actions: write)"
        ),
        "{said}"
    );
    let off = scratch.write(
        "off.yaml",
        &format!("{base}    spot: true\n    rerun_interrupted: false\n"),
    )?;
    let out = ephemera()?
        .args(["config", "validate"])
        .arg(&off)
        .assert()
        .success();
    assert!(!stdout_of(out.get_output()).contains("re-run"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_validates_then_writes_the_parameter() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let scratch = Scratch::new()?;
    let good = config_yaml(DEPLOYMENT, "https://api.github.com");
    let file = scratch.write("config.yaml", &good)?;
    let parameter = "/eph/config";
    let push = |file: &std::path::Path| -> anyhow::Result<assert_cmd::Command> {
        let mut command = ephemera()?;
        command.args(["config", "push"]).arg(file).args([
            "--config-parameter",
            parameter,
            "--endpoint-url",
            &moto.endpoint,
            "--region",
            "us-east-1",
        ]);
        Ok(command)
    };

    let out = push(&file)?.assert().success();
    assert!(stdout_of(out.get_output()).contains(&format!("to {parameter} (version 1)")));
    let sdk = ephemera_aws::sdk_config(&ephemera_aws::AwsSettings::emulator(&moto.endpoint)).await;
    let ssm = aws_sdk_ssm::Client::new(&sdk);
    let stored = ssm.get_parameter().name(parameter).send().await?;
    assert_eq!(
        stored.parameter().and_then(|p| p.value()),
        Some(good.as_str())
    );

    let out = push(&file)?.assert().success();
    assert!(stdout_of(out.get_output()).contains("nothing to push"));

    let other = scratch.write(
        "other.yaml",
        &config_yaml("other", "https://api.github.com"),
    )?;
    let out = push(&other)?.assert().code(6);
    assert!(stderr_of(out.get_output()).contains("--allow-deployment-change"));

    let broken = scratch.write(
        "broken.yaml",
        &good.replace("max_runners: 10", "max_runners: 0"),
    )?;
    let out = push(&broken)?.assert().code(7);
    assert!(stderr_of(out.get_output()).contains(":8: pools[0].max_runners: must be at least 1"));

    let stored = ssm.get_parameter().name(parameter).send().await?;
    assert_eq!(
        stored.parameter().and_then(|p| p.value()),
        Some(good.as_str()),
        "unchanged"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_finds_the_parameter_through_the_stack_outputs() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let sdk = ephemera_aws::sdk_config(&ephemera_aws::AwsSettings::emulator(&moto.endpoint)).await;
    let template = serde_json::json!({
        "Resources": {
            "ConfigParameter": {
                "Type": "AWS::SSM::Parameter",
                "Properties": { "Name": "/ephemera/eph/config", "Type": "String", "Value": "-" }
            }
        },
        "Outputs": {
            "ConfigParameterName": { "Value": { "Ref": "ConfigParameter" } },
            "TableName": { "Value": "eph-runners" }
        }
    });
    aws_sdk_cloudformation::Client::new(&sdk)
        .create_stack()
        .stack_name("eph-stack")
        .template_body(template.to_string())
        .send()
        .await?;
    let scratch = Scratch::new()?;
    let good = config_yaml(DEPLOYMENT, "https://api.github.com");
    let file = scratch.write("config.yaml", &good)?;
    let out = ephemera()?
        .args(["config", "push"])
        .arg(&file)
        .args(["--stack", "eph-stack", "--endpoint-url", &moto.endpoint])
        .args(["--region", "us-east-1"])
        .assert()
        .success();
    assert!(stdout_of(out.get_output()).contains("to /ephemera/eph/config (version 2)"));
    let ssm = aws_sdk_ssm::Client::new(&sdk);
    let stored = ssm
        .get_parameter()
        .name("/ephemera/eph/config")
        .send()
        .await?;
    assert_eq!(
        stored.parameter().and_then(|p| p.value()),
        Some(good.as_str())
    );
    Ok(())
}
