//! Starting and resetting the moto AWS emulator (server mode) on a free loopback port.
//!
//! moto is installed into `.venv` by the Makefile; `MOTO_SERVER` overrides the path of
//! its `moto_server` executable. It is started through `serial_moto.py`, which takes
//! DynamoDB requests one at a time as DynamoDB itself isolates transactions (moto alone
//! lets concurrent transactions race), and leaves every other service parallel.

use anyhow::{bail, Context};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// The launcher of moto's server with DynamoDB serialized.
const SERIAL_MOTO: &str = include_str!("serial_moto.py");
/// moto's CreateFleet made to launch from the launch template's data, as EC2 does.
const FLEET_TEMPLATES: &str = include_str!("moto_fleet_templates.py");

/// A running moto server, stopped when dropped.
pub struct Moto {
    pub endpoint: String,
    child: Child,
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
    /// Starts moto and waits (at most 60 s) until it answers.
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
        let script = format!("{FLEET_TEMPLATES}\ninstall()\n{SERIAL_MOTO}");
        let child = Command::new(&python)
            .args(["-c", &script, "-H", "127.0.0.1", "-p", &port.to_string()])
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
        let url = format!("{}/moto-api/", self.endpoint);
        while started.elapsed() < limit {
            if client.get(&url).send().await.is_ok() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("moto did not answer on {} within {limit:?}", self.endpoint)
    }

    /// Forgets every resource, so the next test starts from nothing.
    pub async fn reset(&self) -> anyhow::Result<()> {
        let url = format!("{}/moto-api/reset", self.endpoint);
        let response = reqwest::Client::new().post(&url).send().await?;
        if !response.status().is_success() {
            bail!("moto reset answered {}", response.status());
        }
        Ok(())
    }

    /// Stops the server now (dropping does the same).
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}
