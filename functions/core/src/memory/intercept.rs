//! One wrapper for every port: [`Intercept`] hands each call to a [`Hook`] before and
//! after passing it to the port it wraps. A test's crash switch, the chaos suite's gates,
//! the model's quotas and a test's slow table are each a hook, not a hand-written copy of
//! every port method; [`CrashSwitch`], the hook that stops a caller dead between two
//! calls, lives here because the chaos suite and the end-to-end tests both need it.

use crate::lifecycle::InstanceStatus;
use crate::message::QueueMessage;
use crate::model::{JobRecord, JobStatus, PoolRecord, RunnerRecord};
use crate::model::{Rerun, RerunState, RunKey, RunState};
use crate::ports::*;
use crate::ports::{RerunStore, WorkflowRuns};
use crate::prices::JobCost;
use async_trait::async_trait;
use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::sync::Notify;

/// One argument of a call, as a hook reads it: the kinds a hook branches on, and
/// `Other` for the rest.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    Text(&'a str),
    Number(u64),
    Launch(&'a FleetRequest),
    Update(&'a RunnerUpdate),
    Transition(&'a Transition),
    Other,
}

/// A call on its way through an [`Intercept`]: the port's trait, the method and its
/// arguments in order.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    pub port: &'static str,
    pub name: &'static str,
    pub args: &'a [Arg<'a>],
}

impl Call<'_> {
    /// Whether this is a call of the method `name`.
    pub fn is(&self, name: &str) -> bool {
        self.name == name
    }
}

/// Why a hook failed a call; each port turns it into its own error.
#[derive(Debug)]
pub enum Refusal {
    Throttled(Cause),
    /// Another writer holds the item (the table's [`StoreError::Conflict`]).
    Conflict(String),
    Transient(Cause),
}

/// The cause of a [`Refusal::Conflict`] on a port that has no conflict of its own.
#[derive(Debug, thiserror::Error)]
#[error("concurrent update of {0}")]
pub struct Conflicted(pub String);

/// What happens around each call of an [`Intercept`].
#[async_trait]
pub trait Hook: Send + Sync {
    /// Before the call: `Ok` lets it through, `Err` fails it with the port's own error
    /// without reaching the port, and a future that never resolves stops the caller
    /// there, as a crash does.
    async fn before(&self, _call: &Call<'_>) -> Result<(), Refusal> {
        Ok(())
    }

    /// After a call that reached the port, with its outcome (the method's `Result`),
    /// which the hook reads but does not change.
    fn after(&self, _call: &Call<'_>, _outcome: &dyn Any) {}
}

/// A port whose every call goes through `hook` first.
pub struct Intercept<P: ?Sized, H: ?Sized> {
    inner: Arc<P>,
    hook: Arc<H>,
}

impl<P: ?Sized, H: ?Sized> Intercept<P, H> {
    pub fn new(inner: Arc<P>, hook: &Arc<H>) -> Arc<Intercept<P, H>> {
        Arc::new(Intercept {
            inner,
            hook: hook.clone(),
        })
    }
}

/// Counts a handler's external calls and stops the one past the armed count: that call
/// never starts and never returns, as when the process dies there. A test races the
/// handler against [`CrashSwitch::crashed`] and drops it when that fires — a crash
/// between two external calls, by a hook and not by a sleep. Armed at a named
/// [`CrashPoint`] instead, it stops the first call of that method, or the call after it.
#[derive(Debug)]
pub struct CrashSwitch {
    calls: AtomicUsize,
    crash_before: AtomicUsize,
    crashed: Notify,
    at: std::sync::Mutex<Option<CrashPoint>>,
}

/// A crash at a named call: before the first call of `port`'s method `name` (that call
/// never reaches the port), or, `after`, once it has returned (the next call is stopped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashPoint {
    pub port: &'static str,
    pub name: &'static str,
    pub after: bool,
}

impl CrashSwitch {
    /// A switch that lets every call through until armed.
    pub fn new() -> Arc<CrashSwitch> {
        Arc::new(CrashSwitch {
            calls: AtomicUsize::new(0),
            crash_before: AtomicUsize::new(usize::MAX),
            crashed: Notify::new(),
            at: std::sync::Mutex::new(None),
        })
    }

    /// Lets the next `calls` external calls through and stops the one after.
    pub fn arm(&self, calls: usize) {
        *self.point() = None;
        self.calls.store(0, Ordering::SeqCst);
        self.crash_before
            .store(calls.saturating_add(1), Ordering::SeqCst);
    }

