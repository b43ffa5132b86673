//! ephemera's CloudWatch metrics, written as Embedded Metric Format (EMF) log lines.
//!
//! A handler records what happened into its [`Metrics`] handle and calls
//! [`Metrics::flush`] once per invocation. The flush writes one JSON document per distinct
//! set of dimension values to stdout; CloudWatch Logs extracts the metrics from the
//! function's log group, so there is no API call, no SDK and no IAM permission to grant.
//! Names, units and dimensions live in one table, [`Metric`], which the dashboard in
//! `template.yaml` relies on.
//!
//! Tests capture the lines with [`Metrics::capture`] and check them with [`validate_emf`],
//! which the end-to-end tests also run on the functions' stdout.

mod catalog;
mod emf;
#[cfg(test)]
mod tests;

pub use catalog::{Aggregation, Dimension, Metric, CLOUDWATCH_UNITS, NAMESPACE};
pub use emf::{validate_emf, EmfDocument, MAX_DIMENSIONS, MAX_METRICS, MAX_VALUES};

use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use time::OffsetDateTime;

/// Dimension values in the metric's dimension order, `Deployment` first.
type DimensionValues = Vec<(Dimension, String)>;
/// What was recorded since the last flush, grouped the way documents are.
type Pending = BTreeMap<DimensionValues, BTreeMap<Metric, Vec<f64>>>;

/// Where a handler records metrics. Cheap to clone; clones share one buffer.
///
/// The default is [`Metrics::disabled`], which records nothing.
#[derive(Clone, Default)]
pub struct Metrics {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    deployment: String,
    sink: Sink,
    pending: Mutex<Pending>,
}

enum Sink {
    Stdout,
    Capture(Captured),
}

/// The lines a [`Metrics::capture`] handle has flushed.
#[derive(Debug, Clone, Default)]
pub struct Captured {
    lines: Arc<Mutex<Vec<String>>>,
}

impl Captured {
    /// Every line flushed so far, oldest first.
    pub fn lines(&self) -> Vec<String> {
        lock(&self.lines).clone()
    }

    /// Every line flushed so far, validated; the first invalid line is an error.
    pub fn documents(&self) -> Result<Vec<EmfDocument>, String> {
        self.lines().iter().map(|line| validate_emf(line)).collect()
    }
}

impl Metrics {
    /// Writes to stdout, for Lambda: CloudWatch Logs turns the lines into metrics.
    pub fn stdout(deployment: impl Into<String>) -> Metrics {
        Metrics::with_sink(deployment.into(), Sink::Stdout)
    }

    /// Keeps the lines in memory, for tests.
    pub fn capture(deployment: impl Into<String>) -> (Metrics, Captured) {
        let captured = Captured::default();
        let metrics = Metrics::with_sink(deployment.into(), Sink::Capture(captured.clone()));
        (metrics, captured)
    }

    /// Records and writes nothing.
    pub fn disabled() -> Metrics {
        Metrics { inner: None }
    }

    fn with_sink(deployment: String, sink: Sink) -> Metrics {
        let inner = Inner {
            deployment: dimension_value(&deployment),
            sink,
            pending: Mutex::default(),
        };
        Metrics {
            inner: Some(Arc::new(inner)),
        }
    }

    /// Records `value` for `metric`. `dimensions` gives a value to each of the metric's
    /// dimensions but `Deployment`, in any order.
    ///
    /// Other dimensions are a programming error: the value is dropped with an error log,
    /// and debug builds panic, even when disabled, so that tests catch it. Non-finite
    /// values are dropped.
    pub fn record(&self, metric: Metric, dimensions: &[(Dimension, &str)], value: f64) {
        // Checked even when disabled, so that handler tests without metrics catch it too.
        let deployment = self.inner.as_ref().map_or("", |inner| &inner.deployment);
        let Some(key) = key(metric, deployment, dimensions) else {
            tracing::error!(
                metric = metric.name(),
                ?dimensions,
                "metric dimensions do not match its definition"
            );
            debug_assert!(
                false,
                "{} takes dimensions {:?}, not {dimensions:?}",
                metric.name(),
                metric.dimensions()
            );
            return;
        };
        if !value.is_finite() {
            tracing::warn!(
                metric = metric.name(),
                value,
                "dropped a non-finite metric value"
            );
            return;
        }
        let Some(inner) = &self.inner else {
            return;
        };
        let mut pending = lock(&inner.pending);
        let values = pending.entry(key).or_default().entry(metric).or_default();
        match (metric.aggregation(), values.first_mut()) {
            (Aggregation::Sum, Some(total)) => *total += value,
            _ => values.push(value),
        }
    }

