//! `ephemera config validate FILE` and `ephemera config push FILE`.
//!
//! Validation is [`Config::check`]: every problem at once, each naming the file, the line
//! and the field, and stricter than what the functions load (a pool that can never get
//! a job is an error here). Push validates, checks the size against SSM's tiers, then
//! writes the deployment's SSM parameter, which the stack does not own (it keeps its
//! default configuration in another one, read only while nothing was pushed), so a
//! redeploy keeps what was pushed. The functions check its version at most every
//! `EPHEMERA_RELOAD_SECONDS` (30 s by default) and use a new one from their next
//! invocation after that check.

use crate::exit::{Failure, Outcome, INVALID_CONFIG, REFUSED};
use crate::target::{ConfigParameterArg, Deployment, DeploymentCommand, StackArgs, TargetArgs};
use anyhow::Context;
use aws_sdk_ssm::types::{ParameterTier, ParameterType};
use clap::Args;
use ephemera_core::config::Config;
use ephemera_core::routing::{registered_labels, SELF_HOSTED};
use std::path::{Path, PathBuf};

/// The most a Standard-tier SSM parameter holds (4 KB).
const STANDARD_TIER_LIMIT: usize = 4096;
/// The most an Advanced-tier SSM parameter holds (8 KB); Advanced parameters are charged
/// for, per parameter and month.
const ADVANCED_TIER_LIMIT: usize = 8192;

#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// The configuration file (YAML).
    file: PathBuf,
}

#[derive(Args, Debug)]
pub struct PushArgs {
    /// The configuration file (YAML).
    file: PathBuf,
    /// Allow a file whose `deployment` differs from the one in the parameter (every
    /// runner name, tag and orphan sweep follows that name).
    #[arg(long)]
    allow_deployment_change: bool,
    /// Store a file above 4 KB as an Advanced-tier SSM parameter (up to 8 KB; charged
    /// per parameter and month, and a parameter never goes back to Standard).
    #[arg(long)]
    advanced_tier: bool,
    #[command(flatten)]
    stack: StackArgs,
    #[command(flatten)]
    config_parameter: ConfigParameterArg,
}

impl DeploymentCommand for PushArgs {
    fn target(&self) -> TargetArgs {
        TargetArgs::new(&self.stack).config_parameter(&self.config_parameter)
    }

    async fn run(self, deployment: &mut Deployment) -> Outcome {
        push(deployment, self).await
    }
}

/// The SSM tier `text` needs, or exit code 7 saying why it cannot be stored.
fn tier_for(file: &Path, text: &str, advanced_allowed: bool) -> Result<ParameterTier, Failure> {
    let size = text.len();
    let name = file.display();
    if size > ADVANCED_TIER_LIMIT {
        return Err(Failure::msg(
            INVALID_CONFIG,
            format!(
                "{name} is {size} bytes; an SSM parameter holds at most {ADVANCED_TIER_LIMIT} \
                 (Advanced tier): shorten it (comments, fewer pools)"
            ),
        ));
    }
    if size > STANDARD_TIER_LIMIT && !advanced_allowed {
        return Err(Failure::msg(
            INVALID_CONFIG,
            format!(
                "{name} is {size} bytes; a Standard SSM parameter holds at most \
                 {STANDARD_TIER_LIMIT}: shorten it, or pass --advanced-tier to store it as an \
                 Advanced parameter (up to {ADVANCED_TIER_LIMIT}, charged per month)"
            ),
        ));
    }
    Ok(if size > STANDARD_TIER_LIMIT {
        ParameterTier::Advanced
    } else {
        ParameterTier::Standard
    })
}

/// Reads and checks `file`: the configuration and its text, or exit code 7 with every
/// problem on stderr.
fn checked(file: &Path) -> Result<(Config, String), Failure> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let name = file.display().to_string();
    let text = Config::text_of(&name, &bytes)
        .map_err(|error| {
            eprintln!("error: {error}");
            Failure::msg(INVALID_CONFIG, format!("{name} is not valid (not UTF-8)"))
        })?
        .to_owned();
    match Config::check(&name, &text) {
        Ok(config) => Ok((config, text)),
        Err(errors) => {
            for error in &errors {
                eprintln!("error: {error}");
            }
            let count = errors.len();
            let plural = if count == 1 { "" } else { "s" };
            Err(Failure::msg(
                INVALID_CONFIG,
                format!("{} is not valid ({count} problem{plural})", file.display()),
            ))
        }
    }
}

