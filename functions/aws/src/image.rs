//! The root volume of every launch on its image's own root device, and the image
//! override of a pool that names an `ami` (launched through the deployment's launch
//! template: instance profile, security groups, metadata options, user data).
//!
//! A template's block device mapping names a device (`/dev/xvda` on Amazon Linux); an
//! image whose root device is another (`/dev/sda1` on Ubuntu) would get that volume as
//! an extra disk and keep its small default root. So before a launch the image it will
//! run — the pool's `ami`, or else the template's own image (the stack's `RunnerAmi`,
//! which may name an Ubuntu image as well) — is read (DescribeImages) from the template
//! version the launch uses, and when its root device is not the one the template's
//! single mapping names, the override maps that volume on the image's root device and
//! removes the template's device. CreateFleet merges an override's mappings into the
//! template's by device name: one on a device the template does not map is added, and
//! only `NoDevice` removes one
//! (<https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_FleetBlockDeviceMappingRequest.html>).
//! A template with several mappings is left as it is: which of them is the root cannot
//! be told apart safely.
//! The same read gives the image's architecture and the size of its root snapshot, which
//! bound a launch's instance types and a sized root volume ([`crate::launch`]).
//!
//! The answer is kept for [`ROOT_TTL`] per template, version and image, so a warm scaler
//! reads the two descriptions once every few minutes, not once per launch. Because the
//! template's image may be `resolve:ssm:NAME`, which EC2 reads again at every launch, an
//! answer built on the template's image names that image in the override: the launch
//! runs exactly the image whose root device was read, never one a bake wrote to the
//! parameter since (which may have another root device). A bake therefore reaches launches
//! at most [`ROOT_TTL`] after it writes the parameter, and every launch in between has
//! its volume on its own image's root device.

use crate::ec2::fleet_error;
use crate::Ec2Fleet;
use aws_sdk_ec2::types::{
    FleetBlockDeviceMappingRequest, FleetEbsBlockDeviceRequest, LaunchTemplateBlockDeviceMapping,
    LaunchTemplateEbsBlockDevice, ResponseLaunchTemplateData,
};
use ephemera_core::ports::FleetError;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::warn;

/// How long a template's and image's root device answer is reused.
pub(crate) const ROOT_TTL: Duration = Duration::from_secs(300);

/// What a CreateFleet override carries for the image a launch runs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ImageOverride {
    /// The image the launch runs: the pool's, or the template's own (resolved from its
    /// `resolve:ssm:` parameter) when its root device was read for the mappings.
    pub image_id: Option<String>,
    /// Empty when the template's mappings stay as they are.
    pub block_devices: Vec<FleetBlockDeviceMappingRequest>,
    /// The template's root volume on the image's root device, where the template has a
    /// single EBS mapping: what a sized job's `disk` resizes ([`crate::launch`]).
    pub root: Option<FleetBlockDeviceMappingRequest>,
    /// The image's architecture (`x86_64`, `arm64`), when it was read: a launch offers
    /// only instance types of it ([`crate::launch`]).
    pub architecture: Option<String>,
    /// The size of the snapshot on the image's root device, in GiB, when it was read: a
    /// root volume may not be smaller ([`crate::launch`]).
    pub root_snapshot_gib: Option<u32>,
}

/// What DescribeImages says of the image a launch runs.
#[derive(Debug, Clone, PartialEq)]
struct ImageFacts {
    root_device: String,
    architecture: Option<String>,
    root_snapshot_gib: Option<u32>,
}

/// Answers of [`Ec2Fleet::image_override`] by template, version and pool image, with
/// when they were read.
pub(crate) type RootCache = Arc<Mutex<HashMap<RootKey, (Instant, ImageOverride)>>>;

/// Template, version and pool image.
pub(crate) type RootKey = (String, String, Option<String>);

impl Ec2Fleet {
    /// The override launching `version` of `template` with the pool's `ami` (or the
    /// template's own image): two reads, that template version and the image's root
    /// device, reused for [`ROOT_TTL`].
    pub(crate) async fn image_override(
        &self,
        template: &str,
        version: &str,
        ami: Option<&str>,
    ) -> Result<ImageOverride, FleetError> {
        let key = (
            template.to_owned(),
            version.to_owned(),
            ami.map(str::to_owned),
        );
        {
            let cache = self.roots.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((read, answer)) = cache.get(&key) {
                if read.elapsed() < ROOT_TTL {
                    return Ok(answer.clone());
                }
            }
        }
        let answer = self.read_image_override(template, version, ami).await?;
        let mut cache = self.roots.lock().unwrap_or_else(|e| e.into_inner());
        cache.insert(key, (Instant::now(), answer.clone()));
        Ok(answer)
    }

