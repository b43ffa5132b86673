//! `ephemera config validate FILE` and `ephemera config push FILE`.
//!
//! Validation is [`Config::check`]: every problem at once, each naming the file, the line
//! and the field, and stricter than what the functions load (a pool that can never get
//! a job is an error here). Push validates, then writes the deployment's SSM parameter,
//! which the functions read again within a minute.

use crate::exit::{Failure, Outcome, INVALID_CONFIG, REFUSED};
use crate::target::Deployment;
use anyhow::Context;
use aws_sdk_ssm::types::{ParameterTier, ParameterType};
use clap::Args;
use ephemera_core::config::Config;
use ephemera_core::routing::{registered_labels, SELF_HOSTED};
use std::path::{Path, PathBuf};

/// Parameters above this size need SSM's advanced tier.
const STANDARD_TIER_LIMIT: usize = 4096;

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
}

/// Reads and checks `file`: the configuration and its text, or exit code 7 with every
/// problem on stderr.
fn checked(file: &Path) -> Result<(Config, String), Failure> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    match Config::check(&file.display().to_string(), &text) {
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
            format!(
                "  pool {}: runners register with labels [{}]{note}; it takes a job whose \
                 runs-on labels are all among them",
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
    Ok(())
}

pub async fn push(deployment: &mut Deployment, args: PushArgs) -> Outcome {
    let (config, text) = checked(&args.file)?;
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
    let current_deployment = current
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
    let mut put = ssm
        .put_parameter()
        .name(&name)
        .value(&text)
        .r#type(ParameterType::String)
        .overwrite(true);
    if text.len() > STANDARD_TIER_LIMIT {
        put = put.tier(ParameterTier::Advanced);
    }
    let version = put
        .send()
        .await
        .with_context(|| format!("writing parameter {name}"))?
        .version;
    println!(
        "pushed {} to {name} (version {version}); the functions use it within a minute",
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
