//! Tests of the metrics handle, the catalog and the EMF checker.

use super::*;
use serde_json::json;
use Dimension::{Deployment, Endpoint, Mode, Outcome, Pool, Reason};

fn valid_document() -> Value {
    json!({
        "_aws": {
            "Timestamp": 1_700_000_000_000_i64,
            "CloudWatchMetrics": [{
                "Namespace": "ephemera",
                "Dimensions": [["Deployment", "Pool"]],
                "Metrics": [{ "Name": "RunnersLaunched", "Unit": "Count" }],
            }],
        },
        "Deployment": "ci",
        "Pool": "linux-x64",
        "RunnersLaunched": 2,
    })
}

fn rejection(document: &Value) -> String {
    validate_emf(&document.to_string()).expect_err("the document should be rejected")
}

fn directive(document: &mut Value) -> &mut Value {
    &mut document["_aws"]["CloudWatchMetrics"][0]
}

#[test]
fn metric_names_are_unique_and_units_are_cloudwatch_units() {
    let mut names: Vec<&str> = Metric::ALL.iter().map(|m| m.name()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), Metric::ALL.len());
    for metric in Metric::ALL {
        assert!(CLOUDWATCH_UNITS.contains(&metric.unit()), "{metric:?}");
        assert_eq!(metric.dimensions()[0], Deployment, "{metric:?}");
    }
    assert_eq!(Metric::QueuedToOnline.unit(), "Milliseconds");
    assert_eq!(Metric::JobsQueued.unit(), "Count");
}

#[test]
fn each_metric_has_its_dimension_set() {
    assert_eq!(Metric::RunnersLaunched.dimensions(), [Deployment, Pool]);
    assert_eq!(
        Metric::LaunchFailures.dimensions(),
        [Deployment, Pool, Reason]
    );
    assert_eq!(
        Metric::RunnersDeleted.dimensions(),
        [Deployment, Pool, Mode]
    );
    assert_eq!(
        Metric::OrphansReaped.dimensions(),
        [Deployment, Dimension::Kind]
    );
    assert_eq!(
        Metric::GitHubCalls.dimensions(),
        [Deployment, Endpoint, Outcome]
    );
    assert_eq!(
        Metric::GitHubRateLimitRemaining.dimensions(),
        [Deployment, Dimension::App, Dimension::Resource]
    );
    assert_eq!(
        Metric::RunnersByStatus.dimensions(),
        [Deployment, Pool, Dimension::Status]
    );
}

#[test]
fn flushed_document_is_valid_emf_with_its_values() {
    let (metrics, captured) = Metrics::capture("ci");
    metrics.record(Metric::RunnersLaunched, &[(Pool, "linux-x64")], 3.0);
    assert_eq!(metrics.flush(), 1);

    let lines = captured.lines();
    assert_eq!(lines.len(), 1);
    let document = validate_emf(&lines[0]).unwrap();
    assert_eq!(document.values(Metric::RunnersLaunched), Some(&[3.0][..]));
    assert_eq!(document.dimension(Deployment), Some("ci"));
    assert_eq!(document.dimension(Pool), Some("linux-x64"));
    assert_eq!(document.dimension_sets, [["Deployment", "Pool"]]);
    assert_eq!(document.units["RunnersLaunched"], "Count");
    assert!(document.timestamp > 1_700_000_000_000);
}

#[test]
fn counts_for_the_same_dimensions_are_summed() {
    let (metrics, captured) = Metrics::capture("ci");
    for launched in [1.0, 2.0, 4.0] {
        metrics.record(Metric::RunnersLaunched, &[(Pool, "linux-x64")], launched);
    }
    metrics.flush();
    let documents = captured.documents().unwrap();
    assert_eq!(documents.len(), 1);
    assert_eq!(
        documents[0].values(Metric::RunnersLaunched),
        Some(&[7.0][..])
    );
}

#[test]
fn timings_are_kept_as_value_arrays() {
    let (metrics, captured) = Metrics::capture("ci");
    let pool = [(Pool, "linux-x64")];
    metrics.record_duration(Metric::QueuedToLaunched, &pool, time::Duration::seconds(2));
    metrics.record_duration(
        Metric::QueuedToLaunched,
        &pool,
        time::Duration::milliseconds(-5),
    );
    metrics.record(Metric::QueuedToLaunched, &pool, 1500.0);
    metrics.flush();
    let documents = captured.documents().unwrap();
    assert_eq!(
        documents[0].values(Metric::QueuedToLaunched),
        Some(&[2000.0, 0.0, 1500.0][..])
    );
    assert_eq!(documents[0].units["QueuedToLaunched"], "Milliseconds");
}

