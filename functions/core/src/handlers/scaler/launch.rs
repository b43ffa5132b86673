//! Launch: the runners of one pool that need an instance get one EC2 request together
//! (spot first when the pool asks for it, then on-demand for what spot could not give),
//! and each runner records its instance; a runner left without one fails.

use super::rerun::forced_market;
use super::{Handled, Scaler, ScalerError};
use crate::clock::Clock;
use crate::config::PoolConfig;
use crate::handlers::error_chain;
use crate::metrics::{Dimension, Metric};
use crate::model::RunnerRecord;
use crate::ports::*;
use crate::sizing::launch::{first_market, sized_fleet_request};
use crate::sizing::SizingRequest;
use tracing::{info, warn};

/// The `Reason` dimension of a launch failure.
fn failure_reason(err: &FleetError) -> &'static str {
    match err {
        FleetError::CapacityUnavailable(_) => "capacity",
        FleetError::Throttled(_) => "throttled",
        FleetError::Rejected { .. } => "rejected",
        FleetError::Transient(_) => "transient",
    }
}

/// Instances for `count` runners of `pool` in `deployment`: the pool's market first, and
/// on-demand for whatever spot had no capacity for. A pool with an `ami` launches through
/// the deployment's launch template (its instance profile, security groups, metadata
/// options and user data) with the image overridden; a pool with `ssm_access` through
/// the deployment's Session Manager template ([`PoolConfig::launch_template_name`]).
pub fn fleet_request(
    deployment: &str,
    pool: &PoolConfig,
    count: u32,
    market: Market,
) -> FleetRequest {
    FleetRequest {
        pool: pool.name.clone(),
        count,
        launch_template: pool.launch_template_name(deployment),
        template_version: pool.template_version(deployment),
        ami: pool.ami.clone(),
        instance_types: pool.instance_types.clone(),
        subnets: pool.subnets.clone(),
        market,
        spot_allocation: pool.spot_allocation_strategy,
        shape: None,
        root_volume: None,
    }
}

/// One instance a launch made, with what the runner record keeps of it.
struct Launched {
    id: String,
    instance_type: Option<String>,
    market: Market,
    root_volume: Option<RootVolume>,
}

impl Launched {
    fn all(launch: FleetLaunch, market: Market) -> Vec<Launched> {
        let FleetLaunch {
            instance_ids,
            instance_types,
            root_volume,
            ..
        } = launch;
        instance_ids
            .into_iter()
            .map(|id| Launched {
                instance_type: instance_types.get(&id).cloned(),
                id,
                market,
                root_volume: root_volume.clone(),
            })
            .collect()
    }
}

/// The sizing request a runner was launched for: its registered labels carry the job's
/// sizing labels ([`super::claim`]), in a pool that accepts them.
fn sizing_of(pool: &PoolConfig, runner: &RunnerRecord) -> Option<SizingRequest> {
    if !pool.sizing.accept {
        return None;
    }
    SizingRequest::from_labels(&runner.labels).ok().flatten()
}

/// Whether spot may fall back to on-demand: always for an unsized job; for a sized one
/// only where the pool's `sizing.spot` allows on-demand (`false`).
fn on_demand_allowed(pool: &PoolConfig, sizing: Option<&SizingRequest>) -> bool {
    sizing.is_none() || pool.sizing.spot.contains(&false)
}

/// What one EC2 request is for: the size its runners ask (none for the unsized), and the
/// market their records name before launch (a re-run's on-demand), if any.
type GroupKey = (Option<SizingRequest>, Option<Market>);

/// The runners of one launch, grouped by [`GroupKey`]: one EC2 request per group.
type Groups = Vec<(GroupKey, Vec<(String, RunnerRecord)>)>;

fn by_size(pool: &PoolConfig, runners: Vec<(String, RunnerRecord)>) -> Groups {
    let mut groups: Groups = Vec::new();
    for (message_id, runner) in runners {
        let key = (sizing_of(pool, &runner), forced_market(&runner));
        match groups.iter_mut().find(|(held, _)| *held == key) {
            Some((_, group)) => group.push((message_id, runner)),
            None => groups.push((key, vec![(message_id, runner)])),
        }
    }
    groups
}

