//! `orphan_instance` and `orphan_github_runner`, the orphan sweeps. An instance tagged for this deployment that no live
//! record claims is terminated (its JIT config deleted with it) once it is older than
//! `reaper.orphan_grace` (10 min by default) and was a suspect in the previous run too. A GitHub runner
//! with this deployment's name prefix, offline, is removed once a consistent read shows
//! no live record by its name — through the same DELETE as every graceful deletion, so
//! a busy one (422) is kept. Neither sweep runs on an incomplete snapshot, and neither
//! can touch what is not ours: EC2 is listed by the deployment tag, GitHub runners are
//! filtered by name prefix.

use super::decide;
use super::{Reaper, Snapshot};
use crate::handlers::error_chain;
use crate::metrics::{Dimension, Metric};
use crate::ports::*;
use std::collections::HashSet;
use time::OffsetDateTime;
use tokio::time::Instant;
use tracing::{info, warn};

/// GitHub scopes listed per run, so a deployment spread over many is swept in turns.
const SCOPES_PER_RUN: usize = 20;

impl Reaper {
    /// Terminates the orphan instances seen in this run and the last; returns how many.
    pub(super) async fn sweep_instances(
        &self,
        snapshot: &Snapshot,
        instances: &[Instance],
        now: OffsetDateTime,
    ) -> usize {
        if !snapshot.complete {
            return 0;
        }
        let suspects: HashSet<String> = decide::orphan_instances(
            instances,
            &snapshot.runners,
            now,
            self.config.reaper.orphan_grace,
        )
        .into_iter()
        .collect();
        let confirmed: Vec<String> = {
            let mut memory = self.memory();
            let confirmed = suspects
                .iter()
                .filter(|id| memory.orphan_instances.contains(*id))
                .cloned()
                .collect();
            memory.orphan_instances = suspects;
            confirmed
        };
        let mut reaped = 0;
        for instance_id in confirmed {
            if let Err(err) = self.fleet.terminate(&instance_id).await {
                warn!(rule = "orphan_instance", %instance_id, error = %error_chain(&err), "cannot terminate orphan instance; next run retries");
                continue;
            }
            if let Err(err) = self.jit_store.delete(&instance_id).await {
                warn!(rule = "orphan_instance", %instance_id, error = %error_chain(&err), "cannot delete orphan's JIT config");
            }
            self.metrics
                .record(Metric::OrphansReaped, &[(Dimension::Kind, "instance")], 1.0);
            info!(rule = "orphan_instance", %instance_id, "orphan instance terminated");
            self.memory().orphan_instances.remove(&instance_id);
            reaped += 1;
        }
        reaped
    }

    /// Removes the orphan GitHub runners of the scopes this reaper knows; returns how many.
    pub(super) async fn sweep_runners(&self, snapshot: &Snapshot, deadline: Instant) -> usize {
        if !snapshot.complete {
            return 0;
        }
        let scopes: Vec<RunnerScope> = {
            let mut known: HashSet<RunnerScope> = self.memory().scopes.clone();
            known.extend(snapshot.queued_jobs.iter().map(|job| {
                RunnerScope {
                    installation_id: job.installation_id,
                    owner: job.owner.clone(),
                    repo: (self.config.github.scope == crate::config::Scope::Repo)
                        .then(|| job.repo.clone()),
                }
            }));
            known.into_iter().take(SCOPES_PER_RUN).collect()
        };
        let mut reaped = 0;
        for scope in scopes {
            if Instant::now() >= deadline {
                break;
            }
            let listed = match self.forge.list_runners(&scope).await {
                Ok(listed) => listed,
                Err(err) => {
                    warn!(rule = "orphan_github_runner", owner = %scope.owner, error = %error_chain(&err), "cannot list GitHub runners");
                    continue;
                }
            };
            for orphan in
                decide::orphan_runners(&self.config.deployment, &listed, &snapshot.runners)
            {
                if self.remove_orphan_runner(&scope, orphan).await {
                    reaped += 1;
                }
            }
        }
        reaped
    }

    async fn remove_orphan_runner(&self, scope: &RunnerScope, orphan: &ForgeRunner) -> bool {
        // The snapshot may miss a record moving between statuses; this read may not.
        match self.store.get_runner(&orphan.name).await {
            Ok(Some(record)) if record.status.is_live() => return false,
            Ok(_) => {}
            Err(err) => {
                warn!(rule = "orphan_github_runner", runner = %orphan.name, error = %error_chain(&err), "cannot read runner record");
                return false;
            }
        }
        match self.forge.remove_runner(scope, orphan.id).await {
            Ok(RunnerRemoval::Removed) => {
                self.metrics.record(
                    Metric::OrphansReaped,
                    &[(Dimension::Kind, "github_runner")],
                    1.0,
                );
                info!(rule = "orphan_github_runner", runner = %orphan.name, runner_id = orphan.id, "orphan GitHub runner removed");
                true
            }
            Ok(RunnerRemoval::NotFound) => false,
            Ok(RunnerRemoval::Busy) => {
                info!(rule = "orphan_github_runner", runner = %orphan.name, "orphan GitHub runner is running a job; kept");
                false
            }
            Err(err) => {
                warn!(rule = "orphan_github_runner", runner = %orphan.name, error = %error_chain(&err), "cannot remove orphan GitHub runner");
                false
            }
        }
    }
}
