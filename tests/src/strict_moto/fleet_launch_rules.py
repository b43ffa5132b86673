"""CreateFleet's launches checked against the image they run, as EC2 checks them, where
moto launches anything.

Each override is taken as EC2 launches it: the launch template version's data with the
override on top, block device mappings merged by device name (fleet_templates.py), the
image the override or the template names (a template's `resolve:ssm:` image resolved,
image_params.py). Refused, each rule cited:

- an EBS volume whose size its type does not allow: gp2 and gp3 1-16,384 GiB, io1
  4-16,384, io2 4-65,536, st1 and sc1 125-16,384, standard 1-1,024 (EC2 API reference,
  LaunchTemplateEbsBlockDeviceRequest VolumeSize,
  https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_LaunchTemplateEbsBlockDeviceRequest.html):
  InvalidParameterValue;
- an io1 or io2 volume without Iops ("This parameter is required for io1 and io2
  volumes"), and Iops on gp2, st1, sc1 or standard ("not supported"), EbsBlockDevice
  Iops (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_EbsBlockDevice.html):
  InvalidParameterCombination; Throughput on any type but gp3 ("Valid only for gp3
  volumes", the same page): InvalidParameterCombination;
- an st1 or sc1 volume on the image's root device: HDD volumes "cannot be used as a boot
  volume" (Amazon EBS volume types,
  https://docs.aws.amazon.com/ebs/latest/userguide/ebs-volume-types.html):
  InvalidBlockDeviceMapping;
- a root volume smaller than the image's root snapshot ("You can specify a volume size
  that is equal to or larger than the snapshot size", EbsBlockDevice VolumeSize):
  InvalidBlockDeviceMapping, "Volume of size 4GB is smaller than snapshot 'snap-…',
  expect size >= 15GB" (moto's images all have a 15 GiB root snapshot);
- an instance type whose architectures do not include the image's (EC2 "Find an AMI that
  meets the requirements for your EC2 instance": an AMI is for one architecture, and
  RunInstances refuses another with InvalidParameterValue "The architecture 'arm64' of
  the specified instance type does not match the architecture 'x86_64' of the specified
  AMI", https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/finding-an-ami.html).

EC2 may report some of these per override in an instant fleet's Errors; the layer refuses
the whole request, which is stricter, and says which override broke which rule. A volume
type given nowhere is the image's root snapshot's type on the root device (moto's:
standard) and gp2 elsewhere. Each refusal is counted as `ec2_fleet_launch_rules`.
`install()` wraps moto's CreateFleet response; call it after `fleet_requirements.install()`."""

from .core import STATE
from .fleet_templates import _merged_mappings
from .image_params import resolved_image

# (least, most) GiB by volume type.
SIZES = {
    "gp2": (1, 16384),
    "gp3": (1, 16384),
    "io1": (4, 16384),
    "io2": (4, 65536),
    "st1": (125, 16384),
    "sc1": (125, 16384),
    "standard": (1, 1024),
}
NEEDS_IOPS = ("io1", "io2")
NO_IOPS = ("gp2", "st1", "sc1", "standard")
HDD = ("st1", "sc1")


def _template_data(backend, spec):
    """The launch template version's data the override builds on ({} when unknown)."""
    try:
        if "LaunchTemplateId" in spec:
            template = backend.get_launch_template(spec["LaunchTemplateId"])
        else:
            template = backend.get_launch_template_by_name(spec["LaunchTemplateName"])
        return dict(template.get_version(spec.get("Version") or "$Default").data)
    except Exception:  # moto answers an unknown template or version itself
        return {}


def _image(backend, image_id):
    try:
        found = backend.describe_images(ami_ids=[image_id])
    except Exception:  # moto answers an unknown image itself
        return None
    return found[0] if found else None


def _number(value):
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return None


def volume_problem(mapping, image):
    """(code, message) of what EC2 refuses in one block device mapping, or None."""
    ebs = mapping.get("Ebs")
    if not isinstance(ebs, dict) or "NoDevice" in mapping:
        return None
    device = mapping.get("DeviceName")
    root = image is not None and device == image.root_device_name
    snapshot = image.block_device_mappings[0]["Ebs"] if root else {}
    kind = ebs.get("VolumeType") or snapshot.get("VolumeType") or "gp2"
    size = _number(ebs.get("VolumeSize") or snapshot.get("VolumeSize"))
    if kind in SIZES and size is not None:
        least, most = SIZES[kind]
        if not least <= size <= most:
            return (
                "InvalidParameterValue",
                f"Volume of {size}GiB on {device}: a {kind} volume must be from {least} to {most} GiB",
            )
    if kind in NEEDS_IOPS and ebs.get("Iops") is None:
        return ("InvalidParameterCombination", f"The parameter iops must be specified for {kind} volumes.")
    if kind in NO_IOPS and ebs.get("Iops") is not None:
        return ("InvalidParameterCombination", f"The parameter iops is not supported for {kind} volumes.")
    if kind != "gp3" and ebs.get("Throughput") is not None:
        return ("InvalidParameterCombination", f"The parameter throughput is not supported for {kind} volumes.")
    if root and kind in HDD:
        return ("InvalidBlockDeviceMapping", f"Volume type {kind} on {device} cannot be a boot volume.")
    least = _number(snapshot.get("VolumeSize"))
    if root and size is not None and least is not None and size < least:
        return (
            "InvalidBlockDeviceMapping",
            f"Volume of size {size}GB is smaller than snapshot '{snapshot.get('SnapshotId')}', "
            f"expect size >= {least}GB",
        )
    return None


def architecture_problem(instance_type, image):
    """(code, message) when `instance_type` cannot run `image`'s architecture, or None."""
    from moto.ec2.models.instance_types import INSTANCE_TYPES

    info = INSTANCE_TYPES.get(instance_type) or {}
    supported = (info.get("ProcessorInfo") or {}).get("SupportedArchitectures") or []
    if image is None or not supported or image.architecture in supported:
        return None
    return (
        "InvalidParameterValue",
        f"The architecture '{supported[0]}' of the specified instance type does not match the "
        f"architecture '{image.architecture}' of the specified AMI. Specify an instance type "
        "and an AMI that have matching architectures, and try again.",
    )


def problem(backend, configs):
    """(code, message) of the first launch EC2 refuses among `configs`' overrides, or None."""
    for config in configs or []:
        data = _template_data(backend, dict(config.get("LaunchTemplateSpecification") or {}))
        for override in config.get("Overrides") or [{}]:
            image_id = resolved_image(backend, override.get("ImageId") or data.get("ImageId"))
            image = _image(backend, image_id) if image_id else None
            mappings = data.get("BlockDeviceMappings") or []
            if override.get("BlockDeviceMappings"):
                mappings = _merged_mappings(mappings, override["BlockDeviceMappings"])
            for mapping in mappings:
                found = volume_problem(mapping, image)
                if found:
                    return found
            instance_type = override.get("InstanceType") or data.get("InstanceType")
            found = architecture_problem(instance_type, image) if instance_type else None
            if found:
                return found
    return None


def install():
    from moto.ec2.exceptions import EC2ClientError
    from moto.ec2.responses.fleets import Fleets

    create_fleet = Fleets.create_fleet

    def checked(self):
        if STATE.setting("enabled"):
            found = problem(self.ec2_backend, self._get_param("LaunchTemplateConfigs", []))
            if found:
                STATE.count("ec2_fleet_launch_rules")
                STATE.write_log(f"strict: CreateFleet refused: {found[0]}: {found[1]}")
                raise EC2ClientError(*found)
        return create_fleet(self)

    Fleets.create_fleet = checked
