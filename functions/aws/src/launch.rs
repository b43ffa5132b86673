//! The [`Launcher`] port on EC2: one request per pool and batch.
//!
//! Every pool gets EC2 CreateFleet of type `instant` through a launch template, offering
//! every instance type × subnet of the pool as overrides (spot with the
//! capacity-optimized strategy, or on-demand). A pool that names an `ami` launches
//! through the deployment's template with the image in every override, so its instances
//! carry the template's instance profile, security groups, metadata options and user
//! data like every other runner; and every launch has the template's root volume on the
//! root device of the image it runs, read from the image ([`crate::image`]).
//!
//! The deployment's template launches the version its stack last wrote (see
//! [`Ec2Fleet::with_stack_template_version`]), a pool's own template `$Default` or the
//! version the pool configures; CreateFleet takes a number, `$Latest` or `$Default`
//! (<https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_FleetLaunchTemplateSpecificationRequest.html>).
//! The instances carry the deployment and pool tags; which runner owns which instance is
//! written in the runner records, so no per-instance call follows the launch.

use crate::ec2::{fleet_error, fleet_shortfall, OverrideError};
use crate::image::ImageOverride;
use crate::{tags, Ec2Fleet};
use async_trait::async_trait;
use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest, FleetType,
    InstanceType, SpotAllocationStrategy, SpotOptionsRequest, TargetCapacitySpecificationRequest,
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
        let version = self.version_name(&request.template_version);
        let image = self
            .image_override(&request.launch_template, version, request.ami.as_deref())
            .await?;
        let launch = self.create_fleet(request, Some(&image)).await?;
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
        request: &FleetRequest,
        image: Option<&ImageOverride>,
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
                    .launch_template_name(&request.launch_template)
                    .version(self.version_name(&request.template_version))
                    .build(),
            )
            .set_overrides(Some(overrides(request, image)))
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
}

/// Every instance type × subnet of the pool (types alone when it names no subnet), each
/// with the image that replaces the template's, if any.
fn overrides(
    request: &FleetRequest,
    image: Option<&ImageOverride>,
) -> Vec<FleetLaunchTemplateOverridesRequest> {
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
                    .set_image_id(image.and_then(|i| i.image_id.clone()))
                    .set_block_device_mappings(
                        image
                            .filter(|i| !i.block_devices.is_empty())
                            .map(|i| i.block_devices.clone()),
                    )
                    .build()
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::types::FleetBlockDeviceMappingRequest;
    use ephemera_core::ports::TemplateVersion;

    #[test]
    fn overrides_offer_every_type_in_every_subnet() {
        let request = FleetRequest {
            pool: "linux".into(),
            count: 2,
            launch_template: "lt".into(),
            template_version: TemplateVersion::Named("$Default".into()),
            ami: None,
            instance_types: vec!["m7i.large".into(), "m6i.large".into()],
            subnets: vec!["subnet-a".into(), "subnet-b".into(), "subnet-c".into()],
            market: Market::Spot,
            shape: None,
            root_volume: None,
        };
        let offered: Vec<(String, String)> = overrides(&request, None)
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
        assert_eq!(overrides(&no_subnets, None).len(), 2);
    }

    #[test]
    fn an_image_override_goes_into_every_override() {
        let request = FleetRequest {
            pool: "ubuntu".into(),
            count: 1,
            launch_template: "eph-runner".into(),
            template_version: TemplateVersion::Stack,
            ami: Some("ami-1".into()),
            instance_types: vec!["m7i.large".into(), "m6i.large".into()],
            subnets: vec!["subnet-a".into(), "subnet-b".into()],
            market: Market::OnDemand,
            shape: None,
            root_volume: None,
        };
        let root = FleetBlockDeviceMappingRequest::builder()
            .device_name("/dev/sda1")
            .build();
        let image = ImageOverride {
            image_id: Some("ami-1".into()),
            block_devices: vec![root],
        };
        let offered = overrides(&request, Some(&image));
        assert_eq!(offered.len(), 4, "every type in every subnet");
        for each in &offered {
            assert_eq!(each.image_id(), Some("ami-1"));
            assert_eq!(
                each.block_device_mappings()[0].device_name(),
                Some("/dev/sda1")
            );
        }
    }
}
