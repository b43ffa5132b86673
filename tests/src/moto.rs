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
//!
//! IAM: each actor of a test calls AWS with an access key of its own, registered with
//! the strict layer as a role of template.yaml ([`Moto::role_settings`]); the layer
//! refuses what that role's policies do not allow, as IAM would. Any other key (the
//! `testing` of [`AwsSettings::emulator`]) is the operator, with full access.

use anyhow::{bail, Context};
use ephemera_aws::AwsSettings;
use serde::Deserialize;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// The directory holding the `strict_moto` Python package.
const STRICT_LAYER_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");

/// An arm64 image moto ships (Amazon Linux 2022 for arm64); its other images are x86_64,
/// and EC2 launches an image only on an instance type of its architecture.
pub const ARM64_IMAGE: &str = "ami-0e9271c829888680e";

/// A running moto server, stopped when dropped.
pub struct Moto {
    pub endpoint: String,
    child: Child,
}

/// Which server answered a readiness check.
enum Ready {
    Ours,
    /// Another process holds the port (ours exited, or another moto answered).
    Another,
}

/// The strict layer's `GET /strict-api/process`.
#[derive(Deserialize)]
struct StrictProcess {
    pid: u32,
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
    ///
    /// A free port is only free when it is picked: another server started in between
    /// may take it, and our moto then fails to bind while the other one answers on the
    /// port. So the answer must come from our own process (its PID), or moto is started
    /// again on another port, at most three times.
    pub async fn start() -> anyhow::Result<Moto> {
        Moto::start_on(free_port).await
    }

    /// [`Moto::start`], on the ports `next_port` picks.
    async fn start_on(mut next_port: impl FnMut() -> anyhow::Result<u16>) -> anyhow::Result<Moto> {
        let path = moto_server_path();
        if !path.exists() {
            bail!(
                "{} not found: run `make venv` (or set MOTO_SERVER)",
                path.display()
            );
        }
        let mut taken = Vec::new();
        for _ in 0..3 {
            let port = next_port()?;
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
            let mut moto = Moto {
                endpoint: format!("http://127.0.0.1:{port}"),
                child,
            };
            match moto.wait_ready(Duration::from_secs(60)).await? {
                Ready::Ours => return Ok(moto),
                Ready::Another => taken.push(port),
            }
        }
        bail!("moto could not bind a free port: ports {taken:?} were taken by other servers as it started")
    }

