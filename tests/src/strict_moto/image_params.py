"""A launch template's `resolve:ssm:` image, resolved at launch as EC2 does.

EC2 takes `resolve:ssm:<parameter>` (also `:<version>`, `:<label>`, or a parameter ARN)
as a launch template's ImageId and reads the parameter at each launch, so a new AMI id
written to it reaches the next instance with no new template version (EC2 API reference,
FleetLaunchTemplateOverridesRequest ImageId; EC2 Auto Scaling guide, "Use AWS Systems
Manager parameters instead of AMI IDs in launch templates"). DescribeLaunchTemplateVersions
with ResolveAlias=true answers the AMI id the parameter holds now (ResponseLaunchTemplateData
ImageId). moto stores the string and launches an instance whose image is that string, so
without this an image stack's bake could never be seen to reach a runner.

What is modelled: CreateFleet resolves the template's image (the override that launched
names none) from moto's own SSM parameters, and ResolveAlias answers the same. What is
not: EC2's refusals (a missing parameter, a fleet of type maintain or request, a launcher
without ssm:GetParameters), whose exact errors the documentation does not give; a
parameter moto does not hold leaves the string as it was. `install()` patches moto before
the server starts."""

from moto.ec2.models.fleets import Fleet
from moto.ec2.responses.launch_templates import LaunchTemplates
from moto.ssm.models import ssm_backends

PREFIX = "resolve:ssm:"


def resolved_image(backend, image_id):
    """The AMI id `image_id` names now, or `image_id` itself when it names no parameter."""
    if not isinstance(image_id, str) or not image_id.startswith(PREFIX):
        return image_id
    ssm = ssm_backends[backend.account_id][backend.region_name]
    try:
        parameter = ssm.get_parameter(image_id[len(PREFIX):])
    except Exception:  # an unknown version: EC2 refuses; here the string stays
        parameter = None
    return parameter.value if parameter is not None else image_id


def _template_image(backend, spec):
    try:
        if "LaunchTemplateId" in spec:
            template = backend.get_launch_template(spec["LaunchTemplateId"])
        else:
            template = backend.get_launch_template_by_name(spec["LaunchTemplateName"])
        version = spec.get("Version") or "$Default"
        if version == "$Latest":
            version = template.latest_version_number
        elif version == "$Default":
            version = template.default_version_number
        return template.get_version(version).data.get("ImageId")
    except Exception:  # moto answers an unknown template or version itself
        return None


def with_resolved_images(backend, configs):
    """`configs` with each override that names no image given the template's, resolved."""
    launched = []
    for config in configs or []:
        spec = dict(config.get("LaunchTemplateSpecification") or {})
        image = _template_image(backend, spec)
        resolved = resolved_image(backend, image)
        if resolved == image:
            launched.append(config)
            continue
        overrides = [dict(o) for o in (config.get("Overrides") or [{}])]
        for override in overrides:
            override.setdefault("ImageId", resolved)
        launched.append(dict(config, Overrides=overrides))
    return launched


def install():
    fleet_init = Fleet.__init__

    def init(self, ec2_backend, fleet_id, on_demand_options, spot_options, target, configs, *rest):
        fleet_init(
            self,
            ec2_backend,
            fleet_id,
            on_demand_options,
            spot_options,
            target,
            with_resolved_images(ec2_backend, configs),
            *rest,
        )
        # DescribeFleets shows the request as it was made.
        self.launch_template_configs = configs

    Fleet.__init__ = init

    describe = LaunchTemplates.describe_launch_template_versions

    def describe_versions(self):
        answer = describe(self)
        if str(self._get_param("ResolveAlias")).lower() != "true":
            return answer
        for version in answer.result["LaunchTemplateVersions"]:
            data = dict(version["LaunchTemplateData"])
            if "ImageId" in data:
                data["ImageId"] = resolved_image(self.ec2_backend, data["ImageId"])
            version["LaunchTemplateData"] = data
        return answer

    LaunchTemplates.describe_launch_template_versions = describe_versions
