//! The configuration: the one the functions read parses and validates, and each
//! function runs the parameter's current version.

use super::Request;
use crate::cmd::doctor::ports::StackPort;
use crate::cmd::doctor::report::{Check, Report};
use crate::errors::describe;
use ephemera_aws::config_source::LoadedConfig;
use ephemera_aws::running::FUNCTIONS;
use ephemera_aws::stack::{CONFIG_PARAMETER_NAME, DEFAULT_CONFIG_PARAMETER_NAME, TABLE_NAME};
use std::collections::BTreeMap;

/// `config.valid`: the configuration the functions read parses and validates.
pub(super) async fn config_check(
    request: &Request,
    outputs: &BTreeMap<String, String>,
    stack: &dyn StackPort,
    report: &mut Report,
) -> Option<LoadedConfig> {
    let Some(parameter) = outputs.get(CONFIG_PARAMETER_NAME) else {
        report.push(Check::skip("config.valid", "stack.outputs failed"));
        return None;
    };
    let default = outputs
        .get(DEFAULT_CONFIG_PARAMETER_NAME)
        .map(String::as_str);
    match stack.load_config(parameter, default).await {
        Ok(loaded) => {
            report.push(Check::pass(
                "config.valid",
                format!(
                    "{} version {}: deployment {}, {} pool(s)",
                    loaded.parameter,
                    loaded.version,
                    loaded.config.deployment,
                    loaded.config.pools.len()
                ),
            ));
            Some(loaded)
        }
        Err(err) => {
            report.push(Check::fail(
                "config.valid",
                describe(&err),
                format!(
                    "check the file with `ephemera config validate FILE`, then `ephemera \
                     config push FILE --stack {}`",
                    request.stack
                ),
            ));
            None
        }
    }
}

/// `config.running`, per function: the configuration version it last built its handler
/// from (its `RUNNING#<function>` item) is the parameter's.
pub(super) async fn running_checks(
    outputs: &BTreeMap<String, String>,
    loaded: Option<&LoadedConfig>,
    stack: &dyn StackPort,
    report: &mut Report,
) {
    let (Some(loaded), Some(table)) = (loaded, outputs.get(TABLE_NAME)) else {
        report.push(Check::skip("config.running", "config.valid failed"));
        return;
    };
    for function in FUNCTIONS {
        let check = match stack.running_config(table, function).await {
            Ok(Some(running))
                if running.parameter == loaded.parameter && running.version == loaded.version =>
            {
                Check::pass(
                    "config.running",
                    format!("runs version {} (since {})", running.version, running.at),
                )
            }
            Ok(Some(running)) => Check::warn(
                "config.running",
                format!(
                    "runs version {} of {}; the functions read version {} of {}",
                    running.version, running.parameter, loaded.version, loaded.parameter
                ),
                format!(
                    "a function reads the parameter again within EPHEMERA_RELOAD_SECONDS \
                     (30 s by default) of its next invocation; if this stays, see the \
                     {function} function's log for why it cannot use the new version"
                ),
            ),
            Ok(None) => Check::warn(
                "config.running",
                "has not run yet (no record of the configuration it runs)",
                format!(
                    "it records its version at its first invocation; if jobs have come \
                     and this stays, see the {function} function's log"
                ),
            ),
            Err(err) => Check::warn(
                "config.running",
                describe(&err),
                "the credentials need dynamodb:GetItem on the table",
            ),
        };
        report.push(check.on(function));
    }
}
