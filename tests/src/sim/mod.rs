//! A stateful GitHub simulator: the REST routes ephemera calls, signed `workflow_job`
//! webhooks, and the runner agent that real instances would run.
//!
//! The pipeline tests start it in-process with [`start`]; `make demo` runs it as the
//! `github-sim` binary. It serves on loopback, answers with GitHub's bodies and errors,
//! and checks App JWTs and installation tokens like GitHub does. When given an AWS
//! endpoint, its agent watches the deployment's EC2 instances, reads each one's JIT
//! config from the JIT table, brings the runner online, runs one job and deregisters — and counts
//! every job whose instance was terminated under it (`jobs_killed`, which must stay 0).

mod agent;
pub mod app;
mod auth;
pub mod body;
pub mod buckets;
pub mod deliveries;
pub mod faults;
pub mod host_runner;
mod intercept;
mod jit;
mod power;
mod releases;
mod routes;
mod runners;
pub mod runs;
pub mod state;
mod webhook;

pub use faults::{RateLimitKind, RateLimitWindow, SimFaults};
pub use host_runner::{HostRunnerPlay, DEFAULT_RUNNER_VERSION};
pub use runs::SpotInterruption;
pub use state::{Counters, IssuedToken, RunnerScope, SimJob, SimRunner, SimState};
pub use webhook::payload as webhook_payload;

use anyhow::Context;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::task::JoinHandle;

/// How the simulator behaves.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The loopback port to serve on; 0 (the default) picks a free one.
    pub port: u16,
    /// Where `workflow_job` deliveries go; without one they count as failed.
    pub webhook_url: Option<String>,
    pub webhook_secret: String,
    pub app_id: u64,
    /// Verifies App JWTs (PEM, RSA public key).
    pub app_public_key_pem: String,
    /// Further Apps installed on the same accounts, as (App id, public key PEM): each
    /// mints its own installation tokens and spends its own buckets. The first App
    /// alone sends webhooks.
    pub more_apps: Vec<(u64, String)>,
    pub installation_id: u64,
    /// The AWS endpoint (moto) the agent watches; `None` runs no agent.
    pub aws_endpoint: Option<String>,
    /// The `ephemera:deployment` tag and JIT table prefix the agent looks for.
    pub deployment: String,
    /// How long a job runs when it is created without a duration.
    pub job_duration: Duration,
    /// How long an online runner waits before taking a job.
    pub pickup_delay: Duration,
    /// Instances boot (read their JIT config) after a delay spread evenly over
    /// `0..=boot_spread`, drawn from the instance id, so they come online in an order of
    /// their own, as on EC2, and not in launch order (zero: at the next poll).
    pub boot_spread: Duration,
    /// How often the agent looks at EC2.
    pub agent_poll: Duration,
    /// What GitHub gets wrong (nothing by default); switchable with
    /// [`SimHandle::set_faults`].
    pub faults: SimFaults,
    /// Where every REST exchange is recorded for the conformance check, as
    /// `exchanges-PORT.jsonl`; defaults to `$EPHEMERA_SIM_RECORD_DIR` if set.
    pub record_dir: Option<PathBuf>,
}

/// The environment variable that turns recording on for every simulator of a process.
pub const RECORD_DIR_ENV: &str = "EPHEMERA_SIM_RECORD_DIR";

impl SimConfig {
    /// Defaults: installation 1, jobs of 2 s, pickup after 1 s, agent poll 200 ms, no
    /// webhook URL, no agent, no faults; recording if `$EPHEMERA_SIM_RECORD_DIR` is set.
    pub fn new(
        app_id: u64,
        app_public_key_pem: impl Into<String>,
        webhook_secret: impl Into<String>,
        deployment: impl Into<String>,
    ) -> SimConfig {
        let deployment = deployment.into();
        SimConfig {
            port: 0,
            webhook_url: None,
            webhook_secret: webhook_secret.into(),
            app_id,
            app_public_key_pem: app_public_key_pem.into(),
            more_apps: Vec::new(),
            installation_id: 1,
            aws_endpoint: None,
            deployment,
            job_duration: Duration::from_secs(2),
            pickup_delay: Duration::from_secs(1),
            boot_spread: Duration::ZERO,
            agent_poll: Duration::from_millis(200),
            faults: SimFaults::default(),
            record_dir: std::env::var_os(RECORD_DIR_ENV)
                .filter(|dir| !dir.is_empty())
                .map(PathBuf::from),
        }
    }
}

