//! [`AppPaces`]: the registration paces of a scaler process with several GitHub Apps.
//!
//! Each App has its own buckets at GitHub, so each has its own [`RegistrationPace`]
//! (the forge over the Apps, [`crate::apps::SeveralApps`], spends them); the scaler's
//! own pace, which sends a job back to the queue until its turn, holds the Apps'
//! allowances together. Both live as long as the process: a configuration reload
//! must not refill them, or a reloaded process would burst past GitHub's minute.

use super::{settings_from_environment, RegistrationPace, GITHUB_REGISTRATIONS_PER_HOUR};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// A scaler process's paces, per App and for the Apps together.
#[derive(Debug)]
pub struct AppPaces {
    per_minute: f64,
    processes: u32,
    apps: Mutex<HashMap<u64, Arc<RegistrationPace>>>,
    together: Mutex<Option<(usize, Arc<RegistrationPace>)>>,
}

impl AppPaces {
    /// Every App allowed `per_minute` registrations a minute (and GitHub's hour),
    /// shared by `processes` scaler invocations running at once.
    pub fn new(per_minute: f64, processes: u32) -> AppPaces {
        AppPaces {
            per_minute,
            processes,
            apps: Mutex::default(),
            together: Mutex::default(),
        }
    }

    /// The paces of a scaler invocation from its environment's texts, as
    /// [`RegistrationPace::from_environment`] reads them.
    pub fn from_environment(
        per_minute: Option<&str>,
        concurrency: Option<&str>,
    ) -> Result<AppPaces, String> {
        let (per_minute, processes) = settings_from_environment(per_minute, concurrency)?;
        Ok(AppPaces::new(per_minute, processes))
    }

    /// App `app_id`'s own pace: made at the first ask, the same one after.
    pub fn app(&self, app_id: u64) -> Arc<RegistrationPace> {
        let mut apps = self.apps.lock().unwrap_or_else(PoisonError::into_inner);
        apps.entry(app_id)
            .or_insert_with(|| Arc::new(RegistrationPace::shared(self.per_minute, self.processes)))
            .clone()
    }

    /// The pace of `apps` Apps together (their allowances summed): the same one while
    /// their number stays; one App's is exactly [`RegistrationPace::shared`].
    pub fn together(&self, apps: usize) -> Arc<RegistrationPace> {
        let mut together = self.together.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, pace)) = together.as_ref().filter(|(count, _)| *count == apps) {
            return pace.clone();
        }
        let n = apps.max(1) as f64;
        let pace = Arc::new(RegistrationPace::shared_within(
            self.per_minute * n,
            GITHUB_REGISTRATIONS_PER_HOUR * n,
            self.processes,
        ));
        *together = Some((apps, pace.clone()));
        pace
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at_once(pace: &RegistrationPace) -> usize {
        (0..1000)
            .take_while(|_| pace.take(Duration::ZERO).is_ok())
            .count()
    }

    #[tokio::test(start_paused = true)]
    async fn each_app_has_its_own_pace_kept_across_asks() {
        let paces = AppPaces::new(180.0, 1);
        assert_eq!(at_once(&paces.app(42)), 165);
        assert_eq!(at_once(&paces.app(42)), 0, "the same pace, spent");
        assert_eq!(at_once(&paces.app(43)), 165, "another App's is full");
    }

    #[tokio::test(start_paused = true)]
    async fn apps_together_hold_the_sum_of_their_allowances() {
        let paces = AppPaces::new(180.0, 1);
        assert_eq!(at_once(&paces.together(1)), 165);
        assert_eq!(at_once(&paces.together(2)), 330);
        assert_eq!(
            at_once(&paces.together(2)),
            0,
            "kept while the number stays"
        );
    }
}