    /// Lets every call through until `point`, and stops the caller there.
    pub fn arm_at(&self, point: CrashPoint) {
        self.disarm();
        *self.point() = Some(point);
    }

    /// Lets every call through.
    pub fn disarm(&self) {
        *self.point() = None;
        self.crash_before.store(usize::MAX, Ordering::SeqCst);
    }

    fn point(&self) -> std::sync::MutexGuard<'_, Option<CrashPoint>> {
        self.at.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// External calls made (or stopped) since the last `arm`.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Resolves once a call has been stopped.
    pub async fn crashed(&self) {
        self.crashed.notified().await;
    }
}

#[async_trait]
impl Hook for CrashSwitch {
    async fn before(&self, call_made: &Call<'_>) -> Result<(), Refusal> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let reached = {
            let mut point = self.point();
            let hit = point.filter(|p| p.port == call_made.port && p.name == call_made.name);
            if hit.is_some() {
                *point = None;
            }
            hit
        };
        match reached {
            // This call goes through; the next one is stopped.
            Some(point) if point.after => self.crash_before.store(call + 1, Ordering::SeqCst),
            Some(_) => self.crash_before.store(call, Ordering::SeqCst),
            None => {}
        }
        if call >= self.crash_before.load(Ordering::SeqCst) {
            self.crashed.notify_one();
            std::future::pending::<()>().await;
        }
        Ok(())
    }
}

impl From<Refusal> for StoreError {
    fn from(refusal: Refusal) -> StoreError {
        match refusal {
            Refusal::Throttled(cause) => StoreError::Throttled(cause),
            Refusal::Conflict(key) => StoreError::Conflict(key),
            Refusal::Transient(cause) => StoreError::Transient(cause),
        }
    }
}

/// Turns a refusal into a port's error with a `Throttled` and a `Transient` variant.
macro_rules! refusal_into {
    ($error:ident) => {
        impl From<Refusal> for $error {
            fn from(refusal: Refusal) -> $error {
                match refusal {
                    Refusal::Throttled(cause) => $error::Throttled(cause),
                    Refusal::Conflict(key) => $error::Transient(Box::new(Conflicted(key))),
                    Refusal::Transient(cause) => $error::Transient(cause),
                }
            }
        }
    };
}

refusal_into!(QueueError);
refusal_into!(FleetError);
refusal_into!(JitStoreError);

impl From<Refusal> for ForgeError {
    fn from(refusal: Refusal) -> ForgeError {
        match refusal {
            Refusal::Throttled(_) => ForgeError::Throttled { retry_after: None },
            Refusal::Conflict(key) => ForgeError::Transient(Box::new(Conflicted(key))),
            Refusal::Transient(cause) => ForgeError::Transient(cause),
        }
    }
}

/// How an argument shows itself to a hook.
pub trait IntoArg<'a> {
    fn into_arg(self) -> Arg<'a>;
}

impl<'a> IntoArg<'a> for &'a str {
    fn into_arg(self) -> Arg<'a> {
        Arg::Text(self)
    }
}

impl<'a> IntoArg<'a> for u64 {
    fn into_arg(self) -> Arg<'a> {
        Arg::Number(self)
    }
}

/// Arguments that show themselves as the variant given.
macro_rules! into_arg {
    ($($variant:ident: $ty:ty),* $(,)?) => {$(
        impl<'a> IntoArg<'a> for &'a $ty {
            fn into_arg(self) -> Arg<'a> {
                Arg::$variant(self)
            }
        }
    )*};
}

into_arg!(Launch: FleetRequest, Update: RunnerUpdate, Transition: Transition);

/// Arguments a hook sees only as [`Arg::Other`].
macro_rules! other_arg {
    ($($ty:ty),* $(,)?) => {$(
        impl<'a> IntoArg<'a> for $ty {
            fn into_arg(self) -> Arg<'a> {
                Arg::Other
            }
        }
    )*};
}

other_arg!(
    Option<&JobCost>,
    ShutdownBehaviour,
    u32,
    usize,
    Duration,
    OffsetDateTime,
    JobStatus,
    InstanceStatus,
    Option<u64>,
    Option<&str>,
    &JobRecord,
    &RunnerRecord,
    &ClaimHandOver,
    &PoolCounter,
    &RunnerScope,
    &JitRequest,
    &JitConfig,
    &QueueMessage,
    &HostStamps,
    &Rerun,
    &TemplateVersion,
    &RunKey,
    RerunState,
);

