//! The [`Launcher`] port on EC2: one request per pool and batch.
//!
//! Every pool gets EC2 CreateFleet of type `instant` through a launch template, offering
//! every instance type × subnet of the pool as overrides (spot with the pool's
//! allocation strategy, price-capacity-optimized unless it says otherwise, or
//! on-demand). A pool that names an `ami` launches
//! through the deployment's template with the image in every override, so its instances
//! carry the template's instance profile, security groups, metadata options and user
//! data like every other runner; and every launch has the template's root volume on the
//! root device of the image it runs, read from the image ([`crate::image`]). The image's
//! architecture, read with it, bounds the instance types offered: a sized launch offers
//! only types of it, and a launch naming an image offers only the pool's types of it,
//! since EC2 runs an image only on a type of its architecture
//! (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/finding-an-ami.html>).
//!
//! The deployment's template launches the version its stack last wrote (see
//! [`Ec2Fleet::with_stack_template_version`]), a pool's own template `$Default` or the
//! version the pool configures; CreateFleet takes a number, `$Latest` or `$Default`
//! (<https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_FleetLaunchTemplateSpecificationRequest.html>).
//! A pool with `ssm_access` names the deployment's Session Manager template, whose
//! version the stack passes apart ([`Ec2Fleet::with_ssm_template_version`]).
//! The instances carry the deployment and pool tags; which runner owns which instance is
//! written in the runner records, so no per-instance call follows the launch.

use crate::ec2::{fleet_error, fleet_shortfall, OverrideError};
use crate::image::ImageOverride;
use crate::instance_types::{matching, MAX_OVERRIDES};
use crate::{tags, Ec2Fleet};
use async_trait::async_trait;
use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, FleetBlockDeviceMappingRequest, FleetEbsBlockDeviceRequest,
    FleetLaunchTemplateConfigRequest, FleetLaunchTemplateOverridesRequest,
    FleetLaunchTemplateSpecificationRequest, FleetType, InstanceType, SpotAllocationStrategy,
    SpotOptionsRequest, TargetCapacitySpecificationRequest, VolumeType,
};
use ephemera_core::ports::{
    FleetError, FleetLaunch, FleetRequest, Launcher, Market, RootVolume, Shape, ShutdownBehaviour,
};
use tracing::{info, instrument, warn};

/// EC2 answered a launch without saying why nothing came up.
#[derive(Debug, thiserror::Error)]
#[error("EC2 launched no instance and gave no reason")]
struct NothingLaunched;

#[async_trait]
impl Launcher for Ec2Fleet {
    #[instrument(skip_all, fields(instance_id))]
    async fn start(&self, instance_id: &str) -> Result<(), FleetError> {
        let call = self.client.start_instances().instance_ids(instance_id);
        call.send().await.map(drop).map_err(crate::ec2::fleet_error)
    }

    #[instrument(skip_all, fields(instance_id, ?behaviour))]
    async fn set_shutdown_behaviour(
        &self,
        instance_id: &str,
        behaviour: ShutdownBehaviour,
    ) -> Result<(), FleetError> {
        self.modify_shutdown_behaviour(instance_id, behaviour).await
    }

