//! The figures the model runs on as a list, each value written from the model's own
//! defaults ([`Quotas`], [`Latencies`], [`Settings`]) next to its source: what
//! docs/performance.md's "The quotas it runs on" table shows, so it cannot drift from
//! the code.

use super::{Latencies, Latency, Quotas, Settings};
use crate::bucket::BucketSpec;
use serde_json::{json, Value};

/// One figure: what it is, its value in the model, and where the value comes from.
#[derive(Debug, Clone)]
pub struct Figure {
    pub figure: String,
    pub value: String,
    pub source: String,
}

impl Figure {
    pub fn to_json(&self) -> Value {
        json!({ "figure": self.figure, "value": self.value, "source": self.source })
    }
}

fn figure(figure: &str, value: String, source: &str) -> Figure {
    Figure {
        figure: figure.to_owned(),
        value,
        source: source.to_owned(),
    }
}

/// A whole number with thousands separated, as the docs write it.
pub fn thousands(value: f64) -> String {
    let rounded = value.round() as i64;
    let digits = rounded.abs().to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    if rounded < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// A number as the docs write it: whole numbers with separators, else as it is.
fn num(value: f64) -> String {
    if value.fract() == 0.0 {
        thousands(value)
    } else {
        format!("{value}")
    }
}

fn bucket(spec: BucketSpec) -> String {
    format!("{}, refill {}/s", num(spec.capacity), num(spec.per_second))
}

fn millis(latency: Latency) -> String {
    format!(
        "{}/{}",
        num(latency.median.as_millis() as f64),
        num(latency.p99.as_millis() as f64)
    )
}

/// Every figure of the default quotas, latencies and settings, with its source.
pub fn figures() -> Vec<Figure> {
    let quotas = Quotas::default();
    let latencies = Latencies::default();
    let settings = Settings::default_settings();
    let mut all = github(&quotas, &settings);
    all.extend(aws(&quotas));
    all.extend(deployment(&settings, &latencies));
    all
}

fn github(quotas: &Quotas, settings: &Settings) -> Vec<Figure> {
    let points = quotas.github_points;
    let content = super::ContentCreation::documented();
    let org = quotas
        .github_org_registrations
        .map_or("not applied".to_owned(), |org| {
            format!(
                "{} every 5 minutes (a bucket of {}, {} a second), shared by every App",
                thousands(org.per_second * 300.0),
                thousands(org.capacity),
                num(org.per_second)
            )
        });
    vec![
        figure(
            "GitHub REST points per endpoint and minute",
            format!("{} (a POST 5, a GET 1)", thousands(points.per_second * 60.0)),
            "docs.github.com, \"Rate limits for the REST API\", secondary rate limits",
        ),
        figure(
            "GitHub concurrent requests",
            thousands(f64::from(quotas.github_concurrent)),
            "same page",
        ),
        figure(
            "GitHub wait after a secondary limit",
            format!("{} s", quotas.github_retry_after.as_secs()),
            "same page (wait at least a minute without `retry-after`)",
        ),
        figure(
            "GitHub installation budget, `core` (every call but registrations)",
            format!("{} calls an hour", thousands(f64::from(quotas.github_core_hourly))),
            "same page, primary limit of an App installation (more with many repositories or users; 15,000 on Enterprise Cloud); token mints are the App's JWT's, not counted",
        ),
        figure(
            "GitHub installation budget, `actions_runner_registration` (generate-jitconfig)",
            format!("{} an hour", thousands(f64::from(quotas.github_registration_hourly))),
            "\"REST API endpoints for rate limits\" lists the bucket apart from `core`, without a figure; the figure, and that generate-jitconfig spends it: terraform-aws-github-runner's rate-limit guide (docs/rate-limits-and-tuning.md)",
        ),
        figure(
            "GitHub runner registrations per organization",
            org,
            "docs.github.com, \"Actions limits\", runner registrations: \"1500 runners / 5 minutes / repository/org/enterprise\" (GitHub Support can raise it); the bucket's shape, and that a refusal is a rate-limit answer with the bucket's wait: assumed",
        ),
        figure(
            "GitHub runners per runner group",
            format!(
                "{}; generate-jitconfig past it refused (422, assumed), the creation failed",
                thousands(f64::from(quotas.github_runners_per_group))
            ),
            "docs.github.com, \"Actions limits\", runners per runner group: \"10,000 runners\", \"Runners registered at the same time per runner group\", not raised by Support; \"Usage limits for self-hosted runners\": \"If this limit is reached, adding a new runner will not be possible\"",
        ),
        figure(
            "GitHub content-creation limit on generate-jitconfig",
            format!(
                "{} (when applied: {} a minute, {} an hour)",
                if quotas.github_content_creation.is_some() { "applied" } else { "not applied, a setting" },
                thousands(content.per_minute.per_second * 60.0),
                thousands(f64::from(content.per_hour))
            ),
            "\"Rate limits for the REST API\" lists 80 a minute and 500 an hour for content-creating requests; that generate-jitconfig is not one is assumed: terraform-aws-github-runner users report 0 → 1,000 JIT runners in about 8 minutes, above it",
        ),
        figure(
            "GitHub Apps",
            format!("{}; 2 in the two-App bursts, each with its own buckets and pace, the scaler's environments taking them in turn", settings.github_apps),
            "primary limits are per installation, secondary per App (\"Rate limits for the REST API\"); the same installations for each App: assumed",
        ),
        figure(
            "registration pace",
            format!(
                "per App {} a minute, and no more than its {} an hour in any hour, shared by the scaler's invocations",
                settings.registrations_per_minute.map_or("unpaced".to_owned(), num),
                thousands(f64::from(quotas.github_registration_hourly))
            ),
            "functions/core/src/pace.rs (900 points a minute at 5 a POST; actions_runner_registration)",
        ),
        figure(
            "ephemera's GitHub client retries",
            format!(
                "{} attempts, {} ms doubling, within {} s; `retry-after` honoured when it fits",
                crate::github::ATTEMPTS,
                crate::github::BASE_DELAY.as_millis(),
                crate::github::BUDGET.as_secs()
            ),
            "functions/github/src/retry.rs (`RetryPolicy::default`)",
        ),
        figure(
            "GitHub latency (median/p99)",
            format!("{} ms", millis(Latencies::default().github)),
            "assumed",
        ),
    ]
}

fn aws(quotas: &Quotas) -> Vec<Figure> {
    vec![
        figure(
            "EC2 CreateFleet requests",
            bucket(quotas.ec2_create_fleet),
            "EC2 API reference, \"Request throttling\": mutating actions",
        ),
        figure(
            "EC2 instances launched",
            bucket(quotas.ec2_launch_resource),
            "same page, RunInstances resource bucket (that an instant fleet spends it: assumed)",
        ),
        figure(
            "EC2 DescribeInstances (filtered)",
            bucket(quotas.ec2_describe),
            "same page, non-mutating actions",
        ),
        figure(
            "EC2 TerminateInstances",
            format!(
                "requests {}; instances {}",
                bucket(quotas.ec2_terminate),
                bucket(quotas.ec2_terminate_resource)
            ),
            "same page: uncategorized actions, resource buckets",
        ),
        figure(
            "DynamoDB writes on one partition",
            format!(
                "{} WCU/s; 2 WCU per item in a transaction",
                thousands(quotas.dynamodb_partition_wcu)
            ),
            "DynamoDB developer guide (partitions and data distribution; capacity for transactions)",
        ),
        figure(
            "DynamoDB transaction conflict",
            "an item is held for the call's latency".to_owned(),
            "assumed (conflicts are documented, their window is not)",
        ),
        figure(
            "SSM PutParameter (the peer's JIT channel)",
            format!("{}/s", num(quotas.ssm_put.per_second)),
            "an AWS Support reply quoted in terraform-aws-github-runner #2944 (3 TPS standard, 10 with higher throughput; \"not documented any where\"); the AWS General Reference's Systems Manager quotas list 40 TPS for Parameter Store's default throughput, which the peer first paced to (#1841, #2823)",
        ),
        figure(
            "AWS SDK retries",
            format!(
                "{} attempts, jittered exponential backoff from 1 s",
                crate::metered::SDK_ATTEMPTS
            ),
            "the SDK's standard retry mode (3 attempts); the backoff's base: assumed",
        ),
        figure(
            "SQS standard queue",
            "not throttled".to_owned(),
            "SQS developer guide: nearly unlimited transactions per second",
        ),
        figure(
            "Lambda account concurrency",
            format!("{} (new accounts: 10)", thousands(f64::from(quotas.lambda_account_concurrency))),
            "Lambda developer guide, quotas",
        ),
        figure(
            "SQS event source",
            format!(
                "{} batches at first, +{} a minute, at most 1,000",
                quotas.esm_initial, quotas.esm_added_per_minute
            ),
            "Lambda developer guide, \"scaling for SQS event sources\"",
        ),
        figure(
            "Lambda requests per second",
            "10 per execution environment (a refused request holds a slot 100 ms)".to_owned(),
            "Lambda developer guide, \"understanding Lambda function scaling\"",
        ),
    ]
}

fn deployment(settings: &Settings, latencies: &Latencies) -> Vec<Figure> {
    vec![
        figure(
            "batch size, `ScalerMaxConcurrency`, visibility, maxReceiveCount, scaler timeout",
            format!(
                "{}, {}, {} s, {}, {} s",
                settings.batch_size,
                settings.scaler_max_concurrency,
                settings.visibility.as_secs(),
                settings.max_receives,
                settings.scaler_timeout.as_secs()
            ),
            "template.yaml",
        ),
        figure(
            "`WebhookReservedConcurrency`",
            settings
                .webhook_reserved_concurrency
                .map_or("none".to_owned(), |n| thousands(f64::from(n))),
            "template.yaml",
        ),
        figure(
            "which idle scaler environment takes a batch",
            "the one idle longest".to_owned(),
            "assumed (Lambda does not say)",
        ),
        figure(
            "AWS latencies (median/p99, ms): DynamoDB, transactions, SQS, CreateFleet, other EC2, SSM, Lambda invoke",
            [
                latencies.dynamodb,
                latencies.dynamodb_transaction,
                latencies.sqs,
                latencies.ec2_create_fleet,
                latencies.ec2_other,
                latencies.ssm,
                latencies.lambda_invoke,
            ]
            .map(millis)
            .join(", "),
            "assumed, log-normal through the two",
        ),
        figure(
            "instance boot (launch → JIT config read)",
            "the stock host's stages added up ([A job's start](#a-jobs-start))".to_owned(),
            "functions/model/src/host.rs, each stage's own source",
        ),
        figure(
            "webhook deliveries of a burst",
            "500 a second".to_owned(),
            "assumed",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_figure_has_a_value_and_a_source() {
        let all = figures();
        assert!(all.len() > 20);
        for figure in &all {
            assert!(!figure.value.trim().is_empty(), "{figure:?}");
            assert!(!figure.source.trim().is_empty(), "{figure:?}");
            // A table cell of docs/performance.md: no `|` inside.
            let cells = [&figure.figure, &figure.value, &figure.source];
            assert!(cells.iter().all(|c| !c.contains('|')), "{figure:?}");
        }
    }

    #[test]
    fn values_are_written_from_the_defaults() {
        let all = figures();
        let value = |name: &str| {
            all.iter()
                .find(|f| f.figure == name)
                .map(|f| f.value.clone())
                .unwrap_or_default()
        };
        assert_eq!(value("EC2 instances launched"), "1,000, refill 2/s");
        assert_eq!(value("SSM PutParameter (the peer's JIT channel)"), "3/s");
        assert!(value("GitHub runners per runner group").starts_with("10,000;"));
        assert!(value("GitHub runner registrations per organization")
            .starts_with("1,500 every 5 minutes"));
        assert_eq!(thousands(1_234_567.0), "1,234,567");
    }
}
