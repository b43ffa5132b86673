//! ephemera's domain: everything that decides, and nothing that talks to AWS or GitHub.
//!
//! ephemera turns GitHub `workflow_job` webhooks into short-lived EC2 runners. This crate
//! holds the rules of that flow so that the Lambda functions, `ephemera local` and the
//! tests all run the same code; the adapters that reach AWS and GitHub live in
//! `ephemera-aws` and `ephemera-github` and plug in through the traits in [`ports`].
//!
//! # Layout
//! - [`lifecycle`]: the four state machines of the records (instance, runner, job, and a
//!   job's claim), each one table of allowed moves that the stores enforce.
//! - [`config`]: the operator's YAML, typed and validated.
//! - [`webhook`]: signature verification and the `workflow_job` fields we read.
//! - [`screen`]: the refusal of a flood's requests from their headers alone.
//! - [`routing`]: which pool a job's labels go to.
//! - [`sizing`]: the labels a job sizes its runner with, and the pool's policy on them.
//! - [`message`]: the versioned queue message between webhook and scaler.
//! - [`model`]: the records kept in the table (runners, jobs, pools).
//! - [`ports`]: the narrow traits the handlers reach AWS and GitHub through, with their
//!   typed errors; a few ports sit with the rule they serve ([`lease`], [`breaker`],
//!   [`rerun`], [`unrouted`]).
//! - [`prices`]: cached instance prices and what a job's instance cost; [`costs`]: a
//!   job's cost as shown, and costs summed by repository and pool.
//! - [`rerun`]: the one re-run, on on-demand, of a job its spot runner's interruption
//!   failed.
//! - [`breaker`]: a pool's spot circuit breaker, on-demand for a while when
//!   interruptions spike.
//! - [`lease`]: expiring leases, so that only one reaper runs at a time.
//! - `memory` (feature `fakes`): in-memory implementations of the ports and the port
//!   wrapper (`Intercept`), for the tests and the model of the quotas.
//! - [`handlers`]: the webhook, scaler and reaper handlers, generic over the ports.
//! - [`pace`]: GitHub registrations spread evenly over the App's rate limit.
//! - [`metrics`]: the metrics the handlers emit, as CloudWatch embedded metric format.
//! - [`timeline`]: a job's stages (queued, claimed, launched, online, started...) and
//!   the gaps between them, from the stamps its records carry.
//! - [`unrouted`]: the trace of jobs no pool takes, for the operator.
//! - [`backoff`], [`names`], [`clock`]: small pieces used by the handlers.

pub mod apps;
pub mod backoff;
pub mod breaker;
pub mod clock;
pub mod config;
pub mod costs;
pub mod handlers;
pub mod lifecycle;
#[cfg(any(test, feature = "fakes"))]
pub mod memory;
pub mod message;
pub mod metrics;
pub mod model;
pub mod names;
pub mod pace;
pub mod ports;
pub mod prices;
pub mod rerun;
pub mod routing;
pub mod screen;
pub mod sizing;
pub mod timeline;
pub mod unrouted;
pub mod webhook;

pub use time::OffsetDateTime;
