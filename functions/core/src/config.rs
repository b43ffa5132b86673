//! The operator's configuration: one YAML file, typed, validated, failing fast.
//!
//! Every error names the file, the line and the field (`pools[1].max_runners`), so an
//! operator can fix a bad file without guessing: the YAML parser places type errors and
//! unknown keys, and [`locate`] finds the line of a field for the checks of meaning that
//! come after parsing (duplicate pool names, a pool shadowed by an earlier one,
//! `min_idle` above `max_runners`). `ephemera config validate` prints them all, with
//! [`Config::check`], which is stricter than what the functions load ([`Config::parse`]).

use serde::{Deserialize, Deserializer};
use std::collections::HashSet;
use std::fmt;
use std::path::Path;
use std::time::Duration;

mod every_error;
mod github_limits;
mod locate;
mod more_apps;
pub mod ranges;
mod schedule;
pub use more_apps::MoreApp;
pub use schedule::{scheduled, Schedule};
mod sizing;
mod spot_allocation;
mod spot_breaker;
mod template_version;
pub use sizing::SizingPolicy;
pub use spot_allocation::SpotAllocation;
pub use spot_breaker::SpotBreaker;
use template_version::template_version_problem;

pub use ranges::parse_duration;

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
    /// Further GitHub Apps installed on the same accounts, each with its own rate-limit
    /// buckets: registrations and other calls are spread across all of them. The App of
    /// `app_id` stays the one that sends webhooks (the webhook secret is its).
    #[serde(default)]
    pub more_apps: Vec<MoreApp>,
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
    /// A job goes to the first pool whose runners can take it; they register with these
    /// labels plus `self-hosted` ([`crate::routing::registered_labels`]).
    pub labels: Vec<String>,
    pub max_runners: u32,
    /// The most vCPUs the pool's live runners may have together (no cap unless set).
    #[serde(default)]
    pub max_vcpus: Option<u32>,
    /// Whether jobs may size their runner with labels, and within what bounds.
    #[serde(default)]
    pub sizing: SizingPolicy,
    /// Idle runners kept ready: the reaper launches job-less (warm) runners while fewer
    /// wait, and spares that many idle ones from scale-down.
    #[serde(default)]
    pub min_idle: u32,
    /// When the pool keeps its `min_idle` (always unless set).
    #[serde(default)]
    pub min_idle_schedule: Option<Schedule>,
    /// Instances kept prepared and stopped, each taken by one job and started for it
    /// (docs/design.md, "Stopped pool"); none unless set.
    #[serde(default)]
    pub stopped: u32,
    /// When the pool keeps its `stopped` instances (always unless set).
    #[serde(default)]
    pub stopped_schedule: Option<Schedule>,
    /// A stopped instance launched longer ago than this is replaced, so that no job
    /// starts on an old kernel.
    #[serde(default = "default_stopped_max_age", deserialize_with = "duration")]
    pub stopped_max_age: Duration,
    /// Where warm runners register: the organization, or with `scope: repo` the owner of
    /// `warm_repo`. A job's runner registers where its job is; a warm runner has no job
    /// to say where, so without this the pool launches none.
    #[serde(default)]
    pub warm_owner: Option<String>,
    /// With `scope: repo`: the repository (its name only) warm runners register on.
    #[serde(default)]
    pub warm_repo: Option<String>,
    #[serde(default = "yes")]
    pub ephemeral: bool,
    pub instance_types: Vec<String>,
    #[serde(default)]
    pub subnets: Vec<String>,
    /// Name of the EC2 launch template (preferred) ...
    #[serde(default)]
    pub launch_template: Option<String>,
    /// The version of the pool's own `launch_template` to launch: `$Default` (unless
    /// set), `$Latest` or a version number. The deployment's template always launches
    /// the version its stack last wrote.
    #[serde(default)]
    pub launch_template_version: Option<String>,
    /// ... or an AMI id, launched through the deployment's launch template
    /// (`<deployment>-runner`) with this image instead of the template's.
    #[serde(default)]
    pub ami: Option<String>,
    #[serde(default)]
    pub spot: bool,
    /// How EC2 picks among the spot types and zones a launch offers
    /// ([`SpotAllocation`]); price-capacity-optimized unless set.
    #[serde(default)]
    pub spot_allocation_strategy: SpotAllocation,
    /// Launch through the deployment's Session Manager template
    /// (`<deployment>-runner-ssm`), whose instance profile adds the SSM agent's grants,
    /// so `ephemera runners connect` can open a shell on the pool's runners. Off unless set.
    #[serde(default)]
    pub ssm_access: bool,
    /// When interruptions spike, launches go on-demand for a while.
    #[serde(default)]
    pub spot_breaker: SpotBreaker,
    /// Re-run, once and on on-demand, a job that failed because its spot runner was
    /// interrupted ([`crate::rerun`]). Unset: on for a spot pool.
    #[serde(default)]
    pub rerun_interrupted: Option<bool>,
    #[serde(default = "default_runner_group")]
    pub runner_group: String,
    #[serde(default = "default_bootstrap_timeout", deserialize_with = "duration")]
    pub bootstrap_timeout: Duration,
    #[serde(default = "default_idle_timeout", deserialize_with = "duration")]
    pub idle_timeout: Duration,
    /// Ask GitHub whether a job is still queued before launching a runner for it (one
    /// call per job; saves an instance when jobs are often cancelled while they wait).
    #[serde(default)]
    pub check_queued: bool,
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
    /// An instance of this deployment that no live record claims is terminated once it
    /// is older than this (and seen in two runs): long enough for a launch to be recorded,
    /// or for a creation that died between launch and record to be resumed elsewhere.
    #[serde(default = "default_orphan_grace", deserialize_with = "duration")]
    pub orphan_grace: Duration,
}

