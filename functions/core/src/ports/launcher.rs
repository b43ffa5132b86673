//! [`Launcher`]: launching runner instances, the scaler's capability (the reaper has
//! none).
//!
//! Fake: `memory::FakeFleet`. Adapter: `ephemera_aws::Ec2Fleet` (EC2 CreateFleet; its
//! launch is in `ephemera_aws::launch`).

use super::{FleetError, ShutdownBehaviour};
use crate::model::{FleetRequest, RootVolume};
use async_trait::async_trait;

/// What one launch request made.
#[derive(Debug)]
pub struct FleetLaunch {
    pub instance_ids: Vec<String>,
    /// Why fewer instances than asked came up, when that happened.
    pub shortfall: Option<FleetError>,
    /// The type each instance was launched as, when the answer said (EC2's CreateFleet
    /// names it per group of instances): which of the pool's types the runner got.
    pub instance_types: std::collections::HashMap<String, String>,
    /// The root volume the launch gave its instances, when it is known: what a stopped
    /// pool's instance costs while it waits ([`crate::prices`]).
    pub root_volume: Option<RootVolume>,
}

/// Launching runner instances (the scaler's capability).
#[async_trait]
pub trait Launcher: Send + Sync {
    /// Launches up to `request.count` instances in one request, tagged with this
    /// deployment and the pool. An error means none came up; fewer than asked is a
    /// [`FleetLaunch::shortfall`]. Not idempotent: the runner records say which instance
    /// is whose, and the reaper ends instances that no record claims.
    async fn launch(&self, request: &FleetRequest) -> Result<FleetLaunch, FleetError>;

    /// Starts a stopped instance (a stopped pool's, taken by a job). EC2 refusing it for
    /// capacity is [`FleetError::CapacityUnavailable`]; starting one already pending or
    /// running changes nothing. Any error leaves the instance stopped.
    async fn start(&self, instance_id: &str) -> Result<(), FleetError>;

    /// Sets what the instance does when its own OS shuts it down: a stopped pool's
    /// instance is set to [`ShutdownBehaviour::Stop`] before it learns to prepare.
    async fn set_shutdown_behaviour(
        &self,
        instance_id: &str,
        behaviour: ShutdownBehaviour,
    ) -> Result<(), FleetError>;
}
