//! The App key and GitHub's view of the App: key, JWT, permissions, events, webhook
//! URL, installations and deliveries.

use super::*;

#[tokio::test]
async fn the_placeholder_key_fails_the_key_check_and_skips_githubs() {
    let mut world = healthy();
    world.secret = APP_KEY_PLACEHOLDER.into();
    let report = run(&world).await;
    let (check, message, fix) = only_failure(&report);
    assert_eq!(check, "github.app_key");
    assert!(message.contains("placeholder"), "{message}");
    assert!(
        fix.contains("put-secret-value --secret-id arn:secret:key"),
        "{fix}"
    );
    assert_eq!(report.named("github.app")[0].status, Status::Skip);
    assert_eq!(report.named("ec2.dry_run")[0].status, Status::Pass);
}

#[tokio::test]
async fn a_key_that_is_not_a_key_fails_the_key_check() {
    let mut world = healthy();
    world.secret = "hello".into();
    let (check, message, _) = only_failure(&run(&world).await);
    assert_eq!(check, "github.app_key");
    assert!(message.contains("not an RSA private key"), "{message}");
}

#[tokio::test]
async fn a_refused_jwt_fails_the_app_check() {
    let mut world = healthy();
    world.jwt_accepted = false;
    let report = run(&world).await;
    let (check, _, fix) = only_failure(&report);
    assert_eq!(check, "github.app");
    assert!(fix.contains("App 42"), "{fix}");
    assert_eq!(report.named("github.webhook_url")[0].status, Status::Skip);
}

#[tokio::test]
async fn a_missing_permission_fails_the_permissions_check() {
    let mut world = healthy();
    world
        .permissions
        .insert("organization_self_hosted_runners".into(), "read".into());
    let (check, message, fix) = only_failure(&run(&world).await);
    assert_eq!(check, "github.permissions");
    assert!(
        message.contains("organization_self_hosted_runners: write (has read)"),
        "{message}"
    );
    assert!(
        fix.contains("https://github.com/settings/apps/eph-app"),
        "{fix}"
    );
}

#[tokio::test]
async fn repository_scope_needs_administration_instead() {
    let mut world = healthy();
    world.config = Ok(CONFIG.replace("  api_url", "  scope: repo\n  api_url"));
    let (check, message, _) = only_failure(&run(&world).await);
    assert_eq!(check, "github.permissions");
    assert!(
        message.contains("administration: write (has none)"),
        "{message}"
    );
}

#[tokio::test]
async fn a_spot_pool_that_reruns_interrupted_jobs_needs_actions_write() {
    let mut world = healthy();
    world.permissions.insert("actions".into(), "read".into());
    world.config = Ok(CONFIG.replace(
        "    warm_owner: acme",
        "    warm_owner: acme\n    spot: true",
    ));
    let (check, message, _) = only_failure(&run(&world).await);
    assert_eq!(check, "github.permissions");
    assert!(
        message.contains("actions: write (has read, to re-run the jobs spot interruptions fail"),
        "{message}"
    );
    // Switched off, read is enough again.
    world.config = Ok(CONFIG.replace(
        "    warm_owner: acme",
        "    warm_owner: acme\n    spot: true\n    rerun_interrupted: false",
    ));
    assert!(run(&world).await.named("github.permissions")[0].status == Status::Pass);
}

#[tokio::test]
async fn no_workflow_job_event_fails_the_events_check() {
    let mut world = healthy();
    world.events = vec!["push".into()];
    let (check, message, fix) = only_failure(&run(&world).await);
    assert_eq!(check, "github.events");
    assert!(message.contains("it gets: push"), "{message}");
    assert!(fix.contains("Workflow job"), "{fix}");
}

#[tokio::test]
async fn a_wrong_webhook_url_fails_the_webhook_check_with_the_right_one() {
    let mut world = healthy();
    world.webhook_url = Some("https://old.example/webhook".into());
    let (check, message, fix) = only_failure(&run(&world).await);
    assert_eq!(check, "github.webhook_url");
    assert!(
        message.contains("is https://old.example/webhook"),
        "{message}"
    );
    assert!(fix.contains("https://hook.lambda-url/"), "{fix}");
    world.webhook_url = None;
    let (check, message, _) = only_failure(&run(&world).await);
    assert_eq!(check, "github.webhook_url");
    assert!(message.contains("no webhook URL"), "{message}");
}

#[tokio::test]
async fn an_app_not_installed_fails_that_accounts_installation_check() {
    let mut world = healthy();
    world.installed_on.clear();
    let report = run(&world).await;
    let (check, message, fix) = only_failure(&report);
    assert_eq!(check, "github.installation");
    assert!(message.contains("not installed on acme"), "{message}");
    assert!(
        fix.contains("https://github.com/apps/eph-app/installations/new"),
        "{fix}"
    );
    assert_eq!(
        report.named("github.installation")[0].subject.as_deref(),
        Some("acme")
    );
}

#[tokio::test]
async fn without_accounts_to_check_the_installation_check_warns() {
    let mut world = healthy();
    world.config = Ok(CONFIG.replace("    warm_owner: acme\n", ""));
    let report = run(&world).await;
    assert!(report.ok(), "{}", report.text());
    let check = report.named("github.installation")[0];
    assert_eq!(check.status, Status::Warn);
    assert!(check.fix.as_deref().unwrap_or_default().contains("--owner"));
}

#[tokio::test]
async fn failed_deliveries_are_counted_by_reason_as_a_warning() {
    let mut world = healthy();
    world.deliveries = vec![200, 503, 503, 0, 401];
    let report = run(&world).await;
    assert!(report.ok(), "{}", report.text());
    let check = report.named("github.deliveries")[0];
    assert_eq!(check.status, Status::Warn);
    assert!(
        check.message.starts_with("4 of 5 recent deliveries failed"),
        "{}",
        check.message
    );
    assert!(check.message.contains("2× HTTP 503"), "{}", check.message);
    assert!(check.message.contains("1× no answer"), "{}", check.message);
    assert!(
        check.message.contains("webhook secret mismatch"),
        "{}",
        check.message
    );
}