    #[instrument(skip_all, fields(pool = %request.pool, count = request.count, market = ?request.market))]
    async fn launch(&self, request: &FleetRequest) -> Result<FleetLaunch, FleetError> {
        let version = self.version_name(&request.launch_template, &request.template_version);
        let image = self
            .image_override(&request.launch_template, version, request.ami.as_deref())
            .await?;
        let sized;
        let request = match &request.shape {
            Some(shape) => {
                sized = self
                    .with_matching_types(request, shape, image.architecture.as_deref())
                    .await?;
                &sized
            }
            None => match (request.ami.as_deref(), image.architecture.as_deref()) {
                (Some(ami), Some(architecture)) => {
                    sized = self.of_architecture(request, ami, architecture).await?;
                    &sized
                }
                _ => request,
            },
        };
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
    /// `request` offering the catalog's types that match `shape` ([`crate::instance_types`])
    /// instead of the pool's, as many as fit in CreateFleet's overrides with its subnets,
    /// all of the image's `architecture` when it was read: EC2 launches an image only on
    /// an instance type of its architecture.
    async fn with_matching_types(
        &self,
        request: &FleetRequest,
        shape: &Shape,
        architecture: Option<&str>,
    ) -> Result<FleetRequest, FleetError> {
        let shape = &shape_on_image(shape, request.ami.as_deref(), architecture)?;
        let catalog = self.catalog().await?;
        let limit = MAX_OVERRIDES / request.subnets.len().max(1);
        let types = matching(
            &catalog,
            shape,
            request.market,
            &request.instance_types,
            limit,
        );
        if types.is_empty() {
            return Err(FleetError::Rejected {
                code: "NoMatchingInstanceType".to_owned(),
                message: format!(
                    "no instance type matches {shape:?} for {:?}",
                    request.market
                ),
            });
        }
        info!(pool = %request.pool, types = %types.join(","), "sized launch offers these instance types");
        Ok(FleetRequest {
            instance_types: types,
            ..request.clone()
        })
    }

    /// `request` (no shape) offering only the pool's types of the `architecture` of the
    /// image `ami` it names, or refused, naming both, when none is: EC2 refuses an
    /// image on an instance type of another architecture.
    async fn of_architecture(
        &self,
        request: &FleetRequest,
        ami: &str,
        architecture: &str,
    ) -> Result<FleetRequest, FleetError> {
        let catalog = self.catalog().await?;
        let runs = |name: &String| {
            catalog
                .iter()
                .find(|info| &info.name == name)
                // A type the catalog does not know: EC2 says what is wrong with it.
                .is_none_or(|info| info.architectures.iter().any(|a| a == architecture))
        };
        let types: Vec<String> = request
            .instance_types
            .iter()
            .filter(|t| runs(t))
            .cloned()
            .collect();
        if types.is_empty() {
            return Err(FleetError::Rejected {
                code: "ImageArchitecture".to_owned(),
                message: format!(
                    "image {ami} is {architecture}, and none of pool {:?}'s instance types \
                     ({}) is: EC2 launches an image only on a type of its architecture",
                    request.pool,
                    request.instance_types.join(", ")
                ),
            });
        }
        if types.len() < request.instance_types.len() {
            warn!(pool = %request.pool, %ami, %architecture, types = %types.join(","), "offering only the pool's instance types of the image's architecture");
        }
        Ok(FleetRequest {
            instance_types: types,
            ..request.clone()
        })
    }

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
                    .version(self.version_name(&request.launch_template, &request.template_version))
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
                    .allocation_strategy(SpotAllocationStrategy::from(
                        request.spot_allocation.as_str(),
                    ))
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
        let instance_types = output
            .instances()
            .iter()
            .filter_map(|made| Some((made, made.instance_type()?.as_str().to_owned())))
            .flat_map(|(made, kind)| {
                made.instance_ids()
                    .iter()
                    .map(move |id| (id.clone(), kind.clone()))
            })
            .collect();
        Ok(FleetLaunch {
            instance_ids,
            shortfall,
            instance_types,
            root_volume: launched_root(request, image),
        })
    }
}

/// The root volume a launch gives its instances: a sized job's, else the template's
/// single mapping as the override carries it, else the image's own root snapshot's size
/// (type unknown); `None` when none of these was read.
fn launched_root(request: &FleetRequest, image: Option<&ImageOverride>) -> Option<RootVolume> {
    let template = image
        .and_then(|i| i.root.as_ref())
        .and_then(|root| root.ebs());
    let template_type = template
        .and_then(|ebs| ebs.volume_type())
        .map(|t| t.as_str().to_owned());
    if let Some(sized) = &request.root_volume {
        return Some(RootVolume {
            gib: sized.gib,
            volume_type: sized.volume_type.clone().or(template_type),
        });
    }
    let template_gib = template
        .and_then(|ebs| ebs.volume_size())
        .and_then(|gib| u32::try_from(gib).ok());
    match (template_gib, image.and_then(|i| i.root_snapshot_gib)) {
        (Some(gib), _) => Some(RootVolume {
            gib,
            volume_type: template_type,
        }),
        (None, Some(gib)) => Some(RootVolume {
            gib,
            volume_type: None,
        }),
        (None, None) => None,
    }
}

