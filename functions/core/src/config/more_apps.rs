//! `github.more_apps`, the further Apps of a deployment, and its checks: every App has
//! an id of its own, above 0, and names the secret its private key is kept in.
//!
//! A secret is named as Secrets Manager takes it: its name (letters, digits and
//! `/_+=.@-`, at most 512 characters) or its ARN (`arn:PARTITION:secretsmanager:…`).

use super::GitHubConfig;
use serde::Deserialize;

/// One more GitHub App of the deployment ([`GitHubConfig::more_apps`]).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct MoreApp {
    pub app_id: u64,
    /// The Secrets Manager secret (its name or ARN) holding the App's private key, PEM.
    pub key_secret: String,
}

impl GitHubConfig {
    /// Every App's id: `app_id` first (the App that sends webhooks), then `more_apps`.
    pub fn app_ids(&self) -> Vec<u64> {
        std::iter::once(self.app_id)
            .chain(self.more_apps.iter().map(|app| app.app_id))
            .collect()
    }
}

/// Problems of `github.more_apps`, as (field, message).
pub fn problems(github: &GitHubConfig) -> Vec<(String, String)> {
    let mut problems = Vec::new();
    let mut seen = vec![(github.app_id, "github.app_id".to_owned())];
    for (i, app) in github.more_apps.iter().enumerate() {
        let at = |field: &str| format!("github.more_apps[{i}].{field}");
        if app.app_id == 0 {
            problems.push((at("app_id"), "must be the App's id, above 0".to_owned()));
        } else if let Some((_, first)) = seen.iter().find(|(id, _)| *id == app.app_id) {
            let message = format!(
                "App {} is already listed as {first}: each App is listed once",
                app.app_id
            );
            problems.push((at("app_id"), message));
        } else {
            seen.push((app.app_id, at("app_id")));
        }
        if let Some(problem) = secret_problem(&app.key_secret) {
            problems.push((at("key_secret"), problem));
        }
    }
    problems
}

/// Why `secret` cannot name a Secrets Manager secret, if it cannot.
fn secret_problem(secret: &str) -> Option<String> {
    if secret.trim().is_empty() {
        return Some(
            "must name the Secrets Manager secret (its name or ARN) that holds this App's \
             private key"
                .to_owned(),
        );
    }
    if secret.starts_with("arn:") {
        let parts: Vec<&str> = secret.splitn(7, ':').collect();
        let is_secret_arn =
            parts.len() == 7 && parts[2] == "secretsmanager" && parts[5] == "secret";
        return (!is_secret_arn).then(|| {
            format!(
                "{secret:?} is not a secret's ARN (arn:PARTITION:secretsmanager:REGION:ACCOUNT:secret:NAME)"
            )
        });
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || "/_+=.@-".contains(c);
    if secret.len() > 512 || !secret.chars().all(allowed) {
        return Some(format!(
            "{secret:?} is not a secret's name (at most 512 letters, digits and /_+=.@-) or ARN"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, ConfigError};

    fn config(more_apps: &str) -> String {
        format!(
            "deployment: eph\ngithub:\n  app_id: 42\n  more_apps:\n{more_apps}pools:\n  - name: \
             linux\n    labels: [linux]\n    max_runners: 1\n    instance_types: [m7i.large]\n    \
             launch_template: lt\n"
        )
    }

    fn errors(more_apps: &str) -> Vec<ConfigError> {
        Config::check("c.yaml", &config(more_apps)).expect_err("must be refused")
    }

    #[test]
    fn more_apps_are_read_in_order_after_the_first() {
        let text = config(
            "    - app_id: 43\n      key_secret: eph/app-43\n    - app_id: 44\n      key_secret: \
             arn:aws:secretsmanager:eu-west-1:123456789012:secret:eph/app-44-AbCdEf\n",
        );
        let parsed = Config::parse("c.yaml", &text).expect("valid");
        assert_eq!(parsed.github.app_ids(), vec![42, 43, 44]);
        assert_eq!(parsed.github.more_apps[0].key_secret, "eph/app-43");
    }

    #[test]
    fn no_more_apps_is_one_app() {
        let text = config("").replace("  more_apps:\n", "");
        let parsed = Config::parse("c.yaml", &text).expect("valid");
        assert_eq!(parsed.github.app_ids(), vec![42]);
    }

    #[test]
    fn an_app_listed_twice_is_named_with_its_line() {
        let found = errors(
            "    - app_id: 43\n      key_secret: a\n    - app_id: 43\n      key_secret: b\n    \
             - app_id: 42\n      key_secret: c\n",
        );
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].field, "github.more_apps[1].app_id");
        assert_eq!(found[0].line, Some(7));
        assert!(
            found[0].message.contains("github.more_apps[0].app_id"),
            "{}",
            found[0]
        );
        assert_eq!(found[1].field, "github.more_apps[2].app_id");
        assert!(found[1].message.contains("github.app_id"), "{}", found[1]);
    }

    #[test]
    fn an_app_id_of_zero_is_refused() {
        let found = errors("    - app_id: 0\n      key_secret: a\n");
        assert_eq!(found[0].field, "github.more_apps[0].app_id");
        assert!(found[0]
            .to_string()
            .starts_with("c.yaml:5: github.more_apps[0].app_id: "));
    }

    #[test]
    fn a_key_secret_must_name_a_secret() {
        for bad in ["''", "'has space'", "arn:aws:s3:::bucket"] {
            let found = errors(&format!("    - app_id: 43\n      key_secret: {bad}\n"));
            assert_eq!(found[0].field, "github.more_apps[0].key_secret", "{bad}");
            assert_eq!(found[0].line, Some(6), "{bad}");
        }
    }

    #[test]
    fn a_missing_key_secret_is_a_parse_error_naming_the_app() {
        let err = Config::parse("c.yaml", &config("    - app_id: 43\n")).expect_err("refused");
        assert_eq!(err.field, "github.more_apps[0]");
        assert!(err.message.contains("key_secret"), "{err}");
    }
}
