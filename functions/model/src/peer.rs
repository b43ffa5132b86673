//! terraform-aws-github-runner's call pattern on the same model, so the two compare on
//! one set of quotas: per batch an installation token minted, a DescribeInstances and a
//! CreateFleet; per job a queued check on GitHub, a JIT config and an SSM parameter.
//! A failed call fails its message, which SQS hands out again after the visibility
//! timeout (a new instance is launched for it then: the peer keeps no record per job).
//! Its scale-up timeout and the queue's visibility are both 30 s
//! (`runners_scale_up_lambda_timeout`, which main.tf sets the visibility to), and no
//! dead-letter queue by default (`redrive_build_queue`).
//!
//! The calls are those of its ephemeral runners (`enable_ephemeral_runners = true`, which
//! gives JIT configs): the comparable setup. Its default, non-ephemeral runners get a
//! registration token (one call too) and register with `config.sh` on the instance; a
//! later job may then run on a runner left by an earlier one, without a launch.

use crate::cloud::{Caller, Cloud};
use crate::github::{self, GENERATE_JITCONFIG, GET_JOB};
use crate::metered::{MeteredFleet, MeteredJitStore};
use crate::report::Timeline;
use crate::sqs::Stored;
use ephemera_core::memory::FakeForge;
use ephemera_core::ports::*;
use std::sync::Arc;

/// The peer's scale-up function.
pub struct PeerScaler {
    pub cloud: Arc<Cloud>,
    pub forge: Arc<FakeForge>,
    pub fleet: Arc<MeteredFleet>,
    pub jit_store: Arc<MeteredJitStore>,
    pub timeline: Arc<Timeline>,
    pub request: FleetRequest,
}

impl PeerScaler {
    /// Handles a batch; returns the ids of the messages that failed.
    pub async fn handle_batch(&self, batch: Vec<Stored>) -> Vec<String> {
        let cloud = &self.cloud;
        // The installation token, minted with the App's JWT (the App's own limit).
        cloud.count(Caller::Scaler, "GitHub", "access_tokens");
        cloud.wait(cloud.latencies.github).await;
        if self.fleet.describe().await.is_err() {
            return batch.into_iter().map(|m| m.id).collect();
        }
        let mut failed = Vec::new();
        let mut queued = Vec::new();
        for stored in batch {
            let m = &stored.message;
            let checked = github::request(cloud, Caller::Scaler, GET_JOB).await;
            let state = self
                .forge
                .job_state(m.installation_id, &m.owner, &m.repo, m.job_id)
                .await;
            match (checked, state) {
                (Ok(()), Ok(Some(ForgeJobState::Queued))) => queued.push(stored),
                (Ok(()), Ok(_)) => {}
                _ => failed.push(stored.id),
            }
        }
        if queued.is_empty() {
            return failed;
        }
        let mut request = self.request.clone();
        request.count = u32::try_from(queued.len()).unwrap_or(u32::MAX);
        let instances = match self.fleet.launch(&request).await {
            Ok(launch) => launch.instance_ids,
            Err(_) => Vec::new(),
        };
        let mut instances = instances.into_iter();
        for stored in queued {
            let Some(instance_id) = instances.next() else {
                failed.push(stored.id);
                continue;
            };
            self.timeline.launched(Some(stored.message.received_at));
            if !self.register(&stored, &instance_id).await {
                failed.push(stored.id);
            }
        }
        failed
    }

    /// A JIT config for the instance, into its SSM parameter.
    async fn register(&self, stored: &Stored, instance_id: &str) -> bool {
        if github::request(&self.cloud, Caller::Scaler, GENERATE_JITCONFIG)
            .await
            .is_err()
        {
            return false;
        }
        let scope = RunnerScope {
            installation_id: stored.message.installation_id,
            owner: stored.message.owner.clone(),
            repo: None,
        };
        let jit = JitRequest {
            name: format!("peer-{instance_id}"),
            labels: stored.message.labels.clone(),
            runner_group: "Default".to_owned(),
            work_folder: "_work".to_owned(),
        };
        let Ok(config) = self.forge.generate_jit_config(&scope, &jit).await else {
            return false;
        };
        let delivered = self.jit_store.put(instance_id, &jit.name, &config).await;
        if delivered.is_ok() {
            self.timeline.registered();
        }
        delivered.is_ok()
    }
}
