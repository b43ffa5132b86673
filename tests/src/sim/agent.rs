//! The runner agent, played for every instance of the deployment.
//!
//! Each tick (bounded work) it does what a real runner instance and GitHub would do:
//! ends the jobs whose time is up (the ephemeral runner deregisters and its host powers
//! off, see [`super::power`]), notices instances that died under an online runner (a
//! busy one counts as a killed job), lets new instances pick up their JIT config from
//! the JIT table (GetItem by the instance's ARN, then an UpdateItem that removes the
//! config and stamps the read with the runner the host runs ([`super::host_runner`]), as
//! the bootstrap script does, each signed with the instance's own runner role
//! credentials), and hands queued jobs to idle runners whose
//! labels include all of the job's. Timers run on tokio time.
//!
//! A stopped pool's host (docs/design.md, "Stopped pool") is played too. Its item says
//! `prepare` and holds no config: once, after its boot delay, the host counts itself
//! prepared and powers off on the same path as a host whose runner exited, where EC2
//! applies its shutdown behaviour (`stop`, set by the scaler before it wrote the item:
//! StopInstances, which the strict layer carries through `stopping` to `stopped`). The
//! host is not taken: when the instance runs again (StartInstances after a take), it is
//! a new boot, and after its boot delay it reads its item again, now with the config
//! that replaced `prepare`, and runs its runner as any other host. A resumed host whose
//! item still says `prepare` keeps waiting for its config: it prepares only once.
//! What the bootstrap does in between (Docker up, the per-boot resume script, the credentials
//! removed) has nothing to show through the APIs and is not played.

use super::body::decode_jit_config;
use super::host_runner::{HostRunnerPlay, Tombstoned};
use super::power::Power;
use super::state::SimJob;
use super::{webhook, Shared};
use aws_sdk_dynamodb::types::AttributeValue;
use ephemera_aws::jit::{item_key, BOOTSTRAP_READ_CONDITION, JIT_CONFIG, PREPARE};
use ephemera_aws::{DynamoJitConfigs, Ec2Fleet, ResourceNames};
use ephemera_core::ports::{Fleet, Instance, InstanceState};
use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{Instant, MissedTickBehavior};

/// At most this many JIT config reads per tick, so one tick stays short.
const PICKUPS_PER_TICK: usize = 16;

/// An instance's AWS clients, with its runner role's credentials.
#[derive(Clone)]
struct HostClients {
    dynamodb: aws_sdk_dynamodb::Client,
    s3: aws_sdk_s3::Client,
}

pub struct Agent {
    shared: Arc<Shared>,
    fleet: Ec2Fleet,
    /// The emulator, where each instance's role credentials are registered.
    endpoint: String,
    /// Each instance's clients, calling as its runner role (template.yaml's RunnerRole,
    /// whose policy lets an instance read only its own JIT config and the runner copy).
    host_clients: HashMap<String, HostClients>,
    /// The JIT table, and the ARNs of the instances as their credentials carry them.
    jit: DynamoJitConfigs,
    power: Power,
    /// Instances whose JIT config was already read (or found unusable).
    taken: HashSet<String>,
    /// Instances that found `prepare` in their item and powered off for it: on a later
    /// boot they wait for their config and never power off for `prepare` again.
    prepared: HashSet<String>,
    /// When each instance not yet taken was first seen live.
    first_seen: HashMap<String, Instant>,
}

impl Agent {
    pub async fn new(shared: Arc<Shared>, endpoint: &str) -> Agent {
        let settings = ephemera_aws::AwsSettings::emulator(endpoint);
        let sdk = ephemera_aws::sdk_config(&settings).await;
        Agent {
            fleet: Ec2Fleet::new(
                aws_sdk_ec2::Client::new(&sdk),
                shared.config.deployment.clone(),
            ),
            power: Power::new(aws_sdk_ec2::Client::new(&sdk)),
            endpoint: endpoint.to_owned(),
            host_clients: HashMap::new(),
            jit: DynamoJitConfigs::new(
                aws_sdk_dynamodb::Client::new(&sdk),
                ResourceNames::for_deployment(&shared.config.deployment).jit_table,
            ),
            taken: HashSet::new(),
            prepared: HashSet::new(),
            first_seen: HashMap::new(),
            shared,
        }
    }