impl Default for ReaperConfig {
    fn default() -> Self {
        ReaperConfig {
            deleted_ttl: default_deleted_ttl(),
            stuck_deleting: default_stuck_deleting(),
            orphan_grace: default_orphan_grace(),
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
fn default_stopped_max_age() -> Duration {
    Duration::from_secs(7 * 24 * 3600)
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
fn default_orphan_grace() -> Duration {
    Duration::from_secs(10 * 60)
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
        let bytes = std::fs::read(path).map_err(|err| ConfigError {
            file: file.clone(),
            line: None,
            field: String::new(),
            message: format!("cannot read: {err}"),
        })?;
        Config::parse(&file, Config::text_of(&file, &bytes)?)
    }

    /// The text of a file's `bytes`, or where they stop being UTF-8 (YAML 1.2 files are
    /// Unicode, and this parser reads UTF-8 only: https://yaml.org/spec/1.2.2/#51-character-set).
    pub fn text_of<'b>(file: &str, bytes: &'b [u8]) -> Result<&'b str, ConfigError> {
        std::str::from_utf8(bytes).map_err(|err| {
            let good = &bytes[..err.valid_up_to()];
            let line = good.iter().filter(|b| **b == b'\n').count() + 1;
            let column =
                good.len() - good.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1) + 1;
            let bad = bytes[err.valid_up_to()];
            ConfigError {
                file: file.to_owned(),
                line: Some(line),
                field: String::new(),
                message: format!(
                    "byte 0x{bad:02x} at column {column} is not UTF-8: save the file as UTF-8"
                ),
            }
        })
    }

    /// Parses and validates `text`; `file` names it in errors. The first problem found.
    pub fn parse(file: &str, text: &str) -> Result<Config, ConfigError> {
        Config::check_with(file, text, false).map_err(|mut errors| errors.swap_remove(0))
    }

    /// What operators check before a push (`ephemera config validate`): everything
    /// [`Config::parse`] checks, every problem at once (every type error and unknown key;
    /// a file that is not YAML has only its one syntax error; the checks of meaning run
    /// once every field has its type), and also pools that can never get a job because an
    /// earlier pool has all of their labels. The functions themselves accept such a
    /// file, since stopping every pool over one unreachable pool would be worse than the
    /// mistake. Never an empty `Err`.
    pub fn check(file: &str, text: &str) -> Result<Config, Vec<ConfigError>> {
        Config::check_with(file, text, true)
    }

