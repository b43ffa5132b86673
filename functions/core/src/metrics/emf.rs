//! A checker for Embedded Metric Format documents, and the parsed view tests assert on.
//!
//! CloudWatch drops an invalid document without a word in the function's own logs, so the
//! tests check every line against the rules of the EMF specification instead:
//! <https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html>

use super::catalog::{Dimension, Metric, CLOUDWATCH_UNITS, NAMESPACE};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Most metric definitions in one metric directive.
pub const MAX_METRICS: usize = 100;
/// Most dimension names in one dimension set.
pub const MAX_DIMENSIONS: usize = 30;
/// Most values in one metric's array.
pub const MAX_VALUES: usize = 100;

/// One valid EMF document, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct EmfDocument {
    /// `_aws.Timestamp`, milliseconds since the Unix epoch.
    pub timestamp: i64,
    /// Every dimension set of every directive, each a list of dimension names.
    pub dimension_sets: Vec<Vec<String>>,
    /// Dimension name → value, for the names in `dimension_sets`.
    pub dimensions: BTreeMap<String, String>,
    /// Metric name → values (a single number is one value).
    pub metrics: BTreeMap<String, Vec<f64>>,
    /// Metric name → unit, for the metrics that declare one.
    pub units: BTreeMap<String, String>,
}

impl EmfDocument {
    /// The values of `metric`, if the document has it.
    pub fn values(&self, metric: Metric) -> Option<&[f64]> {
        self.metrics.get(metric.name()).map(Vec::as_slice)
    }

    /// The value of `dimension`, if the document has it.
    pub fn dimension(&self, dimension: Dimension) -> Option<&str> {
        self.dimensions.get(dimension.name()).map(String::as_str)
    }
}

/// Parses one line and checks it is an EMF document in the `ephemera` namespace: the
/// `_aws` block with a numeric `Timestamp` and `CloudWatchMetrics`, and for each directive
/// at most [`MAX_METRICS`] metrics and [`MAX_DIMENSIONS`] names per dimension set, every
/// dimension name a top-level string member, every metric a top-level number or array of
/// 1 to [`MAX_VALUES`] numbers, and every unit one CloudWatch knows.
pub fn validate_emf(line: &str) -> Result<EmfDocument, String> {
    let root: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let root = root
        .as_object()
        .ok_or("the document is not a JSON object")?;
    let aws = root.get("_aws").ok_or("no `_aws` member")?;
    let aws = aws.as_object().ok_or("`_aws` is not an object")?;
    let timestamp = aws
        .get("Timestamp")
        .and_then(Value::as_i64)
        .ok_or("`_aws.Timestamp` is missing or not an integer number of milliseconds")?;
    let directives = aws
        .get("CloudWatchMetrics")
        .and_then(Value::as_array)
        .ok_or("`_aws.CloudWatchMetrics` is missing or not an array")?;
    if directives.is_empty() {
        return Err("`_aws.CloudWatchMetrics` is empty".into());
    }
    let mut document = EmfDocument {
        timestamp,
        dimension_sets: Vec::new(),
        dimensions: BTreeMap::new(),
        metrics: BTreeMap::new(),
        units: BTreeMap::new(),
    };
    for directive in directives {
        let directive = directive
            .as_object()
            .ok_or("a metric directive is not an object")?;
        check_namespace(directive)?;
        check_dimensions(root, directive, &mut document)?;
        check_metrics(root, directive, &mut document)?;
    }
    Ok(document)
}

fn check_namespace(directive: &Map<String, Value>) -> Result<(), String> {
    match directive.get("Namespace").and_then(Value::as_str) {
        Some(NAMESPACE) => Ok(()),
        Some(other) => Err(format!("namespace {other:?} is not {NAMESPACE:?}")),
        None => Err("a directive has no string `Namespace`".into()),
    }
}

fn check_dimensions(
    root: &Map<String, Value>,
    directive: &Map<String, Value>,
    document: &mut EmfDocument,
) -> Result<(), String> {
    let sets = directive
        .get("Dimensions")
        .and_then(Value::as_array)
        .ok_or("a directive has no `Dimensions` array")?;
    for set in sets {
        let set = set.as_array().ok_or("a dimension set is not an array")?;
        if set.len() > MAX_DIMENSIONS {
            return Err(format!(
                "a dimension set has {} dimensions, more than {MAX_DIMENSIONS}",
                set.len()
            ));
        }
        let mut names = Vec::with_capacity(set.len());
        for name in set {
            let name = name.as_str().ok_or("a dimension name is not a string")?;
            let value = root
                .get(name)
                .ok_or_else(|| format!("dimension {name:?} has no top-level member"))?;
            let value = value
                .as_str()
                .ok_or_else(|| format!("dimension {name:?} is not a string"))?;
            document
                .dimensions
                .insert(name.to_owned(), value.to_owned());
            names.push(name.to_owned());
        }
        document.dimension_sets.push(names);
    }
    Ok(())
}

fn check_metrics(
    root: &Map<String, Value>,
    directive: &Map<String, Value>,
    document: &mut EmfDocument,
) -> Result<(), String> {
    let definitions = directive
        .get("Metrics")
        .and_then(Value::as_array)
        .ok_or("a directive has no `Metrics` array")?;
    if definitions.len() > MAX_METRICS {
        return Err(format!(
            "a directive has {} metrics, more than {MAX_METRICS}",
            definitions.len()
        ));
    }
    for definition in definitions {
        let name = definition
            .get("Name")
            .and_then(Value::as_str)
            .ok_or("a metric definition has no string `Name`")?;
        if let Some(unit) = definition.get("Unit") {
            let unit = unit
                .as_str()
                .filter(|unit| CLOUDWATCH_UNITS.contains(unit))
                .ok_or_else(|| format!("metric {name:?} has unit {unit}, not a CloudWatch unit"))?;
            document.units.insert(name.to_owned(), unit.to_owned());
        }
        if let Some(resolution) = definition.get("StorageResolution") {
            if resolution.as_u64() != Some(1) && resolution.as_u64() != Some(60) {
                return Err(format!(
                    "metric {name:?} has storage resolution {resolution}"
                ));
            }
        }
        let values = root
            .get(name)
            .ok_or_else(|| format!("metric {name:?} has no top-level member"))?;
        document
            .metrics
            .insert(name.to_owned(), metric_values(name, values)?);
    }
    Ok(())
}

fn metric_values(name: &str, value: &Value) -> Result<Vec<f64>, String> {
    let not_numeric = || format!("metric {name:?} is not a number or an array of numbers");
    match value {
        Value::Number(number) => Ok(vec![number.as_f64().ok_or_else(not_numeric)?]),
        Value::Array(items) if items.is_empty() || items.len() > MAX_VALUES => Err(format!(
            "metric {name:?} has {} values, not 1 to {MAX_VALUES}",
            items.len()
        )),
        Value::Array(items) => items
            .iter()
            .map(|item| item.as_f64().ok_or_else(not_numeric))
            .collect(),
        _ => Err(not_numeric()),
    }
}
