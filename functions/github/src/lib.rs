//! ephemera's GitHub App client: the [`Forge`](ephemera_core::ports::Forge) port over
//! GitHub's REST API.
//!
//! The scaler registers just-in-time runners through it, the reaper and the CLI remove
//! runners and ask about jobs. It speaks to github.com, GitHub Enterprise Server
//! (`https://HOST/api/v3`), GHE.com (`https://api.SUBDOMAIN.ghe.com`) and the project's
//! GitHub simulator alike: only the base URL differs.
//!
//! Layout:
//! - `client`: configuration, [`GitHubApp`] itself, and its call accounting.
//! - `auth`: the App JWT (and the re-read of a rotated key through the
//!   [`AppKeySource`](ephemera_core::ports::AppKeySource) port), installation lookup, the
//!   installation-token cache, and the calls made as the App or as an installation,
//!   with the 401 retry.
//! - `outcome`: what an HTTP answer means (a pure function of status, headers, body).
//! - `retry`: exponential backoff with full jitter inside a time budget.
//! - `http`: one API call with a given bearer: headers, retries, counting and logging.
//! - `forge`: the [`Forge`](ephemera_core::ports::Forge) methods and response shapes.
//! - `list`: listing a scope's runners, paginated ([`GitHubApp::list_runners`]).
//! - `app`: the App's own description, webhook URL and installations (`ephemera doctor`).
//! - `several`: a deployment's Apps as one forge ([`forge_over`]).
//! - `deliveries`: the App's webhook deliveries, listed and redelivered (the
//!   [`HookDeliveries`](ephemera_core::ports::HookDeliveries) port).
//! - `runs`: a workflow run's state and a job's re-run (the
//!   [`WorkflowRuns`](ephemera_core::ports::WorkflowRuns) port).
//!
//! Secrets (the private key, tokens, JIT configs) stay in `SecretString`s: they are
//! never logged and never put into an error.

mod client;

mod app;
mod auth;
mod deliveries;
mod forge;
mod http;
mod list;
mod outcome;
mod rate;
mod releases;
mod retry;
mod runs;
mod several;

#[cfg(test)]
mod harness;
#[cfg(test)]
mod shelf_tests;
#[cfg(test)]
mod stub;
#[cfg(test)]
mod tests;

pub use app::AppDescription;
pub use auth::KEY_REREAD_GAP;
pub use client::{CallCount, ConfigError, GitHubApp, GitHubAppConfig};
pub use rate::RateBucket;
pub use retry::RetryPolicy;
pub use several::{deployment_apps, forge_over, paced_forge, unshared_pace};
