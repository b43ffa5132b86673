//! Counting AWS calls: an SDK interceptor that tallies every operation the clients it is
//! attached to send, by service and operation, so tests and benchmarks can say how many
//! DynamoDB writes, EC2 launches or SSM calls a job costs.

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Shared tally of `(service, operation)` → calls.
#[derive(Debug, Clone, Default)]
pub struct CallCounter {
    counts: Arc<Mutex<BTreeMap<(String, String), u64>>>,
}

impl CallCounter {
    /// Calls of `operation` on `service` (e.g. `("DynamoDB", "TransactWriteItems")`).
    pub fn count(&self, service: &str, operation: &str) -> u64 {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        counts
            .get(&(service.to_owned(), operation.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    /// Calls to `service` whose operation satisfies `pick`.
    pub fn sum(&self, service: &str, pick: impl Fn(&str) -> bool) -> u64 {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        counts
            .iter()
            .filter(|((s, op), _)| s == service && pick(op))
            .map(|(_, n)| n)
            .sum()
    }

    /// Every tally, sorted.
    pub fn all(&self) -> Vec<(String, String, u64)> {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        counts
            .iter()
            .map(|((s, op), n)| (s.clone(), op.clone(), *n))
            .collect()
    }

    /// Forgets every tally.
    pub fn reset(&self) {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

impl Intercept for CallCounter {
    fn name(&self) -> &'static str {
        "CallCounter"
    }

    // Counted per HTTP request sent, so retries count as the calls they are.
    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(metadata) = cfg.load::<Metadata>() {
            let key = (metadata.service().to_owned(), metadata.name().to_owned());
            *self
                .counts
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(key)
                .or_default() += 1;
        }
        Ok(())
    }
}

/// DynamoDB operations that write.
pub fn is_dynamodb_write(operation: &str) -> bool {
    matches!(
        operation,
        "PutItem" | "UpdateItem" | "DeleteItem" | "TransactWriteItems" | "BatchWriteItem"
    )
}
