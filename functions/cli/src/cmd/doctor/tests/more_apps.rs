//! The further Apps of `github.more_apps`: each is checked for its key, its JWT, its
//! permissions and its installations, and a failure names the App and the account.

use super::*;

/// The healthy deployment with App 43 listed, its key in `eph/app-43`, installed where
/// `installed_on` says.
fn with_second_app(installed_on: &[&str]) -> World {
    let mut world = healthy();
    world.config = Ok(CONFIG.replace(
        "  api_url: https://api.github.com\n",
        "  api_url: https://api.github.com\n  more_apps:\n    - app_id: 43\n      key_secret: eph/app-43\n",
    ));
    world.more_secrets.insert("eph/app-43".into(), PEM.into());
    world
        .more_installed
        .insert(43, installed_on.iter().map(|a| a.to_string()).collect());
    world
}

fn subjects(report: &Report, check: &str) -> Vec<(Option<String>, Status)> {
    report
        .named(check)
        .iter()
        .map(|c| (c.subject.clone(), c.status))
        .collect()
}

#[tokio::test]
async fn a_second_app_installed_where_the_first_is_passes_its_own_checks() {
    let report = run(&with_second_app(&["acme"])).await;
    assert!(report.ok(), "{}", report.text());
    assert_eq!(
        subjects(&report, "github.installation"),
        vec![
            (Some("acme".into()), Status::Pass),
            (Some("App 43 on acme".into()), Status::Pass),
        ]
    );
    assert_eq!(
        subjects(&report, "github.app_key"),
        vec![(None, Status::Pass), (Some("App 43".into()), Status::Pass)]
    );
    let rate_limits = subjects(&report, "github.rate_limit");
    assert_eq!(rate_limits.len(), 2, "each App's budgets: {rate_limits:?}");
    // Webhooks are the first App's alone.
    assert_eq!(report.named("github.webhook_url").len(), 1);
}

#[tokio::test]
async fn a_second_app_missing_on_an_account_fails_naming_the_app_and_the_account() {
    let report = run(&with_second_app(&[])).await;
    let (check, message, fix) = only_failure(&report);
    assert_eq!(check, "github.installation");
    assert_eq!(message, "App 43 is not installed on acme");
    assert!(
        fix.contains("https://github.com/apps/eph-app-43/installations/new"),
        "{fix}"
    );
    let failed = report.named("github.installation")[1].subject.clone();
    assert_eq!(failed.as_deref(), Some("App 43 on acme"));
}

#[tokio::test]
async fn a_second_apps_missing_secret_fails_its_key_check_and_skips_its_others() {
    let mut world = with_second_app(&["acme"]);
    world.more_secrets.clear();
    let report = run(&world).await;
    let (check, message, fix) = only_failure(&report);
    assert_eq!(check, "github.app_key");
    assert!(message.contains("eph/app-43"), "{message}");
    assert!(fix.contains("eph/app-43"), "{fix}");
    let skipped = report
        .checks
        .iter()
        .filter(|c| c.subject.as_deref() == Some("App 43") && c.status == Status::Skip)
        .count();
    assert_eq!(skipped, 3, "{}", report.text());
}

#[tokio::test]
async fn a_second_app_lacking_a_permission_is_named() {
    let mut world = with_second_app(&["acme"]);
    // The World's permissions are every App's; the first App's check fails too, so
    // only the second App's failure is looked at.
    world.permissions.remove("actions");
    let report = run(&world).await;
    let second = report
        .named("github.permissions")
        .into_iter()
        .find(|c| c.subject.as_deref() == Some("App 43"))
        .expect("the second App's permissions are checked");
    assert_eq!(second.status, Status::Fail);
    assert!(
        second.message.contains("App 43 lacks actions: read"),
        "{}",
        second.message
    );
}
