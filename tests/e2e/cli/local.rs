//! `ephemera local`'s own inputs: a reaper interval out of range is refused by name
//! (it once panicked on `0s`), `--help` lists the environment it reads, and the
//! configuration is a file or a stack's.

use super::{ephemera, stderr_of, stdout_of};

#[test]
fn a_reaper_interval_out_of_range_is_a_usage_error_naming_the_option() -> anyhow::Result<()> {
    for interval in ["0s", "300000000000000d", "2d"] {
        let out = ephemera()?
            .args(["local", "--config", "infra/config.example.yaml"])
            .args(["--reaper-interval", interval])
            .assert()
            .code(2);
        let err = stderr_of(out.get_output());
        assert!(err.contains("--reaper-interval"), "{interval}: {err}");
        assert!(!err.contains("panicked"), "{interval}: {err}");
    }
    Ok(())
}

#[test]
fn local_help_lists_the_webhook_secret_and_examples() -> anyhow::Result<()> {
    let out = ephemera()?.args(["local", "--help"]).assert().success();
    let help = stdout_of(out.get_output());
    assert!(help.contains("EPHEMERA_WEBHOOK_SECRET "), "{help}");
    assert!(help.contains("Examples:"), "{help}");
    Ok(())
}

#[test]
fn every_missing_input_is_reported_at_once_before_listening() -> anyhow::Result<()> {
    let out = ephemera()?
        .args(["local", "--config", "infra/config.example.yaml"])
        .args(["--endpoint-url", "http://127.0.0.1:9"])
        .env_remove("EPHEMERA_WEBHOOK_SECRET")
        .env_remove("AWS_ACCESS_KEY_ID")
        .assert()
        .code(1);
    let err = stderr_of(out.get_output());
    assert!(err.contains("EPHEMERA_WEBHOOK_SECRET"), "{err}");
    assert!(err.contains("--github-app-key"), "{err}");
    assert!(err.contains("AWS_ACCESS_KEY_ID=testing"), "{err}");
    assert!(!err.contains("webhook listening"), "{err}");
    assert!(!err.contains("IMDS"), "{err}");
    Ok(())
}

#[test]
fn the_log_has_no_colour_codes_when_it_is_not_a_terminal() -> anyhow::Result<()> {
    let out = ephemera()?
        .args([
            "local",
            "--config",
            "infra/config.example.yaml",
            "--only",
            "webhook",
        ])
        .args([
            "--listen",
            "127.0.0.1:0",
            "--queue-url",
            "http://127.0.0.1:9/q",
        ])
        .args(["--endpoint-url", "http://127.0.0.1:9"])
        .env("EPHEMERA_WEBHOOK_SECRET", "s")
        .env_remove("NO_COLOR")
        .timeout(std::time::Duration::from_secs(10))
        .output()?;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("webhook listening"), "{err}");
    assert!(!err.contains('\u{1b}'), "{err:?}");
    assert!(!err.contains("IMDS"), "an emulator needs no region: {err}");
    Ok(())
}

#[test]
fn the_configuration_is_a_file_or_a_stack_not_both_nor_neither() -> anyhow::Result<()> {
    let out = ephemera()?.args(["local"]).assert().code(2);
    let err = stderr_of(out.get_output());
    assert!(err.contains("--config"), "{err}");
    let out = ephemera()?
        .args(["local", "--config", "infra/config.example.yaml"])
        .args(["--stack", "ephemera"])
        .assert()
        .code(2);
    let err = stderr_of(out.get_output());
    assert!(err.contains("--stack"), "{err}");
    let out = ephemera()?
        .args(["local", "--stack", "ephemera", "--bootstrap"])
        .assert()
        .code(2);
    let err = stderr_of(out.get_output());
    assert!(
        err.contains("--bootstrap"),
        "a stack's resources exist: {err}"
    );
    Ok(())
}