fn summary(config: &Config) -> String {
    let pools: Vec<&str> = config.pools.iter().map(|p| p.name.as_str()).collect();
    format!(
        "deployment {}, {} pool{}: {}",
        config.deployment,
        pools.len(),
        if pools.len() == 1 { "" } else { "s" },
        pools.join(", ")
    )
}

/// One line per pool: the labels its runners register with, which are the only labels
/// GitHub matches a job's `runs-on` against (a just-in-time runner has no implied label).
fn registered_labels_lines(config: &Config) -> Vec<String> {
    config
        .pools
        .iter()
        .map(|pool| {
            let labels = registered_labels(pool);
            let added = !pool
                .labels
                .iter()
                .any(|l| l.trim().eq_ignore_ascii_case(SELF_HOSTED));
            let note = if added { " (self-hosted added)" } else { "" };
            let policy = &pool.sizing;
            let sizing = if policy.accept {
                let cap = pool.runner_cap();
                let capped = if cap < pool.max_runners {
                    format!("; max_vcpus holds it to {cap} runners at once")
                } else {
                    String::new()
                };
                format!(
                    ", and sizing labels ({}*) up to {} vCPUs, {} GiB of memory and a {} GiB \
                     disk per runner (a sized job's runner registers with them too){capped}",
                    ephemera_core::sizing::PREFIX,
                    policy.max_vcpus_per_runner,
                    policy.max_memory_gib,
                    policy.max_disk_gib
                )
            } else {
                String::new()
            };
            format!(
                "  pool {}: runners register with labels [{}]{note}; it takes a job whose \
                 runs-on labels are all among them{sizing}",
                pool.name,
                labels.join(", ")
            )
        })
        .collect()
}

pub fn validate(args: ValidateArgs) -> Outcome {
    let (config, _) = checked(&args.file)?;
    println!("{}: valid ({})", args.file.display(), summary(&config));
    for line in registered_labels_lines(&config) {
        println!("{line}");
    }
    for line in rerun_lines(&config) {
        println!("{line}");
    }
    for line in stopped_lines(&config) {
        println!("{line}");
    }
    Ok(())
}

/// One line per pool that asks for stopped instances: this version takes a stopped
/// instance for a job but prepares none yet (docs/configuration.md, "Stopped pool"), so
/// the operator learns here, not from a bill or a slow start, that its jobs launch.
fn stopped_lines(config: &Config) -> Vec<String> {
    config
        .pools
        .iter()
        .filter(|pool| pool.stopped > 0)
        .map(|pool| {
            format!(
                "  pool {}: stopped: {} is accepted, but this version prepares no stopped \
                 instance yet (docs/configuration.md, Stopped pool): its jobs launch as \
                 without the key",
                pool.name, pool.stopped
            )
        })
        .collect()
}

/// One line per spot pool that re-runs the jobs its interruptions fail
/// (`rerun_interrupted`), naming the permission that takes.
fn rerun_lines(config: &Config) -> Vec<String> {
    config
        .pools
        .iter()
        .filter(|pool| pool.spot && pool.reruns_interrupted())
        .map(|pool| {
            format!(
                "  pool {}: a job a spot interruption fails is re-run once, on on-demand \
                 (rerun_interrupted; the GitHub App needs actions: write)",
                pool.name
            )
        })
        .collect()
}

