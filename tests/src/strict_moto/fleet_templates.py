# moto's CreateFleet, launching as EC2 does from a launch template.
#
# EC2 builds every fleet instance from the launch template's data merged with the
# override that launched it: the template's instance profile, security groups, metadata
# options, shutdown behaviour and block devices (an override's ImageId replaces the
# template's). moto's fleet passes only the image, type, subnet, user data and tags on,
# so without this an instance launched through a template would show none of what the
# template says. The block devices follow EC2's FleetBlockDeviceMappingRequest
# (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_FleetBlockDeviceMappingRequest.html):
# an override's mapping on a device name the template maps changes only the parameters it
# gives; one on another device name adds a mapping; `NoDevice` removes the device, whatever
# its value. Then, as EC2 launches: a mapping on the image's root device name sets the root
# volume, any other adds a volume.
# `install()` patches moto's Fleet; `python -m strict_moto` calls it before the server
# starts.
import copy

from moto.ec2.models.fleets import Fleet
from moto.ec2.models.instances import MetadataOptions

_fleet_init = Fleet.__init__


def _launched(fleet):
    """(instance, launch spec) of every instance the fleet launched."""
    for item in fleet.on_demand_instances:
        yield item["instance"], item.get("launch_spec")
    for request in fleet.spot_requests:
        if getattr(request, "instance", None) is not None:
            yield request.instance, request.launch_spec


def _merged_data(backend, launch_spec):
    """The template version's data with the override on top, as EC2 merges them."""
    spec = launch_spec.launch_template_spec or {}
    template = backend.get_launch_template(spec["LaunchTemplateId"])
    data = dict(template.get_version(spec.get("Version", "$Default")).data)
    overrides = dict(launch_spec.overrides or {})
    mappings = overrides.pop("BlockDeviceMappings", None)
    data.update(overrides)
    if mappings:
        data["BlockDeviceMappings"] = _merged_mappings(data.get("BlockDeviceMappings") or [], mappings)
    return data


def _merged_mappings(template_mappings, override_mappings):
    """The template's block device mappings with an override's on top, by device name."""
    merged = {m.get("DeviceName"): copy.deepcopy(m) for m in template_mappings}
    for mapping in override_mappings:
        device = mapping.get("DeviceName")
        if "NoDevice" in mapping:
            merged.pop(device, None)
        elif device in merged:
            base = merged[device]
            for key, value in mapping.items():
                if key == "Ebs" and isinstance(base.get("Ebs"), dict):
                    base["Ebs"] = {**base["Ebs"], **value}
                else:
                    base[key] = value
        else:
            merged[device] = copy.deepcopy(mapping)
    return list(merged.values())


def _tags_of(backend, resource_id):
    tags = backend.describe_tags(filters={"resource-id": [resource_id]})
    return {t.get("key", t.get("Key")): t.get("value", t.get("Value")) for t in tags}


def _apply_block_devices(backend, instance, mappings):
    """The launch's tags stay on the volumes that replace moto's default root."""
    root = instance.root_device_name
    tags = {}
    if any(m.get("DeviceName") == root for m in mappings):
        for device in list(instance.block_device_mapping.keys()):
            volume_id = instance.block_device_mapping[device].volume_id
            tags.update(_tags_of(backend, volume_id))
            backend.detach_volume(volume_id, instance.id, device)
            backend.delete_volume(volume_id)
    for mapping in mappings:
        ebs = mapping.get("Ebs")
        if ebs is None or mapping.get("NoDevice") is not None:
            continue
        instance.add_block_device(
            int(ebs.get("VolumeSize", 8)),
            mapping["DeviceName"],
            ebs.get("SnapshotId"),
            str(ebs.get("Encrypted", False)).lower() == "true",
            str(ebs.get("DeleteOnTermination", True)).lower() == "true",
            ebs.get("KmsKeyId"),
            ebs.get("VolumeType"),
        )
        if tags:
            volume_id = instance.block_device_mapping[mapping["DeviceName"]].volume_id
            backend.create_tags([volume_id], tags)


def _apply(backend, instance, data):
    profile = data.get("IamInstanceProfile") or {}
    if profile:
        backend.associate_iam_instance_profile(
            instance_id=instance.id,
            iam_instance_profile_name=profile.get("Name"),
            iam_instance_profile_arn=profile.get("Arn"),
        )
    groups = [backend.get_security_group_from_id(g) for g in data.get("SecurityGroupIds") or []]
    if groups:
        instance.security_groups = [g for g in groups if g is not None]
    if data.get("MetadataOptions"):
        instance.metadata_options = MetadataOptions(data["MetadataOptions"])
    if data.get("InstanceInitiatedShutdownBehavior"):
        instance.instance_initiated_shutdown_behavior = data["InstanceInitiatedShutdownBehavior"]
    if data.get("BlockDeviceMappings"):
        _apply_block_devices(backend, instance, data["BlockDeviceMappings"])


def _fleet_init_from_templates(self, *args, **kwargs):
    _fleet_init(self, *args, **kwargs)
    for instance, launch_spec in _launched(self):
        if launch_spec is not None and launch_spec.launch_template_spec:
            _apply(self.ec2_backend, instance, _merged_data(self.ec2_backend, launch_spec))


def install():
    Fleet.__init__ = _fleet_init_from_templates
