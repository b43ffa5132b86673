//! Fault injection around the real adapters: what moto and the GitHub simulator cannot
//! produce (provider errors, lost answers, at chosen moments) is made here, while every
//! call that goes through still reaches the emulator or the simulator over the wire.

use async_trait::async_trait;
use ephemera_aws::Ec2Fleet;
use ephemera_core::ports::{
    Fleet, FleetError, FleetLaunch, FleetRequest, Forge, ForgeError, ForgeJobState, ForgeRunner,
    Instance, JitConfig, JitRequest, Launcher, Market, RunnerRemoval, RunnerScope,
    ShutdownBehaviour, TemplateVersion,
};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// The error an injected failure carries.
#[derive(Debug, thiserror::Error)]
#[error("injected failure: {0}")]
pub struct Injected(pub &'static str);

/// The faults to inject and the calls counted, shared by the fleets of every actor.
#[derive(Default)]
struct FleetFaults {
    terminate_failures: AtomicU32,
    terminate_calls: AtomicU32,
    spot_failures: AtomicU32,
    launch_calls: AtomicU32,
    /// How many instances each launch request asked for, in order.
    launch_sizes: std::sync::Mutex<Vec<u32>>,
}

/// The real EC2 fleet adapter, with failures injected on demand.
pub struct FaultyFleet {
    inner: Arc<Ec2Fleet>,
    faults: Arc<FleetFaults>,
}

impl FaultyFleet {
    pub fn new(inner: Arc<Ec2Fleet>) -> FaultyFleet {
        FaultyFleet {
            inner,
            faults: Arc::default(),
        }
    }

    /// The same faults and counts over another adapter (another actor's credentials):
    /// a fault injected through either is seen by both, and both calls are counted.
    pub fn sharing_faults(&self, inner: Arc<Ec2Fleet>) -> FaultyFleet {
        FaultyFleet {
            inner,
            faults: self.faults.clone(),
        }
    }

    /// The wrapped adapter.
    pub fn inner(&self) -> &Ec2Fleet {
        &self.inner
    }

    /// The next `count` terminate calls fail (without reaching EC2).
    pub fn fail_terminate(&self, count: u32) {
        self.faults
            .terminate_failures
            .store(count, Ordering::SeqCst);
    }

    /// The next `count` spot launches fail for lack of capacity (without reaching EC2),
    /// as EC2 answers when a spot pool is exhausted.
    pub fn fail_spot(&self, count: u32) {
        self.faults.spot_failures.store(count, Ordering::SeqCst);
    }

    /// Launch requests made so far (each one EC2 call), failed or not.
    pub fn launch_calls(&self) -> u32 {
        self.faults.launch_calls.load(Ordering::SeqCst)
    }

    /// How many instances each launch request asked for, in order.
    pub fn launch_sizes(&self) -> Vec<u32> {
        self.faults
            .launch_sizes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Terminate calls made so far, failed or not.
    pub fn terminate_calls(&self) -> u32 {
        self.faults.terminate_calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Launcher for FaultyFleet {
    async fn launch(&self, request: &FleetRequest) -> Result<FleetLaunch, FleetError> {
        self.faults.launch_calls.fetch_add(1, Ordering::SeqCst);
        self.faults
            .launch_sizes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(request.count);
        if request.market == Market::Spot && spend(&self.faults.spot_failures) {
            return Err(FleetError::CapacityUnavailable(
                "InsufficientInstanceCapacity".to_owned(),
            ));
        }
        self.inner.launch(request).await
    }

    async fn start(&self, instance_id: &str) -> Result<(), FleetError> {
        self.inner.start(instance_id).await
    }

    async fn set_shutdown_behaviour(
        &self,
        instance_id: &str,
        behaviour: ShutdownBehaviour,
    ) -> Result<(), FleetError> {
        Launcher::set_shutdown_behaviour(&*self.inner, instance_id, behaviour).await
    }
}

#[async_trait]
impl Fleet for FaultyFleet {
    async fn terminate(&self, instance_id: &str) -> Result<(), FleetError> {
        self.faults.terminate_calls.fetch_add(1, Ordering::SeqCst);
        let failing = self
            .faults
            .terminate_failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                left.checked_sub(1)
            })
            .is_ok();
        if failing {
            return Err(FleetError::Transient(Box::new(Injected(
                "TerminateInstances",
            ))));
        }
        self.inner.terminate(instance_id).await
    }

    async fn describe(&self) -> Result<Vec<Instance>, FleetError> {
        self.inner.describe().await
    }

    async fn launch_image(
        &self,
        template: &str,
        version: &TemplateVersion,
        ami: Option<&str>,
    ) -> Result<Option<String>, FleetError> {
        self.inner.launch_image(template, version, ami).await
    }

    async fn set_shutdown_behaviour(
        &self,
        instance_id: &str,
        behaviour: ShutdownBehaviour,
    ) -> Result<(), FleetError> {
        Fleet::set_shutdown_behaviour(&*self.inner, instance_id, behaviour).await
    }

    async fn describe_live(&self) -> Result<Vec<Instance>, FleetError> {
        self.inner.describe_live().await
    }
}

/// The real GitHub client, with answers lost on demand.
pub struct FaultyForge {
    inner: Arc<dyn Forge>,
    lost_jit_answers: AtomicU32,
}

impl FaultyForge {
    pub fn new(inner: Arc<dyn Forge>) -> FaultyForge {
        FaultyForge {
            inner,
            lost_jit_answers: AtomicU32::new(0),
        }
    }

    /// The next `count` JIT registrations reach GitHub, which registers the runner, but
    /// their answer is lost on the way back (a dropped connection): the caller sees a
    /// transient error and never learns the runner's id.
    pub fn lose_jit_answers(&self, count: u32) {
        self.lost_jit_answers.store(count, Ordering::SeqCst);
    }
}

#[async_trait]
impl Forge for FaultyForge {
    async fn generate_jit_config(
        &self,
        scope: &RunnerScope,
        request: &JitRequest,
    ) -> Result<JitConfig, ForgeError> {
        let answer = self.inner.generate_jit_config(scope, request).await;
        if answer.is_ok() && spend(&self.lost_jit_answers) {
            return Err(ForgeError::Transient(Box::new(Injected(
                "generate-jitconfig answer lost",
            ))));
        }
        answer
    }

    async fn remove_runner(
        &self,
        scope: &RunnerScope,
        runner_id: u64,
    ) -> Result<RunnerRemoval, ForgeError> {
        self.inner.remove_runner(scope, runner_id).await
    }

    async fn get_runner(
        &self,
        scope: &RunnerScope,
        runner_id: u64,
    ) -> Result<Option<ForgeRunner>, ForgeError> {
        self.inner.get_runner(scope, runner_id).await
    }

    async fn list_runners(&self, scope: &RunnerScope) -> Result<Vec<ForgeRunner>, ForgeError> {
        self.inner.list_runners(scope).await
    }

    async fn find_runner(
        &self,
        scope: &RunnerScope,
        name: &str,
    ) -> Result<Option<ForgeRunner>, ForgeError> {
        self.inner.find_runner(scope, name).await
    }

    async fn job_state(
        &self,
        installation_id: Option<u64>,
        owner: &str,
        repo: &str,
        job_id: u64,
    ) -> Result<Option<ForgeJobState>, ForgeError> {
        self.inner
            .job_state(installation_id, owner, repo, job_id)
            .await
    }
}

/// Takes one from `left` if any are left: true if this call is to fail.
fn spend(left: &AtomicU32) -> bool {
    left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}