/// What the routes, the agent and the handle share.
pub(crate) struct Shared {
    config: SimConfig,
    url: String,
    state: Mutex<SimState>,
    webhook_url: Mutex<Option<String>>,
    /// Repositories whose every delivery the endpoint answers with a status, forever.
    refused_repos: Mutex<std::collections::HashMap<String, u16>>,
    http: reqwest::Client,
    /// Replaced when the App's keys change ([`SimHandle::set_app_keys`]).
    verifier: Mutex<auth::AppVerifier>,
    /// The further Apps' verifiers, by App id.
    more_verifiers: Vec<(u64, auth::AppVerifier)>,
    faults: Mutex<faults::FaultState>,
    /// What the hosts report of their runner ([`SimHandle::set_host_runner`]).
    host_runner: Mutex<HostRunnerPlay>,
    recorder: Option<intercept::Recorder>,
    /// GitHub's primary rate-limit buckets, per credential and resource.
    buckets: buckets::Buckets,
    /// The runner's releases ([`releases`]).
    releases: Mutex<releases::Releases>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, SimState> {
        // A panic while holding the lock leaves plain data; keep serving it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The App JWT verifier in force now.
    fn verifier(&self) -> auth::AppVerifier {
        self.verifier
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The App whose JWT `headers` carry: the first App, or one of the further Apps.
    fn verify_app(&self, headers: &axum::http::HeaderMap) -> Result<u64, auth::ApiError> {
        let first = self.verifier().verify(headers);
        if first.is_ok() || self.more_verifiers.is_empty() {
            return first.map(|()| self.config.app_id);
        }
        self.more_verifiers
            .iter()
            .find(|(_, verifier)| verifier.verify(headers).is_ok())
            .map(|(app_id, _)| *app_id)
            .ok_or_else(auth::ApiError::bad_credentials)
    }

    /// Whose buckets a call with `authorization` spends: an installation token this
    /// simulator issued spends its App installation's (GitHub keeps them per App
    /// installation, whichever of its tokens is used), with the App's id; any other
    /// credential its own.
    fn bucket_owner(&self, authorization: Option<&str>) -> (String, Option<u64>) {
        let credential = buckets::credential_of(authorization);
        let Some(token) = credential.strip_prefix("token:") else {
            return (credential, None);
        };
        match self.lock().tokens.get(token) {
            Some(issued) => (
                buckets::installation_credential(issued.app_id, issued.installation_id),
                Some(issued.app_id),
            ),
            None => (credential, None),
        }
    }

    fn releases(&self) -> MutexGuard<'_, releases::Releases> {
        self.releases.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn host_runner(&self) -> HostRunnerPlay {
        let play = self.host_runner.lock().unwrap_or_else(|e| e.into_inner());
        play.clone()
    }

    fn faults(&self) -> MutexGuard<'_, faults::FaultState> {
        self.faults.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Creates a queued job and sends its `queued` delivery.
    async fn create_job(
        self: &Arc<Self>,
        owner: &str,
        repo: &str,
        labels: Vec<String>,
        duration: Option<Duration>,
    ) -> SimJob {
        let duration = duration.unwrap_or(self.config.job_duration);
        let job = self.lock().create_job(owner, repo, labels, duration);
        webhook::deliver(self, "queued", &job).await;
        job
    }
}

/// A running simulator; dropping it stops the server and the agent.
pub struct SimHandle {
    /// `http://127.0.0.1:PORT`, the API base URL.
    pub url: String,
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

/// Binds 127.0.0.1 on the configured port (a free one by default), serves the routes,
/// and starts the agent when the configuration names an AWS endpoint.
pub async fn start(config: SimConfig) -> anyhow::Result<SimHandle> {
    let verifier = auth::AppVerifier::new(config.app_id, &config.app_public_key_pem)?;
    let more_verifiers = config
        .more_apps
        .iter()
        .map(|(app_id, pem)| Ok((*app_id, auth::AppVerifier::new(*app_id, pem)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let address = format!("127.0.0.1:{}", config.port);
    let listener = tokio::net::TcpListener::bind(&address)
        .await
        .with_context(|| format!("binding {address}"))?;
    let address = listener.local_addr()?;
    let url = format!("http://{address}");
    let recorder = match &config.record_dir {
        Some(dir) => {
            let path = dir.join(format!("exchanges-{}.jsonl", address.port()));
            let recorder = intercept::Recorder::create(&path)
                .with_context(|| format!("recording exchanges to {}", path.display()))?;
            Some(recorder)
        }
        None => None,
    };
    let shared = Arc::new(Shared {
        url: url.clone(),
        webhook_url: Mutex::new(config.webhook_url.clone()),
        refused_repos: Mutex::default(),
        state: Mutex::new(SimState::default()),
        http: reqwest::Client::new(),
        verifier: Mutex::new(verifier),
        more_verifiers,
        faults: Mutex::new(faults::FaultState::new(config.faults.clone())),
        host_runner: Mutex::default(),
        recorder,
        buckets: buckets::Buckets::new(tokio::time::Instant::now()),
        releases: Mutex::default(),
        config,
    });
    let router = routes::router(shared.clone());
    let mut tasks = vec![tokio::spawn(async move {
        let router = router.into_make_service_with_connect_info::<std::net::SocketAddr>();
        if let Err(error) = axum::serve(listener, router).await {
            tracing::error!(error = %error, "github-sim server stopped");
        }
    })];
    if let Some(endpoint) = shared.config.aws_endpoint.clone() {
        let agent = agent::Agent::new(shared.clone(), &endpoint).await;
        tasks.push(tokio::spawn(agent.run()));
    }
    Ok(SimHandle { url, shared, tasks })
}

impl SimHandle {
    /// Creates a `queued` job (with the configured duration unless given one) and sends
    /// the signed `queued` webhook. Returns the job id.
    pub async fn create_job(
        &self,
        owner: &str,
        repo: &str,
        labels: &[&str],
        duration: Option<Duration>,
    ) -> anyhow::Result<u64> {
        let labels = labels.iter().map(|l| l.to_string()).collect();
        let job = self.shared.create_job(owner, repo, labels, duration).await;
        Ok(job.id)
    }

    /// Sends later deliveries to `url`.
    pub fn set_webhook_url(&self, url: impl Into<String>) {
        *self.shared.webhook_url.lock().expect("webhook url lock") = Some(url.into());
    }

    /// Makes every later delivery (and redelivery) of a job of repository `repo` answered
    /// with `status` and logged as failed, as an endpoint refusing those requests would.
    pub fn refuse_deliveries(&self, repo: &str, status: u16) {
        self.shared
            .refused_repos
            .lock()
            .expect("refused repos lock")
            .insert(repo.to_owned(), status);
    }

    /// Replaces the App's private keys, given by their public halves, as its settings
    /// page does (generate a key, delete the old one): from now on only JWTs signed with
    /// one of them are accepted. Installation tokens already issued stay valid.
    pub fn set_app_keys(&self, public_key_pems: &[&str]) -> anyhow::Result<()> {
        let verifier = auth::AppVerifier::with_keys(self.shared.config.app_id, public_key_pems)?;
        *self
            .shared
            .verifier
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = verifier;
        Ok(())
    }

    /// Replaces the faults in force; their counts (and the rate-limit window) start
    /// afresh.
    /// Spends GitHub's `resource` bucket (`buckets::REGISTRATION`, `buckets::CORE`) for
    /// every credential until the simulator's hour ends: its calls answer 403 with
    /// `x-ratelimit-remaining: 0`, as GitHub's primary rate limit does.
    pub fn exhaust_bucket(&self, resource: &'static str) {
        self.shared.buckets.exhaust_all(resource);
    }

    /// Spends App `app_id`'s `resource` bucket in the installation until the
    /// simulator's hour ends, the other Apps' left as they are: its calls answer 403 with
    /// `x-ratelimit-remaining: 0`.
    pub fn exhaust_app_bucket(&self, app_id: u64, resource: &'static str) {
        let credential =
            buckets::installation_credential(app_id, self.shared.config.installation_id);
        self.shared.buckets.exhaust(&credential, resource);
    }

    /// What the hosts booting from now on report of their runner in the JIT tombstone
    /// (by default: the stock image's runner, [`DEFAULT_RUNNER_VERSION`]).
    pub fn set_host_runner(&self, play: HostRunnerPlay) {
        *self
            .shared
            .host_runner
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = play;
    }

    pub fn set_faults(&self, faults: SimFaults) {
        self.shared.faults().replace(faults);
    }

    /// A copy of runners, jobs, tokens and counters.
    pub fn snapshot(&self) -> SimState {
        self.shared.lock().clone()
    }

    /// Changes the state directly (fault injection in tests).
    pub fn with_state<T>(&self, change: impl FnOnce(&mut SimState) -> T) -> T {
        change(&mut self.shared.lock())
    }

    /// Publishes runner `version` with one tarball per arch (`x64`, `arm64`), as the
    /// latest release; `published_sums` overrides what the notes say an arch's sum is.
    pub fn publish_runner_release(
        &self,
        version: &str,
        tarballs: &[(&str, &[u8])],
        published_sums: &[(&str, &str)],
    ) {
        let tarballs = tarballs
            .iter()
            .map(|(arch, bytes)| ((*arch).to_owned(), bytes.to_vec()))
            .collect();
        let sums = published_sums
            .iter()
            .map(|(arch, sum)| ((*arch).to_owned(), (*sum).to_owned()))
            .collect();
        self.shared.publish_runner_release(version, tarballs, sums);
    }

    /// The release assets downloaded so far, by name, in order.
    pub fn runner_downloads(&self) -> Vec<String> {
        self.shared.releases().downloads.clone()
    }

    /// `GET /repos/actions/runner/releases/latest` answered so far, by status.
    pub fn latest_release_answers(&self) -> std::collections::BTreeMap<u16, u64> {
        self.shared.releases().latest_answers.clone()
    }

    /// Stops the server and the agent and waits until they are gone.
    pub async fn stop(mut self) {
        for task in self.tasks.drain(..) {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}
