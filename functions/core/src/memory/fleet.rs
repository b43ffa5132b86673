//! [`FakeFleet`]: EC2 as a map of instances, for both the scaler's [`Launcher`] and the
//! reaper's [`Fleet`].
//!
//! A launch makes `count` instances in one call, like CreateFleet; failures can be
//! injected per market (spot capacity running out, say) and a cap on how many instances
//! one request may make produces a partial launch. Terminated instances stay visible to
//! `describe`, as they do in EC2 for a while.

use super::{lock, spend, InjectedFailure};
use crate::ports::{
    Fleet, FleetError, FleetLaunch, FleetRequest, Instance, InstanceState, Launcher, Market,
    RootVolume, ShutdownBehaviour, TemplateVersion,
};
use async_trait::async_trait;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use time::OffsetDateTime;

/// A kind of [`FleetError`] for [`FakeFleet::fail_launch_with`] to answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FleetFailure {
    CapacityUnavailable,
    Rejected,
    Throttled,
    Transient,
}

impl FleetFailure {
    fn error(self, what: &'static str) -> FleetError {
        match self {
            FleetFailure::CapacityUnavailable => {
                FleetError::CapacityUnavailable("InsufficientInstanceCapacity".to_owned())
            }
            FleetFailure::Rejected => FleetError::Rejected {
                code: "InvalidAMIID.NotFound".to_owned(),
                message: format!("injected failure: {what}"),
            },
            FleetFailure::Throttled => FleetError::Throttled(Box::new(InjectedFailure(what))),
            FleetFailure::Transient => FleetError::Transient(Box::new(InjectedFailure(what))),
        }
    }
}

/// Construct with [`FakeFleet::new`]; every launch is stamped with the time set by
/// [`launch_at`](FakeFleet::launch_at) (the Unix epoch until set).
#[derive(Debug, Default)]
pub struct FakeFleet {
    state: Mutex<FleetState>,
}

#[derive(Debug)]
struct FleetState {
    instances: BTreeMap<String, Instance>,
    requests: Vec<FleetRequest>,
    next_id: u64,
    clock: OffsetDateTime,
    launch_failure: Option<FleetFailure>,
    market_failures: HashMap<MarketKey, FleetFailure>,
    /// At most this many instances per request (the rest is a capacity shortfall).
    launch_cap: Option<u32>,
    terminate_failures: u32,
    start_failure: Option<FleetFailure>,
    start_calls: usize,
    /// Shutdown behaviours set after launch (a launch's is the template's, `terminate`).
    shutdown: HashMap<String, ShutdownBehaviour>,
    shutdown_failures: u32,
    describe_failures: u32,
    launch_calls: usize,
    terminate_calls: usize,
    /// The image a launch template names: what a launch without `ami` runs.
    template_image: String,
}

/// The root volume, in GiB, of the fake's launch templates.
pub const FAKE_ROOT_GIB: u32 = 8;

/// The image the fake's launch templates name until [`FakeFleet::set_template_image`].
pub const FAKE_TEMPLATE_IMAGE: &str = "ami-0000000000000001a";

impl Default for FleetState {
    fn default() -> FleetState {
        FleetState {
            instances: BTreeMap::new(),
            requests: Vec::new(),
            next_id: 1,
            clock: OffsetDateTime::UNIX_EPOCH,
            launch_failure: None,
            market_failures: HashMap::new(),
            launch_cap: None,
            terminate_failures: 0,
            describe_failures: 0,
            launch_calls: 0,
            start_failure: None,
            start_calls: 0,
            shutdown: HashMap::new(),
            shutdown_failures: 0,
            terminate_calls: 0,
            template_image: FAKE_TEMPLATE_IMAGE.to_owned(),
        }
    }
}

impl FakeFleet {
    pub fn new() -> FakeFleet {
        FakeFleet::default()
    }

    /// What the instance does when its OS shuts it down: `terminate`, the launch
    /// template's, until set otherwise.
    pub fn shutdown_behaviour(&self, id: &str) -> ShutdownBehaviour {
        let state = lock(&self.state);
        let set = state.shutdown.get(id).copied();
        set.unwrap_or(ShutdownBehaviour::Terminate)
    }