    /// Waits until a strict layer answers on the port, and says whether it is ours.
    async fn wait_ready(&mut self, limit: Duration) -> anyhow::Result<Ready> {
        let started = Instant::now();
        let client = reqwest::Client::new();
        let url = format!("{}/strict-api/process", self.endpoint);
        let ours = self.child.id();
        while started.elapsed() < limit {
            if let Ok(Some(_)) = self.child.try_wait() {
                return Ok(Ready::Another);
            }
            if let Ok(response) = client.get(&url).send().await {
                if !response.status().is_success() {
                    bail!(
                        "{} answered {} for the strict layer's process: is it moto without the layer?",
                        self.endpoint,
                        response.status()
                    );
                }
                let process: StrictProcess = response.json().await.with_context(|| {
                    format!(
                        "{} answered the strict layer's process with no PID",
                        self.endpoint
                    )
                })?;
                return Ok(if Some(process.pid) == ours {
                    Ready::Ours
                } else {
                    Ready::Another
                });
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

    /// Settings that call AWS as the role `role` (a logical id of template.yaml, e.g.
    /// `ScalerRole`) of the deployment `deployment`: a fresh access key, registered with
    /// the strict layer, whose requests are evaluated against that role's policies.
    pub async fn role_settings(&self, role: &str, deployment: &str) -> anyhow::Result<AwsSettings> {
        let parameters = serde_json::json!({ "DeploymentName": deployment });
        self.principal_settings(role, parameters, None).await
    }

    /// [`Moto::role_settings`] with the stack's `parameters` (an object with at least
    /// `DeploymentName`, e.g. `GitHubAppKeySecretArn`), and for a runner host the
    /// instance whose credentials these are (`ec2:SourceInstanceARN`).
    pub async fn principal_settings(
        &self,
        role: &str,
        parameters: serde_json::Value,
        source_instance: Option<&str>,
    ) -> anyhow::Result<AwsSettings> {
        principal_settings(
            &self.endpoint,
            "template.yaml",
            role,
            parameters,
            source_instance,
        )
        .await
    }

    /// Settings that call AWS as the role `role` of the image stack
    /// (infra/image/template.yaml, e.g. `ExecutionRoleX86`, with which EC2 Image Builder
    /// runs that architecture's pipeline) of the deployment `deployment`.
    pub async fn image_role_settings(
        &self,
        role: &str,
        deployment: &str,
    ) -> anyhow::Result<AwsSettings> {
        let parameters = serde_json::json!({ "DeploymentName": deployment });
        principal_settings(
            &self.endpoint,
            "infra/image/template.yaml",
            role,
            parameters,
            None,
        )
        .await
    }

    /// The grants of the templates' roles that requests needed so far (`used`), and
    /// those none needed (`unused`), as the strict layer recorded them.
    pub async fn iam_coverage(&self) -> anyhow::Result<serde_json::Value> {
        let url = format!("{}/strict-api/iam/coverage", self.endpoint);
        let response = reqwest::Client::new().get(&url).send().await?;
        Ok(response.error_for_status()?.json().await?)
    }

    /// Stops the server now (dropping does the same).
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// Settings that call the strict emulator at `endpoint` as the role `role` of `template`
/// (a path from the workspace): a fresh access key, registered with the strict layer
/// with the stack's `parameters` (at least `DeploymentName`) and, for a runner host, the
/// instance whose credentials these are (`ec2:SourceInstanceARN`, as IMDS's role
/// credentials carry it).
pub async fn principal_settings(
    endpoint: &str,
    template: &str,
    role: &str,
    parameters: serde_json::Value,
    source_instance: Option<&str>,
) -> anyhow::Result<AwsSettings> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let serial = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let key = format!("ASIA{}{}X{serial}", role.to_uppercase(), std::process::id());
    let body = serde_json::json!({
        "access_key_id": key,
        "template": template,
        "role": role,
        "parameters": parameters,
        "source_instance": source_instance,
    });
    let url = format!("{endpoint}/strict-api/iam/principals");
    let response = reqwest::Client::new().post(&url).json(&body).send().await?;
    let status = response.status();
    let text = response.text().await?;
    if !status.is_success() {
        bail!("registering {role} with the strict layer: {status}: {text}");
    }
    let mut settings = AwsSettings::emulator(endpoint);
    settings.static_credentials = Some((key, "testing".to_owned()));
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_port_another_moto_took_is_left_for_the_next_free_one() -> anyhow::Result<()> {
        let first = Moto::start().await?;
        let taken: u16 = first
            .endpoint
            .rsplit(':')
            .next()
            .unwrap_or_default()
            .parse()?;
        let mut ports = vec![taken, free_port()?].into_iter();
        let second = Moto::start_on(|| ports.next().context("no port left")).await?;
        assert_ne!(second.endpoint, first.endpoint);
        // Each answers for itself: a setting changed on one is not seen on the other.
        second
            .set_strict(serde_json::json!({"dynamodb_transaction_in_flight_ms": 7}))
            .await?;
        assert_ne!(
            first.strict_settings().await?["dynamodb_transaction_in_flight_ms"],
            7
        );
        let mut only_taken = std::iter::repeat(taken);
        let refused = Moto::start_on(|| Ok(only_taken.next().unwrap_or(taken)))
            .await
            .err()
            .context("three taken ports must fail")?;
        assert!(refused.to_string().contains("were taken"), "{refused}");
        Ok(())
    }
}
