"""SSM Parameter Store as strict as AWS: value size by tier, the PutParameter and
DeleteParameter request rates, and the account's Standard-parameter count."""

import json

from .core import STATE, account_of, json_error, read_body, region_of

CONTENT_TYPE = "application/x-amz-json-1.1"
ADVANCED_PAGE = (
    "https://docs.aws.amazon.com/systems-manager/latest/userguide/"
    "parameter-store-advanced-parameters.html"
)


def error(start_response, code, message):
    return json_error(start_response, CONTENT_TYPE, {"__type": code, "message": message})


def throttled(start_response, kind):
    STATE.count(kind)
    return error(start_response, "ThrottlingException", "Rate exceeded")


def put_rate():
    if STATE.setting("ssm_high_throughput"):
        return STATE.setting("ssm_put_parameter_high_throughput_tps")
    return STATE.setting("ssm_put_parameter_tps")


def effective_tier(request, value):
    """The tier a PutParameter lands in: Standard unless asked otherwise;
    Intelligent-Tiering picks Advanced only when the value or policies need it."""
    tier = request.get("Tier") or "Standard"
    if tier == "Intelligent-Tiering":
        needs_advanced = len(value) > STATE.setting("ssm_standard_value_max_chars")
        return "Advanced" if needs_advanced or request.get("Policies") else "Standard"
    return tier


def value_refusal(tier, value):
    """The ValidationException message for a value too large for its tier, if it is."""
    standard_max = STATE.setting("ssm_standard_value_max_chars")
    advanced_max = STATE.setting("ssm_advanced_value_max_chars")
    if tier == "Standard" and len(value) > standard_max:
        return (
            f"Standard tier parameters support a maximum parameter value of {standard_max} "
            "characters. To create a larger parameter value, upgrade the parameter to use "
            f"the advanced-parameter tier. For more information, see {ADVANCED_PAGE}"
        )
    if len(value) > advanced_max:
        return (
            "1 validation error detected: Value at 'value' failed to satisfy constraint: "
            f"Member must have length less than or equal to {advanced_max}"
        )
    return None


def standard_parameters(environ):
    """The names and number of Standard-tier parameters moto holds for the caller."""
    from moto.ssm.models import ssm_backends

    backend = ssm_backends[account_of(environ)][region_of(environ)]
    names = set()
    for name, versions in list(backend._parameters.items()):
        if versions and (versions[-1].tier or "Standard") == "Standard":
            names.add(name)
    return backend, names


def over_parameter_limit(environ, name):
    backend, names = standard_parameters(environ)
    if name in backend._parameters and backend._parameters[name]:
        return False  # an overwrite adds no parameter
    return len(names) >= STATE.setting("ssm_standard_parameter_limit")


def check_put_parameter(environ, start_response):
    if not STATE.take_token("ssm:PutParameter", put_rate()):
        return throttled(start_response, "ssm_put_parameter_throttled")
    request = json.loads(read_body(environ) or b"{}")
    value = request.get("Value") or ""
    tier = effective_tier(request, value)
    refusal = value_refusal(tier, value)
    if refusal:
        STATE.count("ssm_value_too_large")
        return error(start_response, "ValidationException", refusal)
    if tier == "Standard" and over_parameter_limit(environ, request.get("Name", "")):
        STATE.count("ssm_parameter_limit_exceeded")
        return error(
            start_response,
            "ParameterLimitExceeded",
            "You have exceeded the number of parameters for this AWS account. "
            "Delete unnecessary parameters and try again.",
        )
    return None


def check(action, environ, start_response):
    """An error response if AWS would refuse this SSM request, else None."""
    if action == "PutParameter":
        return check_put_parameter(environ, start_response)
    if action == "DeleteParameter":
        if not STATE.take_token("ssm:DeleteParameter", STATE.setting("ssm_delete_parameter_tps")):
            return throttled(start_response, "ssm_delete_parameter_throttled")
    return None