    fn check_with(file: &str, text: &str, strict: bool) -> Result<Config, Vec<ConfigError>> {
        let deserializer = serde_yaml_ng::Deserializer::from_str(text);
        let config: Config = serde_path_to_error::deserialize(deserializer).map_err(|err| {
            let field = known_path(&err.path().to_string());
            let inner = err.into_inner();
            // The parser places a custom error (a bad duration) at the enclosing mapping;
            // the scanner finds the field's own line. Both are at or above the truth.
            let line = inner
                .location()
                .map(|l| l.line())
                .max(locate::line_of(text, &field));
            let raw = strip_location(&inner.to_string());
            let mut message = every_error::yaml_words(&raw);
            if line.is_some_and(|line| indented_with_tab(text, line)) {
                message.push_str(": a tab in the indentation (YAML indents with spaces only)");
            }
            let mut errors = vec![ConfigError {
                file: file.to_owned(),
                line,
                message,
                field: field.clone(),
            }];
            if strict {
                errors.extend(
                    every_error::further_errors::<Config>(text, &field, &raw)
                        .into_iter()
                        .map(|(field, message)| ConfigError {
                            file: file.to_owned(),
                            line: locate::line_of(text, &field),
                            message: every_error::yaml_words(&strip_location(&message)),
                            field,
                        }),
                );
            }
            errors
        })?;
        let problems = config.problems(strict);
        if problems.is_empty() {
            return Ok(config);
        }
        Err(problems
            .into_iter()
            .map(|(field, message)| ConfigError {
                file: file.to_owned(),
                line: locate::line_of(text, &field),
                field,
                message,
            })
            .collect())
    }

    /// The pool named `name`.
    pub fn pool(&self, name: &str) -> Option<&PoolConfig> {
        self.pools.iter().find(|pool| pool.name == name)
    }

    /// Every problem of meaning, as (field, message), in the order of the file; with
    /// `strict`, shadowed pools too.
    fn problems(&self, strict: bool) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        if !is_name(&self.deployment) {
            problems.push(("deployment".into(), NAME_RULE.into()));
        }
        let api_url = &self.github.api_url;
        if !(api_url.starts_with("https://") || api_url.starts_with("http://")) {
            let message = format!("{api_url:?} is not an http(s) URL");
            problems.push(("github.api_url".into(), message));
        }
        if self.github.app_id == 0 {
            problems.push((
                "github.app_id".into(),
                "must be the App's id, above 0".into(),
            ));
        }
        problems.extend(more_apps::problems(&self.github));
        for (field, duration, range) in [
            (
                "reaper.deleted_ttl",
                self.reaper.deleted_ttl,
                ranges::DELETED_TTL,
            ),
            (
                "reaper.stuck_deleting",
                self.reaper.stuck_deleting,
                ranges::STUCK_DELETING,
            ),
            (
                "reaper.orphan_grace",
                self.reaper.orphan_grace,
                ranges::ORPHAN_GRACE,
            ),
        ] {
            if let Some(problem) = ranges::check_duration(duration, range) {
                problems.push((field.into(), problem));
            }
        }
        if self.pools.is_empty() {
            problems.push(("pools".into(), "at least one pool is required".into()));
        }
        let mut names = HashSet::new();
        for (i, pool) in self.pools.iter().enumerate() {
            let at = |field: &str| format!("pools[{i}].{field}");
            if !is_name(&pool.name) {
                problems.push((at("name"), NAME_RULE.into()));
            } else if !names.insert(pool.name.as_str()) {
                let message = format!("duplicate pool name {:?}", pool.name);
                problems.push((at("name"), message));
            }
            problems.extend(pool.problems().into_iter().map(|(f, m)| (at(f), m)));
            let ssm = pool.ssm_problems(&self.deployment);
            problems.extend(ssm.into_iter().map(|(f, m)| (at(f), m)));
            let breaker = pool.spot_breaker.problems();
            problems.extend(breaker.into_iter().map(|(f, m)| (at(f), m)));
            let sizing = sizing::pool_problems(pool);
            problems.extend(sizing.into_iter().map(|(f, m)| (at(&f), m)));
            let limits = github_limits::pool_problems(self, i);
            problems.extend(limits.into_iter().map(|(f, m)| (at(f), m)));
            if strict {
                let warm = pool.warm_problems(self.github.scope);
                problems.extend(warm.into_iter().map(|(f, m)| (at(f), m)));
            }
            if let Some((j, earlier)) = self.shadowing(i).filter(|_| strict) {
                let message = format!(
                    "pool {:?} can never get a job: pools[{j}] ({:?}) comes first and has all \
                     of its labels, and a job goes to the first pool that has all of the job's \
                     labels; move {:?} above {:?} or give it a label {:?} lacks",
                    pool.name, earlier.name, pool.name, earlier.name, earlier.name
                );
                problems.push((at("labels"), message));
            }
        }
        problems
    }

    /// An earlier pool whose registered labels contain all of pool `i`'s (ignoring
    /// case), which therefore takes every job pool `i` could take.
    fn shadowing(&self, i: usize) -> Option<(usize, &PoolConfig)> {
        let labels = |pool: &PoolConfig| -> HashSet<String> {
            crate::routing::registered_labels(pool)
                .iter()
                .map(|l| l.to_lowercase())
                .collect()
        };
        let own = labels(&self.pools[i]);
        self.pools[..i]
            .iter()
            .enumerate()
            .find(|(_, earlier)| labels(earlier).is_superset(&own))
    }
}

