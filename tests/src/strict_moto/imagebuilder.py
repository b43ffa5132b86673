"""EC2 Image Builder's StartImagePipelineExecution, which moto does not have: answered
here after the IAM check, as the API reference shapes it
(https://docs.aws.amazon.com/imagebuilder/latest/APIReference/API_StartImagePipelineExecution.html:
`PUT /StartImagePipelineExecution`, body {imagePipelineArn, clientToken}; answer
{requestId, clientToken, imageBuildVersionArn}). Each call is recorded, so a test can ask
what was started (`GET /strict-api/imagebuilder/executions`); a repeated clientToken
answers the first call's build, as the token's idempotency promises, and is recorded once."""

import json
import uuid

from .core import STATE, read_body

PATH = "/StartImagePipelineExecution"


def is_start(environ):
    return environ.get("PATH_INFO", "").rstrip("/") == PATH and environ.get("REQUEST_METHOD") == "PUT"


def executions():
    with STATE.lock:
        return list(STATE.image_executions)


def start(environ, start_response):
    try:
        body = json.loads(read_body(environ) or b"{}")
        arn, token = body["imagePipelineArn"], body["clientToken"]
    except (ValueError, KeyError) as err:
        payload = json.dumps({"message": f"invalid request: {err}"}).encode()
        start_response("400 Bad Request", [("Content-Type", "application/json"),
                                           ("x-amzn-ErrorType", "InvalidRequestException"),
                                           ("Content-Length", str(len(payload)))])
        return [payload]
    with STATE.lock:
        started = STATE.image_executions
        earlier = next((e for e in started if e["imagePipelineArn"] == arn and e["clientToken"] == token), None)
        if earlier is None:
            name = arn.rsplit("/", 1)[-1]
            region_account = ":".join(arn.split(":")[3:5])
            earlier = {
                "imagePipelineArn": arn,
                "clientToken": token,
                "imageBuildVersionArn": f"arn:aws:imagebuilder:{region_account}:image/{name}/1.0.0/{len(started) + 1}",
            }
            started.append(earlier)
    answer = {"requestId": str(uuid.uuid4()), "clientToken": token,
              "imageBuildVersionArn": earlier["imageBuildVersionArn"]}
    payload = json.dumps(answer).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))])
    return [payload]
