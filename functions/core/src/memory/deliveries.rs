//! [`MemoryDeliveries`]: the App's webhook deliveries as a list, newest first, paged
//! like GitHub's (a cursor per page), recording every redelivery asked for; its calls can
//! be made to fail as GitHub's 5xx answers do.

use super::{lock, spend, InjectedFailure};
use crate::ports::{DeliveryPage, ForgeError, HookDeliveries, HookDelivery};
use async_trait::async_trait;
use std::sync::Mutex;

/// Construct with [`MemoryDeliveries::new`]; add deliveries with
/// [`record`](MemoryDeliveries::record).
#[derive(Debug)]
pub struct MemoryDeliveries {
    state: Mutex<State>,
    per_page: usize,
}

#[derive(Debug, Default)]
struct State {
    /// Oldest first.
    deliveries: Vec<HookDelivery>,
    redelivered: Vec<u64>,
    list_calls: usize,
    failures_left: u32,
}

impl MemoryDeliveries {
    /// Pages of `per_page` deliveries.
    pub fn new(per_page: usize) -> MemoryDeliveries {
        MemoryDeliveries {
            state: Mutex::default(),
            per_page: per_page.max(1),
        }
    }

    /// Adds a delivery, the newest so far.
    pub fn record(&self, delivery: HookDelivery) {
        lock(&self.state).deliveries.push(delivery);
    }

    /// The ids asked to be redelivered, in order.
    pub fn redelivered(&self) -> Vec<u64> {
        lock(&self.state).redelivered.clone()
    }

    pub fn list_calls(&self) -> usize {
        lock(&self.state).list_calls
    }

    /// Every delivery recorded, oldest first.
    pub fn deliveries(&self) -> Vec<HookDelivery> {
        lock(&self.state).deliveries.clone()
    }

    /// The delivery `id`, if recorded.
    pub fn delivery(&self, id: u64) -> Option<HookDelivery> {
        let state = lock(&self.state);
        state.deliveries.iter().find(|d| d.id == id).cloned()
    }

    /// Makes the next `times` calls (listing or redelivering) fail with
    /// [`ForgeError::Transient`], as a 5xx answer does; 0 clears.
    pub fn fail_next(&self, times: u32) {
        lock(&self.state).failures_left = times;
    }
}

fn injected() -> ForgeError {
    ForgeError::Transient(Box::new(InjectedFailure("github deliveries")))
}

#[async_trait]
impl HookDeliveries for MemoryDeliveries {
    async fn list_deliveries(&self, cursor: Option<&str>) -> Result<DeliveryPage, ForgeError> {
        let mut state = lock(&self.state);
        state.list_calls += 1;
        if spend(&mut state.failures_left) {
            return Err(injected());
        }
        let skip = match cursor {
            None => 0,
            Some(text) => text.parse::<usize>().map_err(|_| ForgeError::Rejected {
                status: 422,
                message: format!("cursor {text:?} is not valid"),
            })?,
        };
        let newest_first: Vec<HookDelivery> = state.deliveries.iter().rev().cloned().collect();
        let page: Vec<HookDelivery> = newest_first
            .iter()
            .skip(skip)
            .take(self.per_page)
            .cloned()
            .collect();
        let next = skip + page.len();
        Ok(DeliveryPage {
            deliveries: page,
            next_cursor: (next < newest_first.len()).then(|| next.to_string()),
        })
    }

    async fn redeliver(&self, id: u64) -> Result<(), ForgeError> {
        let mut state = lock(&self.state);
        if spend(&mut state.failures_left) {
            return Err(injected());
        }
        if !state.deliveries.iter().any(|d| d.id == id) {
            return Err(ForgeError::Rejected {
                status: 404,
                message: format!("delivery {id} not found"),
            });
        }
        state.redelivered.push(id);
        Ok(())
    }
}
