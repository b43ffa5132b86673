//! The metrics port of `ephemera doctor` on CloudWatch: `GetMetricData`, one `Sum`
//! query per reason the webhook's screen refuses for, over one period as long as the
//! window. The names come from core's metric catalog, so they are the ones the webhook
//! writes.

use super::AwsPorts;
use crate::cmd::doctor::ports::{MetricsPort, Rejections};
use crate::errors::aws;
use async_trait::async_trait;
use aws_sdk_cloudwatch::types::{Dimension as CwDimension, Metric, MetricDataQuery, MetricStat};
use aws_smithy_types::DateTime;
use ephemera_core::metrics::{Dimension, Metric as Catalog, NAMESPACE};
use ephemera_core::screen::Rejection;
use std::time::{Duration, SystemTime};

/// The query of one reason's sum; its id is the reason, which CloudWatch's id rule
/// (a lowercase letter, then letters, digits and `_`) allows.
fn query(deployment: &str, reason: &str, period: i32) -> MetricDataQuery {
    let dimension = |name: Dimension, value: &str| {
        CwDimension::builder()
            .name(name.name())
            .value(value)
            .build()
    };
    let metric = Metric::builder()
        .namespace(NAMESPACE)
        .metric_name(Catalog::WebhookRejected.name())
        .dimensions(dimension(Dimension::Deployment, deployment))
        .dimensions(dimension(Dimension::Reason, reason))
        .build();
    MetricDataQuery::builder()
        .id(reason)
        .metric_stat(
            MetricStat::builder()
                .metric(metric)
                .period(period)
                .stat("Sum")
                .build(),
        )
        .return_data(true)
        .build()
}

#[async_trait]
impl MetricsPort for AwsPorts {
    #[tracing::instrument(skip_all, fields(deployment = %deployment))]
    async fn webhook_rejections(
        &self,
        deployment: &str,
        window: Duration,
    ) -> anyhow::Result<Rejections> {
        let end = SystemTime::now();
        let start = end.checked_sub(window).unwrap_or(SystemTime::UNIX_EPOCH);
        // One period over the whole window; CloudWatch wants a multiple of 60 seconds,
        // and an unaligned start can split it in two datapoints, which are summed.
        let period = i32::try_from(window.as_secs().div_ceil(60).max(1) * 60)?;
        let queries: Vec<MetricDataQuery> = Rejection::ALL
            .iter()
            .map(|rejection| query(deployment, rejection.reason(), period))
            .collect();
        let mut rejections = Rejections::default();
        let mut next_token = None;
        loop {
            let page = self
                .cloudwatch
                .get_metric_data()
                .start_time(DateTime::from(start))
                .end_time(DateTime::from(end))
                .set_metric_data_queries(Some(queries.clone()))
                .set_next_token(next_token)
                .send()
                .await
                .map_err(aws("CloudWatch", "GetMetricData"))?;
            for result in page.metric_data_results() {
                let sum: f64 = result.values().iter().sum();
                if let (Some(reason), true) = (result.id(), sum > 0.0) {
                    *rejections.by_reason.entry(reason.to_owned()).or_default() += sum;
                }
            }
            match page.next_token() {
                Some(token) => next_token = Some(token.to_owned()),
                None => return Ok(rejections),
            }
        }
    }
}
