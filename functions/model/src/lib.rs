//! A model of ephemera at internet scale: the real webhook, scaler and reaper handlers
//! on the in-memory ports, in simulated time, with every port answering after a drawn
//! latency and refusing past the quotas AWS and GitHub document.
//!
//! A run is a burst: N jobs queued at once on GitHub, their webhooks delivered, the
//! scaler invoked by the SQS event source as Lambda does it (batch size, concurrency cap,
//! visibility timeout, redrive to the dead-letter queue), the reaper every minute, and a
//! runner agent on every instance that boots, reads its JIT config and takes a job. Time
//! is tokio's paused clock: an hour of bursting takes seconds.
//!
//! # Layout
//! - [`account`]: the account a burst assumes, each limit's bound or failure.
//! - [`quotas`]: the figures (quotas, latencies, settings), each with its source.
//! - [`bucket`]: token buckets and GitHub's hourly window.
//! - [`cloud`]: the account and the App: buckets, latencies, call and throttle tallies.
//! - [`flood`]: refused requests on the webhook's URL, and GitHub's redeliveries.
//! - [`metered`]: the AWS ports (table, fleet, JIT items, queue) behind quotas and latency.
//! - [`github`]: the GitHub port behind GitHub's limits and ephemera's retry policy.
//! - [`sqs`]: the jobs queue and its dead-letter queue.
//! - [`host`]: a job's start on the host, stage by stage, each with its source.
//! - [`stages`]: each stage's figure and its source (measured, or assumed and why).
//! - [`start`]: queued → started p50/p99 per host mode and for the peer.
//! - [`world`]: the fakes, GitHub's queued jobs, webhook deliveries, runner agents.
//! - [`burst`]: one burst, driven through ephemera or through the peer's call pattern.
//! - [`peer`]: terraform-aws-github-runner's call pattern on the same model.
//! - [`report`]: what a burst measured, and the bound the binding quota alone allows.
//! - [`agreement`]: a small burst's calls per job, to compare with the emulator's.

pub mod account;
pub mod agreement;
pub mod bucket;
pub mod burst;
pub mod cloud;
pub mod flood;
pub mod github;
pub mod host;
pub mod metered;
pub mod peer;
pub mod quotas;
pub mod report;
pub mod sqs;
pub mod stages;
pub mod start;
pub mod world;
