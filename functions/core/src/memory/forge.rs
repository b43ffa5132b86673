//! [`FakeForge`]: GitHub's runners and jobs, as the App installation sees them.
//!
//! It keeps the two behaviours the lifecycle depends on: a runner name can be registered
//! only once (so a retried registration must first remove the stale one), and removing
//! a runner that is running a job is refused (422), which is the reaper's only "is it
//! busy?" check. Runners belong to the scope they were registered in; asked about from
//! another scope, GitHub does not know them.

use super::{lock, spend, InjectedFailure};
use crate::ports::{
    Forge, ForgeError, ForgeJobState, ForgeRunner, JitConfig, JitRequest, RunnerRemoval,
    RunnerScope,
};
use async_trait::async_trait;
use secrecy::SecretString;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

/// A kind of [`ForgeError`] for [`FakeForge::fail_next_with`] to answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForgeFailure {
    /// A 5xx or a dropped connection.
    Transient,
    /// The rate limit, with a `retry-after` of one minute.
    Throttled,
    Unauthorized,
    /// A 403 refusal (a missing App permission).
    Rejected,
}

impl ForgeFailure {
    fn error(self) -> ForgeError {
        match self {
            ForgeFailure::Transient => ForgeError::Transient(Box::new(InjectedFailure("github"))),
            ForgeFailure::Throttled => ForgeError::Throttled {
                retry_after: Some(Duration::from_secs(60)),
            },
            ForgeFailure::Unauthorized => ForgeError::Unauthorized,
            ForgeFailure::Rejected => ForgeError::Rejected {
                status: 403,
                message: "injected failure: github".to_owned(),
            },
        }
    }
}

/// Calls made to each [`Forge`] method, failed ones included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ForgeCalls {
    pub generate_jit_config: usize,
    pub remove_runner: usize,
    pub get_runner: usize,
    pub list_runners: usize,
    pub job_state: usize,
}

/// Construct with [`FakeForge::new`]. Registered runners start offline and idle; the
/// JIT config of runner `id` named `name` is the text `jit:<id>:<name>`.
#[derive(Debug, Default)]
pub struct FakeForge {
    state: Mutex<ForgeState>,
}

#[derive(Debug, Default)]
struct ForgeState {
    runners: BTreeMap<u64, (RunnerScope, ForgeRunner)>,
    last_id: u64,
    jobs: HashMap<u64, ForgeJobState>,
    failures: u32,
    failure: Option<ForgeFailure>,
    calls: ForgeCalls,
    /// Every registration asked for, failed ones included, in order.
    jit_requests: Vec<JitRequest>,
}

impl ForgeState {
    /// Fails this call if an injected failure is pending.
    fn check(&mut self) -> Result<(), ForgeError> {
        if spend(&mut self.failures) {
            return Err(self.failure.unwrap_or(ForgeFailure::Transient).error());
        }
        Ok(())
    }

    fn register(&mut self, scope: &RunnerScope, name: &str) -> Result<u64, ForgeError> {
        let taken = self
            .runners
            .values()
            .any(|(s, r)| s == scope && r.name == name);
        if taken {
            return Err(ForgeError::AlreadyExists(name.to_owned()));
        }
        self.last_id += 1;
        let runner = ForgeRunner {
            id: self.last_id,
            name: name.to_owned(),
            online: false,
            busy: false,
        };
        self.runners.insert(runner.id, (scope.clone(), runner));
        Ok(self.last_id)
    }

    fn find(&mut self, scope: &RunnerScope, runner_id: u64) -> Option<&mut ForgeRunner> {
        match self.runners.get_mut(&runner_id) {
            Some((s, runner)) if s == scope => Some(runner),
            _ => None,
        }
    }
}

impl FakeForge {
    pub fn new() -> FakeForge {
        FakeForge::default()
    }

    /// Every registered runner, by id.
    pub fn runners(&self) -> Vec<ForgeRunner> {
        let state = lock(&self.state);
        state
            .runners
            .values()
            .map(|(_, runner)| runner.clone())
            .collect()
    }

