//! Starting, resetting and steering the moto AWS emulator (server mode) on a free
//! loopback port, behind the strict layer (`strict_moto/`).
//!
//! moto is installed into `.venv` by the Makefile; `MOTO_SERVER` overrides the path of
//! its `moto_server` executable. moto runs in-process under `strict_moto`, a WSGI layer
//! that refuses what AWS refuses (SSM sizes and rates, DynamoDB transaction conflicts
//! and limits, SQS sizes and delays, Lambda's recursion cut-off, CreateFleet partial
//! fulfilment as a fault), resolves a launch template's `resolve:ssm:` image at launch
//! as EC2 does, and takes DynamoDB requests one at a time, as DynamoDB isolates
//! transactions. Strict is on by default; its settings come from
//! `EPHEMERA_STRICT_SETTINGS` (JSON) or `EPHEMERA_STRICT_SETTINGS_FILE` at start, and
//! from [`Moto::set_strict`] at run time.

use anyhow::{bail, Context};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// The directory holding the `strict_moto` Python package.
const STRICT_LAYER_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");

/// A running moto server, stopped when dropped.
pub struct Moto {
    pub endpoint: String,
    child: Child,
}

/// What the strict layer refused so far, and the lines it logged (Lambda's recursion
/// stops).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct StrictStats {
    /// Refusals by kind, e.g. `ssm_put_parameter_throttled`, `dynamodb_transaction_conflict`.
    pub refusals: HashMap<String, u64>,
    pub log: Vec<String>,
}

impl StrictStats {
    /// How many refusals of `kind` there were.
    pub fn count(&self, kind: &str) -> u64 {
        self.refusals.get(kind).copied().unwrap_or(0)
    }
}

/// Where the Makefile installs moto.
pub fn moto_server_path() -> PathBuf {
    if let Ok(path) = std::env::var("MOTO_SERVER") {
        return PathBuf::from(path);
    }
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default();
    workspace.join(".venv/bin/moto_server")
}

/// A free TCP port on 127.0.0.1 (free when asked; bind soon after).
pub fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("binding 127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

impl Moto {
    /// Starts moto behind the strict layer and waits (at most 60 s) until it answers.
    pub async fn start() -> anyhow::Result<Moto> {
        let path = moto_server_path();
        if !path.exists() {
            bail!(
                "{} not found: run `make venv` (or set MOTO_SERVER)",
                path.display()
            );
        }
        let port = free_port()?;
        let python = path.with_file_name("python");
        let child = Command::new(&python)
            .args([
                "-m",
                "strict_moto",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .env("PYTHONPATH", STRICT_LAYER_DIR)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting moto with {}", python.display()))?;
        let moto = Moto {
            endpoint: format!("http://127.0.0.1:{port}"),
            child,
        };
        moto.wait_ready(Duration::from_secs(60)).await?;
        Ok(moto)
    }

    async fn wait_ready(&self, limit: Duration) -> anyhow::Result<()> {
        let started = Instant::now();
        let client = reqwest::Client::new();
        let url = format!("{}/strict-api/settings", self.endpoint);
        while started.elapsed() < limit {
            if let Ok(response) = client.get(&url).send().await {
                if response.status().is_success() {
                    return Ok(());
                }
                bail!(
                    "{} answered {} for the strict layer's settings: is it moto without the layer?",
                    self.endpoint,
                    response.status()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("moto did not answer on {} within {limit:?}", self.endpoint)
    }

    /// Forgets every resource, so the next test starts from nothing; the strict layer
    /// goes back to its start-up settings, full buckets and no counts.
    pub async fn reset(&self) -> anyhow::Result<()> {
        self.post("/moto-api/reset", serde_json::json!({})).await?;
        Ok(())
    }

    /// The strict layer's settings in force.
    pub async fn strict_settings(&self) -> anyhow::Result<serde_json::Value> {
        let url = format!("{}/strict-api/settings", self.endpoint);
        let response = reqwest::Client::new().get(&url).send().await?;
        Ok(response.error_for_status()?.json().await?)
    }

    /// Changes some strict settings, e.g. `json!({"ssm_put_parameter_tps": 10})`;
    /// answers the settings now in force.
    pub async fn set_strict(
        &self,
        changes: serde_json::Value,
    ) -> anyhow::Result<serde_json::Value> {
        self.post("/strict-api/settings", changes).await
    }

    /// What the strict layer refused so far.
    pub async fn strict_stats(&self) -> anyhow::Result<StrictStats> {
        let url = format!("{}/strict-api/stats", self.endpoint);
        let response = reqwest::Client::new().get(&url).send().await?;
        Ok(response.error_for_status()?.json().await?)
    }

    /// Stops the strict layer's clock (request rates, transaction windows), so tests
    /// decide when time passes, with [`Moto::advance_strict_clock`].
    pub async fn pause_strict_clock(&self) -> anyhow::Result<()> {
        self.post("/strict-api/clock", serde_json::json!({"pause": true}))
            .await
            .map(drop)
    }

    /// Moves the strict layer's clock on by `by`.
    pub async fn advance_strict_clock(&self, by: Duration) -> anyhow::Result<()> {
        let body = serde_json::json!({"advance_ms": by.as_secs_f64() * 1000.0});
        self.post("/strict-api/clock", body).await.map(drop)
    }

    async fn post(&self, path: &str, body: serde_json::Value) -> anyhow::Result<serde_json::Value> {
        let url = format!("{}{path}", self.endpoint);
        let response = reqwest::Client::new().post(&url).json(&body).send().await?;
        let status = response.status();
        let text = response.text().await?;
        if !status.is_success() {
            bail!("{path} answered {status}: {text}");
        }
        serde_json::from_str(&text).with_context(|| format!("{path} answered {text}"))
    }

    /// Stops the server now (dropping does the same).
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}
