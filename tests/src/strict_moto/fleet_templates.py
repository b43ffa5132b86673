# moto's CreateFleet, launching as EC2 does from a launch template.
#
# EC2 builds every fleet instance from the launch template's data merged with the
# override that launched it: the template's instance profile, security groups, metadata
# options, shutdown behaviour and block devices (an override's ImageId and
# BlockDeviceMappings replace the template's). moto's fleet passes only the image, type,
# subnet, user data and tags on, so without this an instance launched through a template
# would show none of what the template says. The block devices follow EC2: a mapping on
# the image's root device name sets the root volume, any other adds a volume.
# `install()` patches moto's Fleet; `python -m strict_moto` calls it before the server
# starts.
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
    data.update(launch_spec.overrides or {})
    return data


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
