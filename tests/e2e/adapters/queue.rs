//! The SQS jobs queue against moto: a message goes round trip intact, and one that is
//! received too often without being deleted lands in the DLQ.

use ephemera_aws::provision::MAX_RECEIVE_COUNT;
use ephemera_aws::{ensure_resources, sdk_config, AwsSettings, ResourceNames, SqsJobQueue};
use ephemera_core::message::{MessageKind, QueueMessage, VERSION};
use ephemera_core::ports::JobQueue;
use ephemera_tests::moto::Moto;
use std::time::{Duration, Instant};

fn message(job_id: u64) -> QueueMessage {
    QueueMessage {
        v: VERSION,
        kind: MessageKind::Queued,
        delivery_id: format!("delivery-{job_id}"),
        job_id,
        run_id: 42,
        pool: "linux".to_owned(),
        labels: vec!["self-hosted".to_owned(), "linux".to_owned()],
        repo: "hello".to_owned(),
        owner: "octo".to_owned(),
        installation_id: Some(7),
        runner_name: None,
        runner_id: None,
        received_at: time::macros::datetime!(2025-03-01 12:00:00 UTC),
        github: Default::default(),
        attempt: Default::default(),
    }
}

#[tokio::test]
async fn queue_round_trips_a_message() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let resources = ensure_resources(&config, &ResourceNames::for_deployment("eph")).await?;
    let queue = SqsJobQueue::new(aws_sdk_sqs::Client::new(&config), &resources.queue_url);
    assert_eq!(queue.queue_url(), resources.queue_url);

    queue.send(&message(1)).await?;
    assert_eq!(queue.approximate_depth().await?, 1);
    let received = queue.receive(10, 1).await?;
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].receive_count, 1);
    assert!(!received[0].message_id.is_empty());
    assert_eq!(QueueMessage::decode(&received[0].body)?, message(1));

    queue.delete(&received[0].receipt_handle).await?;
    assert!(queue.receive(10, 0).await?.is_empty());
    assert_eq!(queue.approximate_depth().await?, 0);
    // Provisioning again finds the same resources.
    let again = ensure_resources(&config, &ResourceNames::for_deployment("eph")).await?;
    assert_eq!(again, resources);
    Ok(())
}

#[tokio::test]
async fn queue_message_received_too_often_lands_in_the_dlq() -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let config = sdk_config(&AwsSettings::emulator(&moto.endpoint)).await;
    let resources = ensure_resources(&config, &ResourceNames::for_deployment("eph")).await?;
    let sqs = aws_sdk_sqs::Client::new(&config);
    let queue = SqsJobQueue::new(sqs.clone(), &resources.queue_url);
    let dlq = SqsJobQueue::new(sqs.clone(), &resources.dlq_url);
    queue.send(&message(2)).await?;

    // Fail it over and over: receive, then make it visible again at once.
    let started = Instant::now();
    let mut highest_count = 0;
    for _ in 0..(3 * MAX_RECEIVE_COUNT) {
        if started.elapsed() > Duration::from_secs(30) {
            break;
        }
        let received = queue.receive(1, 0).await?;
        let Some(first) = received.first() else {
            if highest_count >= MAX_RECEIVE_COUNT {
                break;
            }
            continue;
        };
        highest_count = highest_count.max(first.receive_count);
        sqs.change_message_visibility()
            .queue_url(queue.queue_url())
            .receipt_handle(&first.receipt_handle)
            .visibility_timeout(0)
            .send()
            .await?;
    }
    assert_eq!(highest_count, MAX_RECEIVE_COUNT);
    let dead = dlq.receive(10, 1).await?;
    assert_eq!(dead.len(), 1, "the message is in the DLQ");
    assert_eq!(QueueMessage::decode(&dead[0].body)?, message(2));
    assert!(queue.receive(10, 0).await?.is_empty());
    Ok(())
}