pub async fn push(deployment: &mut Deployment, args: PushArgs) -> Outcome {
    let (config, text) = checked(&args.file)?;
    let tier = tier_for(&args.file, &text, args.advanced_tier)?;
    deployment.progress.step(format!(
        "{}: valid ({})",
        args.file.display(),
        summary(&config)
    ));
    let name = deployment.config_parameter().await?;
    let ssm = aws_sdk_ssm::Client::new(&deployment.sdk);
    deployment
        .progress
        .step(format!("reading parameter {name}"));
    let current = current_value(&ssm, &name).await?;
    if current.as_deref() == Some(text.as_str()) {
        println!(
            "parameter {name} already holds {}; nothing to push",
            args.file.display()
        );
        return Ok(());
    }
    // Nothing pushed yet: the functions run the stack's default, which names the
    // deployment too.
    let in_force = match (&current, deployment.default_config_parameter().await?) {
        (None, Some(default)) => current_value(&ssm, &default).await?,
        _ => current.clone(),
    };
    let current_deployment = in_force
        .as_deref()
        .and_then(|text| Config::parse(&name, text).ok())
        .map(|c| c.deployment);
    if let Some(old) = current_deployment.filter(|old| *old != config.deployment) {
        if !args.allow_deployment_change {
            return Err(Failure::msg(
                REFUSED,
                format!(
                    "parameter {name} is for deployment {old:?}, {} names {:?}: the runners of \
                     {old:?} would be left behind; pass --allow-deployment-change if you mean it",
                    args.file.display(),
                    config.deployment
                ),
            ));
        }
    }
    deployment
        .progress
        .step(format!("writing parameter {name}"));
    let version = ssm
        .put_parameter()
        .name(&name)
        .value(&text)
        .r#type(ParameterType::String)
        // Standard is SSM's default; an Advanced parameter cannot go back to it.
        .set_tier((tier == ParameterTier::Advanced).then_some(tier))
        .overwrite(true)
        .send()
        .await
        .with_context(|| format!("writing parameter {name}"))?
        .version;
    println!(
        "pushed {} to {name} (version {version}); each function checks for a new version at \
         most every EPHEMERA_RELOAD_SECONDS (30 s by default) and uses it from its next \
         invocation after that check; redeploying the stack does not change it",
        args.file.display()
    );
    Ok(())
}

/// The parameter's value, `None` when it does not exist yet.
async fn current_value(ssm: &aws_sdk_ssm::Client, name: &str) -> anyhow::Result<Option<String>> {
    match ssm.get_parameter().name(name).send().await {
        Ok(output) => Ok(output.parameter.and_then(|p| p.value)),
        Err(err)
            if err
                .as_service_error()
                .is_some_and(|e| e.is_parameter_not_found()) =>
        {
            Ok(None)
        }
        Err(err) => Err(anyhow::Error::new(err).context(format!("reading parameter {name}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_with_stopped_instances_is_told_that_none_are_prepared_yet() {
        let yaml = "deployment: d\ngithub:\n  app_id: 1\npools:\n  - name: a\n    labels: [x]\n    \
                    max_runners: 4\n    stopped: 2\n    instance_types: [m7i.large]\n    launch_template: t\n  \
                    - name: b\n    labels: [y]\n    max_runners: 4\n    instance_types: [m7i.large]\n    \
                    launch_template: t\n";
        let config = Config::parse("config.yaml", yaml).expect("a valid config");
        let lines = stopped_lines(&config);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("pool a: stopped: 2"), "{lines:?}");
        assert!(
            lines[0].contains("prepares no stopped instance yet"),
            "{lines:?}"
        );
    }

    #[test]
    fn a_file_above_the_standard_tier_is_refused_unless_advanced_is_asked_for() {
        let file = Path::new("config.yaml");
        let small = "x".repeat(STANDARD_TIER_LIMIT);
        assert_eq!(
            tier_for(file, &small, false).ok(),
            Some(ParameterTier::Standard)
        );
        let big = "x".repeat(STANDARD_TIER_LIMIT + 1);
        let refused = tier_for(file, &big, false).expect_err("above 4 KB");
        assert_eq!(refused.code, INVALID_CONFIG);
        let said = refused.error.to_string();
        assert!(said.contains("config.yaml is 4097 bytes"), "{said}");
        assert!(said.contains("--advanced-tier"), "{said}");
        assert_eq!(
            tier_for(file, &big, true).ok(),
            Some(ParameterTier::Advanced)
        );
        let huge = "x".repeat(ADVANCED_TIER_LIMIT + 1);
        assert!(tier_for(file, &huge, true).is_err());
    }
}