    /// Records a duration in the metric's unit (milliseconds, or seconds to the
    /// millisecond); a negative one (clock skew) counts as zero.
    pub fn record_duration(
        &self,
        metric: Metric,
        dimensions: &[(Dimension, &str)],
        duration: time::Duration,
    ) {
        let value = if metric.unit() == "Seconds" {
            (duration.as_seconds_f64() * 1000.0).round().max(0.0) / 1000.0
        } else {
            duration.whole_milliseconds().max(0) as f64
        };
        self.record(metric, dimensions, value);
    }

    /// Writes what was recorded since the last flush, one line per distinct set of
    /// dimension values (more only past EMF's limits), and returns the number of lines.
    pub fn flush(&self) -> usize {
        let Some(inner) = &self.inner else {
            return 0;
        };
        let pending = std::mem::take(&mut *lock(&inner.pending));
        let timestamp = (OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64;
        let lines: Vec<String> = pending
            .iter()
            .flat_map(|(key, metrics)| documents(key, metrics, timestamp))
            .collect();
        inner.sink.write(&lines);
        lines.len()
    }
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sink = match self.inner.as_deref().map(|inner| &inner.sink) {
            None => "disabled",
            Some(Sink::Stdout) => "stdout",
            Some(Sink::Capture(_)) => "capture",
        };
        f.debug_struct("Metrics").field("sink", &sink).finish()
    }
}

impl Sink {
    fn write(&self, lines: &[String]) {
        match self {
            Sink::Stdout => {
                let mut out = std::io::stdout().lock();
                for line in lines {
                    // One write per line, so a log line from another thread cannot land
                    // inside the JSON and spoil the document.
                    if let Err(error) = out.write_all(format!("{line}\n").as_bytes()) {
                        tracing::warn!(%error, "could not write metrics to stdout");
                    }
                }
                let _ = out.flush();
            }
            Sink::Capture(captured) => lock(&captured.lines).extend_from_slice(lines),
        }
    }
}

/// The dimension values of one record in the metric's order, or `None` if `given` does
/// not name exactly the metric's dimensions other than `Deployment`.
fn key(metric: Metric, deployment: &str, given: &[(Dimension, &str)]) -> Option<DimensionValues> {
    let wanted = metric.dimensions();
    if given.len() + 1 != wanted.len() {
        return None;
    }
    wanted
        .iter()
        .map(|&dimension| match dimension {
            Dimension::Deployment => Some((dimension, deployment.to_owned())),
            _ => given
                .iter()
                .find(|(name, _)| *name == dimension)
                .map(|(_, value)| (dimension, dimension_value(value))),
        })
        .collect()
}

/// A value CloudWatch accepts as a dimension value: 1 to 1024 ASCII characters, not all
/// blank. An invalid one would make CloudWatch drop the whole document.
fn dimension_value(raw: &str) -> String {
    let value: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii() && !c.is_ascii_control() {
                c
            } else {
                '_'
            }
        })
        .take(1024)
        .collect();
    if value.trim().is_empty() {
        "unknown".to_owned()
    } else {
        value
    }
}

/// The documents for one set of dimension values: usually one, more when a metric has
/// more than [`MAX_VALUES`] samples or the set has more than [`MAX_METRICS`] metrics.
fn documents(
    key: &DimensionValues,
    metrics: &BTreeMap<Metric, Vec<f64>>,
    timestamp: i64,
) -> Vec<String> {
    let rounds = metrics
        .values()
        .map(|values| values.len().div_ceil(MAX_VALUES))
        .max()
        .unwrap_or(0);
    let mut documents = Vec::new();
    for round in 0..rounds {
        let entries: Vec<(Metric, &[f64])> = metrics
            .iter()
            .filter_map(|(metric, values)| {
                let chunk = values.chunks(MAX_VALUES).nth(round)?;
                Some((*metric, chunk))
            })
            .collect();
        for chunk in entries.chunks(MAX_METRICS) {
            documents.push(render(key, chunk, timestamp));
        }
    }
    documents
}

/// One EMF document, as one line of JSON.
fn render(key: &DimensionValues, entries: &[(Metric, &[f64])], timestamp: i64) -> String {
    let names: Vec<&str> = key.iter().map(|(dimension, _)| dimension.name()).collect();
    let definitions: Vec<Value> = entries
        .iter()
        .map(|(metric, _)| json!({ "Name": metric.name(), "Unit": metric.unit() }))
        .collect();
    let mut root = Map::new();
    root.insert(
        "_aws".to_owned(),
        json!({
            "Timestamp": timestamp,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [names],
                "Metrics": definitions,
            }],
        }),
    );
    for (dimension, value) in key {
        root.insert(dimension.name().to_owned(), Value::from(value.as_str()));
    }
    for (metric, values) in entries {
        let value = match values {
            [single] => Value::from(*single),
            many => Value::from(many.to_vec()),
        };
        root.insert(metric.name().to_owned(), value);
    }
    Value::Object(root).to_string()
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
