//! The image override of a pool that names an `ami`: launched through the deployment's
//! launch template (instance profile, security groups, metadata options, user data), with
//! the template's root volume moved onto the image's own root device.
//!
//! A template's block device mapping names a device (`/dev/xvda` on Amazon Linux); an
//! image whose root device is another (`/dev/sda1` on Ubuntu) would get that volume as
//! an extra disk and keep its small default root. So the root device name is read from
//! the image (DescribeImages), never assumed, and the template's one mapping is offered
//! on it. A template with several mappings is left as it is: which of them is the root
//! cannot be told apart safely.

use crate::ec2::fleet_error;
use crate::Ec2Fleet;
use aws_sdk_ec2::types::{
    FleetBlockDeviceMappingRequest, FleetEbsBlockDeviceRequest, LaunchTemplateBlockDeviceMapping,
};
use ephemera_core::ports::FleetError;

/// What a CreateFleet override carries for an image that replaces the template's.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ImageOverride {
    pub image_id: String,
    /// Empty when the template's mappings stay as they are.
    pub block_devices: Vec<FleetBlockDeviceMappingRequest>,
}

impl Ec2Fleet {
    /// The override launching `image` through `template` (two reads: the image's root
    /// device, the template's default version).
    pub(crate) async fn image_override(
        &self,
        template: &str,
        image: &str,
    ) -> Result<ImageOverride, FleetError> {
        let images = self
            .client
            .describe_images()
            .image_ids(image)
            .send()
            .await
            .map_err(fleet_error)?;
        let root = images
            .images()
            .iter()
            .find(|found| found.image_id() == Some(image))
            .and_then(|found| found.root_device_name())
            .ok_or_else(|| FleetError::Rejected {
                code: "InvalidAMIID.NotFound".to_owned(),
                message: format!("image {image} does not exist or has no root device"),
            })?
            .to_owned();
        let versions = self
            .client
            .describe_launch_template_versions()
            .launch_template_name(template)
            .versions("$Default")
            .send()
            .await
            .map_err(fleet_error)?;
        let mappings = versions
            .launch_template_versions()
            .first()
            .and_then(|version| version.launch_template_data())
            .map(|data| data.block_device_mappings())
            .unwrap_or_default();
        Ok(ImageOverride {
            image_id: image.to_owned(),
            block_devices: root_volume_on(&root, mappings).into_iter().collect(),
        })
    }
}

/// The template's single EBS mapping moved onto `root`; `None` when the template has no
/// mapping, several, or one that is not an EBS volume.
fn root_volume_on(
    root: &str,
    mappings: &[LaunchTemplateBlockDeviceMapping],
) -> Option<FleetBlockDeviceMappingRequest> {
    let [only] = mappings else { return None };
    let ebs = only.ebs()?;
    let volume = FleetEbsBlockDeviceRequest::builder()
        .set_encrypted(ebs.encrypted())
        .set_delete_on_termination(ebs.delete_on_termination())
        .set_iops(ebs.iops())
        .set_throughput(ebs.throughput())
        .set_kms_key_id(ebs.kms_key_id().map(str::to_owned))
        .set_volume_size(ebs.volume_size())
        .set_volume_type(ebs.volume_type().cloned())
        .build();
    Some(
        FleetBlockDeviceMappingRequest::builder()
            .device_name(root)
            .ebs(volume)
            .build(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::types::{LaunchTemplateEbsBlockDevice, VolumeType};

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
        let moved = root_volume_on("/dev/sda1", &[mapping("/dev/xvda", 30)]).expect("moved");
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
        assert!(root_volume_on("/dev/sda1", &two).is_none());
        assert!(root_volume_on("/dev/sda1", &[]).is_none());
    }
}
