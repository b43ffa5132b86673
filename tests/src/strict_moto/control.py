"""The layer's control API, on moto's own port:

    GET  /strict-api/settings        the settings in force (JSON)
    POST /strict-api/settings        change some of them ({"key": value, ...})
    GET  /strict-api/stats           {"refusals": {kind: count}, "log": [line, ...]}
    GET  /strict-api/process         {"pid": n}: which process answers on this port
    POST /strict-api/clock           {"pause": true} | {"pause": false} | {"advance_ms": n}
    POST /strict-api/iam/principals  {"access_key_id", "template", "role", "parameters",
                                     "source_instance"?}: requests signed with that key
                                     are the role's (iam.py)
    GET  /strict-api/imagebuilder/executions  [{"imagePipelineArn", "clientToken",
                                     "imageBuildVersionArn"}, ...]: the image pipelines
                                     started (imagebuilder.py), in order
    GET  /strict-api/iam/coverage    {"used": [grant, ...], "unused": [grant, ...]}: the
                                     grants requests needed, and the written grants of the
                                     templates no request needed so far

`POST /moto-api/reset` also resets the layer (settings as at start-up, no counts)."""

import json
import os

from . import iam, iam_policies, imagebuilder
from .core import STATE, SettingsError, checked_settings, read_body


def answer(start_response, status, document):
    payload = json.dumps(document).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))])
    return [payload]


def refuse(start_response, message):
    return answer(start_response, "400 Bad Request", {"error": message})


def settings(environ, start_response):
    if environ["REQUEST_METHOD"] == "POST":
        try:
            changes = json.loads(read_body(environ) or b"{}")
            with STATE.lock:
                STATE.settings = checked_settings(STATE.settings, changes)
        except (ValueError, SettingsError) as err:
            return refuse(start_response, f"strict settings: {err}")
    with STATE.lock:
        return answer(start_response, "200 OK", STATE.settings)


def clock(environ, start_response):
    try:
        request = json.loads(read_body(environ) or b"{}")
        with STATE.lock:
            if request.get("pause") is True:
                STATE.clock.pause()
            elif request.get("pause") is False:
                STATE.clock.resume()
            if "advance_ms" in request:
                STATE.clock.advance(float(request["advance_ms"]) / 1000.0)
    except (ValueError, TypeError, AttributeError) as err:
        return refuse(start_response, f"strict clock: {err}")
    return answer(start_response, "200 OK", {"paused": STATE.clock.paused_at is not None})


def principals(environ, start_response):
    try:
        document = json.loads(read_body(environ) or b"{}")
        registered = iam.register(document)
    except (ValueError, iam_policies.PolicyError, OSError) as err:
        return refuse(start_response, f"strict iam principal: {err}")
    return answer(start_response, "200 OK", registered)


def grant_key(grant):
    return tuple(grant[k] for k in ("template", "role", "policy", "sid", "action", "resource_index"))


def coverage_report():
    used = iam.coverage()
    needed = {grant_key(g) for g in used}
    written = [g for name in iam_policies.TEMPLATES for g in iam_policies.written_grants(name)]
    return {"used": used, "unused": [g for g in written if grant_key(g) not in needed]}


def handle(environ, start_response):
    """Answers a /strict-api/ request."""
    path = environ.get("PATH_INFO", "")
    if path == "/strict-api/settings":
        return settings(environ, start_response)
    if path == "/strict-api/process":
        return answer(start_response, "200 OK", {"pid": os.getpid()})
    if path == "/strict-api/stats":
        return answer(start_response, "200 OK", STATE.stats())
    if path == "/strict-api/iam/principals" and environ["REQUEST_METHOD"] == "POST":
        return principals(environ, start_response)
    if path == "/strict-api/imagebuilder/executions":
        return answer(start_response, "200 OK", imagebuilder.executions())
    if path == "/strict-api/iam/coverage":
        return answer(start_response, "200 OK", coverage_report())
    if path == "/strict-api/clock" and environ["REQUEST_METHOD"] == "POST":
        return clock(environ, start_response)
    return answer(start_response, "404 Not Found", {"error": f"no strict-api route {path}"})