/// Implements a port for [`Intercept`]: each method asks the hook, calls the port, and
/// shows the hook the outcome.
macro_rules! intercept {
    ($port:ident { $(fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $out:ty;)* }) => {
        #[async_trait]
        impl<P: $port + ?Sized, H: Hook + ?Sized> $port for Intercept<P, H> {
            $(async fn $name(&self $(, $arg: $ty)*) -> $out {
                let args = [$(IntoArg::into_arg($arg)),*];
                let call = Call { port: stringify!($port), name: stringify!($name), args: &args };
                self.hook.before(&call).await?;
                let outcome = self.inner.$name($($arg),*).await;
                self.hook.after(&call, &outcome);
                outcome
            })*
        }
    };
}

intercept!(RunnerStore {
    fn record_job(&self, job: &JobRecord) -> Result<JobRecord, StoreError>;
    fn get_job(&self, job_id: u64) -> Result<Option<JobRecord>, StoreError>;
    fn advance_job(&self, job: &JobRecord, status: JobStatus, runner_name: Option<&str>) -> Result<(), StoreError>;
    fn claim_job(&self, job_id: u64, runner: &RunnerRecord, max_runners: u32) -> Result<Claim, StoreError>;
    fn reserve_runner(&self, runner: &RunnerRecord, max_runners: u32) -> Result<bool, StoreError>;
    fn unclaim_job(&self, job_id: u64, runner_name: &str) -> Result<(), StoreError>;
    fn hand_over_claim(&self, hand_over: &ClaimHandOver, at: OffsetDateTime) -> Result<bool, StoreError>;
    fn take_stopped(&self, job_id: u64, runner_name: &str, at: OffsetDateTime) -> Result<bool, StoreError>;
    fn get_runner(&self, name: &str) -> Result<Option<RunnerRecord>, StoreError>;
    fn update_runner(&self, name: &str, update: &RunnerUpdate, at: OffsetDateTime) -> Result<RunnerRecord, StoreError>;
    fn transition(&self, name: &str, transition: &Transition) -> Result<RunnerRecord, StoreError>;
    fn fail_creation(&self, name: &str, at: OffsetDateTime, error: &str) -> Result<RunnerRecord, StoreError>;
    fn finish_deletion(&self, name: &str, at: OffsetDateTime, ttl: OffsetDateTime, host: &HostStamps, cost: Option<&JobCost>) -> Result<(), StoreError>;
    fn runners_in_status(&self, status: InstanceStatus, due: OffsetDateTime, limit: usize) -> Result<Vec<RunnerRecord>, StoreError>;
    fn runners_on_instance(&self, instance_id: &str) -> Result<Vec<RunnerRecord>, StoreError>;
    fn get_pool(&self, name: &str) -> Result<PoolRecord, StoreError>;
    fn jobs_in_status(&self, status: JobStatus, due: OffsetDateTime, limit: usize) -> Result<Vec<JobRecord>, StoreError>;
    fn recheck_job_at(&self, job_id: u64, at: OffsetDateTime) -> Result<bool, StoreError>;
    fn recheck_runner_at(&self, name: &str, status: InstanceStatus, at: OffsetDateTime) -> Result<bool, StoreError>;
    fn pool_counter(&self, name: &str) -> Result<PoolCounter, StoreError>;
    fn repair_pool_counter(&self, name: &str, observed: &PoolCounter, slots_used: u32, at: OffsetDateTime) -> Result<bool, StoreError>;
});

intercept!(JobQueue {
    fn send(&self, message: &QueueMessage) -> Result<(), QueueError>;
    fn send_after(&self, message: &QueueMessage, delay: Duration) -> Result<(), QueueError>;
});

intercept!(Launcher {
    fn launch(&self, request: &FleetRequest) -> Result<FleetLaunch, FleetError>;
    fn start(&self, instance_id: &str) -> Result<(), FleetError>;
    fn set_shutdown_behaviour(&self, instance_id: &str, behaviour: ShutdownBehaviour) -> Result<(), FleetError>;
});

intercept!(Fleet {
    fn terminate(&self, instance_id: &str) -> Result<(), FleetError>;
    fn describe(&self) -> Result<Vec<Instance>, FleetError>;
    fn set_shutdown_behaviour(&self, instance_id: &str, behaviour: ShutdownBehaviour) -> Result<(), FleetError>;
    fn describe_live(&self) -> Result<Vec<Instance>, FleetError>;
    fn launch_image(&self, template: &str, version: &TemplateVersion, ami: Option<&str>) -> Result<Option<String>, FleetError>;
});

intercept!(JitConfigStore {
    fn put(&self, instance_id: &str, runner_name: &str, jit: &JitConfig) -> Result<(), JitStoreError>;
    fn put_prepare(&self, instance_id: &str, runner_name: &str) -> Result<(), JitStoreError>;
    fn delete(&self, instance_id: &str) -> Result<Tombstone, JitStoreError>;
});