    pub async fn run(mut self) {
        let mut interval = tokio::time::interval(self.shared.config.agent_poll);
        interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            interval.tick().await;
            self.tick().await;
        }
    }

    async fn tick(&mut self) {
        let finished = self.shared.lock().finish_jobs(Instant::now());
        self.send("completed", &finished).await;
        match self.fleet.describe_live().await {
            Ok(instances) => {
                let killed = self.lose_dead(&instances);
                self.send("completed", &killed).await;
                self.pick_up(&instances).await;
            }
            Err(error) => tracing::warn!(error = %error, "agent cannot list instances"),
        }
        let delay = self.shared.config.pickup_delay;
        let started = self.shared.lock().assign_jobs(Instant::now(), delay);
        self.send("in_progress", &started).await;
        self.power.power_off_exited(&self.shared).await;
    }

    async fn send(&self, action: &str, jobs: &[SimJob]) {
        for job in jobs {
            webhook::deliver(&self.shared, action, job).await;
        }
    }

    /// Online runners whose instance is no longer pending or running go offline.
    fn lose_dead(&self, instances: &[Instance]) -> Vec<SimJob> {
        let live: HashSet<&str> = instances
            .iter()
            .filter(|i| is_live(i.state))
            .map(|i| i.id.as_str())
            .collect();
        let mut state = self.shared.lock();
        let dead: Vec<String> = state
            .online_instances()
            .into_iter()
            .filter(|id| !live.contains(id.as_str()))
            .collect();
        dead.iter()
            .filter_map(|id| {
                let job = state.lose_instance(id);
                if let Some(job) = &job {
                    tracing::error!(instance_id = %id, job_id = job.id, "busy runner's instance terminated");
                }
                job
            })
            .collect()
    }

    /// New live instances read their JIT config and bring their runner online.
    async fn pick_up(&mut self, instances: &[Instance]) {
        let now = Instant::now();
        let spread = self.shared.config.boot_spread;
        // A host whose image's runner is behind replaces it before it reads its config,
        // after its OS boot (a second at least: the read's stamp is to the second, and a
        // swap's start, the read less the swap, never comes before the launch on EC2).
        let swap = match self.shared.host_runner().swap_ms() {
            Some(ms) => Duration::from_millis(ms) + Duration::from_secs(1),
            None => Duration::ZERO,
        };
        let fresh: Vec<&Instance> = instances
            .iter()
            .filter(|i| is_live(i.state) && !self.taken.contains(&i.id))
            .filter(|i| {
                let seen = *self.first_seen.entry(i.id.clone()).or_insert(now);
                seen + boot_delay(&i.id, spread) + swap <= now
            })
            .take(PICKUPS_PER_TICK)
            .collect();
        for instance in fresh {
            let instance_arn = self.jit.instance_arn(&instance.id);
            let host = match self.host_client(&instance.id).await {
                Ok(host) => host,
                Err(error) => {
                    tracing::warn!(%instance_arn, error = %error, "agent has no role credentials");
                    continue;
                }
            };
            match self.read_jit_item(&host.dynamodb, &instance_arn).await {
                Ok(JitItem::Config(encoded)) => {
                    self.taken.insert(instance.id.clone());
                    self.first_seen.remove(&instance.id);
                    self.host_clients.remove(&instance.id);
                    let play = self.host_play(&host.s3, &instance_arn).await;
                    self.stamp_jit_read(&host.dynamodb, &instance_arn, &play)
                        .await;
                    self.start_runner(&instance.id, &encoded);
                }
                Ok(JitItem::Prepare) => self.power_off_prepared(&instance.id),
                // Not there yet: the bootstrap script waits for it.
                Ok(JitItem::Absent) => {}
                Err(error) => {
                    tracing::warn!(%instance_arn, error = %error, "agent cannot read JIT config")
                }
            }
        }
    }

    /// A stopped pool's host has prepared: it powers off (once), and EC2 stops it. Its
    /// next boot is seen afresh, with its boot delay again.
    fn power_off_prepared(&mut self, instance_id: &str) {
        if !self.prepared.insert(instance_id.to_owned()) {
            // Resumed, and its config not there yet: the bootstrap waits for it.
            return;
        }
        self.first_seen.remove(instance_id);
        tracing::info!(instance_id, "host prepared; powering off to be stopped");
        let mut state = self.shared.lock();
        state.counters.hosts_prepared += 1;
        state.hosts_to_power_off.push(instance_id.to_owned());
    }

    /// Brings the runner of a JIT config online; a runner that cannot start exits, and
    /// its host powers off.
    fn start_runner(&self, instance_id: &str, encoded: &str) {
        let mut state = self.shared.lock();
        let Some((runner_id, runner_name)) = decode_jit_config(encoded) else {
            tracing::warn!(
                instance_id,
                "JIT config cannot be decoded; runner does not start"
            );
            state.hosts_to_power_off.push(instance_id.to_owned());
            return;
        };
        if state.bring_online(runner_id, &runner_name, instance_id, Instant::now()) {
            tracing::info!(instance_id, runner = %runner_name, runner_id, "runner online");
        } else {
            tracing::warn!(instance_id, runner = %runner_name, "runner unknown to GitHub; it does not start");
            state.hosts_to_power_off.push(instance_id.to_owned());
        }
    }

    /// What this host reports of its runner: the test's play, with the newest runner the
    /// bucket's `runner/latest-x64` names when the play gives a bucket (bootstrap.sh's
    /// signed GET as the instance's role; an unreadable pointer leaves the play's own).
    async fn host_play(&self, s3: &aws_sdk_s3::Client, instance_arn: &str) -> HostRunnerPlay {
        let mut play = self.shared.host_runner();
        let Some(bucket) = play.bucket.clone() else {
            return play;
        };
        let read = s3
            .get_object()
            .bucket(&bucket)
            .key("runner/latest-x64")
            .send()
            .await;
        let pointer = match read {
            Ok(answer) => answer.body.collect().await.map(|b| b.into_bytes()),
            Err(error) => {
                tracing::warn!(%instance_arn, error = %error, "agent cannot read the runner copy's pointer");
                return play;
            }
        };
        let version = pointer
            .ok()
            .and_then(|bytes| HostRunnerPlay::version_of_pointer(&String::from_utf8_lossy(&bytes)));
        if let Some(version) = version {
            play.runner_version = version;
        }
        play
    }

    /// The clients of instance `instance_id`: its runner role's credentials, as IMDS
    /// hands them to the instance, registered with the strict layer once.
    async fn host_client(&mut self, instance_id: &str) -> anyhow::Result<HostClients> {
        if let Some(client) = self.host_clients.get(instance_id) {
            return Ok(client.clone());
        }
        let parameters = serde_json::json!({ "DeploymentName": self.shared.config.deployment });
        let settings = crate::moto::principal_settings(
            &self.endpoint,
            "template.yaml",
            "RunnerRole",
            parameters,
            Some(instance_id),
        )
        .await?;
        let sdk = ephemera_aws::sdk_config(&settings).await;
        let clients = HostClients {
            dynamodb: aws_sdk_dynamodb::Client::new(&sdk),
            s3: ephemera_aws::runner_bucket::s3_client(&sdk),
        };
        self.host_clients
            .insert(instance_id.to_owned(), clients.clone());
        Ok(clients)
    }

    /// DynamoDB `GetItem`, `ConsistentRead`, projection `jit_config, prepare`: the
    /// request bootstrap.sh sends with `curl --aws-sigv4`.
    async fn read_jit_item(
        &self,
        host: &aws_sdk_dynamodb::Client,
        instance_arn: &str,
    ) -> anyhow::Result<JitItem> {
        let output = host
            .get_item()
            .table_name(self.jit.table())
            .set_key(Some(item_key(instance_arn)))
            .consistent_read(true)
            .projection_expression("#config, #prepare")
            .expression_attribute_names("#config", JIT_CONFIG)
            .expression_attribute_names("#prepare", PREPARE)
            .send()
            .await?;
        let Some(mut item) = output.item else {
            return Ok(JitItem::Absent);
        };
        if let Some(AttributeValue::S(encoded)) = item.remove(JIT_CONFIG) {
            return Ok(JitItem::Config(encoded));
        }
        let prepare = matches!(item.get(PREPARE), Some(AttributeValue::Bool(true)));
        Ok(if prepare {
            JitItem::Prepare
        } else {
            JitItem::Absent
        })
    }

    /// DynamoDB `UpdateItem` `REMOVE jit_config SET jit_read_at = :now, runner_version =
    /// :v[, runner_image_version = :i][, runner_swap_ms = :w]` on the item that is there,
    /// as bootstrap.sh sends it (with `curl --aws-sigv4`, `date +%s`).
    async fn stamp_jit_read(
        &self,
        host: &aws_sdk_dynamodb::Client,
        instance_arn: &str,
        play: &HostRunnerPlay,
    ) {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let (expression, values) = play.tombstone();
        let mut update = host
            .update_item()
            .table_name(self.jit.table())
            .set_key(Some(item_key(instance_arn)))
            .update_expression(expression)
            .condition_expression(BOOTSTRAP_READ_CONDITION)
            .expression_attribute_values(":now", AttributeValue::N(now.to_string()));
        for (name, value) in values {
            let value = match value {
                Tombstoned::Text(text) => AttributeValue::S(text),
                Tombstoned::Number(n) => AttributeValue::N(n.to_string()),
            };
            update = update.expression_attribute_values(name, value);
        }
        let stamped = update.send().await;
        if let Err(error) = stamped {
            tracing::warn!(%instance_arn, error = %error, "agent cannot stamp its JIT config read");
        }
    }
}

/// What a host finds in its JIT item.
enum JitItem {
    /// Its runner's encoded JIT config.
    Config(String),
    /// No config, and `prepare`: a stopped pool's host, to prepare and power off.
    Prepare,
    /// No config yet (or only a read's tombstone): it waits.
    Absent,
}

fn is_live(state: InstanceState) -> bool {
    matches!(state, InstanceState::Pending | InstanceState::Running)
}

/// The boot time of instance `id`: a fraction of `spread` drawn from its id.
fn boot_delay(id: &str, spread: Duration) -> Duration {
    if spread.is_zero() {
        return Duration::ZERO;
    }
    let mut hasher = DefaultHasher::new();
    id.hash(&mut hasher);
    spread.mul_f64((hasher.finish() % 10_000) as f64 / 10_000.0)
}