/// `shape` on the image `ami` of `architecture` (when read): the image's architecture
/// where the job names none, refused naming both where it names another.
fn shape_on_image(
    shape: &Shape,
    ami: Option<&str>,
    architecture: Option<&str>,
) -> Result<Shape, FleetError> {
    let Some(image_arch) = architecture else {
        return Ok(shape.clone());
    };
    match shape.architecture.as_deref() {
        Some(asked) if asked != image_arch => Err(FleetError::Rejected {
            code: "ImageArchitecture".to_owned(),
            message: format!(
                "the job asks {asked} instance types, but its image {} is {image_arch}: \
                 EC2 launches an image only on a type of its architecture",
                ami.unwrap_or("(the launch template's)")
            ),
        }),
        _ => Ok(Shape {
            architecture: Some(image_arch.to_owned()),
            ..shape.clone()
        }),
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
                    .set_block_device_mappings(block_devices(request, image))
                    .build()
            })
        })
        .collect()
}

/// An override's block devices: the image's ([`crate::image`]), with the root volume
/// resized (and retyped) when a sized job asks for its `disk`. CreateFleet merges an
/// override's mappings into the template's by device name
/// (<https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_FleetBlockDeviceMappingRequest.html>),
/// so the root mapping is given whole, with the template's other settings kept.
fn block_devices(
    request: &FleetRequest,
    image: Option<&ImageOverride>,
) -> Option<Vec<FleetBlockDeviceMappingRequest>> {
    let asked = request.root_volume.as_ref();
    let root = image.and_then(|i| i.root.as_ref());
    let (Some(volume), Some(root)) = (asked, root) else {
        if asked.is_some() {
            warn!(pool = %request.pool, "the template has no single root volume to resize; the disk asked is not applied");
        }
        return image
            .filter(|i| !i.block_devices.is_empty())
            .map(|i| i.block_devices.clone());
    };
    let device = root.device_name().unwrap_or_default();
    let ebs = root.ebs();
    // "If you specify a snapshot, the default is the snapshot size. You can specify a
    // volume size that is equal to or larger than the snapshot size" (EC2 API reference,
    // EbsBlockDevice VolumeSize): a disk asked below the image's own is raised to it.
    let snapshot = image.and_then(|i| i.root_snapshot_gib).unwrap_or(0);
    if volume.gib < snapshot {
        info!(pool = %request.pool, asked = volume.gib, snapshot, "the disk asked is below the image's root snapshot: raised to the snapshot's size");
    }
    let gib = volume.gib.max(snapshot);
    let resized = FleetEbsBlockDeviceRequest::builder()
        .set_encrypted(ebs.and_then(|e| e.encrypted()))
        .set_delete_on_termination(ebs.and_then(|e| e.delete_on_termination()))
        .set_kms_key_id(ebs.and_then(|e| e.kms_key_id()).map(str::to_owned))
        .set_iops(
            ebs.and_then(|e| e.iops())
                .filter(|_| volume.volume_type.is_none()),
        )
        .set_throughput(
            ebs.and_then(|e| e.throughput())
                .filter(|_| volume.volume_type.is_none()),
        )
        .volume_size(i32::try_from(gib).unwrap_or(i32::MAX))
        .set_volume_type(match &volume.volume_type {
            Some(kind) => Some(VolumeType::from(kind.as_str())),
            None => ebs.and_then(|e| e.volume_type()).cloned(),
        })
        .build();
    let mut mappings: Vec<FleetBlockDeviceMappingRequest> = image
        .map(|i| i.block_devices.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m.device_name() != Some(device))
        .collect();
    mappings.push(
        FleetBlockDeviceMappingRequest::builder()
            .device_name(device)
            .ebs(resized)
            .build(),
    );
    Some(mappings)
}