    /// The registered runner named `name`, in any scope.
    pub fn runner_named(&self, name: &str) -> Option<ForgeRunner> {
        let state = lock(&self.state);
        let found = state
            .runners
            .values()
            .find(|(_, runner)| runner.name == name);
        found.map(|(_, runner)| runner.clone())
    }

    /// Registers a runner as it is (one registered outside the scaler, or an orphan);
    /// returns its id. Panics if the name is taken in that scope.
    pub fn register(&self, scope: &RunnerScope, name: &str) -> u64 {
        match lock(&self.state).register(scope, name) {
            Ok(id) => id,
            Err(err) => panic!("cannot plant runner {name}: {err}"),
        }
    }

    /// Marks a runner as running a job (its removal is then refused) or not.
    pub fn set_busy(&self, runner_id: u64, busy: bool) {
        if let Some((_, runner)) = lock(&self.state).runners.get_mut(&runner_id) {
            runner.busy = busy;
        }
    }

    /// Removes a runner as GitHub does when an ephemeral runner has run its job (no call
    /// counted, no injected failure spent).
    pub fn deregister(&self, runner_id: u64) {
        lock(&self.state).runners.remove(&runner_id);
    }

    pub fn set_online(&self, runner_id: u64, online: bool) {
        if let Some((_, runner)) = lock(&self.state).runners.get_mut(&runner_id) {
            runner.online = online;
        }
    }

    /// What `job_state` answers for `job_id` (in any repository); unset jobs are unknown.
    pub fn set_job_state(&self, job_id: u64, state: ForgeJobState) {
        lock(&self.state).jobs.insert(job_id, state);
    }

    /// What `job_state` would answer for `job_id` (no call counted).
    pub fn job_state_of(&self, job_id: u64) -> Option<ForgeJobState> {
        lock(&self.state).jobs.get(&job_id).copied()
    }

    /// Makes the next `times` calls (of any method) fail with [`ForgeError::Transient`]
    /// and change nothing.
    pub fn fail_next(&self, times: u32) {
        self.fail_next_with(times, ForgeFailure::Transient);
    }

    /// Makes the next `times` calls (of any method) fail with `failure`.
    pub fn fail_next_with(&self, times: u32, failure: ForgeFailure) {
        let mut state = lock(&self.state);
        state.failures = times;
        state.failure = Some(failure);
    }

    pub fn calls(&self) -> ForgeCalls {
        lock(&self.state).calls
    }

    /// Every generate-jitconfig request received, in order.
    pub fn jit_requests(&self) -> Vec<JitRequest> {
        lock(&self.state).jit_requests.clone()
    }
}

#[async_trait]
impl Forge for FakeForge {
    async fn generate_jit_config(
        &self,
        scope: &RunnerScope,
        request: &JitRequest,
    ) -> Result<JitConfig, ForgeError> {
        let mut state = lock(&self.state);
        state.calls.generate_jit_config += 1;
        state.jit_requests.push(request.clone());
        state.check()?;
        let runner_id = state.register(scope, &request.name)?;
        Ok(JitConfig {
            runner_id,
            encoded: SecretString::from(format!("jit:{runner_id}:{}", request.name)),
        })
    }

    async fn remove_runner(
        &self,
        scope: &RunnerScope,
        runner_id: u64,
    ) -> Result<RunnerRemoval, ForgeError> {
        let mut state = lock(&self.state);
        state.calls.remove_runner += 1;
        state.check()?;
        match state.find(scope, runner_id) {
            None => Ok(RunnerRemoval::NotFound),
            Some(runner) if runner.busy => Ok(RunnerRemoval::Busy),
            Some(_) => {
                state.runners.remove(&runner_id);
                Ok(RunnerRemoval::Removed)
            }
        }
    }

