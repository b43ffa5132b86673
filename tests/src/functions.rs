//! The Lambda binaries (`webhook`, `scaler`, `reaper`) run as Lambda runs them: a
//! process with the environment template.yaml gives it, asking a Lambda runtime API for
//! events. The runtime API here is the project's own, on a loopback port: it hands out
//! the events a test queues and collects what the function answers.
//!
//! Each function calls AWS as its role of template.yaml (`WebhookRole`, `ScalerRole`,
//! `ReaperRole`), with an access key registered with the strict layer for the stack its
//! environment names ([`as_role`]); a test's own calls stay the operator's.

use crate::moto::Moto;
use crate::pipeline::workspace_path;
use anyhow::Context;
use aws_sdk_secretsmanager::Client as SecretsClient;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

/// A debug build of one of the Lambda binaries (`cargo build --workspace --bins`).
pub fn binary(name: &str) -> anyhow::Result<PathBuf> {
    let dir = std::env::current_exe()?
        .parent()
        .and_then(|deps| deps.parent())
        .context("no target directory")?
        .to_path_buf();
    let path = dir.join(name);
    anyhow::ensure!(
        path.is_file(),
        "{} is missing: cargo build --workspace --bins",
        path.display()
    );
    Ok(path)
}

/// An endpoint on 127.0.0.1 that accepts connections and never answers, counting them.
pub struct HungEndpoint {
    pub url: String,
    connections: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl HungEndpoint {
    pub async fn start() -> anyhow::Result<HungEndpoint> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let connections = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = connections.clone();
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                held.push(socket);
            }
        });
        Ok(HungEndpoint {
            url,
            connections,
            task,
        })
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for HungEndpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What a function process printed and how it ended.
#[derive(Debug)]
pub struct Exited {
    pub success: bool,
    /// Stdout (the JSON log) and stderr, together.
    pub output: String,
    pub took: Duration,
}

/// The role of template.yaml the function `name` runs as.
fn role_of(name: &str) -> anyhow::Result<&'static str> {
    Ok(match name {
        "webhook" => "WebhookRole",
        "scaler" => "ScalerRole",
        "reaper" => "ReaperRole",
        other => anyhow::bail!("no role for the function {other}"),
    })
}

/// The stack parameters the function environment `env` was made from (the inverse of
/// the template's `Globals`): the deployment (from `EPHEMERA_TABLE`, `<deployment>-runners`)
/// and the secrets passed by ARN. `None` when the environment names no table, or no
/// configuration parameter: such a function exits at its cold start before any call, so
/// it needs no role (and registering one would reach a test's hung endpoint).
fn stack_parameters(env: &[(String, String)]) -> Option<serde_json::Value> {
    let get = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    get("EPHEMERA_CONFIG_PARAMETER")?;
    let deployment = get("EPHEMERA_TABLE")?.strip_suffix("-runners")?;
    let mut parameters = serde_json::json!({ "DeploymentName": deployment });
    for (variable, parameter) in [
        ("EPHEMERA_GITHUB_KEY_SECRET_ID", "GitHubAppKeySecretArn"),
        ("EPHEMERA_WEBHOOK_SECRET_ID", "WebhookSecretArn"),
        (
            "EPHEMERA_WEBHOOK_PREVIOUS_SECRET_ID",
            "WebhookPreviousSecretArn",
        ),
        ("EPHEMERA_MORE_APP_KEY_SECRET_ARNS", "MoreAppKeySecretArns"),
    ] {
        if let Some(value) = get(variable).filter(|v| v.starts_with("arn:")) {
            parameters[parameter] = serde_json::Value::from(value);
        }
    }
    Some(parameters)
}

/// `env` with the credentials of the function `name`'s role, registered with the strict
/// layer at `AWS_ENDPOINT_URL`. Unchanged when the endpoint is not a strict layer (a
/// hung or refusing endpoint of a fault test) or the environment is not a deployment's.
pub async fn as_role(
    name: &str,
    env: &[(String, String)],
) -> anyhow::Result<Vec<(String, String)>> {
    let mut env = env.to_vec();
    let endpoint = env
        .iter()
        .find(|(k, _)| k == "AWS_ENDPOINT_URL")
        .map(|(_, v)| v.clone());
    let (Some(endpoint), Some(parameters)) = (endpoint, stack_parameters(&env)) else {
        return Ok(env);
    };
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let serial = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let role = role_of(name)?;
    let key = format!("ASIA{}{}F{serial}", role.to_uppercase(), std::process::id());
    let body = serde_json::json!({
        "access_key_id": key,
        "template": "template.yaml",
        "role": role,
        "parameters": parameters,
    });
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(3))
        .build()?;
    let url = format!("{endpoint}/strict-api/iam/principals");
    let Ok(response) = client.post(&url).json(&body).send().await else {
        return Ok(env);
    };
    if response.status() == reqwest::StatusCode::NOT_FOUND {
        return Ok(env);
    }
    let status = response.status();
    if !status.is_success() {
        anyhow::bail!(
            "registering {role} with the strict layer: {status}: {}",
            response.text().await.unwrap_or_default()
        );
    }
    env.retain(|(k, _)| k != "AWS_ACCESS_KEY_ID");
    env.push(("AWS_ACCESS_KEY_ID".to_owned(), key));
    Ok(env)
}