impl PoolConfig {
    /// The warm runners the pool keeps at `now`: `min_idle`, or none outside its schedule.
    pub fn min_idle_at(&self, now: time::OffsetDateTime) -> u32 {
        scheduled(self.min_idle, self.min_idle_schedule.as_ref(), now)
    }

    /// The stopped instances the pool keeps at `now`: `stopped`, or none outside its
    /// schedule.
    pub fn stopped_at(&self, now: time::OffsetDateTime) -> u32 {
        scheduled(self.stopped, self.stopped_schedule.as_ref(), now)
    }

    /// Whether a job of this pool that failed because its spot runner was interrupted is
    /// re-run: as `rerun_interrupted` says, on by default for a spot pool.
    pub fn reruns_interrupted(&self) -> bool {
        self.rerun_interrupted.unwrap_or(self.spot)
    }

    /// Where this pool's warm runners register, `None` when the configuration does not
    /// say (then no warm runner is launched).
    pub fn warm_scope(&self, scope: Scope) -> Option<(String, Option<String>)> {
        let owner = self.warm_owner.clone()?;
        match scope {
            Scope::Org => Some((owner, None)),
            Scope::Repo => Some((owner, Some(self.warm_repo.clone()?))),
        }
    }

    /// A `min_idle` or `stopped` that cannot launch for want of a place to register (a
    /// taken stopped instance's runner registers where warm runners do; checked by
    /// `ephemera config validate`; the functions load such a file, keep its idle runners
    /// and log why they launch none, as before `min_idle` launched).
    fn warm_problems(&self, scope: Scope) -> Vec<(&'static str, String)> {
        if self.min_idle == 0 && self.stopped == 0 {
            return Vec::new();
        }
        let mut problems = Vec::new();
        if self.warm_owner.is_none() {
            let message = "required when min_idle or stopped is above 0: the organization \
                           (or owner) warm runners and taken stopped instances register on";
            problems.push(("warm_owner", message.to_owned()));
        }
        if scope == Scope::Repo && self.warm_repo.is_none() {
            let message = "required when min_idle or stopped is above 0 with scope repo: the \
                           repository warm runners and taken stopped instances register on";
            problems.push(("warm_repo", message.to_owned()));
        }
        problems
    }

