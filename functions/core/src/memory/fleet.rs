//! [`FakeFleet`]: EC2 as a map of instances, for both the scaler's [`Launcher`] and the
//! reaper's [`Fleet`].
//!
//! Launch treats the runner name as EC2's client token: a retried launch for the same
//! runner returns the instance already made instead of a second one, which is what keeps
//! a retried scaler message from leaking instances. Terminated instances stay visible to
//! `describe`, as they do in EC2 for a while.

use super::{lock, spend, InjectedFailure};
use crate::ports::{Fleet, FleetError, Instance, InstanceState, LaunchSpec, Launcher};
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
    /// Client token (runner name) → instance id.
    tokens: HashMap<String, String>,
    specs: Vec<LaunchSpec>,
    next_id: u64,
    clock: OffsetDateTime,
    launch_failure: Option<FleetFailure>,
    terminate_failures: u32,
    describe_failures: u32,
    launch_calls: usize,
    terminate_calls: usize,
}

impl Default for FleetState {
    fn default() -> FleetState {
        FleetState {
            instances: BTreeMap::new(),
            tokens: HashMap::new(),
            specs: Vec::new(),
            next_id: 1,
            clock: OffsetDateTime::UNIX_EPOCH,
            launch_failure: None,
            terminate_failures: 0,
            describe_failures: 0,
            launch_calls: 0,
            terminate_calls: 0,
        }
    }
}

impl FakeFleet {
    pub fn new() -> FakeFleet {
        FakeFleet::default()
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

    /// The specs of the launches that made an instance, in order.
    pub fn launched_specs(&self) -> Vec<LaunchSpec> {
        lock(&self.state).specs.clone()
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

    /// Makes the next `times` calls of `terminate` fail with [`FleetError::Transient`].
    pub fn fail_terminate_times(&self, times: u32) {
        lock(&self.state).terminate_failures = times;
    }

    /// Makes the next `times` calls of `describe` fail with [`FleetError::Transient`].
    pub fn fail_describe_times(&self, times: u32) {
        lock(&self.state).describe_failures = times;
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

#[async_trait]
impl Launcher for FakeFleet {
    async fn launch(&self, spec: &LaunchSpec) -> Result<String, FleetError> {
        let state = &mut *lock(&self.state);
        state.launch_calls += 1;
        if let Some(failure) = state.launch_failure {
            return Err(failure.error("launch"));
        }
        if let Some(id) = state.tokens.get(&spec.runner_name) {
            return Ok(id.clone());
        }
        let id = format!("i-{:017x}", state.next_id);
        state.next_id += 1;
        let instance = Instance {
            id: id.clone(),
            state: InstanceState::Pending,
            runner_name: Some(spec.runner_name.clone()),
            pool: Some(spec.pool.clone()),
            launched_at: Some(state.clock),
        };
        state.instances.insert(id.clone(), instance);
        state.tokens.insert(spec.runner_name.clone(), id.clone());
        state.specs.push(spec.clone());
        Ok(id)
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(runner_name: &str) -> LaunchSpec {
        LaunchSpec {
            runner_name: runner_name.to_owned(),
            pool: "linux".to_owned(),
            launch_template: Some("lt-1".to_owned()),
            ami: None,
            instance_type: "t3.small".to_owned(),
            subnet: None,
            spot: false,
        }
    }

    #[tokio::test]
    async fn launch_is_idempotent_per_runner_name() {
        let fleet = FakeFleet::new();
        let first = fleet.launch(&spec("a")).await.expect("launch");
        let again = fleet.launch(&spec("a")).await.expect("launch");
        let other = fleet.launch(&spec("b")).await.expect("launch");
        assert_eq!(first, again);
        assert_ne!(first, other);
        assert!(first.starts_with("i-"));
        assert_eq!((fleet.instances().len(), fleet.launch_calls()), (2, 3));
        let instance = fleet.instance(&first).expect("described");
        assert_eq!(instance.runner_name.as_deref(), Some("a"));
    }

    #[tokio::test]
    async fn failing_launch_makes_nothing() {
        let fleet = FakeFleet::new();
        fleet.fail_launch_with(Some(FleetFailure::CapacityUnavailable));
        let err = fleet.launch(&spec("a")).await.expect_err("fails");
        assert!(matches!(err, FleetError::CapacityUnavailable(_)));
        assert!(fleet.instances().is_empty());
        fleet.fail_launch_with(None);
        fleet.launch(&spec("a")).await.expect("launch");
    }

    #[tokio::test]
    async fn terminate_fails_as_often_as_told_then_terminates() {
        let fleet = FakeFleet::new();
        let id = fleet.launch(&spec("a")).await.expect("launch");
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