impl Scaler {
    /// Launches instances for the runners of one pool in one request (plus one on-demand
    /// request if spot fell short), records each runner's instance, and fails the
    /// runners left without one. Returns the runners to finish and the failed outcomes.
    pub(super) async fn launch_pool(
        &self,
        pool_name: &str,
        runners: Vec<(String, RunnerRecord)>,
        clock: &Clock,
    ) -> (
        Vec<(String, RunnerRecord)>,
        Vec<(String, Result<Handled, ScalerError>)>,
    ) {
        let Ok(pool) = self.pool(pool_name) else {
            let failed = runners
                .into_iter()
                .map(|(id, _)| (id, Err(ScalerError::UnknownPool(pool_name.to_owned()))))
                .collect();
            return (Vec::new(), failed);
        };
        let mut launched = Vec::new();
        let mut failed = Vec::new();
        for ((sizing, forced), group) in by_size(pool, runners) {
            let (up, down) = self
                .launch_group(pool, (sizing.as_ref(), forced), group, clock)
                .await;
            launched.extend(up);
            failed.extend(down);
        }
        (launched, failed)
    }

    /// Launches one request (plus the on-demand fallback) for runners of one size and
    /// forced market.
    async fn launch_group(
        &self,
        pool: &PoolConfig,
        (sizing, forced): (Option<&SizingRequest>, Option<Market>),
        runners: Vec<(String, RunnerRecord)>,
        clock: &Clock,
    ) -> (
        Vec<(String, RunnerRecord)>,
        Vec<(String, Result<Handled, ScalerError>)>,
    ) {
        let count = u32::try_from(runners.len()).unwrap_or(u32::MAX);
        let (made, shortfall) = self
            .launch_with_fallback(pool, (sizing, forced), count, clock)
            .await;
        let by_pool = [(Dimension::Pool, pool.name.as_str())];
        self.metrics
            .record(Metric::RunnersLaunched, &by_pool, made.len() as f64);
        let missing = runners.len().saturating_sub(made.len());
        if missing > 0 {
            let reason = shortfall.as_ref().map_or("fewer_instances", failure_reason);
            self.metrics.record(
                Metric::LaunchFailures,
                &[
                    (Dimension::Pool, pool.name.as_str()),
                    (Dimension::Reason, reason),
                ],
                missing as f64,
            );
        }
        let mut launched = Vec::new();
        let mut failed = Vec::new();
        let mut instances = made.into_iter();
        for (message_id, runner) in runners {
            let Some(Launched {
                id: instance_id,
                instance_type,
                market,
                root_volume,
            }) = instances.next()
            else {
                let cause: Cause = match &shortfall {
                    Some(err) => error_chain(err).into(),
                    None => "EC2 launched fewer instances than asked".into(),
                };
                let outcome = match self.fail(&runner, cause, clock).await {
                    Err(ScalerError::Creation { runner, cause })
                        if matches!(shortfall, Some(FleetError::Throttled(_))) =>
                    {
                        Err(ScalerError::LaunchThrottled { runner, cause })
                    }
                    outcome => outcome,
                };
                failed.push((message_id, outcome));
                continue;
            };
            // Only if no other delivery recorded an instance first: if one did, this
            // instance stays unrecorded (it never gets a JIT config) and the orphan sweep
            // ends it. Other changes to the record meanwhile (its job handed over, say)
            // do not matter.
            let update = RunnerUpdate {
                instance_id: Some(instance_id.clone()),
                expect_instance: Some(None),
                instance_type,
                market: Some(market),
                root_volume,
                ..RunnerUpdate::default()
            };
            match self
                .store
                .update_runner(&runner.name, &update, clock.now())
                .await
            {
                Ok(runner) => {
                    if let Some(queued_at) = runner.job_queued_at {
                        self.metrics.record_duration(
                            Metric::QueuedToLaunched,
                            &by_pool,
                            clock.now() - queued_at,
                        );
                    }
                    info!(runner = %runner.name, %instance_id, pool = %pool.name, "instance launched");
                    launched.push((message_id, runner));
                }
                // The instance has no record now: the reaper's orphan sweep ends it.
                Err(err) => failed.push((message_id, Err(err.into()))),
            }
        }
        (launched, failed)
    }