    /// Problems of this pool alone, as (field within the pool, message).
    fn problems(&self) -> Vec<(&'static str, String)> {
        let mut problems = Vec::new();
        if self.labels.is_empty() || self.labels.iter().any(|l| l.trim().is_empty()) {
            problems.push(("labels", "labels must be non-empty strings".into()));
        }
        if let Some(problem) = ranges::check_number(self.max_runners.into(), ranges::MAX_RUNNERS) {
            problems.push(("max_runners", problem));
        }
        if self.min_idle > self.max_runners {
            let message = format!(
                "{} is above max_runners ({}): the pool could never keep that many idle",
                self.min_idle, self.max_runners
            );
            problems.push(("min_idle", message));
        }
        if self.stopped > 0 && self.min_idle + self.stopped > self.max_runners {
            let message = format!(
                "{} with min_idle ({}) is above max_runners ({}): stopped instances hold \
                 slots as running ones do",
                self.stopped, self.min_idle, self.max_runners
            );
            problems.push(("stopped", message));
        }
        for (field, schedule) in [
            ("min_idle_schedule", &self.min_idle_schedule),
            ("stopped_schedule", &self.stopped_schedule),
        ] {
            for (part, message) in schedule.iter().flat_map(Schedule::problems) {
                problems.push((schedule_field(field, part), message));
            }
        }
        if self.instance_types.is_empty() {
            problems.push(("instance_types", "at least one instance type".into()));
        }
        match (&self.launch_template, &self.ami) {
            (None, None) => problems.push(("launch_template", "set launch_template or ami".into())),
            (Some(_), Some(_)) => {
                problems.push(("ami", "set launch_template or ami, not both".into()))
            }
            _ => {}
        }
        if let Some(version) = &self.launch_template_version {
            if let Some(problem) = template_version_problem(version, self.ami.is_some()) {
                problems.push(("launch_template_version", problem));
            }
        }
        for (field, duration, range) in [
            (
                "bootstrap_timeout",
                self.bootstrap_timeout,
                ranges::BOOTSTRAP_TIMEOUT,
            ),
            ("idle_timeout", self.idle_timeout, ranges::IDLE_TIMEOUT),
            (
                "stopped_max_age",
                self.stopped_max_age,
                ranges::STOPPED_MAX_AGE,
            ),
        ] {
            if let Some(problem) = ranges::check_duration(duration, range) {
                problems.push((field, problem));
            }
        }
        problems
    }
}

/// The field of a schedule's part, `stopped_schedule.from`: the pool's problems name
/// fields as `&'static str`, and there are few enough to list.
fn schedule_field(schedule: &'static str, part: &'static str) -> &'static str {
    match (schedule, part) {
        ("min_idle_schedule", "days") => "min_idle_schedule.days",
        ("min_idle_schedule", "from") => "min_idle_schedule.from",
        ("min_idle_schedule", "to") => "min_idle_schedule.to",
        ("min_idle_schedule", _) => "min_idle_schedule.utc_offset",
        (_, "days") => "stopped_schedule.days",
        (_, "from") => "stopped_schedule.from",
        (_, "to") => "stopped_schedule.to",
        _ => "stopped_schedule.utc_offset",
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

/// The part of an error's field path that the parser knew: a syntax error deep in a
/// mapping ends in `?` (`pools[0].?`), and a whole-file error is `.`.
fn known_path(path: &str) -> String {
    let known = path.split('?').next().unwrap_or_default();
    known.trim_end_matches('.').to_owned()
}

/// Whether 1-based `line` of `text` has a tab before its first other character.
fn indented_with_tab(text: &str, line: usize) -> bool {
    text.lines().nth(line.saturating_sub(1)).is_some_and(|l| {
        l.chars()
            .take_while(|c| c.is_whitespace())
            .any(|c| c == '\t')
    })
}

/// serde_yaml appends " at line L column C" and may put the path of the enclosing
/// mapping first (`pools[0]: ...`); we report the line and the field ourselves.
fn strip_location(message: &str) -> String {
    let message = match message.rfind(" at line ") {
        Some(at) => &message[..at],
        None => message,
    };
    match message.split_once(": ") {
        Some((path, rest)) if !path.is_empty() && !path.contains(' ') => rest.to_owned(),
        _ => message.to_owned(),
    }
}

fn duration<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    parse_duration(&text).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests;
