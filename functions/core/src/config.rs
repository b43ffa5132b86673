//! The operator's configuration: one YAML file, typed, validated, failing fast.
//!
//! Every error names the file and the field (`pools[1].max_runners`), and the line when
//! the YAML parser knows it, so an operator can fix a bad file without guessing.

use serde::{Deserialize, Deserializer};
use std::collections::HashSet;
use std::fmt;
use std::path::Path;
use std::time::Duration;

/// The whole configuration of one deployment.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Prefix of every runner name and the value of the `ephemera:deployment` tag.
    pub deployment: String,
    pub github: GitHubConfig,
    pub pools: Vec<PoolConfig>,
    #[serde(default)]
    pub reaper: ReaperConfig,
}

/// Where runners are registered.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GitHubConfig {
    pub app_id: u64,
    /// `https://api.github.com`, or `https://HOST/api/v3` for GitHub Enterprise Server.
    #[serde(default = "default_api_url")]
    pub api_url: String,
    /// Register runners on the organization (`org`) or on each repository (`repo`).
    #[serde(default)]
    pub scope: Scope,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    #[default]
    Org,
    Repo,
}

/// A set of identical runners that jobs are routed to by label.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PoolConfig {
    pub name: String,
    /// A job goes to the first pool whose labels contain all of the job's labels
    /// (case-insensitively; `self-hosted` is implied).
    pub labels: Vec<String>,
    pub max_runners: u32,
    #[serde(default)]
    pub min_idle: u32,
    #[serde(default = "yes")]
    pub ephemeral: bool,
    pub instance_types: Vec<String>,
    #[serde(default)]
    pub subnets: Vec<String>,
    /// Name of the EC2 launch template (preferred) ...
    #[serde(default)]
    pub launch_template: Option<String>,
    /// ... or an AMI id, with the instance type and subnet from this pool.
    #[serde(default)]
    pub ami: Option<String>,
    #[serde(default)]
    pub spot: bool,
    #[serde(default = "default_runner_group")]
    pub runner_group: String,
    #[serde(default = "default_bootstrap_timeout", deserialize_with = "duration")]
    pub bootstrap_timeout: Duration,
    #[serde(default = "default_idle_timeout", deserialize_with = "duration")]
    pub idle_timeout: Duration,
}

/// How the reaper treats finished records.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ReaperConfig {
    /// How long a `deleted` record stays in the table before its TTL removes it.
    #[serde(default = "default_deleted_ttl", deserialize_with = "duration")]
    pub deleted_ttl: Duration,
    /// A record `deleting` for longer than this belongs to a reaper that died mid-way.
    #[serde(default = "default_stuck_deleting", deserialize_with = "duration")]
    pub stuck_deleting: Duration,
}

impl Default for ReaperConfig {
    fn default() -> Self {
        ReaperConfig {
            deleted_ttl: default_deleted_ttl(),
            stuck_deleting: default_stuck_deleting(),
        }
    }
}

fn default_api_url() -> String {
    "https://api.github.com".to_owned()
}
fn yes() -> bool {
    true
}
fn default_runner_group() -> String {
    "Default".to_owned()
}
fn default_bootstrap_timeout() -> Duration {
    Duration::from_secs(20 * 60)
}
fn default_idle_timeout() -> Duration {
    Duration::from_secs(10 * 60)
}
fn default_deleted_ttl() -> Duration {
    Duration::from_secs(7 * 24 * 3600)
}
fn default_stuck_deleting() -> Duration {
    Duration::from_secs(5 * 60)
}

/// A configuration that cannot be used, with where the problem is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    pub file: String,
    pub line: Option<usize>,
    /// Path of the offending field, such as `pools[0].max_runners`; empty for the whole file.
    pub field: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl Config {
    /// Reads and validates the file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|err| ConfigError {
            file: file.clone(),
            line: None,
            field: String::new(),
            message: format!("cannot read: {err}"),
        })?;
        Config::parse(&file, &text)
    }

    /// Parses and validates `text`; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Config, ConfigError> {
        let deserializer = serde_yaml_ng::Deserializer::from_str(text);
        let config: Config = serde_path_to_error::deserialize(deserializer).map_err(|err| {
            let field = err.path().to_string();
            let inner = err.into_inner();
            ConfigError {
                file: file.to_owned(),
                line: inner.location().map(|l| l.line()),
                field: if field == "." { String::new() } else { field },
                message: strip_location(&inner.to_string()),
            }
        })?;
        config.validate().map_err(|(field, message)| ConfigError {
            file: file.to_owned(),
            line: None,
            field,
            message,
        })?;
        Ok(config)
    }

    /// The pool named `name`.
    pub fn pool(&self, name: &str) -> Option<&PoolConfig> {
        self.pools.iter().find(|pool| pool.name == name)
    }

    fn validate(&self) -> Result<(), (String, String)> {
        if !is_name(&self.deployment) {
            return Err(("deployment".into(), NAME_RULE.into()));
        }
        if self.pools.is_empty() {
            return Err(("pools".into(), "at least one pool is required".into()));
        }
        let mut names = HashSet::new();
        for (i, pool) in self.pools.iter().enumerate() {
            let at = |field: &str| format!("pools[{i}].{field}");
            if !is_name(&pool.name) {
                return Err((at("name"), NAME_RULE.into()));
            }
            if !names.insert(pool.name.as_str()) {
                return Err((at("name"), format!("duplicate pool name {:?}", pool.name)));
            }
            if pool.labels.is_empty() || pool.labels.iter().any(|l| l.trim().is_empty()) {
                return Err((at("labels"), "labels must be non-empty strings".into()));
            }
            if pool.max_runners == 0 {
                return Err((at("max_runners"), "must be at least 1".into()));
            }
            if pool.min_idle > pool.max_runners {
                let msg = format!(
                    "{} is above max_runners ({})",
                    pool.min_idle, pool.max_runners
                );
                return Err((at("min_idle"), msg));
            }
            if pool.instance_types.is_empty() {
                return Err((at("instance_types"), "at least one instance type".into()));
            }
            match (&pool.launch_template, &pool.ami) {
                (None, None) => {
                    return Err((at("launch_template"), "set launch_template or ami".into()))
                }
                (Some(_), Some(_)) => {
                    return Err((at("ami"), "set launch_template or ami, not both".into()))
                }
                _ => {}
            }
        }
        Ok(())
    }
}