    /// The image `version` of `template` names, a `resolve:ssm:` parameter resolved as
    /// it stands now (DescribeLaunchTemplateVersions with `ResolveAlias`,
    /// <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeLaunchTemplateVersions.html>);
    /// never cached, so a bake is seen at the next read.
    pub(crate) async fn template_image(
        &self,
        template: &str,
        version: &str,
    ) -> Result<Option<String>, FleetError> {
        let data = self.template_data(template, version).await?;
        Ok(data.and_then(|d| d.image_id).map(|image| image.to_owned()))
    }

    /// What `version` of `template` says, its image read as a `resolve:ssm:` parameter
    /// resolves now; `None` for a version that says nothing.
    async fn template_data(
        &self,
        template: &str,
        version: &str,
    ) -> Result<Option<ResponseLaunchTemplateData>, FleetError> {
        let versions = self
            .client
            .describe_launch_template_versions()
            .launch_template_name(template)
            .versions(version)
            // An image named `resolve:ssm:...` comes back as the AMI id it resolves to.
            .resolve_alias(true)
            .send()
            .await
            .map_err(fleet_error)?;
        Ok(versions
            .launch_template_versions
            .unwrap_or_default()
            .into_iter()
            .next()
            .and_then(|version| version.launch_template_data))
    }

    async fn read_image_override(
        &self,
        template: &str,
        version: &str,
        ami: Option<&str>,
    ) -> Result<ImageOverride, FleetError> {
        let data = self.template_data(template, version).await?;
        let data = data.as_ref();
        let mappings = data
            .map(|data| data.block_device_mappings())
            .unwrap_or_default();
        let image = match ami {
            Some(ami) => Some(ami.to_owned()),
            None => data.and_then(|d| d.image_id()).map(str::to_owned),
        };
        let unchanged = ImageOverride {
            image_id: ami.map(str::to_owned),
            block_devices: Vec::new(),
            root: None,
            architecture: None,
            root_snapshot_gib: None,
        };
        let Some(image) = image else {
            return Ok(unchanged);
        };
        let facts = match self.image_facts(&image).await {
            Ok(facts) => facts,
            // The template's own image: CreateFleet says what is wrong with it.
            Err(FleetError::Rejected { code, message }) if ami.is_none() => {
                warn!(%template, %image, %code, %message, "could not read the template image's root device; its mappings stay as they are");
                return Ok(unchanged);
            }
            Err(err) => return Err(err),
        };
        if mappings.is_empty() {
            return Ok(ImageOverride {
                architecture: facts.architecture,
                root_snapshot_gib: facts.root_snapshot_gib,
                ..unchanged
            });
        }
        let root = facts.root_device.as_str();
        Ok(ImageOverride {
            // The image whose root device the mappings are built on, named, so that a
            // parameter moved since this answer was read cannot launch another one.
            image_id: Some(image),
            block_devices: root_volume_on(root, mappings),
            root: single_volume(mappings).map(|(_, ebs)| volume_on(root, ebs)),
            architecture: facts.architecture,
            root_snapshot_gib: facts.root_snapshot_gib,
        })
    }

    /// The image's root device name (`/dev/xvda`, `/dev/sda1`), its architecture, and
    /// the size of the snapshot its root device is made from (DescribeImages
    /// `Architecture` and `BlockDeviceMappings`,
    /// <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_Image.html>).
    async fn image_facts(&self, image: &str) -> Result<ImageFacts, FleetError> {
        let images = self
            .client
            .describe_images()
            .image_ids(image)
            .send()
            .await
            .map_err(fleet_error)?;
        let found = images
            .images()
            .iter()
            .find(|found| found.image_id() == Some(image));
        let Some((found, root_device)) =
            found.and_then(|found| Some((found, found.root_device_name()?)))
        else {
            return Err(FleetError::Rejected {
                code: "InvalidAMIID.NotFound".to_owned(),
                message: format!("image {image} does not exist or has no root device"),
            });
        };
        let root_snapshot_gib = found
            .block_device_mappings()
            .iter()
            .find(|m| m.device_name() == Some(root_device))
            .and_then(|m| m.ebs()?.volume_size())
            .and_then(|gib| u32::try_from(gib).ok());
        Ok(ImageFacts {
            root_device: root_device.to_owned(),
            architecture: found.architecture().map(|a| a.as_str().to_owned()),
            root_snapshot_gib,
        })
    }
}