/// Runs `binary` with only `env` (and a runtime API nobody answers) until it exits, at
/// most `limit`; a process still running then is killed and reported as such.
pub async fn run_until_exit(
    name: &str,
    env: &[(String, String)],
    limit: Duration,
) -> anyhow::Result<Exited> {
    let env = &as_role(name, env).await?;
    let runtime_api = TcpListener::bind("127.0.0.1:0").await?;
    let started = std::time::Instant::now();
    let mut child = tokio::process::Command::new(binary(name)?)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env(
            "AWS_LAMBDA_RUNTIME_API",
            runtime_api.local_addr()?.to_string(),
        )
        .env("AWS_LAMBDA_FUNCTION_NAME", format!("test-{name}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut stdout = child.stdout.take().context("no stdout")?;
    let mut stderr = child.stderr.take().context("no stderr")?;
    let status = tokio::time::timeout(limit, child.wait()).await;
    let took = started.elapsed();
    let _ = child.start_kill();
    let mut output = String::new();
    stdout.read_to_string(&mut output).await?;
    stderr.read_to_string(&mut output).await?;
    println!("{name} ran {took:?}:\n{output}");
    let status = status.with_context(|| format!("{name} still running after {limit:?}"))??;
    Ok(Exited {
        success: status.success(),
        output,
        took,
    })
}

/// The environment template.yaml gives the functions, for the resources and secrets a
/// test made; AWS reached at `endpoint`.
pub fn environment(endpoint: &str, vars: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut env: HashMap<String, String> = [
        ("AWS_ENDPOINT_URL", endpoint),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("RUST_LOG", "info"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    env.extend(vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    env.into_iter().collect()
}

/// Creates the secret `name` holding `value` (or puts `value` into it); its ARN.
pub async fn put_secret(moto: &Moto, name: &str, value: &str) -> anyhow::Result<String> {
    let sdk = ephemera_aws::sdk_config(&ephemera_aws::AwsSettings::emulator(&moto.endpoint)).await;
    let client = SecretsClient::new(&sdk);
    match client
        .create_secret()
        .name(name)
        .secret_string(value)
        .send()
        .await
    {
        Ok(created) => Ok(created.arn().unwrap_or_default().to_owned()),
        Err(_) => {
            let put = client
                .put_secret_value()
                .secret_id(name)
                .secret_string(value)
                .send()
                .await?;
            Ok(put.arn().unwrap_or_default().to_owned())
        }
    }
}

/// The test App key, PEM.
pub fn app_key() -> anyhow::Result<String> {
    Ok(std::fs::read_to_string(workspace_path(
        "tests/fixtures/github-app-test-key.pem",
    ))?)
}

/// A function process answering invocations through its own [`RuntimeApi`](crate::runtime_api::RuntimeApi); killed
/// when dropped.
pub struct Function {
    pub api: crate::runtime_api::RuntimeApi,
    child: tokio::process::Child,
}

impl Function {
    /// Starts the binary `name` with only `env`.
    pub async fn start(name: &str, env: &[(String, String)]) -> anyhow::Result<Function> {
        let env = &as_role(name, env).await?;
        let api = crate::runtime_api::RuntimeApi::start().await?;
        let child = tokio::process::Command::new(binary(name)?)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("AWS_LAMBDA_RUNTIME_API", &api.address)
            .env("AWS_LAMBDA_FUNCTION_NAME", format!("test-{name}"))
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        Ok(Function { api, child })
    }

    /// Hands `event` to the function; its answer.
    pub async fn invoke(&mut self, event: serde_json::Value) -> anyhow::Result<serde_json::Value> {
        if let Some(status) = self.child.try_wait()? {
            anyhow::bail!("the function exited: {status}");
        }
        self.api.invoke(event, Duration::from_secs(90)).await
    }

    /// [`Function::invoke`] with `trace` as the invocation's trace header.
    pub async fn invoke_traced(
        &mut self,
        event: serde_json::Value,
        trace: &str,
    ) -> anyhow::Result<serde_json::Value> {
        if let Some(status) = self.child.try_wait()? {
            anyhow::bail!("the function exited: {status}");
        }
        self.api
            .invoke_traced(event, trace, Duration::from_secs(90))
            .await
    }
}
