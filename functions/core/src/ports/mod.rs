//! The narrow traits through which handlers reach the outside world, one file per port.
//!
//! Each handler takes only the ports it needs: the webhook can only send to the queue,
//! the reaper can terminate but not launch (for the warm pool it reserves a runner and
//! asks the scaler, through the queue, to create it). No SDK or HTTP type appears here;
//! adapters in `ephemera-aws` and `ephemera-github` implement these, and `memory` has
//! fakes (feature `fakes`). Each port's file names its fake and its adapter.
//!
//! A port imports the records ([`crate::model`], [`crate::message`],
//! [`crate::lifecycle`]) and other ports only: the values a port and a decision share
//! (a [`Market`], a [`FleetRequest`], a [`RunnerScope`]...) are records, re-exported
//! here so that `ports::X` names every type a port's signature uses.
//!
//! | port | file | what it reaches |
//! |------|------|-----------------|
//! | [`RunnerStore`] | `runner_store.rs` | the table of runners, jobs and pools |
//! | [`JobQueue`] | `job_queue.rs` | the queue between webhook and scaler |
//! | [`PriceList`] | `price_list.rs` | the providers' instance prices |
//! | [`PriceBook`] | `price_book.rs` | the cached prices |
//! | [`Launcher`] | `launcher.rs` | launching instances (the scaler) |
//! | [`Fleet`] | `fleet.rs` | seeing and ending instances (the reaper) |
//! | [`JitConfigStore`] | `jit_configs.rs` | where a JIT config waits for its instance |
//! | [`Forge`] | `forge.rs` | GitHub's runners and jobs |
//! | [`HookDeliveries`] | `hook_deliveries.rs` | the App's webhook deliveries |
//! | [`AppKeySource`] | `app_keys.rs` | the App's private key |
//! | [`TokenShelf`] | `token_shelf.rs` | installation tokens shared by the processes |
//! | [`Leases`] | `leases.rs` | the reaper's lease |
//! | [`SpotBreakerStore`] | `spot_breaker.rs` | each pool's spot interruptions |
//! | [`RerunStore`] | `reruns.rs` | the wanted re-runs of interrupted jobs |
//! | [`WorkflowRuns`] | `workflow_runs.rs` | GitHub's workflow runs, to re-run a job |
//! | [`UnroutedJobs`] | `unrouted_jobs.rs` | the trace of jobs no pool takes |
//! | [`RunnerReleases`] | `runner_releases.rs` | GitHub's releases of the runner |
//! | [`RunnerBucket`] | `runner_bucket.rs` | the deployment's copy of the runner |
//! | [`ImagePipelines`] | `image_pipelines.rs` | the image pipelines to start on a release |

mod app_keys;
mod fleet;
mod forge;
mod hook_deliveries;
mod image_pipelines;
mod jit_configs;
mod job_queue;
mod launcher;
mod leases;
mod price_book;
mod price_list;
mod reruns;
mod runner_bucket;
mod runner_releases;
mod runner_store;
mod spot_breaker;
mod token_shelf;
mod unrouted_jobs;
mod workflow_runs;

pub use app_keys::{AppKeyError, AppKeySource};
pub use fleet::{Fleet, FleetError, Instance, InstanceState, ShutdownBehaviour};
pub use forge::{
    Forge, ForgeError, ForgeJobState, ForgeRunner, JitConfig, JitRequest, RunnerRemoval,
};
pub use hook_deliveries::{DeliveryPage, HookDeliveries, HookDelivery};
pub use image_pipelines::{ImagePipelines, PipelineError};
pub use jit_configs::{JitConfigStore, JitStoreError, Tombstone};
pub use job_queue::{JobQueue, QueueError};
pub use launcher::{FleetLaunch, Launcher};
pub use leases::Leases;
pub use price_book::PriceBook;
pub use price_list::{PriceError, PriceList};
pub use reruns::RerunStore;
pub use runner_bucket::{BucketError, BucketUpload, RunnerBucket};
pub use runner_releases::{
    AssetChunks, LatestRelease, ReleaseAsset, ReleaseError, RunnerRelease, RunnerReleases,
};
pub use runner_store::{
    Claim, ClaimHandOver, HostStamps, PoolCounter, RunnerStore, RunnerUpdate, StoreError,
    Transition,
};
pub use spot_breaker::SpotBreakerStore;
pub use token_shelf::{fingerprint_of, SharedToken, TokenShelf};
pub use unrouted_jobs::UnroutedJobs;
pub use workflow_runs::{refusal_did_nothing, WorkflowRuns};

// The records the ports' signatures carry, where callers have always found them.
pub use crate::model::{
    FleetRequest, HostRunner, Market, RootVolume, RunnerScope, Shape, TemplateVersion,
};

/// An error from below that callers do not branch on, kept with its cause.
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;
