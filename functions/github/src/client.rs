//! [`GitHubApp`]: configuration, construction, and the count of every API call it made.
//!
//! One `GitHubApp` is built at cold start and shared by every invocation: it holds the
//! HTTP connection pool, the signing key, and the caches (installation tokens,
//! installation ids, runner-group ids) that keep the API calls per job low.

use crate::auth::{AppKey, KeySlot, TokenCache};
use crate::retry::RetryPolicy;
use ephemera_core::ports::{AppKeySource, TokenShelf};
use secrecy::SecretString;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use time::OffsetDateTime;

/// How long a connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one request may take, answer included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the App lives and who it is.
#[derive(Debug, Clone)]
pub struct GitHubAppConfig {
    /// `https://api.github.com`, `https://HOST/api/v3` (GHES), `https://api.SUBDOMAIN.ghe.com`
    /// or a local simulator such as `http://127.0.0.1:PORT`.
    pub api_url: String,
    pub app_id: u64,
    /// The App's private key, PEM (PKCS#1 or PKCS#8 RSA).
    pub private_key: SecretString,
    pub retry: RetryPolicy,
}

impl GitHubAppConfig {
    /// The App `app_id` at `api_url`, signing with `private_key`, retried by the default
    /// policy.
    pub fn new(
        api_url: impl Into<String>,
        app_id: u64,
        private_key: SecretString,
    ) -> GitHubAppConfig {
        GitHubAppConfig {
            api_url: api_url.into(),
            app_id,
            private_key,
            retry: RetryPolicy::default(),
        }
    }

    /// The App the deployment's configuration names, signing with `private_key`.
    pub fn of(github: &ephemera_core::config::GitHubConfig, private_key: SecretString) -> Self {
        GitHubAppConfig::new(&github.api_url, github.app_id, private_key)
    }

    /// The same App, retried by `retry`.
    pub fn with_retry(mut self, retry: RetryPolicy) -> GitHubAppConfig {
        self.retry = retry;
        self
    }
}

/// Why a [`GitHubApp`] could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("github api_url {url:?} is not an http:// or https:// URL")]
    ApiUrl { url: String },
    #[error("the GitHub App private key is not an RSA private key in PEM form (PKCS#1 or PKCS#8)")]
    PrivateKey(#[source] jsonwebtoken::errors::Error),
    #[error("the HTTP client could not be built")]
    HttpClient(#[source] reqwest::Error),
}

/// The clock, injectable so tests move time instead of sleeping.
pub(crate) type Clock = Arc<dyn Fn() -> OffsetDateTime + Send + Sync>;

/// A GitHub App, acting as its installations. Implements
/// [`Forge`](ephemera_core::ports::Forge).
pub struct GitHubApp {
    pub(crate) api_url: String,
    pub(crate) http: reqwest::Client,
    pub(crate) key: KeySlot,
    pub(crate) retry: RetryPolicy,
    pub(crate) clock: Clock,
    pub(crate) tokens: TokenCache,
    /// Installation tokens shared with the deployment's other processes, if wired.
    pub(crate) shelf: Option<Arc<dyn TokenShelf>>,
    /// The App's id, which the shelf keys its tokens by.
    pub(crate) app_id: u64,
    /// Installation ids found by owner (and repository), lower-cased.
    pub(crate) installations: Mutex<HashMap<(String, Option<String>), u64>>,
    /// Runner-group ids by name, per organization (lower-cased).
    pub(crate) runner_groups: Mutex<HashMap<String, HashMap<String, u64>>>,
    pub(crate) accounting: Accounting,
    /// `GitHubCalls` and `GitHubRateLimitRemaining`, flushed by the handler using it.
    pub(crate) metrics: ephemera_core::metrics::Metrics,
    /// GitHub's primary buckets as its answers last reported them ([`crate::rate`]).
    pub(crate) buckets: Mutex<std::collections::BTreeMap<String, crate::rate::RateBucket>>,
}

impl GitHubApp {
    /// Checks the URL and the key and builds the HTTP client; makes no request.
    pub fn new(config: GitHubAppConfig) -> Result<GitHubApp, ConfigError> {
        let api_url = normalize_api_url(&config.api_url)?;
        let key = AppKey::from_pem(config.app_id, &config.private_key)?;
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .user_agent("ephemera")
            .default_headers(crate::http::default_headers())
            .build()
            .map_err(ConfigError::HttpClient)?;
        Ok(GitHubApp {
            api_url,
            http,
            key: KeySlot::new(key),
            retry: config.retry,
            clock: Arc::new(OffsetDateTime::now_utc),
            tokens: TokenCache::default(),
            shelf: None,
            app_id: config.app_id,
            installations: Mutex::default(),
            runner_groups: Mutex::default(),
            accounting: Accounting::default(),
            metrics: ephemera_core::metrics::Metrics::disabled(),
            buckets: Mutex::default(),
        })
    }

    /// Counts every call into `metrics` (by endpoint and outcome) and notes the
    /// remaining rate limit; the handler sharing the handle flushes it.
    pub fn with_metrics(mut self, metrics: ephemera_core::metrics::Metrics) -> GitHubApp {
        self.metrics = metrics;
        self
    }

    /// Reads the key again from `source` when GitHub refuses a JWT signed with it (a
    /// rotated key), and retries that call once with the new key.
    pub fn with_key_source(mut self, source: Arc<dyn AppKeySource>) -> GitHubApp {
        self.key = self.key.with_source(source);
        self
    }

    /// Shares installation tokens through `shelf` with the deployment's other processes:
    /// a token is taken from it before one is minted, and a minted one is put on it
    /// ([`crate::auth`]).
    pub fn with_token_shelf(mut self, shelf: Arc<dyn TokenShelf>) -> GitHubApp {
        self.shelf = Some(shelf);
        self
    }

    /// Replaces the wall clock (used for JWTs, token expiry and rate-limit resets).
    pub fn with_clock(
        mut self,
        now: impl Fn() -> OffsetDateTime + Send + Sync + 'static,
    ) -> GitHubApp {
        self.clock = Arc::new(now);
        self
    }

    /// The App's id.
    pub fn app_id(&self) -> u64 {
        self.app_id
    }

    /// The base URL every path is joined to, without a trailing slash.
    pub fn api_url(&self) -> &str {
        &self.api_url
    }

    /// Every HTTP call made so far, by endpoint and outcome, sorted.
    pub fn calls(&self) -> Vec<CallCount> {
        self.accounting.snapshot()
    }

    /// How many HTTP calls were made so far (retries included).
    pub fn total_calls(&self) -> u64 {
        self.accounting.snapshot().iter().map(|c| c.count).sum()
    }

    pub(crate) fn now(&self) -> OffsetDateTime {
        (self.clock)()
    }
}

impl fmt::Debug for GitHubApp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GitHubApp")
            .field("api_url", &self.api_url)
            .field("app_id", &self.key.current().0.app_id())
            .finish_non_exhaustive()
    }
}

