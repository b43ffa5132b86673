//! The GitHub App manifests ask for exactly the permissions `ephemera doctor` checks for
//! their scope, and nothing more: `infra/github-app-manifest.json` for `scope: org`
//! (*Self-hosted runners* on the organization, no repository *Administration*, which only
//! the repository runner endpoints need: <https://docs.github.com/en/rest/actions/self-hosted-runners>),
//! `infra/github-app-manifest-repo.json` for `scope: repo`; both with `actions: write`,
//! as a spot pool re-runs its interrupted jobs by default, and `metadata: read`, which
//! every App has.

use anyhow::{ensure, Context};
use ephemera_cli::cmd::doctor::checks::needed_permissions;
use ephemera_core::config::Config;
use ephemera_tests::pipeline::workspace_path;
use std::collections::BTreeMap;

/// infra/config.example.yaml with `scope` and a spot pool (which re-runs its
/// interrupted jobs unless told not to).
fn config(scope: &str) -> anyhow::Result<Config> {
    let example = std::fs::read_to_string(workspace_path("infra/config.example.yaml"))?;
    let text = example
        .replace("  scope: org\n", &format!("  scope: {scope}\n"))
        .replace("    # spot: true\n", "    spot: true\n");
    ensure!(
        text.contains("    spot: true\n"),
        "the example no longer has `# spot: true`"
    );
    Ok(Config::parse("config.example.yaml", &text)?)
}

fn manifest_permissions(path: &str) -> anyhow::Result<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(workspace_path(path))?;
    let manifest: serde_json::Value =
        serde_json::from_str(&text).with_context(|| path.to_owned())?;
    let permissions = manifest["default_permissions"]
        .as_object()
        .with_context(|| format!("{path}: no default_permissions"))?;
    Ok(permissions
        .iter()
        .map(|(name, level)| (name.clone(), level.as_str().unwrap_or("").to_owned()))
        .collect())
}

fn check(scope: &str, path: &str) -> anyhow::Result<()> {
    let mut wanted: BTreeMap<String, String> = needed_permissions(&config(scope)?)
        .into_iter()
        .map(|(name, level)| (name.to_owned(), level.to_owned()))
        .collect();
    wanted.insert("metadata".into(), "read".into());
    let asked = manifest_permissions(path)?;
    ensure!(
        asked == wanted,
        "{path} asks {asked:?}; scope {scope} needs {wanted:?}, nothing more"
    );
    Ok(())
}

#[test]
fn the_organization_manifest_asks_no_repository_administration() -> anyhow::Result<()> {
    check("org", "infra/github-app-manifest.json")
}

#[test]
fn the_repository_manifest_asks_what_scope_repo_needs() -> anyhow::Result<()> {
    check("repo", "infra/github-app-manifest-repo.json")
}
