//! The [`Launcher`] port on EC2: one request per pool and batch.
//!
//! A pool with a launch template gets EC2 CreateFleet of type `instant`, offering every
//! instance type × subnet of the pool as overrides (spot with the capacity-optimized
//! strategy, or on-demand); a pool with a bare AMI gets RunInstances with a count. The
//! instances carry the deployment and pool tags; which runner owns which instance is
//! written in the runner records, so no per-instance call follows the launch.

use crate::ec2::{fleet_error, fleet_shortfall, OverrideError};
use crate::{tags, Ec2Fleet};
use async_trait::async_trait;
use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest, FleetType,
    InstanceInterruptionBehavior, InstanceMarketOptionsRequest, InstanceType, MarketType,
    ShutdownBehavior, SpotAllocationStrategy, SpotInstanceType, SpotMarketOptions,
    SpotOptionsRequest, TargetCapacitySpecificationRequest,
};
use ephemera_core::ports::{FleetError, FleetLaunch, FleetRequest, Launcher, Market};
use tracing::{instrument, warn};

/// EC2 answered a launch without saying why nothing came up.
#[derive(Debug, thiserror::Error)]
#[error("EC2 launched no instance and gave no reason")]
struct NothingLaunched;

#[async_trait]
impl Launcher for Ec2Fleet {
    #[instrument(skip_all, fields(pool = %request.pool, count = request.count, market = ?request.market))]
    async fn launch(&self, request: &FleetRequest) -> Result<FleetLaunch, FleetError> {
        let launch = match &request.launch_template {
            Some(template) => self.create_fleet(template, request).await?,
            None => self.run_instances(request).await?,
        };
        if launch.instance_ids.is_empty() {
            return Err(launch
                .shortfall
                .unwrap_or_else(|| FleetError::Transient(Box::new(NothingLaunched))));
        }
        Ok(launch)
    }
}

impl Ec2Fleet {
    async fn create_fleet(
        &self,
        template: &str,
        request: &FleetRequest,
    ) -> Result<FleetLaunch, FleetError> {
        let capacity_type = match request.market {
            Market::Spot => DefaultTargetCapacityType::Spot,
            Market::OnDemand => DefaultTargetCapacityType::OnDemand,
        };
        let target = TargetCapacitySpecificationRequest::builder()
            .total_target_capacity(i32::try_from(request.count).unwrap_or(i32::MAX))
            .default_target_capacity_type(capacity_type)
            .build();
        let config = FleetLaunchTemplateConfigRequest::builder()
            .launch_template_specification(
                FleetLaunchTemplateSpecificationRequest::builder()
                    .launch_template_name(template)
                    .version("$Default")
                    .build(),
            )
            .set_overrides(Some(overrides(request)))
            .build();
        let output = self
            .client
            .create_fleet()
            .r#type(FleetType::Instant)
            .launch_template_configs(config)
            .target_capacity_specification(target)
            .spot_options(
                SpotOptionsRequest::builder()
                    .allocation_strategy(SpotAllocationStrategy::CapacityOptimized)
                    .build(),
            )
            .tag_specifications(tags::pool_tag_specification(
                &self.deployment,
                &request.pool,
            ))
            .send()
            .await
            .map_err(fleet_error)?;
        let instance_ids: Vec<String> = output
            .instances()
            .iter()
            .flat_map(|made| made.instance_ids().iter().cloned())
            .collect();
        let errors: Vec<OverrideError> = output
            .errors()
            .iter()
            .map(|err| OverrideError {
                code: err.error_code().unwrap_or_default().to_owned(),
                message: err.error_message().unwrap_or_default().to_owned(),
            })
            .collect();
        for err in &errors {
            warn!(pool = %request.pool, code = %err.code, message = %err.message, launched = instance_ids.len(), asked = request.count, "CreateFleet override failed");
        }
        let shortfall = fleet_shortfall(&errors, instance_ids.len(), request.count as usize);
        Ok(FleetLaunch {
            instance_ids,
            shortfall,
        })
    }

    async fn run_instances(&self, request: &FleetRequest) -> Result<FleetLaunch, FleetError> {
        let count = i32::try_from(request.count).unwrap_or(i32::MAX);
        let mut call = self
            .client
            .run_instances()
            .min_count(count)
            .max_count(count)
            .set_image_id(request.ami.clone())
            .set_instance_type(
                request
                    .instance_types
                    .first()
                    .map(|t| InstanceType::from(t.as_str())),
            )
            .set_subnet_id(request.subnets.first().cloned())
            // The runner's final `shutdown` must end the instance, not stop it.
            .instance_initiated_shutdown_behavior(ShutdownBehavior::Terminate)
            .set_tag_specifications(Some(tags::pool_tag_specifications(
                &self.deployment,
                &request.pool,
            )));
        if request.market == Market::Spot {
            call = call.instance_market_options(
                InstanceMarketOptionsRequest::builder()
                    .market_type(MarketType::Spot)
                    .spot_options(
                        SpotMarketOptions::builder()
                            .spot_instance_type(SpotInstanceType::OneTime)
                            .instance_interruption_behavior(InstanceInterruptionBehavior::Terminate)
                            .build(),
                    )
                    .build(),
            );
        }
        let output = call.send().await.map_err(fleet_error)?;
        let instance_ids: Vec<String> = output
            .instances()
            .iter()
            .filter_map(|i| i.instance_id())
            .map(str::to_owned)
            .collect();
        let shortfall = (instance_ids.len() < request.count as usize)
            .then(|| FleetError::CapacityUnavailable("fewer instances than asked".to_owned()));
        Ok(FleetLaunch {
            instance_ids,
            shortfall,
        })
    }
}

/// Every instance type × subnet of the pool (types alone when it names no subnet).
fn overrides(request: &FleetRequest) -> Vec<FleetLaunchTemplateOverridesRequest> {
    let subnets: Vec<Option<&String>> = if request.subnets.is_empty() {
        vec![None]
    } else {
        request.subnets.iter().map(Some).collect()
    };
    request
        .instance_types
        .iter()
        .flat_map(|instance_type| {
            subnets.iter().map(move |subnet| {
                FleetLaunchTemplateOverridesRequest::builder()
                    .instance_type(InstanceType::from(instance_type.as_str()))
                    .set_subnet_id(subnet.cloned())
                    .build()
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_offer_every_type_in_every_subnet() {
        let request = FleetRequest {
            pool: "linux".into(),
            count: 2,
            launch_template: Some("lt".into()),
            ami: None,
            instance_types: vec!["m7i.large".into(), "m6i.large".into()],
            subnets: vec!["subnet-a".into(), "subnet-b".into(), "subnet-c".into()],
            market: Market::Spot,
        };
        let offered: Vec<(String, String)> = overrides(&request)
            .iter()
            .map(|o| {
                let t = o
                    .instance_type()
                    .map(|t| t.as_str().to_owned())
                    .unwrap_or_default();
                (t, o.subnet_id().unwrap_or_default().to_owned())
            })
            .collect();
        assert_eq!(offered.len(), 6);
        assert!(offered.contains(&("m6i.large".into(), "subnet-c".into())));
        let no_subnets = FleetRequest {
            subnets: Vec::new(),
            ..request
        };
        assert_eq!(overrides(&no_subnets).len(), 2);
    }
}
