//! [`MemoryDeliveries`]: the App's webhook deliveries as a list, newest first, paged
//! like GitHub's (a `v1_<id>` cursor per page, naming the page's newest delivery), recording every redelivery asked for; its calls can
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
    /// The next redelivery answers GitHub's secondary rate limit, with this wait.
    throttle_next: Option<Option<std::time::Duration>>,
    /// Redeliveries asked, refused ones included.
    asks: usize,
}

impl MemoryDeliveries {
    /// Pages of `per_page` deliveries.
    pub fn new(per_page: usize) -> MemoryDeliveries {
        MemoryDeliveries {
            state: Mutex::default(),
            per_page: per_page.max(1),
        }
    }

    /// Adds a delivery, the newest so far (its id above every other's, as GitHub's are).
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

    /// Makes the next redelivery answer [`ForgeError::Throttled`] with `retry_after`, as
    /// GitHub's secondary rate limit does.
    pub fn throttle_next(&self, retry_after: Option<std::time::Duration>) {
        lock(&self.state).throttle_next = Some(retry_after);
    }

    /// Redeliveries asked so far, those refused included.
    pub fn redelivery_asks(&self) -> usize {
        lock(&self.state).asks
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
        // GitHub's cursor, `v1_<id>`, names the newest delivery of the page it starts:
        // it stays where it was while newer deliveries arrive.
        let from = match cursor {
            None => u64::MAX,
            Some(text) => text
                .strip_prefix("v1_")
                .and_then(|id| id.parse::<u64>().ok())
                .ok_or_else(|| ForgeError::Rejected {
                    status: 422,
                    message: format!("cursor {text:?} is not valid"),
                })?,
        };
        let mut newest_first = state.deliveries.iter().rev().filter(|d| d.id <= from);
        let page: Vec<HookDelivery> = newest_first.by_ref().take(self.per_page).cloned().collect();
        let next = newest_first.next().map(|d| format!("v1_{}", d.id));
        Ok(DeliveryPage {
            deliveries: page,
            next_cursor: next,
        })
    }

    async fn redeliver(&self, id: u64) -> Result<(), ForgeError> {
        let mut state = lock(&self.state);
        state.asks += 1;
        if let Some(retry_after) = state.throttle_next.take() {
            return Err(ForgeError::Throttled { retry_after });
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn delivery(id: u64) -> HookDelivery {
        HookDelivery {
            id,
            guid: format!("g{id}"),
            event: "workflow_job".to_owned(),
            action: Some("queued".to_owned()),
            status_code: 200,
            delivered_at: datetime!(2026-11-22 10:00 UTC),
            redelivery: false,
        }
    }

    fn ids(page: &DeliveryPage) -> Vec<u64> {
        page.deliveries.iter().map(|d| d.id).collect()
    }

    #[tokio::test]
    async fn a_cursor_keeps_its_place_while_newer_deliveries_arrive() {
        let deliveries = MemoryDeliveries::new(2);
        for id in 1..=5 {
            deliveries.record(delivery(id));
        }
        let first = deliveries.list_deliveries(None).await.expect("listed");
        assert_eq!(ids(&first), [5, 4]);
        assert_eq!(first.next_cursor.as_deref(), Some("v1_3"));
        deliveries.record(delivery(6));
        let next = first.next_cursor.as_deref();
        let second = deliveries.list_deliveries(next).await.expect("listed");
        assert_eq!(ids(&second), [3, 2], "the page after 4, not shifted by 6");
        let next = second.next_cursor.as_deref();
        let last = deliveries.list_deliveries(next).await.expect("listed");
        assert_eq!((ids(&last), last.next_cursor), (vec![1], None));
        let bad = deliveries.list_deliveries(Some("2")).await;
        assert!(matches!(bad, Err(ForgeError::Rejected { status: 422, .. })));
    }

    #[tokio::test]
    async fn injected_failures_answer_as_a_5xx_then_clear() {
        let deliveries = MemoryDeliveries::new(2);
        deliveries.record(delivery(1));
        deliveries.fail_next(2);
        let listed = deliveries.list_deliveries(None).await;
        assert!(matches!(listed, Err(ForgeError::Transient(_))));
        let asked = deliveries.redeliver(1).await;
        assert!(matches!(asked, Err(ForgeError::Transient(_))));
        assert!(deliveries.redelivered().is_empty());
        deliveries.redeliver(1).await.expect("asked");
        assert_eq!(deliveries.redelivered(), [1]);
        assert_eq!(
            deliveries.delivery(1).map(|d| d.guid),
            Some("g1".to_owned())
        );
    }
}