    /// The request for `count` runners of `pool` in `market`, sized as `sizing` asks.
    fn request_for(
        &self,
        pool: &PoolConfig,
        sizing: Option<&SizingRequest>,
        count: u32,
        market: Market,
    ) -> Result<FleetRequest, FleetError> {
        let base = fleet_request(&self.config.deployment, pool, count, market);
        match sizing {
            None => Ok(base),
            Some(sizing) => {
                sized_fleet_request(base, pool, sizing).map_err(|err| FleetError::Rejected {
                    code: "SizedLaunch".to_owned(),
                    message: err.to_string(),
                })
            }
        }
    }

    /// Whether the pool's spot circuit breaker is open now. A breaker that cannot be
    /// read is taken as closed: spot, with its on-demand fallback, as without one.
    async fn spot_paused(&self, pool: &PoolConfig, clock: &Clock) -> bool {
        let Some(breakers) = &self.breakers else {
            return false;
        };
        match breakers.breaker_state(&pool.name).await {
            Ok(state) if state.paused(clock.now()) => {
                info!(pool = %pool.name, until = ?state.paused_until, "spot circuit breaker open: launching on-demand");
                true
            }
            Ok(_) => false,
            Err(err) => {
                warn!(pool = %pool.name, error = %err, "cannot read the spot circuit breaker; launching spot");
                false
            }
        }
    }

    async fn launch_with_fallback(
        &self,
        pool: &PoolConfig,
        (sizing, forced): (Option<&SizingRequest>, Option<Market>),
        count: u32,
        clock: &Clock,
    ) -> (Vec<Launched>, Option<FleetError>) {
        let mut market = match (forced, sizing) {
            (Some(market), _) => market,
            (None, Some(sizing)) => first_market(pool, sizing),
            (None, None) if pool.spot => Market::Spot,
            (None, None) => Market::OnDemand,
        };
        if market == Market::Spot
            && on_demand_allowed(pool, sizing)
            && self.spot_paused(pool, clock).await
        {
            market = Market::OnDemand;
        }
        let first = match self.request_for(pool, sizing, count, market) {
            Ok(request) => self.launcher.launch(&request).await,
            Err(err) => Err(err),
        };
        let (mut ids, shortfall) = match first {
            Ok(mut launch) => {
                let shortfall = launch.shortfall.take();
                (Launched::all(launch, market), shortfall)
            }
            Err(err) => (Vec::new(), Some(err)),
        };
        let missing = count.saturating_sub(u32::try_from(ids.len()).unwrap_or(u32::MAX));
        match shortfall {
            Some(FleetError::CapacityUnavailable(code))
                if market == Market::Spot && missing > 0 && on_demand_allowed(pool, sizing) =>
            {
                warn!(pool = %pool.name, missing, code = %code, "spot capacity unavailable; falling back to on-demand");
                self.metrics.record(
                    Metric::SpotFallbacks,
                    &[(Dimension::Pool, pool.name.as_str())],
                    f64::from(missing),
                );
                let fallback = match self.request_for(pool, sizing, missing, Market::OnDemand) {
                    Ok(request) => self.launcher.launch(&request).await,
                    Err(err) => Err(err),
                };
                match fallback {
                    Ok(mut launch) => {
                        let shortfall = launch.shortfall.take();
                        ids.extend(Launched::all(launch, Market::OnDemand));
                        (ids, shortfall)
                    }
                    Err(err) => (ids, Some(err)),
                }
            }
            other => (ids, other),
        }
    }
}