    async fn get_runner(
        &self,
        scope: &RunnerScope,
        runner_id: u64,
    ) -> Result<Option<ForgeRunner>, ForgeError> {
        let mut state = lock(&self.state);
        state.calls.get_runner += 1;
        state.check()?;
        Ok(state.find(scope, runner_id).map(|runner| runner.clone()))
    }

    async fn list_runners(&self, scope: &RunnerScope) -> Result<Vec<ForgeRunner>, ForgeError> {
        let mut state = lock(&self.state);
        state.calls.list_runners += 1;
        state.check()?;
        Ok(state
            .runners
            .values()
            .filter(|(s, _)| s == scope)
            .map(|(_, runner)| runner.clone())
            .collect())
    }

    async fn job_state(
        &self,
        _installation_id: Option<u64>,
        _owner: &str,
        _repo: &str,
        job_id: u64,
    ) -> Result<Option<ForgeJobState>, ForgeError> {
        let mut state = lock(&self.state);
        state.calls.job_state += 1;
        state.check()?;
        Ok(state.jobs.get(&job_id).copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> RunnerScope {
        RunnerScope {
            installation_id: Some(1),
            owner: "acme".to_owned(),
            repo: None,
        }
    }

    fn request(name: &str) -> JitRequest {
        JitRequest {
            name: name.to_owned(),
            labels: vec!["linux".to_owned()],
            runner_group: "default".to_owned(),
            work_folder: "_work".to_owned(),
        }
    }

    #[tokio::test]
    async fn a_runner_name_registers_only_once() {
        let forge = FakeForge::new();
        forge
            .generate_jit_config(&scope(), &request("r"))
            .await
            .expect("registers");
        let again = forge.generate_jit_config(&scope(), &request("r")).await;
        assert!(matches!(again, Err(ForgeError::AlreadyExists(name)) if name == "r"));
        assert_eq!(forge.runners().len(), 1);
    }

    #[tokio::test]
    async fn busy_runner_is_not_removed() {
        let forge = FakeForge::new();
        let jit = forge
            .generate_jit_config(&scope(), &request("r"))
            .await
            .expect("registers");
        forge.set_busy(jit.runner_id, true);
        let busy = forge
            .remove_runner(&scope(), jit.runner_id)
            .await
            .expect("answers");
        assert_eq!(busy, RunnerRemoval::Busy);
        assert!(forge.runner_named("r").is_some());
        forge.set_busy(jit.runner_id, false);
        let removed = forge
            .remove_runner(&scope(), jit.runner_id)
            .await
            .expect("answers");
        let gone = forge
            .remove_runner(&scope(), jit.runner_id)
            .await
            .expect("answers");
        assert_eq!(
            (removed, gone),
            (RunnerRemoval::Removed, RunnerRemoval::NotFound)
        );
    }

    #[tokio::test]
    async fn runners_are_unknown_outside_their_scope() {
        let forge = FakeForge::new();
        let id = forge.register(&scope(), "r");
        let elsewhere = RunnerScope {
            owner: "other".to_owned(),
            ..scope()
        };
        assert_eq!(
            forge.get_runner(&elsewhere, id).await.expect("answers"),
            None
        );
        let removal = forge.remove_runner(&elsewhere, id).await.expect("answers");
        assert_eq!(removal, RunnerRemoval::NotFound);
        assert!(forge
            .get_runner(&scope(), id)
            .await
            .expect("answers")
            .is_some());
    }

    #[tokio::test]
    async fn injected_failures_pass_and_are_counted() {
        let forge = FakeForge::new();
        forge.set_job_state(5, ForgeJobState::Queued);
        forge.fail_next(2);
        for _ in 0..2 {
            let failed = forge.job_state(None, "acme", "app", 5).await;
            assert!(matches!(failed, Err(ForgeError::Transient(_))));
        }
        let state = forge
            .job_state(None, "acme", "app", 5)
            .await
            .expect("answers");
        assert_eq!(state, Some(ForgeJobState::Queued));
        assert_eq!(forge.calls().job_state, 3);
    }
}