#[test]
fn timings_named_in_seconds_are_recorded_in_seconds() {
    let (metrics, captured) = Metrics::capture("ci");
    let pool = [(Pool, "linux-x64")];
    let wait = time::Duration::milliseconds(12_345);
    metrics.record_duration(Metric::QueueToStartSeconds, &pool, wait);
    metrics.record_duration(Metric::BootSeconds, &pool, time::Duration::seconds(-1));
    metrics.flush();
    let documents = captured.documents().unwrap();
    assert_eq!(
        documents[0].values(Metric::QueueToStartSeconds),
        Some(&[12.345][..])
    );
    assert_eq!(documents[0].values(Metric::BootSeconds), Some(&[0.0][..]));
    assert_eq!(documents[0].units["QueueToStartSeconds"], "Seconds");
}

#[test]
fn distinct_pools_yield_distinct_documents() {
    let (metrics, captured) = Metrics::capture("ci");
    metrics.record(Metric::JobsQueued, &[(Pool, "linux-x64")], 1.0);
    metrics.record(Metric::JobsQueued, &[(Pool, "linux-arm64")], 5.0);
    assert_eq!(metrics.flush(), 2);
    let documents = captured.documents().unwrap();
    let by_pool: BTreeMap<&str, f64> = documents
        .iter()
        .map(|d| {
            (
                d.dimension(Pool).unwrap(),
                d.values(Metric::JobsQueued).unwrap()[0],
            )
        })
        .collect();
    assert_eq!(
        by_pool,
        BTreeMap::from([("linux-arm64", 5.0), ("linux-x64", 1.0)])
    );
}

#[test]
fn metrics_with_the_same_dimension_values_share_a_document() {
    let (metrics, captured) = Metrics::capture("ci");
    let pool = [(Pool, "linux-x64")];
    metrics.record(Metric::JobsQueued, &pool, 2.0);
    metrics.record(Metric::RunnersLaunched, &pool, 1.0);
    metrics.record(
        Metric::LaunchFailures,
        &[(Reason, "capacity"), (Pool, "linux-x64")],
        1.0,
    );
    metrics.record(
        Metric::GitHubCalls,
        &[(Endpoint, "jit"), (Outcome, "ok")],
        1.0,
    );
    assert_eq!(metrics.flush(), 3);

    let documents = captured.documents().unwrap();
    let shared = documents
        .iter()
        .find(|d| d.dimension_sets == [["Deployment", "Pool"]]);
    let shared = shared.expect("a document by deployment and pool");
    assert_eq!(shared.values(Metric::JobsQueued), Some(&[2.0][..]));
    assert_eq!(shared.values(Metric::RunnersLaunched), Some(&[1.0][..]));
    let failures = documents
        .iter()
        .find(|d| d.values(Metric::LaunchFailures).is_some());
    assert_eq!(failures.unwrap().dimension(Reason), Some("capacity"));
    let calls = documents
        .iter()
        .find(|d| d.values(Metric::GitHubCalls).is_some());
    assert_eq!(
        calls.unwrap().dimension_sets,
        [["Deployment", "Endpoint", "Outcome"]]
    );
}

#[test]
fn samples_past_the_value_limit_spill_into_another_document() {
    let (metrics, captured) = Metrics::capture("ci");
    for remaining in 0..150 {
        metrics.record(
            Metric::GitHubRateLimitRemaining,
            &[(Dimension::App, "42"), (Dimension::Resource, "core")],
            f64::from(remaining),
        );
    }
    assert_eq!(metrics.flush(), 2);
    let documents = captured.documents().unwrap();
    let values = |i: usize| {
        documents[i]
            .values(Metric::GitHubRateLimitRemaining)
            .unwrap()
            .to_vec()
    };
    assert_eq!(values(0).len(), 100);
    assert_eq!(values(1), (100..150).map(f64::from).collect::<Vec<_>>());
}

#[test]
fn capture_sees_exactly_what_was_flushed() {
    let (metrics, captured) = Metrics::capture("ci");
    metrics.record(Metric::BusyDeferrals, &[(Pool, "linux-x64")], 1.0);
    assert!(
        captured.lines().is_empty(),
        "nothing is written before the flush"
    );

    let clone = metrics.clone();
    clone.record(Metric::BusyDeferrals, &[(Pool, "linux-x64")], 1.0);
    assert_eq!(metrics.flush(), 1);
    assert_eq!(metrics.flush(), 0, "a flush empties the buffer");
    let documents = captured.documents().unwrap();
    assert_eq!(documents.len(), 1);
    assert_eq!(documents[0].values(Metric::BusyDeferrals), Some(&[2.0][..]));
    assert_eq!(documents[0].metrics.len(), 1);
}

#[test]
fn disabled_writes_nothing() {
    let metrics = Metrics::disabled();
    metrics.record(Metric::RunnersLaunched, &[(Pool, "linux-x64")], 1.0);
    assert_eq!(metrics.flush(), 0);
    assert_eq!(
        format!("{:?}", Metrics::default()),
        r#"Metrics { sink: "disabled" }"#
    );
}

