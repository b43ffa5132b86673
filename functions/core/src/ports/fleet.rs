//! [`Fleet`]: seeing and ending runner instances, the reaper's capability; and
//! [`FleetError`], the error of every EC2 call of both fleet ports.
//!
//! Fake: `memory::FakeFleet`. Adapter: `ephemera_aws::Ec2Fleet`.

use super::Cause;
use crate::model::TemplateVersion;
use async_trait::async_trait;
use time::OffsetDateTime;

/// EC2's view of an instance's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceState {
    Pending,
    Running,
    ShuttingDown,
    Terminated,
    Stopping,
    Stopped,
}

/// An instance tagged for this deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    pub id: String,
    pub state: InstanceState,
    pub pool: Option<String>,
    pub launched_at: Option<OffsetDateTime>,
    /// The image (AMI id) the instance was launched from, when EC2 says it.
    pub image_id: Option<String>,
}

/// What an instance does when its own operating system shuts it down (EC2's
/// `InstanceInitiatedShutdownBehavior`: "applies when you perform a shutdown from the
/// operating system of the instance itself", and may be changed "while the instance is
/// running or stopped",
/// https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_ChangingInstanceInitiatedShutdownBehavior.html).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownBehaviour {
    /// The instance stops: a stopped pool's instance while it prepares.
    Stop,
    /// The instance terminates: every runner's, as the launch template says.
    Terminate,
}

impl ShutdownBehaviour {
    /// EC2's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ShutdownBehaviour::Stop => "stop",
            ShutdownBehaviour::Terminate => "terminate",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// No capacity for what was asked (spot or on-demand); another type or later may work.
    #[error("no capacity: {0}")]
    CapacityUnavailable(String),
    #[error("EC2 throttled the request")]
    Throttled(#[source] Cause),
    /// EC2 refused the request as asked (bad AMI, subnet, template, permissions).
    #[error("EC2 refused the request: {code}: {message}")]
    Rejected { code: String, message: String },
    #[error("EC2 request failed")]
    Transient(#[source] Cause),
}

/// Seeing and ending runner instances (the reaper's capability).
#[async_trait]
pub trait Fleet: Send + Sync {
    /// Terminates an instance. One that no longer exists counts as terminated.
    async fn terminate(&self, instance_id: &str) -> Result<(), FleetError>;

    /// Sets what the instance does when its own OS shuts it down: the reaper sets a
    /// prepared stopped instance back to [`ShutdownBehaviour::Terminate`], so that the
    /// host's power-off after its job ends it.
    async fn set_shutdown_behaviour(
        &self,
        instance_id: &str,
        behaviour: ShutdownBehaviour,
    ) -> Result<(), FleetError>;

    /// The image a launch of a pool runs now: the pool's `ami` when it names one (no
    /// call), else the image of `version` of launch template `template`, a
    /// `resolve:ssm:` parameter read as it now resolves. `None` when the template names
    /// no image. The reaper replaces a stopped pool's instance of another image
    /// (docs/design.md, "Stopped pool"). Read-only.
    async fn launch_image(
        &self,
        template: &str,
        version: &TemplateVersion,
        ami: Option<&str>,
    ) -> Result<Option<String>, FleetError>;

    /// Every instance tagged for this deployment, whatever its state.
    async fn describe(&self) -> Result<Vec<Instance>, FleetError>;

    /// The deployment's instances that are not shutting down or terminated (what the
    /// reaper reconciles against); an adapter may filter on the provider's side, so the
    /// answer stays small however many instances came and went.
    async fn describe_live(&self) -> Result<Vec<Instance>, FleetError> {
        Ok(self
            .describe()
            .await?
            .into_iter()
            .filter(|i| {
                !matches!(
                    i.state,
                    InstanceState::ShuttingDown | InstanceState::Terminated
                )
            })
            .collect())
    }
}
