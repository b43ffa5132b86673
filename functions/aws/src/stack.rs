//! Reading a deployed stack's outputs, so operators name a deployment by its
//! CloudFormation stack (`ephemera --stack NAME ...`) instead of copying table names and
//! queue URLs around.
//!
//! template.yaml exports these outputs: `WebhookUrl` (the webhook Function URL),
//! `TableName` (the DynamoDB table), `QueueUrl` (the jobs queue) and
//! `ConfigParameterName` (the SSM parameter that holds the configuration YAML, written by
//! `ephemera config push`; the stack never creates it) and `DefaultConfigParameterName`
//! (the stack's own configuration, used while nothing was pushed). `ephemera doctor`
//! also reads `GitHubAppKeySecret`, `WebhookSecret`, `JitTableName` and
//! `LaunchTemplateName`. Every output key the CLI reads is a constant here.

use anyhow::Context;
use aws_config::SdkConfig;

/// Output key of the webhook Function URL.
pub const WEBHOOK_URL: &str = "WebhookUrl";
/// Output key of the DynamoDB table name.
pub const TABLE_NAME: &str = "TableName";
/// Output key of the jobs queue URL.
pub const QUEUE_URL: &str = "QueueUrl";
/// Output key of the configuration's SSM parameter name.
pub const CONFIG_PARAMETER_NAME: &str = "ConfigParameterName";

/// Output key of the stack's default configuration parameter.
pub const DEFAULT_CONFIG_PARAMETER_NAME: &str = "DefaultConfigParameterName";
/// Output key of the GitHub App key secret's ARN.
pub const APP_KEY_SECRET: &str = "GitHubAppKeySecret";
/// Output key of the webhook secret's ARN.
pub const WEBHOOK_SECRET: &str = "WebhookSecret";
/// Output key of the JIT config table's name.
pub const JIT_TABLE_NAME: &str = "JitTableName";
/// Output key of the runner launch template's name.
pub const LAUNCH_TEMPLATE_NAME: &str = "LaunchTemplateName";
/// Output key of the runners' log group's name (one stream per instance id).
pub const RUNNER_LOG_GROUP_NAME: &str = "RunnerLogGroupName";

/// What template.yaml puts into the App key secret it creates, until the operator puts
/// the key there: the functions and `ephemera doctor` name it as not a key.
pub const APP_KEY_PLACEHOLDER: &str = "not-set-put-the-github-app-private-key-pem-here";

/// What a deployment's stack tells about it; an output the stack lacks is `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StackOutputs {
    pub stack: String,
    pub webhook_url: Option<String>,
    pub table_name: Option<String>,
    pub queue_url: Option<String>,
    pub config_parameter_name: Option<String>,
    pub default_config_parameter_name: Option<String>,
    pub runner_log_group_name: Option<String>,
}

impl StackOutputs {
    /// Picks the known outputs out of `(key, value)` pairs; other keys are ignored.
    pub(crate) fn from_pairs<'a>(
        stack: &str,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> StackOutputs {
        let mut outputs = StackOutputs {
            stack: stack.to_owned(),
            ..StackOutputs::default()
        };
        for (key, value) in pairs {
            let slot = match key {
                WEBHOOK_URL => &mut outputs.webhook_url,
                TABLE_NAME => &mut outputs.table_name,
                QUEUE_URL => &mut outputs.queue_url,
                CONFIG_PARAMETER_NAME => &mut outputs.config_parameter_name,
                DEFAULT_CONFIG_PARAMETER_NAME => &mut outputs.default_config_parameter_name,
                RUNNER_LOG_GROUP_NAME => &mut outputs.runner_log_group_name,
                _ => continue,
            };
            *slot = Some(value.to_owned());
        }
        outputs
    }

    /// The output `key`, or an error saying which stack lacks it.
    pub fn require<'a>(&self, value: &'a Option<String>, key: &str) -> anyhow::Result<&'a str> {
        value
            .as_deref()
            .with_context(|| format!("stack {} has no output {key}", self.stack))
    }
}

/// Reads the outputs of the stack `name` (`DescribeStacks`).
pub async fn stack_outputs(sdk: &SdkConfig, name: &str) -> anyhow::Result<StackOutputs> {
    let client = aws_sdk_cloudformation::Client::new(sdk);
    let described = client
        .describe_stacks()
        .stack_name(name)
        .send()
        .await
        .with_context(|| format!("reading the outputs of stack {name}"))?;
    let stack = described
        .stacks()
        .first()
        .with_context(|| format!("stack {name} not found"))?;
    let pairs = stack
        .outputs()
        .iter()
        .filter_map(|o| Some((o.output_key()?, o.output_value()?)));
    Ok(StackOutputs::from_pairs(name, pairs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_creates_the_app_key_secret_with_the_placeholder() {
        let template = include_str!("../../../template.yaml");
        let line = format!("SecretString: {APP_KEY_PLACEHOLDER}\n");
        assert!(template.contains(&line), "template.yaml lacks {line:?}");
    }

    #[test]
    fn known_outputs_are_picked_and_others_ignored() {
        let outputs = StackOutputs::from_pairs(
            "eph",
            [
                ("TableName", "eph-runners"),
                ("QueueUrl", "https://sqs/eph-jobs"),
                ("ConfigParameterName", "/eph/config"),
                ("SomethingElse", "x"),
            ],
        );
        assert_eq!(outputs.table_name.as_deref(), Some("eph-runners"));
        assert_eq!(outputs.queue_url.as_deref(), Some("https://sqs/eph-jobs"));
        assert_eq!(
            outputs.config_parameter_name.as_deref(),
            Some("/eph/config")
        );
        assert_eq!(outputs.webhook_url, None);
        let missing = outputs.require(&outputs.webhook_url, WEBHOOK_URL);
        assert_eq!(
            missing.map_err(|e| e.to_string()).err().as_deref(),
            Some("stack eph has no output WebhookUrl")
        );
    }
}