    /// Makes the next `times` changes of a shutdown behaviour fail (transient).
    pub fn fail_shutdown_changes(&self, times: u32) {
        lock(&self.state).shutdown_failures = times;
    }

    /// The host powers itself off: the instance stops or terminates as its shutdown
    /// behaviour says (EC2's InstanceInitiatedShutdownBehavior).
    pub fn power_off(&self, id: &str) {
        let behaviour = self.shutdown_behaviour(id);
        let state = &mut *lock(&self.state);
        if let Some(instance) = state.instances.get_mut(id) {
            instance.state = match behaviour {
                ShutdownBehaviour::Stop => InstanceState::Stopped,
                ShutdownBehaviour::Terminate => InstanceState::Terminated,
            };
        }
    }

    /// The image every launch template names from now on (a bake moved the template's
    /// `resolve:ssm:` parameter): launches without an `ami` run it.
    pub fn set_template_image(&self, image: &str) {
        lock(&self.state).template_image = image.to_owned();
    }

    /// Every instance, terminated ones included, by id.
    pub fn instances(&self) -> Vec<Instance> {
        lock(&self.state).instances.values().cloned().collect()
    }

    pub fn instance(&self, id: &str) -> Option<Instance> {
        lock(&self.state).instances.get(id).cloned()
    }

    /// Instances neither shutting down nor terminated.
    pub fn live_instances(&self) -> Vec<Instance> {
        let state = lock(&self.state);
        let live = |i: &&Instance| {
            !matches!(
                i.state,
                InstanceState::ShuttingDown | InstanceState::Terminated
            )
        };
        state.instances.values().filter(live).cloned().collect()
    }

    /// The requests that made at least one instance, in order.
    pub fn launch_requests(&self) -> Vec<FleetRequest> {
        lock(&self.state).requests.clone()
    }

    /// Instances launched so far.
    pub fn launched(&self) -> usize {
        lock(&self.state).instances.len()
    }

    /// Sets an instance's state (a shutdown from inside, a stop). Unknown ids are ignored.
    pub fn set_state(&self, id: &str, to: InstanceState) {
        if let Some(instance) = lock(&self.state).instances.get_mut(id) {
            instance.state = to;
        }
    }

    /// Adds an instance as it is (an orphan, or one launched outside the scaler).
    pub fn put_instance(&self, instance: Instance) {
        lock(&self.state)
            .instances
            .insert(instance.id.clone(), instance);
    }

    /// The launch time given to instances launched from now on.
    pub fn launch_at(&self, at: OffsetDateTime) {
        lock(&self.state).clock = at;
    }

    /// While `Some`, every `launch` fails with that error and makes nothing.
    pub fn fail_launch_with(&self, failure: Option<FleetFailure>) {
        lock(&self.state).launch_failure = failure;
    }

    /// While `Some`, launches in `market` fail with that error and make nothing.
    pub fn fail_market_with(&self, market: Market, failure: Option<FleetFailure>) {
        let key = MarketKey::from(market);
        let failures = &mut lock(&self.state).market_failures;
        match failure {
            Some(failure) => failures.insert(key, failure),
            None => failures.remove(&key),
        };
    }

    /// While `Some(n)`, one request makes at most `n` instances and reports the rest as
    /// a capacity shortfall.
    pub fn cap_launches(&self, cap: Option<u32>) {
        lock(&self.state).launch_cap = cap;
    }

    /// Makes the next `times` calls of `terminate` fail with [`FleetError::Transient`].
    pub fn fail_terminate_times(&self, times: u32) {
        lock(&self.state).terminate_failures = times;
    }

    /// Makes the next `times` calls of `describe` fail with [`FleetError::Transient`].
    pub fn fail_describe_times(&self, times: u32) {
        lock(&self.state).describe_failures = times;
    }

    /// Makes every call of `start` fail with `failure` (until called with `None`).
    pub fn fail_start_with(&self, failure: Option<FleetFailure>) {
        lock(&self.state).start_failure = failure;
    }

    /// Calls of `start`, failed ones included.
    pub fn start_calls(&self) -> usize {
        lock(&self.state).start_calls
    }