fn normalize_api_url(url: &str) -> Result<String, ConfigError> {
    let trimmed = url.trim().trim_end_matches('/');
    match reqwest::Url::parse(trimmed) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.has_host() => {
            Ok(trimmed.to_owned())
        }
        _ => Err(ConfigError::ApiUrl {
            url: url.to_owned(),
        }),
    }
}

/// How many HTTP calls ended one way at one endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallCount {
    /// `generate_jitconfig`, `delete_runner`, `get_runner`, `list_runners`, `get_job`,
    /// `access_token`, `runner_groups`, `installation`.
    pub endpoint: &'static str,
    /// `ok`, `not_found`, `busy`, `already_exists`, `throttled`, `transient`,
    /// `unauthorized`, `rejected`.
    pub outcome: &'static str,
    pub count: u64,
}

/// Counters of HTTP calls, by endpoint and outcome.
#[derive(Debug, Default)]
pub(crate) struct Accounting {
    counts: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
}

impl Accounting {
    pub(crate) fn count(&self, endpoint: &'static str, outcome: &'static str) {
        *lock(&self.counts).entry((endpoint, outcome)).or_default() += 1;
    }

    fn snapshot(&self) -> Vec<CallCount> {
        lock(&self.counts)
            .iter()
            .map(|(&(endpoint, outcome), &count)| CallCount {
                endpoint,
                outcome,
                count,
            })
            .collect()
    }
}

/// Locks a cache; a panic elsewhere while holding it leaves plain data, still usable.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_urls_of_every_flavour_are_accepted_without_trailing_slash() {
        for (given, expected) in [
            ("https://api.github.com/", "https://api.github.com"),
            (
                "https://ghes.example.com/api/v3",
                "https://ghes.example.com/api/v3",
            ),
            ("https://api.acme.ghe.com", "https://api.acme.ghe.com"),
            ("http://127.0.0.1:8080/", "http://127.0.0.1:8080"),
        ] {
            assert_eq!(normalize_api_url(given).ok().as_deref(), Some(expected));
        }
    }

    #[test]
    fn api_url_without_http_scheme_is_refused() {
        for bad in ["api.github.com", "ftp://api.github.com", ""] {
            assert!(matches!(
                normalize_api_url(bad),
                Err(ConfigError::ApiUrl { .. })
            ));
        }
    }

    #[test]
    fn calls_are_counted_by_endpoint_and_outcome() {
        let accounting = Accounting::default();
        accounting.count("get_runner", "ok");
        accounting.count("get_runner", "ok");
        accounting.count("delete_runner", "busy");
        let calls = accounting.snapshot();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].endpoint, "delete_runner");
        assert_eq!((calls[1].outcome, calls[1].count), ("ok", 2));
    }
}
