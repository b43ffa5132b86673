"""EC2 CreateFleet (Type=instant) partial fulfilment, as a fault tests switch on.

With `ec2_create_fleet_fault` = {"launch_at_most": N, "unsupported_subnet": "subnet-…"}
an instant fleet launches at most N of the instances asked for, and answers one error
per override that did not launch: `Unsupported` for an override in the unsupported
subnet, `InsufficientInstanceCapacity` for the others, next to the instances it did
launch. The answer is serialised by moto from EC2's own service model, so its
errorSet/fleetInstanceSet shape is EC2's."""

from .core import STATE

UNSUPPORTED = (
    "Your requested instance type ({type}) is not supported in your requested "
    "Availability Zone ({zone}). Please retry your request by not specifying an "
    "Availability Zone or choosing another one."
)
INSUFFICIENT = (
    "We currently do not have sufficient {type} capacity in the Availability Zone you "
    "requested ({zone}). Our system will be working on provisioning additional capacity. "
    "You can currently get {type} capacity by not specifying an Availability Zone in "
    "your request or choosing a different Availability Zone."
)


def zone_of(backend, subnet_id):
    try:
        return backend.get_subnet(subnet_id).availability_zone
    except Exception:  # no subnet in the override: EC2 picks the zone
        return backend.region_name + "a"


def resolved(backend, spec):
    """The template as EC2 names it in an answer: its id, name and version number."""
    try:
        if "LaunchTemplateId" in spec:
            template = backend.get_launch_template(spec["LaunchTemplateId"])
        else:
            template = backend.get_launch_template_by_name(spec["LaunchTemplateName"])
    except Exception:  # moto has answered (or will answer) the unknown template itself
        return spec
    version = spec.get("Version") or "$Default"
    if version == "$Latest":
        version = template.latest_version_number
    elif version == "$Default":
        version = template.default_version_number
    return {"LaunchTemplateId": template.id, "LaunchTemplateName": template.name, "Version": str(version)}


def failed_overrides(backend, configs, fault, lifecycle, launched):
    """One error per override that did not launch (the first usable one launched)."""
    errors = []
    credited = launched == 0
    for config in configs:
        spec = resolved(backend, dict(config.get("LaunchTemplateSpecification") or {}))
        for override in config.get("Overrides") or [{}]:
            subnet = override.get("SubnetId")
            unsupported = subnet is not None and subnet == fault.get("unsupported_subnet")
            if not unsupported and not credited:
                credited = True
                continue
            words = {"type": override.get("InstanceType", "the instance type"), "zone": zone_of(backend, subnet)}
            errors.append(
                {
                    "LaunchTemplateAndOverrides": {"LaunchTemplateSpecification": spec, "Overrides": override},
                    "Lifecycle": lifecycle,
                    "ErrorCode": "Unsupported" if unsupported else "InsufficientInstanceCapacity",
                    "ErrorMessage": (UNSUPPORTED if unsupported else INSUFFICIENT).format(**words),
                }
            )
    return errors


def capped(target, most):
    """The target capacity with its total (and its parts) no more than `most`."""
    total = int(target.get("TotalTargetCapacity") or 0)
    capped_target = dict(target)
    capped_target["TotalTargetCapacity"] = min(total, most)
    for part in ("OnDemandTargetCapacity", "SpotTargetCapacity"):
        if part in target:
            capped_target[part] = min(int(target[part] or 0), most)
    return capped_target, total


def install():
    """Wraps moto's CreateFleet answer with the fault, when the fault is on."""
    from moto.core.responses import ActionResult
    from moto.ec2.responses.fleets import Fleets

    original = Fleets.create_fleet

    def create_fleet(self):
        fault = STATE.setting("ec2_create_fleet_fault")
        fleet_type = self._get_param("Type", if_none="maintain")
        if not STATE.setting("enabled") or not fault or fleet_type != "instant":
            return original(self)
        target, asked = capped(
            self._get_param("TargetCapacitySpecification", {}), int(fault.get("launch_at_most", 0))
        )
        configs = self._get_param("LaunchTemplateConfigs", [])
        fleet = self.ec2_backend.create_fleet(
            on_demand_options=self._get_param("OnDemandOptions", {}),
            spot_options=self._get_param("SpotOptions", {}),
            target_capacity_specification=target,
            launch_template_configs=configs,
            excess_capacity_termination_policy=self._get_param("ExcessCapacityTerminationPolicy"),
            replace_unhealthy_instances=self._get_param("ReplaceUnhealthyInstances"),
            terminate_instances_with_expiration=self._get_param("TerminateInstancesWithExpiration", if_none=True),
            fleet_type=fleet_type,
            valid_from=self._get_param("ValidFrom"),
            valid_until=self._get_param("ValidUntil"),
            tag_specifications=self._get_param("TagSpecifications", []),
        )
        result = {"FleetId": fleet.id, "Instances": fleet.instances or []}
        launched = sum(len(group.get("InstanceIds") or []) for group in result["Instances"])
        if launched < asked:
            lifecycle = target.get("DefaultTargetCapacityType") or "on-demand"
            result["Errors"] = failed_overrides(self.ec2_backend, configs, fault, lifecycle, launched)
            STATE.count("ec2_create_fleet_partial")
        return ActionResult(result)

    Fleets.create_fleet = create_fleet