#[cfg(test)]
mod tests {
    use super::*;
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
            spot_allocation: Default::default(),
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
            spot_allocation: Default::default(),
            shape: None,
            root_volume: None,
        };
        let root = FleetBlockDeviceMappingRequest::builder()
            .device_name("/dev/sda1")
            .build();
        let image = ImageOverride {
            image_id: Some("ami-1".into()),
            block_devices: vec![root],
            root: None,
            architecture: None,
            root_snapshot_gib: None,
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

    #[test]
    fn a_sized_disk_resizes_the_root_volume_on_the_images_root_device() {
        let request = FleetRequest {
            pool: "sized".into(),
            count: 1,
            launch_template: "eph-runner".into(),
            template_version: TemplateVersion::Stack,
            ami: Some("ami-1".into()),
            instance_types: vec!["m7i.2xlarge".into()],
            subnets: Vec::new(),
            market: Market::OnDemand,
            spot_allocation: Default::default(),
            shape: None,
            root_volume: Some(ephemera_core::ports::RootVolume {
                gib: 80,
                volume_type: Some("io2".into()),
            }),
        };
        let template_volume = FleetEbsBlockDeviceRequest::builder()
            .volume_size(30)
            .volume_type(VolumeType::Gp3)
            .encrypted(true)
            .iops(3000)
            .build();
        let root = FleetBlockDeviceMappingRequest::builder()
            .device_name("/dev/sda1")
            .ebs(template_volume)
            .build();
        let removed = FleetBlockDeviceMappingRequest::builder()
            .device_name("/dev/xvda")
            .no_device("")
            .build();
        let image = ImageOverride {
            image_id: Some("ami-1".into()),
            block_devices: vec![root.clone(), removed],
            root: Some(root),
            architecture: Some("x86_64".into()),
            root_snapshot_gib: Some(8),
        };
        let offered = overrides(&request, Some(&image));
        let mappings = offered[0].block_device_mappings();
        assert_eq!(mappings.len(), 2, "{mappings:?}");
        assert!(mappings.iter().any(|m| m.no_device() == Some("")));
        let resized = mappings
            .iter()
            .find(|m| m.device_name() == Some("/dev/sda1"))
            .and_then(|m| m.ebs())
            .expect("the root volume");
        assert_eq!(resized.volume_size(), Some(80));
        assert_eq!(resized.volume_type(), Some(&VolumeType::Io2));
        assert_eq!(
            resized.encrypted(),
            Some(true),
            "the template's settings kept"
        );
        assert_eq!(resized.iops(), None, "a new type drops the old type's iops");
    }

    #[test]
    fn a_disk_below_the_images_snapshot_is_raised_to_it() {
        let root = FleetBlockDeviceMappingRequest::builder()
            .device_name("/dev/xvda")
            .ebs(
                FleetEbsBlockDeviceRequest::builder()
                    .volume_size(30)
                    .build(),
            )
            .build();
        let image = ImageOverride {
            image_id: Some("ami-1".into()),
            block_devices: Vec::new(),
            root: Some(root),
            architecture: None,
            root_snapshot_gib: Some(15),
        };
        let size = |gib: u32| {
            let request = FleetRequest {
                pool: "sized".into(),
                count: 1,
                launch_template: "eph-runner".into(),
                template_version: TemplateVersion::Stack,
                ami: Some("ami-1".into()),
                instance_types: vec!["m7i.large".into()],
                subnets: Vec::new(),
                market: Market::OnDemand,
                spot_allocation: Default::default(),
                shape: None,
                root_volume: Some(ephemera_core::ports::RootVolume {
                    gib,
                    volume_type: None,
                }),
            };
            block_devices(&request, Some(&image)).expect("mappings")[0]
                .ebs()
                .and_then(|e| e.volume_size())
        };
        assert_eq!(size(10), Some(15), "raised to the snapshot's 15 GiB");
        assert_eq!(size(80), Some(80));
    }

    #[test]
    fn a_sized_shape_takes_the_images_architecture_or_is_refused_naming_both() {
        let shape = Shape {
            vcpus_min: 2,
            vcpus_max: 8,
            ..Shape::default()
        };
        let on_arm = shape_on_image(&shape, Some("ami-1"), Some("arm64")).expect("no arch asked");
        assert_eq!(on_arm.architecture.as_deref(), Some("arm64"));
        let asks_x86 = Shape {
            architecture: Some("x86_64".into()),
            ..shape.clone()
        };
        match shape_on_image(&asks_x86, Some("ami-1"), Some("arm64")) {
            Err(FleetError::Rejected { code, message }) => {
                assert_eq!(code, "ImageArchitecture");
                assert!(
                    message.contains("x86_64") && message.contains("ami-1 is arm64"),
                    "{message}"
                );
            }
            other => panic!("not refused: {other:?}"),
        }
        assert_eq!(shape_on_image(&shape, None, None).expect("unread"), shape);
    }
}
