//! What `ephemera doctor` asks of AWS and GitHub, as small traits, so that every check's
//! logic runs in unit tests on fakes; [`super::aws`] and [`super::github`] implement them
//! with the AWS SDK and the GitHub App client.

use async_trait::async_trait;
use ephemera_aws::config_source::LoadedConfig;
use ephemera_aws::running::RunningConfig;
use ephemera_core::ports::{ForgeError, HookDelivery};
use ephemera_github::AppDescription;
use std::collections::BTreeMap;

/// A stack as `DescribeStacks` reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StackFacts {
    /// `CREATE_COMPLETE`, `UPDATE_ROLLBACK_COMPLETE`, …
    pub status: String,
    /// Output key → value.
    pub outputs: BTreeMap<String, String>,
    /// Parameter key → value, as deployed.
    pub parameters: BTreeMap<String, String>,
}

/// The deployment's own resources.
#[async_trait]
pub trait StackPort: Send + Sync {
    /// `DescribeStacks` of `name`.
    async fn describe_stack(&self, name: &str) -> anyhow::Result<StackFacts>;
    /// The table's status (`ACTIVE`, …), `DescribeTable`.
    async fn table_status(&self, table: &str) -> anyhow::Result<String>;
    /// Whether the queue answers `GetQueueAttributes`.
    async fn queue_reachable(&self, queue_url: &str) -> anyhow::Result<()>;
    /// The log group `name` (`DescribeLogGroups`): `None` when it does not exist, else
    /// its retention in days (`None` inside: kept forever).
    async fn log_group_retention(&self, name: &str) -> anyhow::Result<Option<Option<i32>>>;
    /// The configuration the functions read: `parameter`, else `default`; validated.
    async fn load_config(
        &self,
        parameter: &str,
        default: Option<&str>,
    ) -> anyhow::Result<LoadedConfig>;
    /// A Secrets Manager secret's string.
    async fn secret_value(&self, secret_id: &str) -> anyhow::Result<String>;
    /// The value of the SSM parameter `name` (`GetParameter`); `None` when there is no
    /// such parameter.
    async fn ssm_parameter(&self, name: &str) -> anyhow::Result<Option<String>>;
    /// The stack's resources: logical id → physical id (`DescribeStackResources`).
    async fn stack_resources(&self, name: &str) -> anyhow::Result<BTreeMap<String, String>>;
    /// The line of `runner/latest-<arch>` in the runner bucket `bucket` (S3
    /// `GetObject`); `None` when the object does not exist.
    async fn runner_latest(&self, bucket: &str, arch: &str) -> anyhow::Result<Option<String>>;
    /// The region the checks run in.
    fn region(&self) -> String;
    /// The configuration `function` recorded it runs, in `table`; `None` if it never did.
    async fn running_config(
        &self,
        table: &str,
        function: &str,
    ) -> anyhow::Result<Option<RunningConfig>>;
}

/// GitHub, as the App (its JWT) sees it.
#[async_trait]
pub trait GitHubPort: Send + Sync {
    /// `GET /app`.
    async fn describe_app(&self) -> Result<AppDescription, ForgeError>;
    /// `GET /app/hook/config`'s `url`; `None` when not set.
    async fn webhook_url(&self) -> Result<Option<String>, ForgeError>;
    /// The installation on the organization `owner` (or the repository `owner/repo`);
    /// `None` when the App is not installed there.
    async fn installation(
        &self,
        owner: &str,
        repo: Option<&str>,
    ) -> Result<Option<u64>, ForgeError>;
    /// The newest page of webhook deliveries (`GET /app/hook/deliveries`).
    async fn recent_deliveries(&self) -> Result<Vec<HookDelivery>, ForgeError>;
    /// The installation's rate-limit buckets by resource (`GET /rate_limit` with its
    /// token).
    async fn rate_limits(
        &self,
        installation_id: u64,
    ) -> Result<BTreeMap<String, ephemera_github::RateBucket>, ForgeError>;
}

/// Builds the GitHub port from what the deployment holds: the API URL, the App id and
/// the private key read from its secret. `Err` says why the key cannot be used.
pub trait GitHubConnector: Send + Sync {
    fn connect(
        &self,
        api_url: &str,
        app_id: u64,
        private_key_pem: &str,
    ) -> Result<Box<dyn GitHubPort>, String>;
}

/// What a launch template's default version holds that the checks look at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TemplateFacts {
    pub image_id: Option<String>,
    pub security_groups: Vec<String>,
}