    /// Calls of `launch`, failed and repeated ones included.
    pub fn launch_calls(&self) -> usize {
        lock(&self.state).launch_calls
    }

    /// Calls of `terminate`, failed ones and ones for unknown ids included.
    pub fn terminate_calls(&self) -> usize {
        lock(&self.state).terminate_calls
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum MarketKey {
    Spot,
    OnDemand,
}

impl From<Market> for MarketKey {
    fn from(market: Market) -> MarketKey {
        match market {
            Market::Spot => MarketKey::Spot,
            Market::OnDemand => MarketKey::OnDemand,
        }
    }
}

#[async_trait]
impl Launcher for FakeFleet {
    async fn launch(&self, request: &FleetRequest) -> Result<FleetLaunch, FleetError> {
        let state = &mut *lock(&self.state);
        state.launch_calls += 1;
        if let Some(failure) = state.launch_failure {
            return Err(failure.error("launch"));
        }
        if let Some(failure) = state.market_failures.get(&MarketKey::from(request.market)) {
            return Err(failure.error("launch"));
        }
        let made = state
            .launch_cap
            .map_or(request.count, |cap| cap.min(request.count));
        if made == 0 {
            return Err(FleetFailure::CapacityUnavailable.error("launch"));
        }
        let mut instance_ids = Vec::new();
        for _ in 0..made {
            let id = format!("i-{:017x}", state.next_id);
            state.next_id += 1;
            let instance = Instance {
                id: id.clone(),
                state: InstanceState::Pending,
                pool: Some(request.pool.clone()),
                launched_at: Some(state.clock),
                image_id: Some(
                    request
                        .ami
                        .clone()
                        .unwrap_or_else(|| state.template_image.clone()),
                ),
            };
            state.instances.insert(id.clone(), instance);
            instance_ids.push(id);
        }
        state.requests.push(request.clone());
        let shortfall =
            (made < request.count).then(|| FleetFailure::CapacityUnavailable.error("launch"));
        // The first type offered, as EC2 would name the one it chose.
        let instance_types = request
            .instance_types
            .first()
            .map(|chosen| {
                instance_ids
                    .iter()
                    .map(|id| (id.clone(), chosen.clone()))
                    .collect()
            })
            .unwrap_or_default();
        Ok(FleetLaunch {
            instance_ids,
            shortfall,
            instance_types,
            // A sized job's volume, else the fake template's: 8 GiB of gp3.
            root_volume: Some(request.root_volume.clone().unwrap_or(RootVolume {
                gib: FAKE_ROOT_GIB,
                volume_type: Some("gp3".to_owned()),
            })),
        })
    }

    async fn start(&self, instance_id: &str) -> Result<(), FleetError> {
        let state = &mut *lock(&self.state);
        state.start_calls += 1;
        if let Some(failure) = state.start_failure {
            return Err(failure.error("start"));
        }
        match state.instances.get_mut(instance_id) {
            Some(instance) if instance.state == InstanceState::Stopped => {
                instance.state = InstanceState::Pending;
                Ok(())
            }
            Some(instance)
                if matches!(
                    instance.state,
                    InstanceState::Pending | InstanceState::Running
                ) =>
            {
                Ok(())
            }
            // EC2: "not in a state from which it can be started", or no such instance.
            _ => Err(FleetError::Rejected {
                code: "IncorrectInstanceState".to_owned(),
                message: format!("{instance_id} cannot be started"),
            }),
        }
    }

    async fn set_shutdown_behaviour(
        &self,
        instance_id: &str,
        behaviour: ShutdownBehaviour,
    ) -> Result<(), FleetError> {
        let state = &mut *lock(&self.state);
        if spend(&mut state.shutdown_failures) {
            return Err(FleetFailure::Transient.error("modify shutdown behaviour"));
        }
        match state.instances.get(instance_id) {
            Some(instance) if instance.state != InstanceState::Terminated => {
                state.shutdown.insert(instance_id.to_owned(), behaviour);
                Ok(())
            }
            _ => Err(FleetError::Rejected {
                code: "InvalidInstanceID.NotFound".to_owned(),
                message: format!("{instance_id} does not exist"),
            }),
        }
    }
}

#[async_trait]
impl Fleet for FakeFleet {
    async fn terminate(&self, instance_id: &str) -> Result<(), FleetError> {
        let mut state = lock(&self.state);
        state.terminate_calls += 1;
        if spend(&mut state.terminate_failures) {
            return Err(FleetError::Transient(Box::new(InjectedFailure(
                "terminate",
            ))));
        }
        if let Some(instance) = state.instances.get_mut(instance_id) {
            instance.state = InstanceState::Terminated;
        }
        Ok(())
    }

    async fn describe(&self) -> Result<Vec<Instance>, FleetError> {
        let mut state = lock(&self.state);
        if spend(&mut state.describe_failures) {
            return Err(FleetError::Transient(Box::new(InjectedFailure("describe"))));
        }
        Ok(state.instances.values().cloned().collect())
    }

    async fn launch_image(
        &self,
        _template: &str,
        _version: &TemplateVersion,
        ami: Option<&str>,
    ) -> Result<Option<String>, FleetError> {
        let state = lock(&self.state);
        Ok(Some(ami.map_or_else(
            || state.template_image.clone(),
            str::to_owned,
        )))
    }

    async fn set_shutdown_behaviour(
        &self,
        instance_id: &str,
        behaviour: ShutdownBehaviour,
    ) -> Result<(), FleetError> {
        Launcher::set_shutdown_behaviour(self, instance_id, behaviour).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(count: u32, market: Market) -> FleetRequest {
        FleetRequest {
            pool: "linux".to_owned(),
            count,
            launch_template: "lt-1".to_owned(),
            template_version: TemplateVersion::Named("$Default".to_owned()),
            ami: None,
            instance_types: vec!["t3.small".to_owned()],
            subnets: Vec::new(),
            market,
            spot_allocation: Default::default(),
            shape: None,
            root_volume: None,
        }
    }

    #[tokio::test]
    async fn one_request_launches_count_instances() {
        let fleet = FakeFleet::new();
        let launch = fleet
            .launch(&request(3, Market::OnDemand))
            .await
            .expect("launch");
        assert_eq!(launch.instance_ids.len(), 3);
        assert!(launch.shortfall.is_none());
        assert_eq!((fleet.instances().len(), fleet.launch_calls()), (3, 1));
        let instance = fleet.instance(&launch.instance_ids[0]).expect("described");
        assert_eq!(instance.pool.as_deref(), Some("linux"));
    }

    #[tokio::test]
    async fn failing_market_makes_nothing_and_a_cap_gives_a_shortfall() {
        let fleet = FakeFleet::new();
        fleet.fail_market_with(Market::Spot, Some(FleetFailure::CapacityUnavailable));
        let err = fleet
            .launch(&request(2, Market::Spot))
            .await
            .expect_err("fails");
        assert!(matches!(err, FleetError::CapacityUnavailable(_)));
        assert!(fleet.instances().is_empty());
        fleet.cap_launches(Some(1));
        let partial = fleet
            .launch(&request(2, Market::OnDemand))
            .await
            .expect("launch");
        assert_eq!(partial.instance_ids.len(), 1);
        assert!(matches!(
            partial.shortfall,
            Some(FleetError::CapacityUnavailable(_))
        ));
    }

    #[tokio::test]
    async fn terminate_fails_as_often_as_told_then_terminates() {
        let fleet = FakeFleet::new();
        let id = fleet
            .launch(&request(1, Market::OnDemand))
            .await
            .expect("launch")
            .instance_ids[0]
            .clone();
        fleet.fail_terminate_times(1);
        assert!(matches!(
            fleet.terminate(&id).await,
            Err(FleetError::Transient(_))
        ));
        fleet.terminate(&id).await.expect("terminate");
        fleet
            .terminate("i-unknown")
            .await
            .expect("unknown counts as terminated");
        assert_eq!(
            fleet.instance(&id).expect("still described").state,
            InstanceState::Terminated
        );
        assert!(fleet.live_instances().is_empty());
        assert_eq!(fleet.terminate_calls(), 3);
    }
}
