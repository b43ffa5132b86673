# moto's CloudFormation stack update, reaching what reads a changed attribute.
#
# A stack update in CloudFormation updates every resource whose resolved properties
# change, so a function whose environment reads `Fn::GetAtt RunnerLaunchTemplate.
# LatestVersionNumber` is updated when an update writes a new launch template version.
# moto updates a resource only when its own JSON changed or it names a changed parameter
# with `Ref`, so such a function would keep the version of the stack's creation.
# moto already follows CloudFormation on the template itself: an update of
# AWS::EC2::LaunchTemplate adds a version and leaves the default version where it was
# (moto/ec2/models/launch_templates.py, update_from_cloudformation_json), as
# CloudFormation does: launch templates are immutable, each change is a new version
# (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/manage-launch-template-versions.html),
# and the stack can pass on either version number with Fn::GetAtt
# (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-ec2-launchtemplate.html).
# moto also looks for a changed parameter only in `Ref`, not in `${Name}` of Fn::Sub, so a
# launch template whose ImageId is `resolve:ssm:${RunnerAmi}` kept its image after an
# update of RunnerAmi; CloudFormation updates it, as every property that resolves
# differently. `install()` patches moto's ResourceMap.update and build_resource_diff;
# `python -m strict_moto` calls it.
import re

from moto.cloudformation.parsing import ResourceMap, parse_and_update_resource

_update = ResourceMap.update
_build_resource_diff = ResourceMap.build_resource_diff

_SUB_PARAMETER = re.compile(r"\$\{([A-Za-z0-9]+)\}")

_SUB_REFERENCE = re.compile(r"\$\{([A-Za-z0-9]+)\.([A-Za-z0-9.]+)\}")


def _reads(node):
    """What `node` reads: ("attribute", (logical id, attribute)) for every Fn::GetAtt and
    `${A.B}` of Fn::Sub, ("name", name) for every `${Name}` of Fn::Sub."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "Fn::GetAtt":
                if isinstance(value, list) and len(value) == 2 and isinstance(value[1], str):
                    yield "attribute", (value[0], value[1])
                elif isinstance(value, str) and "." in value:
                    yield "attribute", tuple(value.split(".", 1))
            elif key == "Fn::Sub":
                text = value[0] if isinstance(value, list) else value
                if isinstance(text, str):
                    for found in _SUB_REFERENCE.findall(text):
                        yield "attribute", found
                    for found in _SUB_PARAMETER.findall(text):
                        yield "name", found
                if isinstance(value, list):
                    yield from _reads(value[1:])
            else:
                yield from _reads(value)
    elif isinstance(node, list):
        for item in node:
            yield from _reads(item)


def _attributes_read(node):
    return {found for kind, found in _reads(node) if kind == "attribute"}


def _parameters_subbed(node):
    return {found for kind, found in _reads(node) if kind == "name"}


def _attribute(resources, logical_id, attribute):
    resource = resources._parsed_resources.get(logical_id)
    if not hasattr(resource, "get_cfn_attribute"):
        return None
    try:
        return resource.get_cfn_attribute(attribute)
    except Exception:  # noqa: BLE001 - an attribute moto cannot give is not watched
        return None


def _update_with_readers(self, template, parameters=None):
    resources = template["Resources"]
    reads = {name: _attributes_read(body) for name, body in resources.items()}
    watched = set().union(*reads.values()) if reads else set()
    seen = {key: _attribute(self, *key) for key in watched}
    _update(self, template, parameters)
    # Each round updates the readers of what changed; their own attributes may change in
    # turn (a chain is at most as long as the template).
    for _ in range(len(resources)):
        now = {key: _attribute(self, *key) for key in watched}
        changed = {key for key in watched if now[key] != seen[key]}
        if not changed:
            return
        seen = now
        for name, body in resources.items():
            if name in self._parsed_resources and reads[name] & changed:
                updated = parse_and_update_resource(
                    name,
                    body,
                    self,
                    account_id=self._account_id,
                    region_name=self._region_name,
                )
                if updated is not None:
                    self._parsed_resources[name] = updated


def _diff_with_subbed_parameters(self, other_template, parameters=None):
    actions = _build_resource_diff(self, other_template, parameters)
    if not parameters:
        return actions
    changed = {name for name in parameters if self.input_parameters.get(name) != parameters[name]}
    old = self._resource_json_map
    for name, body in other_template["Resources"].items():
        if name in old and name not in actions["Modify"] and changed & _parameters_subbed(body):
            actions["Modify"].append(name)
    return actions


def install():
    ResourceMap.update = _update_with_readers
    ResourceMap.build_resource_diff = _diff_with_subbed_parameters
