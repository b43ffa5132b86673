//! Where a function's configuration comes from: the YAML in an SSM parameter (written
//! by `ephemera config push`), or, while nothing was pushed, the stack's own default
//! parameter. Read and validated here; [`crate::reload`] reads it at cold start and
//! follows it, `ephemera doctor` and `ephemera local` read it the same way.

use anyhow::Context;
use ephemera_core::config::Config;

/// A configuration, the parameter it was read from and that parameter's version.
#[derive(Debug)]
pub struct LoadedConfig {
    pub config: Config,
    pub parameter: String,
    pub version: i64,
}

/// Reads and validates the configuration in the SSM parameter `name` or, while `name`
/// does not exist (nothing was pushed yet), in `default` (the stack's own).
pub async fn load_config_or_default(
    client: &aws_sdk_ssm::Client,
    name: &str,
    default: Option<&str>,
) -> anyhow::Result<LoadedConfig> {
    for parameter in std::iter::once(name).chain(default) {
        if let Some((text, version)) = read_parameter(client, parameter).await? {
            let config = Config::parse(&format!("ssm:{parameter}"), &text)?;
            return Ok(LoadedConfig {
                config,
                parameter: parameter.to_owned(),
                version,
            });
        }
    }
    let also = default
        .map(|default| format!(" (nor does the stack's default {default})"))
        .unwrap_or_default();
    anyhow::bail!(
        "reading configuration parameter {name}: it does not exist{also}; write it with \
         `ephemera config push FILE --config-parameter {name}`"
    )
}

/// The parameter's value and version; `None` when it does not exist.
async fn read_parameter(
    client: &aws_sdk_ssm::Client,
    name: &str,
) -> anyhow::Result<Option<(String, i64)>> {
    let output = match client
        .get_parameter()
        .name(name)
        .with_decryption(true)
        .send()
        .await
    {
        Ok(output) => output,
        Err(err)
            if err
                .as_service_error()
                .is_some_and(|e| e.is_parameter_not_found()) =>
        {
            return Ok(None);
        }
        Err(err) => {
            return Err(
                anyhow::Error::new(err).context(format!("reading configuration parameter {name}"))
            )
        }
    };
    let parameter = output
        .parameter()
        .with_context(|| format!("configuration parameter {name} has no value"))?;
    let text = parameter
        .value()
        .with_context(|| format!("configuration parameter {name} has no value"))?;
    Ok(Some((text.to_owned(), parameter.version())))
}