intercept!(Forge {
    fn generate_jit_config(&self, scope: &RunnerScope, request: &JitRequest) -> Result<JitConfig, ForgeError>;
    fn remove_runner(&self, scope: &RunnerScope, runner_id: u64) -> Result<RunnerRemoval, ForgeError>;
    fn get_runner(&self, scope: &RunnerScope, runner_id: u64) -> Result<Option<ForgeRunner>, ForgeError>;
    fn list_runners(&self, scope: &RunnerScope) -> Result<Vec<ForgeRunner>, ForgeError>;
    fn find_runner(&self, scope: &RunnerScope, name: &str) -> Result<Option<ForgeRunner>, ForgeError>;
    fn job_state(&self, installation_id: Option<u64>, owner: &str, repo: &str, job_id: u64) -> Result<Option<ForgeJobState>, ForgeError>;
});

intercept!(HookDeliveries {
    fn list_deliveries(&self, cursor: Option<&str>) -> Result<DeliveryPage, ForgeError>;
    fn redeliver(&self, id: u64) -> Result<(), ForgeError>;
});

intercept!(RerunStore {
    fn want_rerun(&self, rerun: &Rerun) -> Result<bool, StoreError>;
    fn reruns(&self) -> Result<Vec<Rerun>, StoreError>;
    fn rerun_of(&self, run: &RunKey) -> Result<Option<Rerun>, StoreError>;
    fn move_rerun(&self, run: &RunKey, from: RerunState, to: RerunState, next_check_at: OffsetDateTime) -> Result<bool, StoreError>;
    fn forget_rerun(&self, run: &RunKey) -> Result<(), StoreError>;
});

intercept!(WorkflowRuns {
    fn run_state(&self, installation_id: Option<u64>, run: &RunKey) -> Result<Option<RunState>, ForgeError>;
    fn rerun_job(&self, installation_id: Option<u64>, run: &RunKey, job_id: u64) -> Result<(), ForgeError>;
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handlers::test_support::job;
    use crate::memory::MemoryStore;
    use std::sync::Mutex;

    /// Refuses `get_job` and writes down every call it sees, and how each ended.
    #[derive(Default)]
    struct Recorder {
        seen: Mutex<Vec<String>>,
    }

    #[async_trait]
    impl Hook for Recorder {
        async fn before(&self, call: &Call<'_>) -> Result<(), Refusal> {
            let seen = format!("{}.{} {:?}", call.port, call.name, call.args);
            self.seen.lock().expect("seen").push(seen);
            if call.is("get_job") {
                return Err(Refusal::Throttled(Box::new(Conflicted("no".into()))));
            }
            Ok(())
        }

        fn after(&self, call: &Call<'_>, outcome: &dyn Any) {
            let stored = outcome.downcast_ref::<Result<JobRecord, StoreError>>();
            let ended = format!("{} ok: {}", call.name, matches!(stored, Some(Ok(_))));
            self.seen.lock().expect("seen").push(ended);
        }
    }

    #[tokio::test]
    async fn the_hook_sees_each_call_and_may_fail_it_with_the_ports_error() {
        let recorder = Arc::new(Recorder::default());
        let store = Intercept::new(Arc::new(MemoryStore::new()), &recorder);
        store.record_job(&job(7)).await.expect("recorded");
        let refused = store.get_job(7).await;
        assert!(
            matches!(refused, Err(StoreError::Throttled(_))),
            "{refused:?}"
        );
        let seen = recorder.seen.lock().expect("seen").clone();
        assert_eq!(
            seen,
            [
                "RunnerStore.record_job [Other]",
                "record_job ok: true",
                "RunnerStore.get_job [Number(7)]",
            ]
        );
    }

    #[tokio::test]
    async fn an_armed_switch_stops_the_call_past_its_count() {
        let switch = CrashSwitch::new();
        let store = Intercept::new(Arc::new(MemoryStore::new()), &switch);
        switch.arm(1);
        store.record_job(&job(7)).await.expect("first call passes");
        let second = tokio::time::timeout(Duration::from_millis(50), store.get_job(7));
        assert!(second.await.is_err(), "the second call returned");
        tokio::time::timeout(Duration::from_millis(50), switch.crashed())
            .await
            .expect("the switch says it crashed");
        assert_eq!(switch.calls(), 2);
        switch.disarm();
        assert!(store.get_job(7).await.expect("read").is_some());
    }
}