#[test]
fn invalid_dimension_values_and_values_are_made_safe() {
    let (metrics, captured) = Metrics::capture("ci");
    metrics.record(Metric::RunnersLaunched, &[(Pool, " ")], 1.0);
    metrics.record(Metric::RunnersLaunched, &[(Pool, "linüx")], f64::NAN);
    metrics.record(Metric::RunnersLaunched, &[(Pool, "linüx")], 1.0);
    metrics.flush();
    let pools: Vec<String> = captured
        .documents()
        .unwrap()
        .iter()
        .map(|d| d.dimension(Pool).unwrap().to_owned())
        .collect();
    assert_eq!(pools, ["lin_x", "unknown"]);
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "takes dimensions")]
fn wrong_dimensions_are_a_programming_error() {
    let (metrics, _captured) = Metrics::capture("ci");
    metrics.record(Metric::RunnersDeleted, &[(Pool, "linux-x64")], 1.0);
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "takes dimensions")]
fn wrong_dimensions_are_caught_even_when_disabled() {
    Metrics::disabled().record(Metric::JobsQueued, &[(Pool, "a"), (Reason, "b")], 1.0);
}

#[test]
fn handle_is_send_and_sync() {
    fn shareable<T: Send + Sync + Clone + 'static>() {}
    shareable::<Metrics>();
}

#[test]
fn validator_accepts_the_reference_document() {
    let document = validate_emf(&valid_document().to_string()).unwrap();
    assert_eq!(document.metrics["RunnersLaunched"], [2.0]);
    assert_eq!(document.dimensions["Pool"], "linux-x64");
}

#[test]
fn validator_rejects_a_document_without_aws_block() {
    let mut document = valid_document();
    document.as_object_mut().unwrap().remove("_aws");
    assert!(rejection(&document).contains("_aws"));
}

#[test]
fn validator_rejects_a_timestamp_that_is_not_a_number() {
    let mut document = valid_document();
    document["_aws"]["Timestamp"] = json!("2026-01-01T00:00:00Z");
    assert!(rejection(&document).contains("Timestamp"));
}

#[test]
fn validator_rejects_a_metric_without_its_member() {
    let mut document = valid_document();
    document.as_object_mut().unwrap().remove("RunnersLaunched");
    assert!(rejection(&document).contains("\"RunnersLaunched\" has no top-level member"));
}

#[test]
fn validator_rejects_a_dimension_without_its_member() {
    let mut document = valid_document();
    document.as_object_mut().unwrap().remove("Pool");
    assert!(rejection(&document).contains("\"Pool\" has no top-level member"));
}

#[test]
fn validator_rejects_a_dimension_that_is_not_a_string() {
    let mut document = valid_document();
    document["Pool"] = json!(7);
    assert!(rejection(&document).contains("\"Pool\" is not a string"));
}

#[test]
fn validator_rejects_an_invalid_unit() {
    let mut document = valid_document();
    directive(&mut document)["Metrics"][0]["Unit"] = json!("Runners");
    assert!(rejection(&document).contains("not a CloudWatch unit"));
}

#[test]
fn validator_rejects_a_value_that_is_not_numeric() {
    let mut document = valid_document();
    document["RunnersLaunched"] = json!("2");
    assert!(rejection(&document).contains("not a number"));
    document["RunnersLaunched"] = json!([1, "2"]);
    assert!(rejection(&document).contains("not a number"));
}

#[test]
fn validator_rejects_more_than_100_metrics() {
    let mut document = valid_document();
    let definitions: Vec<Value> = (0..=MAX_METRICS)
        .map(|i| json!({ "Name": format!("M{i}"), "Unit": "Count" }))
        .collect();
    for i in 0..=MAX_METRICS {
        document[format!("M{i}")] = json!(1);
    }
    directive(&mut document)["Metrics"] = json!(definitions);
    assert!(rejection(&document).contains("101 metrics"));
}

#[test]
fn validator_rejects_more_than_30_dimensions() {
    let mut document = valid_document();
    let names: Vec<String> = (0..=MAX_DIMENSIONS).map(|i| format!("D{i}")).collect();
    for name in &names {
        document[name] = json!("x");
    }
    directive(&mut document)["Dimensions"] = json!([names]);
    assert!(rejection(&document).contains("31 dimensions"));
}

#[test]
fn validator_rejects_more_than_100_values() {
    let mut document = valid_document();
    document["RunnersLaunched"] = json!(vec![1; MAX_VALUES + 1]);
    assert!(rejection(&document).contains("101 values"));
}

#[test]
fn validator_rejects_another_namespace() {
    let mut document = valid_document();
    directive(&mut document)["Namespace"] = json!("other");
    assert!(rejection(&document).contains("namespace"));
}
