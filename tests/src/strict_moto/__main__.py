"""moto's server behind a strict layer: what AWS refuses is refused, with AWS's error
codes, statuses, bodies and messages, before moto sees it; DynamoDB requests are taken
one at a time; what moto cannot parse (Smithy RPC v2 CBOR) is translated for it
(rpcv2_cbor.py); what moto does not offer or fakes (prices) is answered from recorded
answers (prices.py); requests signed by a test's principal are refused where IAM would
refuse them (iam.py). Arguments are moto_server's (-H HOST -p PORT). Settings: core.DEFAULTS,
overridden at start by EPHEMERA_STRICT_SETTINGS_FILE and EPHEMERA_STRICT_SETTINGS, and
at run time through the control API (control.py)."""

import sys

import moto.server as server

from . import (
    cfn_updates,
    control,
    dynamodb,
    ec2,
    fleet_launch_rules,
    fleet_requirements,
    iam,
    fleet_templates,
    imagebuilder,
    instance_states,
    image_params,
    prices,
    rpcv2_cbor,
    sqs,
    ssm,
)
from .core import STATE

run = server.run_simple


def strict_app(app):
    """The WSGI middleware around moto's app."""

    def strict(environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path.startswith("/strict-api/"):
            return control.handle(environ, start_response)
        if path == "/moto-api/reset" and environ["REQUEST_METHOD"] == "POST":
            STATE.reset()
        instance_states.settle()
        refusal = iam.check(environ, start_response)
        if refusal:
            return refusal
        if imagebuilder.is_start(environ):
            return imagebuilder.start(environ, start_response)
        if rpcv2_cbor.is_rpcv2_cbor(environ):
            return rpcv2_cbor.handle(app, environ, start_response)
        if prices.is_get_products(environ):
            return prices.get_products(environ, start_response)
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        service, _, action = target.partition(".")
        strict_on = STATE.setting("enabled")
        spot = strict_on and prices.spot_request(environ)
        if spot:
            return prices.spot_price_history(environ, spot, start_response)
        if service.startswith("DynamoDB_"):
            return dynamodb.handle(app, environ, start_response, action, strict_on)
        if strict_on and service == "AmazonSSM":
            refusal = ssm.check(action, environ, start_response)
            if refusal:
                return refusal
        if strict_on and service == "AmazonSQS":
            refusal = sqs.check(action, environ, start_response)
            if refusal:
                return refusal
        return app(environ, start_response)

    return strict


def strict_run(host, port, app, **options):
    run(host, port, strict_app(app), **options)


if __name__ == "__main__":
    dynamodb.install()
    sqs.install()
    ec2.install()
    instance_states.install()
    fleet_requirements.install()
    fleet_launch_rules.install()
    fleet_templates.install()
    image_params.install()
    cfn_updates.install()
    server.run_simple = strict_run
    server.main(sys.argv[1:])
