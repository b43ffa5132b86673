//! A newcomer's `make up` session, scripted: the demo binary with `--up`, as `make up`
//! runs it, starts (moto, the GitHub simulator and `ephemera local --stack` on 127.0.0.1);
//! then, in a shell with the environment exactly as it printed it, `ephemera pools` shows
//! the pool that runs, a job queued with `make job` runs and `ephemera jobs show` shows
//! it, `ephemera runners logs` says why its deleted runner has none, `ephemera doctor`
//! exits 0 with no failed check, a `config push` changes what runs,
//! and SIGINT (Ctrl-C) stops it all with "stopped" and exit 0. Also: the stack's own SQS
//! event source mapping, which moto runs at every SendMessage, receives the jobs queue's
//! messages until it is disabled (as `make up` and `make demo` disable it).

use super::Scratch;
use anyhow::{bail, ensure, Context};
use ephemera_tests::moto::Moto;
use ephemera_tests::pipeline::{workspace_path, APP_ID};
use ephemera_tests::stack::{create_stack, disable_queue_event_sources, template_path, StackSpec};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The demo binary with `--up`, stopped (SIGINT, then SIGKILL) if the test ends first.
struct Up {
    child: Child,
    lines: mpsc::Receiver<String>,
    /// Everything it printed so far.
    printed: Vec<String>,
}