const NAME_RULE: &str = "must be 1-32 characters of a-z, 0-9 and '-', starting with a letter";

fn is_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (1..=32).contains(&bytes.len())
        && bytes[0].is_ascii_lowercase()
        && !name.ends_with('-')
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// serde_yaml appends " at line L column C"; we report the line ourselves.
fn strip_location(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
}

/// Parses `90s`, `20m`, `1h`, `7d` (a whole number and a unit).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?} has no unit (use s, m, h or d)"))?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} does not start with a whole number"))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        _ => {
            return Err(format!(
                "{text:?} has unknown unit {unit:?} (use s, m, h or d)"
            ))
        }
    };
    Ok(Duration::from_secs(number * seconds))
}

fn duration<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    parse_duration(&text).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
deployment: eph
github:
  app_id: 42
pools:
  - name: linux-x64
    labels: [self-hosted, linux, x64]
    max_runners: 5
    instance_types: [m7i.large]
    launch_template: ephemera-runner
    bootstrap_timeout: 15m
"#;

    #[test]
    fn good_file_parses_with_defaults() {
        let config = Config::parse("good.yaml", GOOD).expect("valid");
        let pool = config.pool("linux-x64").expect("pool");
        assert_eq!(pool.bootstrap_timeout, Duration::from_secs(900));
        assert_eq!(pool.idle_timeout, Duration::from_secs(600));
        assert!(pool.ephemeral);
        assert_eq!(config.github.api_url, "https://api.github.com");
        assert_eq!(config.github.scope, Scope::Org);
        assert_eq!(config.reaper.deleted_ttl, Duration::from_secs(7 * 86400));
    }

    fn error_of(text: &str) -> ConfigError {
        Config::parse("bad.yaml", text).expect_err("must be rejected")
    }

    #[test]
    fn wrong_type_names_field_and_line() {
        let err = error_of(&GOOD.replace("max_runners: 5", "max_runners: many"));
        assert_eq!(err.field, "pools[0].max_runners");
        assert_eq!(err.line, Some(8));
        assert!(
            err.to_string()
                .starts_with("bad.yaml:8: pools[0].max_runners: "),
            "{err}"
        );
    }

    #[test]
    fn unknown_key_is_rejected() {
        let err = error_of(&GOOD.replace("max_runners: 5", "max_runners: 5\n    max_runner: 6"));
        assert_eq!(err.field, "pools[0].max_runner");
        assert!(err.message.contains("max_runner"), "{err}");
    }

    #[test]
    fn bad_duration_names_field() {
        let err = error_of(&GOOD.replace("15m", "15 minutes"));
        assert_eq!(err.field, "pools[0].bootstrap_timeout");
        assert!(err.message.contains("unknown unit"), "{err}");
    }

    #[test]
    fn min_idle_above_max_is_rejected() {
        let err = error_of(&GOOD.replace("max_runners: 5", "max_runners: 5\n    min_idle: 6"));
        assert_eq!(err.field, "pools[0].min_idle");
    }

    #[test]
    fn missing_image_is_rejected() {
        let err = error_of(&GOOD.replace("    launch_template: ephemera-runner\n", ""));
        assert_eq!(err.field, "pools[0].launch_template");
    }

    #[test]
    fn duplicate_pool_names_are_rejected() {
        let pool = GOOD.split_once("pools:\n").expect("pools").1;
        let err = error_of(&format!("{GOOD}{pool}"));
        assert_eq!(err.field, "pools[1].name");
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(604800)));
        assert!(parse_duration("7").is_err());
        assert!(parse_duration("m").is_err());
    }
}