/// The template's single EBS mapping moved onto `root`: the volume on `root`, and
/// `NoDevice` on the template's device so that it is not added as a second disk. Empty
/// when it names `root` already, or the template has no mapping, several, or one that is
/// not an EBS volume.
fn root_volume_on(
    root: &str,
    mappings: &[LaunchTemplateBlockDeviceMapping],
) -> Vec<FleetBlockDeviceMappingRequest> {
    let Some((device, ebs)) = single_volume(mappings) else {
        return Vec::new();
    };
    if device == root {
        return Vec::new();
    }
    vec![
        volume_on(root, ebs),
        // "To omit the device from the block device mapping, specify an empty string."
        FleetBlockDeviceMappingRequest::builder()
            .device_name(device)
            .no_device("")
            .build(),
    ]
}

/// The template's only mapping, when it is an EBS volume: its device and volume.
fn single_volume(
    mappings: &[LaunchTemplateBlockDeviceMapping],
) -> Option<(&str, &LaunchTemplateEbsBlockDevice)> {
    let [only] = mappings else { return None };
    Some((only.device_name()?, only.ebs()?))
}

/// The template's volume `ebs`, as a CreateFleet mapping on `device`.
fn volume_on(device: &str, ebs: &LaunchTemplateEbsBlockDevice) -> FleetBlockDeviceMappingRequest {
    let volume = FleetEbsBlockDeviceRequest::builder()
        .set_encrypted(ebs.encrypted())
        .set_delete_on_termination(ebs.delete_on_termination())
        .set_iops(ebs.iops())
        .set_throughput(ebs.throughput())
        .set_kms_key_id(ebs.kms_key_id().map(str::to_owned))
        .set_volume_size(ebs.volume_size())
        .set_volume_type(ebs.volume_type().cloned())
        .build();
    FleetBlockDeviceMappingRequest::builder()
        .device_name(device)
        .ebs(volume)
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::types::VolumeType;

    fn mapping(device: &str, size: i32) -> LaunchTemplateBlockDeviceMapping {
        LaunchTemplateBlockDeviceMapping::builder()
            .device_name(device)
            .ebs(
                LaunchTemplateEbsBlockDevice::builder()
                    .volume_size(size)
                    .volume_type(VolumeType::Gp3)
                    .encrypted(true)
                    .delete_on_termination(true)
                    .build(),
            )
            .build()
    }

    #[test]
    fn the_templates_root_volume_moves_to_the_images_root_device() {
        let mappings = root_volume_on("/dev/sda1", &[mapping("/dev/xvda", 30)]);
        let [moved, removed] = mappings.as_slice() else {
            panic!("the root volume and the template's device removed: {mappings:?}");
        };
        assert_eq!(removed.device_name(), Some("/dev/xvda"));
        assert_eq!(
            removed.no_device(),
            Some(""),
            "only NoDevice removes a mapping"
        );
        assert!(removed.ebs().is_none());
        assert_eq!(moved.device_name(), Some("/dev/sda1"));
        let ebs = moved.ebs().expect("ebs");
        assert_eq!(ebs.volume_size(), Some(30));
        assert_eq!(ebs.volume_type(), Some(&VolumeType::Gp3));
        assert_eq!(ebs.encrypted(), Some(true));
        assert_eq!(ebs.delete_on_termination(), Some(true));
    }

    #[test]
    fn several_or_no_mappings_stay_as_the_template_has_them() {
        let two = [mapping("/dev/xvda", 30), mapping("/dev/xvdb", 100)];
        assert!(root_volume_on("/dev/sda1", &two).is_empty());
        assert!(root_volume_on("/dev/sda1", &[]).is_empty());
    }

    #[test]
    fn a_mapping_already_on_the_images_root_device_stays() {
        assert!(root_volume_on("/dev/xvda", &[mapping("/dev/xvda", 30)]).is_empty());
    }
}
