//! In-memory implementations of every port, for the handlers' unit tests, the model and
//! the end-to-end tests; compiled only with the `fakes` feature (and in core's own
//! tests), so that no Lambda binary carries them.
//!
//! Each fake keeps the contract written on its port's methods (conditional, idempotent,
//! atomic) and behaves as its real adapter does, so a handler test exercises the same
//! branches as production: [`MemoryStore`] refuses what the DynamoDB conditions refuse,
//! [`FakeFleet`] treats the runner name as EC2's client token, [`FakeForge`] answers a
//! busy runner's DELETE with 422. Each also has switches to inject provider failures and
//! helpers to plant or read state, so a test can produce a crash or a lost webhook and
//! check that the handlers converge.
//!
//! State sits behind a `std::sync::Mutex` that is never held across an `.await`, so
//! every port call is atomic, as the transactions it stands for are.
//!
//! [`Intercept`] wraps any port, fake or real, and hands each call to a [`Hook`] before
//! and after it: the one way tests add crashes, refusals, latency or watches to a port.

mod breaker;
mod deliveries;
mod fleet;
mod forge;
mod intercept;
mod jit_store;
mod leases;
mod prices;
mod queue;
mod releases;
mod reruns;
mod store;
mod tokens;
mod unrouted;

pub use breaker::MemorySpotBreakers;
pub use deliveries::MemoryDeliveries;
pub use fleet::{FakeFleet, FleetFailure, FAKE_ROOT_GIB, FAKE_TEMPLATE_IMAGE};
pub use forge::{FakeForge, ForgeCalls, ForgeFailure};
pub use intercept::{
    Arg, Call, Conflicted, CrashPoint, CrashSwitch, Hook, Intercept, IntoArg, Refusal,
};
pub use jit_store::MemoryJitStore;
pub use leases::MemoryLeases;
pub use prices::{FakePriceList, MemoryPriceBook};
pub use queue::MemoryQueue;
pub use releases::{FakeImagePipelines, FakeRunnerReleases, MemoryRunnerBucket};
pub use reruns::{FakeWorkflowRuns, MemoryReruns};
pub use store::{MemoryStore, StoreOp};
pub use tokens::{MemoryTokenShelf, ShelfCalls};
pub use unrouted::MemoryUnroutedJobs;

use std::sync::{Mutex, MutexGuard, PoisonError};

/// The cause carried by every error a fake is told to fail with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("injected failure: {0}")]
pub struct InjectedFailure(pub &'static str);

/// Locks a fake's state; a test that panicked while holding it leaves nothing half
/// written (no lock is held across a partial update), so the state is still usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Spends one of the `remaining` injected failures: true if this call is to fail.
fn spend(remaining: &mut u32) -> bool {
    if *remaining == 0 {
        return false;
    }
    *remaining -= 1;
    true
}
