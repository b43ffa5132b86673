"""CreateFleet's overrides checked as EC2 checks them, where moto takes anything.

moto launches an override's InstanceType and ignores its InstanceRequirements, so a
malformed request would launch here and fail in AWS. Refused, as EC2 refuses them:

- an override with both InstanceType and InstanceRequirements ("If you specify
  InstanceRequirements, you can't specify InstanceType", API_FleetLaunchTemplateOverridesRequest):
  InvalidParameterCombination;
- InstanceRequirements without VCpuCount or MemoryMiB (both "Required: Yes",
  API_InstanceRequirementsRequest), or either without its Min (VCpuCountRangeRequest and
  MemoryMiBRequest: Min "Required: Yes", Max optional): InvalidParameterValue;
- a Min or Max that is not a whole number of vCPUs or MiB (the units of VCpuCount and
  MemoryMiB), below 0 (VCpuCount.Min below 1), or a Min above its Max: InvalidParameterValue;
- more than 300 overrides across the request's launch templates
  (API_FleetLaunchTemplateConfigRequest: "a maximum of 300 items is allowed across all
  launch templates", said of fleets of type request and maintain; the layer holds instant
  fleets to it too, the bound ephemera keeps): InvalidParameterValue.

The codes are EC2's common ones (errors-overview: InvalidParameterCombination "an incorrect
combination of parameters, or a missing parameter"; InvalidParameterValue "a value
specified in a parameter is not valid"); the messages are the layer's own, since EC2's
exact wording is not documented. Each refusal is counted as `ec2_fleet_overrides`.
`install()` wraps moto's CreateFleet response; call it after `ec2.install()`."""

from .core import STATE

MAX_OVERRIDES = 300


def _whole(value):
    """`value` as an int when it is a whole number, else None."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if number == int(number) else None


def _range_problem(requirements, field, least):
    """What is wrong with `requirements[field]` (a {Min, Max} range), if anything."""
    bounds = requirements.get(field)
    if not isinstance(bounds, dict) or "Min" not in bounds:
        return f"InstanceRequirements.{field}.Min is required"
    low = _whole(bounds["Min"])
    if low is None or low < least:
        return f"InstanceRequirements.{field}.Min must be a whole number of at least {least}, not {bounds['Min']}"
    if "Max" in bounds and bounds["Max"] is not None:
        high = _whole(bounds["Max"])
        if high is None or high < 0:
            return f"InstanceRequirements.{field}.Max must be a whole number, not {bounds['Max']}"
        if low > high:
            return f"InstanceRequirements.{field}.Min ({low}) is above its Max ({high})"
    return None


def problem(configs):
    """(code, message) of the first thing EC2 refuses in `configs`, or None."""
    overrides = [o for c in configs or [] for o in (c.get("Overrides") or [])]
    if len(overrides) > MAX_OVERRIDES:
        return (
            "InvalidParameterValue",
            f"{len(overrides)} launch template overrides; at most {MAX_OVERRIDES} are allowed",
        )
    for override in overrides:
        requirements = override.get("InstanceRequirements")
        if requirements is None:
            continue
        if override.get("InstanceType"):
            return (
                "InvalidParameterCombination",
                "InstanceRequirements and InstanceType cannot both be specified in an override",
            )
        for field, least in (("VCpuCount", 1), ("MemoryMiB", 0)):
            wrong = _range_problem(requirements, field, least)
            if wrong:
                return ("InvalidParameterValue", wrong)
    return None


def install():
    from moto.ec2.exceptions import EC2ClientError
    from moto.ec2.responses.fleets import Fleets

    create_fleet = Fleets.create_fleet

    def checked(self):
        if STATE.setting("enabled"):
            found = problem(self._get_param("LaunchTemplateConfigs", []))
            if found:
                STATE.count("ec2_fleet_overrides")
                raise EC2ClientError(*found)
        return create_fleet(self)

    Fleets.create_fleet = checked
