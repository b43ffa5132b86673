//! `ephemera doctor` through the real binary on a deployment of two GitHub Apps (the
//! stack in moto, the second App's key in a secret of its own, both Apps in the
//! simulator): the second App's key, JWT, permissions, installation and budgets are
//! checked apart, and an App missing on an account fails the one check that names the
//! App and the account.

use crate::doctor::{
    doctor, expect_healthy, functions_run_the_current_configuration, only_failure, world_with,
    World, APP_ID, DEPLOYMENT, ORG,
};
use anyhow::{ensure, Context};
use ephemera_tests::pipeline::workspace_path;
use serde_json::Value;

const SECOND_APP_ID: u64 = 5252;

/// Puts the second App's key into its secret and pushes a configuration listing it.
async fn list_the_second_app(world: &World) -> anyhow::Result<()> {
    let secret = format!("{DEPLOYMENT}/github-app-{SECOND_APP_ID}");
    let key = std::fs::read_to_string(workspace_path("tests/fixtures/github-app-test-key-2.pem"))?;
    aws_sdk_secretsmanager::Client::new(&world.sdk)
        .create_secret()
        .name(&secret)
        .secret_string(key)
        .send()
        .await?;
    let ssm = aws_sdk_ssm::Client::new(&world.sdk);
    let default = ssm
        .get_parameter()
        .name(world.stack.output("DefaultConfigParameterName")?)
        .send()
        .await?
        .parameter()
        .and_then(|p| p.value())
        .context("no default configuration")?
        .to_owned();
    let app_line = default
        .lines()
        .find(|line| line.trim() == format!("app_id: {APP_ID}"))
        .context("no app_id line in the default configuration")?;
    let indent = &app_line[..app_line.len() - app_line.trim_start().len()];
    let listed = format!(
        "{app_line}\n{indent}more_apps:\n{indent}  - app_id: {SECOND_APP_ID}\n{indent}    key_secret: {secret}"
    );
    ssm.put_parameter()
        .name(world.stack.output("ConfigParameterName")?)
        .value(default.replacen(app_line, &listed, 1))
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await?;
    functions_run_the_current_configuration(world).await
}

fn with_subject<'a>(report: &'a Value, check: &str, subject: &str) -> Option<&'a Value> {
    report["checks"]
        .as_array()?
        .iter()
        .find(|c| c["check"] == check && c["subject"] == subject)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_checks_each_app_and_names_the_one_missing_on_an_account() -> anyhow::Result<()> {
    let second_public = std::fs::read_to_string(workspace_path(
        "tests/fixtures/github-app-test-key-2.pub.pem",
    ))?;
    let world = world_with(vec![(SECOND_APP_ID, second_public)]).await?;
    list_the_second_app(&world).await?;
    expect_healthy(&world).await?;
    let (_, report) = doctor(&world).await?;
    let who = format!("App {SECOND_APP_ID}");
    for (check, subject) in [
        ("github.app_key", who.clone()),
        ("github.app", who.clone()),
        ("github.permissions", who.clone()),
        ("github.installation", format!("{who} on {ORG}")),
        ("github.rate_limit", format!("{who} on {ORG}")),
    ] {
        let found = with_subject(&report, check, &subject);
        ensure!(
            found.is_some_and(|c| c["status"] == "pass"),
            "{check} [{subject}]: {report:#}"
        );
    }

    // The second App is not installed on the organization; the first still is.
    world.sim.with_state(|s| {
        let settings = s.more_apps.entry(SECOND_APP_ID).or_default();
        settings.not_installed_on.insert(ORG.to_owned());
    });
    let failed = only_failure(&world, "github.installation").await?;
    ensure!(failed["subject"] == format!("{who} on {ORG}"), "{failed:#}");
    ensure!(
        failed["message"] == format!("{who} is not installed on {ORG}"),
        "{failed:#}"
    );
    ensure!(
        failed["fix"]
            .as_str()
            .is_some_and(|fix| fix.contains(&format!(
                "https://github.com/apps/ephemera-sim-{SECOND_APP_ID}/installations/new"
            ))),
        "{failed:#}"
    );
    world.sim.with_state(|s| s.more_apps.clear());
    expect_healthy(&world).await?;

    // The second App's key is one GitHub does not know (the first App's key).
    let first_key =
        std::fs::read_to_string(workspace_path("tests/fixtures/github-app-test-key.pem"))?;
    aws_sdk_secretsmanager::Client::new(&world.sdk)
        .put_secret_value()
        .secret_id(format!("{DEPLOYMENT}/github-app-{SECOND_APP_ID}"))
        .secret_string(first_key)
        .send()
        .await?;
    let failed = only_failure(&world, "github.app").await?;
    ensure!(failed["subject"] == who, "{failed:#}");
    Ok(())
}
