//! [`MemoryReruns`]: the wanted re-runs in memory, keeping the DynamoDB adapter's rules
//! (one entry per workflow run, moves conditional on the state held); and
//! [`FakeWorkflowRuns`]: workflow runs as GitHub answers for them, refusing a re-run
//! with 403 while the run is in progress, and counting every re-run asked.

use super::lock;
use crate::model::{Rerun, RerunState, RunKey, RunState};
use crate::ports::{ForgeError, StoreError};
use crate::ports::{RerunStore, WorkflowRuns};
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::sync::Mutex;
use time::OffsetDateTime;

/// Entries by run.
#[derive(Default)]
pub struct MemoryReruns {
    entries: Mutex<BTreeMap<RunKey, Rerun>>,
}

impl MemoryReruns {
    pub fn new() -> MemoryReruns {
        MemoryReruns::default()
    }

    /// Every entry as it is.
    pub fn all(&self) -> Vec<Rerun> {
        lock(&self.entries).values().cloned().collect()
    }
}

#[async_trait]
impl RerunStore for MemoryReruns {
    async fn want_rerun(&self, rerun: &Rerun) -> Result<bool, StoreError> {
        let mut entries = lock(&self.entries);
        if entries.contains_key(&rerun.run) {
            return Ok(false);
        }
        entries.insert(rerun.run.clone(), rerun.clone());
        Ok(true)
    }

    async fn reruns(&self) -> Result<Vec<Rerun>, StoreError> {
        Ok(self.all())
    }

    async fn rerun_of(&self, run: &RunKey) -> Result<Option<Rerun>, StoreError> {
        Ok(lock(&self.entries).get(run).cloned())
    }

    async fn move_rerun(
        &self,
        run: &RunKey,
        from: RerunState,
        to: RerunState,
        next_check_at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let mut entries = lock(&self.entries);
        match entries.get_mut(run) {
            Some(entry) if entry.state == from => {
                entry.state = to;
                entry.next_check_at = next_check_at;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn forget_rerun(&self, run: &RunKey) -> Result<(), StoreError> {
        lock(&self.entries).remove(run);
        Ok(())
    }
}

#[derive(Default)]
struct RunsState {
    runs: BTreeMap<RunKey, RunState>,
    /// Every re-run GitHub accepted: (run, job id).
    reruns: Vec<(RunKey, u64)>,
    /// The next this many re-runs fail as a lost answer would (GitHub did re-run).
    lost_answers: u32,
    /// The next this many re-runs are refused with 403, as a run that another re-run
    /// made in progress again would be.
    refusals: u32,
}

/// Workflow runs, set by the test.
#[derive(Default)]
pub struct FakeWorkflowRuns {
    state: Mutex<RunsState>,
}

impl FakeWorkflowRuns {
    pub fn new() -> FakeWorkflowRuns {
        FakeWorkflowRuns::default()
    }

    /// Sets `run`'s state (as GitHub would after its jobs moved).
    pub fn set(&self, run: &RunKey, completed: bool, run_attempt: u32) {
        let state = RunState {
            completed,
            run_attempt,
        };
        lock(&self.state).runs.insert(run.clone(), state);
    }

    /// Every re-run accepted, in order.
    pub fn reruns(&self) -> Vec<(RunKey, u64)> {
        lock(&self.state).reruns.clone()
    }

    /// The next `count` re-runs are refused (403), whatever the run's state.
    pub fn refuse_reruns(&self, count: u32) {
        lock(&self.state).refusals = count;
    }

    /// The next `count` accepted re-runs answer with a transport failure.
    pub fn lose_answers(&self, count: u32) {
        lock(&self.state).lost_answers = count;
    }
}

#[async_trait]
impl WorkflowRuns for FakeWorkflowRuns {
    async fn run_state(
        &self,
        _installation_id: Option<u64>,
        run: &RunKey,
    ) -> Result<Option<RunState>, ForgeError> {
        Ok(lock(&self.state).runs.get(run).cloned())
    }

    async fn rerun_job(
        &self,
        _installation_id: Option<u64>,
        run: &RunKey,
        job_id: u64,
    ) -> Result<(), ForgeError> {
        let mut state = lock(&self.state);
        let refused = super::spend(&mut state.refusals);
        let Some(current) = state.runs.get_mut(run) else {
            return Err(ForgeError::Rejected {
                status: 404,
                message: "Not Found".to_owned(),
            });
        };
        if refused || !current.completed {
            return Err(ForgeError::Rejected {
                status: 403,
                message: "This workflow run cannot be rerun while it is in progress".to_owned(),
            });
        }
        current.completed = false;
        current.run_attempt += 1;
        state.reruns.push((run.clone(), job_id));
        if super::spend(&mut state.lost_answers) {
            return Err(ForgeError::Transient(Box::new(super::InjectedFailure(
                "re-run answer lost",
            ))));
        }
        Ok(())
    }
}
