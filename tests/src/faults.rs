//! Fault injection around the real adapters: what moto cannot produce (provider errors
//! at chosen moments) is made here, while every call that goes through still reaches
//! the emulator over the wire.

use async_trait::async_trait;
use ephemera_aws::Ec2Fleet;
use ephemera_core::ports::{Fleet, FleetError, Instance, LaunchSpec, Launcher};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// The error an injected failure carries.
#[derive(Debug, thiserror::Error)]
#[error("injected failure: {0}")]
pub struct Injected(pub &'static str);

/// The real EC2 fleet adapter, with failures injected on demand.
pub struct FaultyFleet {
    inner: Arc<Ec2Fleet>,
    terminate_failures: AtomicU32,
    terminate_calls: AtomicU32,
}

impl FaultyFleet {
    pub fn new(inner: Arc<Ec2Fleet>) -> FaultyFleet {
        FaultyFleet {
            inner,
            terminate_failures: AtomicU32::new(0),
            terminate_calls: AtomicU32::new(0),
        }
    }

    /// The wrapped adapter.
    pub fn inner(&self) -> &Ec2Fleet {
        &self.inner
    }

    /// The next `count` terminate calls fail (without reaching EC2).
    pub fn fail_terminate(&self, count: u32) {
        self.terminate_failures.store(count, Ordering::SeqCst);
    }

    /// Terminate calls made so far, failed or not.
    pub fn terminate_calls(&self) -> u32 {
        self.terminate_calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Launcher for FaultyFleet {
    async fn launch(&self, spec: &LaunchSpec) -> Result<String, FleetError> {
        self.inner.launch(spec).await
    }
}

#[async_trait]
impl Fleet for FaultyFleet {
    async fn terminate(&self, instance_id: &str) -> Result<(), FleetError> {
        self.terminate_calls.fetch_add(1, Ordering::SeqCst);
        let failing = self
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
}
