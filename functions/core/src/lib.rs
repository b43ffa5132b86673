//! ephemera's domain: everything that decides, and nothing that talks to AWS or GitHub.
//!
//! ephemera turns GitHub `workflow_job` webhooks into short-lived EC2 runners. This crate
//! holds the rules of that flow so that the Lambda functions, `ephemera local` and the
//! tests all run the same code; the adapters that reach AWS and GitHub live in
//! `ephemera-aws` and `ephemera-github` and plug in through the traits in [`ports`].
//!
//! # Layout
//! Records, the plain data:
//! - [`model`]: the records kept in the table (runners, jobs, pools) and the values the
//!   decisions and the ports share (a market, a launch request, a price, a re-run, a
//!   pool's spot breaker state).
//! - [`lifecycle`]: the four state machines of the records (instance, runner, job, and a
//!   job's claim), each one table of allowed moves that the stores enforce.
//! - [`message`]: the versioned queue message between webhook and scaler.
//! - [`unrouted`]: the trace of jobs no pool takes, for the operator.
//! - [`names`]: runner names and their limits.
//!
//! Decisions, pure functions of records, configuration and `now`:
//! - [`config`]: the operator's YAML, typed and validated.
//! - [`webhook`]: signature verification and the `workflow_job` fields we read.
//! - [`screen`]: the refusal of a flood's requests from their headers alone.
//! - [`routing`]: which pool a job's labels go to.
//! - [`sizing`]: the labels a job sizes its runner with, and the pool's policy on them.
//! - [`prices`]: cached instance prices and what a job's instance cost; [`costs`]: a
//!   job's cost as shown, and costs summed by repository and pool.
//! - [`rerun`]: the one re-run, on on-demand, of a job its spot runner's interruption
//!   failed.
//! - [`breaker`]: a pool's spot circuit breaker, on-demand for a while when
//!   interruptions spike.
//! - [`pace`]: GitHub registrations spread evenly over the App's rate limit.
//! - [`metrics`]: the metrics the handlers emit, as CloudWatch embedded metric format.
//! - [`timeline`]: a job's stages (queued, claimed, launched, online, started...) and
//!   the gaps between them, from the stamps its records carry.
//! - [`backoff`], [`clock`]: small pieces used by the handlers.
//!
//! Ports:
//! - [`ports`]: the narrow traits the handlers reach AWS and GitHub through, one file
//!   per port with its typed errors, each naming its fake and its adapter.
//!
//! Handlers, and what is built over the ports:
//! - [`handlers`]: the webhook, scaler and reaper handlers, generic over the ports.
//! - [`releases`]: the runner copy in the deployment's bucket, and the reaper's step that
//!   keeps it at GitHub's newest release.
//! - [`apps`]: one forge over several GitHub Apps, each registering at its own pace.
//! - [`memory`] (feature `fakes`): in-memory implementations of the ports and the port
//!   wrapper (`Intercept`), for the tests and the model of the quotas.
//!
//! # Layers
//! The four groups above are layers, and imports run only downwards: records import
//! nothing else of the crate; decisions import records (and one another); ports import
//! records (and one another); handlers import all three. So a decision never reaches a
//! port, and a record means the same to every layer above it. A value that a port and a
//! decision share is a record (a [`model::Market`], a [`model::FleetRequest`]); what it
//! means for a decision is written beside the decision (`impl Price` in [`prices`]).
//! A test (`layers_tests.rs`) reads the sources and fails on an import that runs
//! upwards, and on a module that no layer lists.

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
pub mod releases;
pub mod rerun;
pub mod routing;
pub mod screen;
pub mod sizing;
pub mod timeline;
pub mod unrouted;
pub mod webhook;

#[cfg(test)]
mod layers_tests;

pub use time::OffsetDateTime;
