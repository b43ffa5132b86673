//! An AWS endpoint that accepts connections and never answers: every caller fails within
//! the timeouts (about 32 s: three attempts of 10 s to the first byte), with an error
//! naming the endpoint and the operation, instead of hanging.

use crate::cli::{ephemera, stderr_of};
use ephemera_tests::functions::{environment, run_until_exit, HungEndpoint};
use std::time::{Duration, Instant};

/// Far above the stated ~32 s; reaching it means the call hung.
const HANG: Duration = Duration::from_secs(150);

#[tokio::test]
async fn runners_list_fails_naming_the_endpoint_and_operation_when_aws_never_answers(
) -> anyhow::Result<()> {
    let hung = HungEndpoint::start().await?;
    let url = hung.url.clone();
    let started = Instant::now();
    let output = tokio::task::spawn_blocking(move || {
        ephemera()?
            .args(["runners", "list", "--endpoint-url", &url])
            .args(["--table", "eph-runners", "--region", "us-east-1"])
            .timeout(HANG)
            .output()
            .map_err(anyhow::Error::from)
    })
    .await??;
    println!("failed after {:?}", started.elapsed());
    let stderr = stderr_of(&output);
    assert!(!output.status.success());
    assert!(
        stderr.contains(&format!(
            "AWS call DynamoDB_20120810.Query to {} failed (no answer within 10s)",
            hung.url
        )),
        "{stderr}"
    );
    assert!(hung.connections() >= 1);
    Ok(())
}

#[tokio::test]
async fn a_cold_start_fails_naming_the_endpoint_and_operation_when_aws_never_answers(
) -> anyhow::Result<()> {
    let hung = HungEndpoint::start().await?;
    let env = environment(
        &hung.url,
        &[
            ("EPHEMERA_CONFIG_PARAMETER", "/ephemera/eph/config"),
            ("EPHEMERA_QUEUE_URL", "http://127.0.0.1:9/queue/eph-jobs"),
            ("EPHEMERA_WEBHOOK_SECRET_ID", "eph/webhook-secret"),
        ],
    );
    let exited = run_until_exit("webhook", &env, HANG).await?;
    assert!(!exited.success);
    assert!(
        exited.output.contains(&format!(
            "AWS call AmazonSSM.GetParameter to {} failed (no answer within 10s)",
            hung.url
        )),
        "{}",
        exited.output
    );
    assert!(exited
        .output
        .contains("reading configuration parameter /ephemera/eph/config"));
    Ok(())
}