impl Up {
    fn start(dir: &std::path::Path) -> anyhow::Result<Up> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_demo"))
            .args(["--up", "--config", "infra/config.example.yaml", "--dir"])
            .arg(dir)
            .env("EPHEMERA_BIN", assert_cmd::cargo::cargo_bin("ephemera"))
            .current_dir(workspace_path(""))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting the demo binary with --up")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        Ok(Up {
            child,
            lines,
            printed: Vec::new(),
        })
    }

    /// The lines printed until `last` (included), within `limit`.
    fn read_until(&mut self, last: &str, limit: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let done = line == last;
                    self.printed.push(line);
                    if done {
                        return Ok(());
                    }
                }
                Err(_) => bail!(
                    "`{last}` not printed within {limit:?}; printed:\n{}\nstderr:\n{}",
                    self.printed.join("\n"),
                    self.stderr_so_far()
                ),
            }
        }
    }

    fn stderr_so_far(&mut self) -> String {
        if self.child.try_wait().ok().flatten().is_none() {
            return String::from("(still running)");
        }
        let mut text = String::new();
        if let Some(mut stderr) = self.child.stderr.take() {
            let _ = stderr.read_to_string(&mut text);
        }
        text
    }

    /// The `export` lines it printed, as printed.
    fn exports(&self) -> Vec<String> {
        self.printed
            .iter()
            .filter(|line| line.starts_with("export "))
            .cloned()
            .collect()
    }

    fn interrupt(&self) -> anyhow::Result<()> {
        let status = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()?;
        ensure!(status.success(), "kill -INT failed");
        Ok(())
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.interrupt();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if self.child.try_wait().ok().flatten().is_some() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `command` in bash, after the `export` lines exactly as `make up` printed them, from
/// the workspace root (where `make job` is).
fn as_printed(exports: &[String], command: &str) -> anyhow::Result<Output> {
    let script = format!("set -e\n{}\n{command}\n", exports.join("\n"));
    let output = Command::new("bash")
        .args(["-c", &script])
        .current_dir(workspace_path(""))
        .env("NO_COLOR", "1")
        // Only what the printed environment sets: nothing of this shell's deployment.
        .env_remove("AWS_PROFILE")
        .env_remove("EPHEMERA_TABLE")
        .env_remove("EPHEMERA_QUEUE_URL")
        .env_remove("EPHEMERA_CONFIG_PARAMETER")
        .env_remove("EPHEMERA_LOG_GROUP")
        // `make job` is its own make, not a sub-make of `make test`'s.
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS")
        .env_remove("MAKELEVEL")
        .output()
        .with_context(|| format!("running {command}"))?;
    Ok(output)
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The job id `make job` printed (`queued: {"id":N,...}`).
fn queued_job(output: &Output) -> anyhow::Result<u64> {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find(|line| line.starts_with("queued: "))
        .with_context(|| format!("make job printed no job: {}", text(output)))?;
    let json = line["queued: ".len()..]
        .split("  (")
        .next()
        .context("no answer")?;
    let answer: serde_json::Value = serde_json::from_str(json)?;
    answer["id"].as_u64().context("no job id")
}

/// `ephemera jobs show JOB`, as printed, once the job completed and its instance was
/// terminated.
fn wait_job_done(exports: &[String], job: u64, limit: Duration) -> anyhow::Result<String> {
    let deadline = Instant::now() + limit;
    loop {
        let output = as_printed(exports, &format!("ephemera jobs show {job}"))?;
        let shown = text(&output);
        // The job's status completed, and its timeline's last stage stamped (a stage
        // not reached yet shows no time).
        let completed = shown
            .lines()
            .any(|line| line.starts_with("status ") && line.trim_end().ends_with("completed"));
        let terminated = shown
            .lines()
            .any(|line| line.starts_with("terminated ") && line.contains(" 20"));
        if output.status.success() && completed && terminated {
            return Ok(shown);
        }
        if Instant::now() > deadline {
            bail!("job {job} not done within {limit:?}: {shown}");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn a_newcomer_runs_make_up_queues_a_job_checks_it_with_doctor_and_stops_it() -> anyhow::Result<()> {
    let scratch = Scratch::new()?;
    let mut up = Up::start(&scratch.0)?;
    up.read_until("ephemera doctor", Duration::from_secs(180))?;
    let exports = up.exports();
    let printed = up.printed.join("\n");
    ensure!(
        exports.iter().any(|e| e.starts_with("export PATH=")),
        "{printed}"
    );
    for line in &up.printed {
        ensure!(
            !line.contains("0.0.0.0"),
            "binds beyond loopback: {printed}"
        );
    }
    ensure!(
        printed.contains("event source mapping disabled (1)"),
        "{printed}"
    );

    // The pool that runs: the stack holds the example file's pools.
    let pools = as_printed(&exports, "ephemera pools")?;
    ensure!(pools.status.success(), "{}", text(&pools));
    ensure!(text(&pools).contains("linux-x64"), "{}", text(&pools));

    // A job through the simulator, as documented.
    let queued = as_printed(&exports, "make --no-print-directory job COUNT=1 DURATION=2")?;
    ensure!(queued.status.success(), "{}", text(&queued));
    let job = queued_job(&queued)?;
    let shown = wait_job_done(&exports, job, Duration::from_secs(90))?;
    ensure!(shown.contains("linux-x64"), "{shown}");

    // Its runner's logs: deleted, on a simulated host that ships none, and said so.
    let runner = shown
        .lines()
        .find_map(|line| line.strip_prefix("runner "))
        .map(str::trim)
        .with_context(|| format!("no runner in {shown}"))?;
    let logs = as_printed(&exports, &format!("ephemera runners logs {runner}"))?;
    let said = text(&logs);
    ensure!(logs.status.code() == Some(4), "{said}\n{shown}");
    let record = text(&as_printed(
        &exports,
        &format!("ephemera runners show {runner} --json"),
    )?);
    ensure!(said.contains("it was deleted"), "{said}\n{record}");
    ensure!(said.contains("hosts ship no logs"), "{said}");
    ensure!(!said.contains("does not exist"), "{said}");

    // doctor: exit 0, no failed check, the local webhook URL checked.
    let doctor = as_printed(&exports, "ephemera doctor")?;
    let report = text(&doctor);
    ensure!(doctor.status.success(), "{report}");
    ensure!(!report.contains('✖'), "{report}");
    ensure!(
        report
            .lines()
            .any(|l| l.starts_with("✔ github.webhook_url") && l.contains("127.0.0.1")),
        "{report}"
    );
    ensure!(!report.contains("has not run yet"), "a job ran: {report}");

    // A pushed configuration is what runs next: a renamed pool takes the next job.
    let github = exports
        .iter()
        .find_map(|e| e.strip_prefix("export GITHUB_SIM="))
        .context("no GITHUB_SIM")?;
    let example = std::fs::read_to_string(workspace_path("infra/config.example.yaml"))?;
    let pushed = example
        .replace("name: linux-x64", "name: linux-pushed")
        .replace(
            "api_url: https://api.github.com",
            &format!("api_url: {github}"),
        );
    let file = scratch.write("pushed.yaml", &pushed)?;
    let push = as_printed(
        &exports,
        &format!("ephemera config push {}", file.display()),
    )?;
    ensure!(push.status.success(), "{}", text(&push));
    let log = scratch.0.join("ephemera-local.log");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&log)?.contains("configuration changed") {
        ensure!(
            Instant::now() < deadline,
            "ephemera local did not take the pushed configuration"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let queued = as_printed(&exports, "make --no-print-directory job DURATION=1")?;
    ensure!(queued.status.success(), "{}", text(&queued));
    let shown = wait_job_done(&exports, queued_job(&queued)?, Duration::from_secs(90))?;
    ensure!(shown.contains("linux-pushed"), "{shown}");

    // The log is readable: the metrics are in their own file.
    let log_text = std::fs::read_to_string(&log)?;
    ensure!(!log_text.contains("_aws"), "metric lines in the log");
    let metrics = std::fs::read_to_string(scratch.0.join("ephemera-local.metrics"))?;
    ensure!(metrics.contains("_aws"), "no metrics: {metrics}");

    // Ctrl-C: "stopped", exit 0.
    up.interrupt()?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = up.child.try_wait()? {
            break status;
        }
        ensure!(Instant::now() < deadline, "still running after SIGINT");
        std::thread::sleep(Duration::from_millis(100));
    };
    while let Ok(line) = up.lines.recv_timeout(Duration::from_secs(2)) {
        up.printed.push(line);
    }
    ensure!(status.success(), "exit {status}: {}", up.stderr_so_far());
    ensure!(
        up.printed.last().map(String::as_str) == Some("stopped"),
        "{}",
        up.printed.join("\n")
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stacks_event_source_mapping_receives_the_jobs_until_it_is_disabled(
) -> anyhow::Result<()> {
    let moto = Moto::start().await?;
    let spec = StackSpec {
        stack_name: "ephemera".into(),
        deployment: "ephemera".into(),
        app_id: APP_ID,
        github_api_url: "http://127.0.0.1:9".into(),
        webhook_secret: "s".into(),
        app_key_pem: std::fs::read_to_string(workspace_path(
            "tests/fixtures/github-app-test-key.pem",
        ))?,
        pools_config: None,
    };
    let stack = create_stack(&moto, &template_path(), &spec).await?;
    let queue_url = stack.output("QueueUrl")?.to_owned();
    let sdk = ephemera_aws::sdk_config(&ephemera_aws::AwsSettings::emulator(&moto.endpoint)).await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    // The first receive of `ephemera local` after a SendMessage: how often the message
    // was received by then.
    let receives_seen_by_local = |body: &'static str| {
        let sqs = sqs.clone();
        let queue_url = queue_url.clone();
        async move {
            sqs.send_message()
                .queue_url(&queue_url)
                .message_body(body)
                .send()
                .await?;
            let received = sqs
                .receive_message()
                .queue_url(&queue_url)
                .wait_time_seconds(2)
                .message_system_attribute_names(
                    aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount,
                )
                .send()
                .await?;
            let message = received
                .messages()
                .first()
                .context("the message was not received")?
                .clone();
            sqs.delete_message()
                .queue_url(&queue_url)
                .receipt_handle(message.receipt_handle().unwrap_or_default())
                .send()
                .await?;
            let count = message
                .attributes()
                .and_then(|a| {
                    a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount)
                })
                .context("no ApproximateReceiveCount")?
                .parse::<u32>()?;
            anyhow::Ok(count)
        }
    };
    // As template.yaml makes it, moto's mapping received the message first (and
    // invoked the function's stub, which failed): a receive towards maxReceiveCount.
    let count = receives_seen_by_local("{\"mapped\":true}").await?;
    ensure!(count == 2, "receive count {count} with the mapping enabled");
    let disabled = disable_queue_event_sources(&moto, &queue_url).await?;
    ensure!(disabled.len() == 1, "disabled {disabled:?}");
    let count = receives_seen_by_local("{\"mapped\":false}").await?;
    ensure!(
        count == 1,
        "receive count {count} with the mapping disabled"
    );
    Ok(())
}