/// An image as `DescribeImages` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFacts {
    /// `available`, `pending`, `failed`, `deregistered`, …
    pub state: String,
    /// When it was made (`CreationDate`); `None` when EC2 did not say.
    pub created: Option<time::OffsetDateTime>,
    /// Its `ephemera:runner-version` tag (infra/image/template.yaml tags its images with
    /// its `RunnerVersion`: a pinned `2.x.y`, or `latest`); `None` on an image no bake of
    /// the image stack made.
    pub runner_version: Option<String>,
    /// Its architecture (`x86_64`, `arm64`, …); `None` when EC2 did not say.
    pub architecture: Option<String>,
}

/// One launch, tried with `DryRun`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DryRunLaunch {
    pub launch_template: String,
    /// The template's version, as for [`Ec2Port::launch_template`].
    pub version: String,
    pub instance_type: String,
    pub subnet: Option<String>,
    pub image: Option<String>,
}

/// How EC2 answered a `DryRun`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DryRunAnswer {
    /// `DryRunOperation`: the request would have succeeded.
    WouldSucceed,
    /// Any other error: its code and message (`UnauthorizedOperation`,
    /// `InvalidParameterValue`, …).
    Refused { code: String, message: String },
}

/// An instance type's architectures and vCPUs (`DescribeInstanceTypes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceTypeFacts {
    pub architectures: Vec<String>,
    pub vcpus: u32,
}

/// EC2, for the pools.
#[async_trait]
pub trait Ec2Port: Send + Sync {
    /// Those of `subnets` EC2 does not know.
    async fn missing_subnets(&self, subnets: &[String]) -> anyhow::Result<Vec<String>>;
    /// Those of `groups` EC2 does not know.
    async fn missing_security_groups(&self, groups: &[String]) -> anyhow::Result<Vec<String>>;
    /// Version `version` (`$Latest`, `$Default` or a number) of the launch template
    /// `name`, as the scaler launches it; `None` when there is none.
    async fn launch_template(
        &self,
        name: &str,
        version: &str,
    ) -> anyhow::Result<Option<TemplateFacts>>;
    /// The image's architecture (`x86_64`, `arm64`); `None` when EC2 knows no such image.
    async fn image_architecture(&self, image_id: &str) -> anyhow::Result<Option<String>>;
    /// The image's state and age; `None` when EC2 knows no such image.
    async fn image(&self, image_id: &str) -> anyhow::Result<Option<ImageFacts>>;
    /// Each of `types` EC2 knows, with its architectures and vCPUs.
    async fn instance_types(
        &self,
        types: &[String],
    ) -> anyhow::Result<BTreeMap<String, InstanceTypeFacts>>;
    /// `RunInstances` with `DryRun`.
    async fn dry_run(&self, launch: &DryRunLaunch) -> anyhow::Result<DryRunAnswer>;
    /// The network interfaces of the region, in any state (`DescribeNetworkInterfaces`,
    /// every page): each counts against "Network interfaces per Region".
    async fn network_interfaces(&self) -> anyhow::Result<u64>;
    /// The free private IPv4 addresses (`AvailableIpAddressCount`) of each of `subnets`
    /// EC2 knows; with none named, of the region's default subnets (`default-for-az`),
    /// where EC2 launches an instance given no subnet.
    async fn free_addresses(&self, subnets: &[String]) -> anyhow::Result<BTreeMap<String, u64>>;
}

/// Service Quotas, for the account's limits that bind a deployment.
#[async_trait]
pub trait QuotaPort: Send + Sync {
    /// The value of quota `quota_code` of service `service_code` in this account and
    /// region (the applied value, else AWS's default); `None` when Service Quotas does
    /// not know that quota here.
    async fn quota(&self, service_code: &str, quota_code: &str) -> anyhow::Result<Option<f64>>;
}

/// The webhook's refusals over a recent window, as CloudWatch sums them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rejections {
    /// The metric's `Reason` (`bad_signature`, …) → requests refused for it; a reason
    /// with none is absent.
    pub by_reason: BTreeMap<String, f64>,
}

/// CloudWatch, for the metrics the functions write.
#[async_trait]
pub trait MetricsPort: Send + Sync {
    /// The sums of `WebhookRejected` by `Reason` for `deployment` over the `window`
    /// that ends now (`GetMetricData`; read-only, needs `cloudwatch:GetMetricData`).
    async fn webhook_rejections(
        &self,
        deployment: &str,
        window: std::time::Duration,
    ) -> anyhow::Result<Rejections>;
}
