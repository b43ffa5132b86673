"""Smithy RPC v2 CBOR in front of moto: the AWS SDKs speak it to CloudWatch (the Rust SDK
from aws-sdk-cloudwatch 1.100 on; botocore's model lists it first), and moto 5.2.5 parses
only the query and JSON protocols. A request that names the protocol is translated,
through botocore's own model of the service, into the JSON protocol (the same operation,
the same members, typed by the same shapes), answered by moto, and its answer translated
back into CBOR, errors included.

The protocol, as the Smithy specification gives it
(https://smithy.io/2.0/additional-specs/protocols/smithy-rpc-v2.html): `POST
/service/{ServiceName}/operation/{OperationName}` with the header `smithy-protocol:
rpc-v2-cbor`; the input and output are CBOR maps of the operation's members; timestamps
are tag 1 (epoch seconds); an error has the same status as in the JSON protocol and a
body map with `__type` and `message`."""

import io
import json
import re

from botocore.loaders import Loader
from botocore.model import ServiceModel
from botocore.parsers import JSONParser, RpcV2CBORParser
from botocore.serialize import JSONSerializer, RpcV2CBORSerializer

PROTOCOL_HEADER = "HTTP_SMITHY_PROTOCOL"
PROTOCOL = "rpc-v2-cbor"

# The services translated here, by the service name their CBOR paths carry (the model's
# targetPrefix), as botocore names them. Only what the project's code calls.
SERVICES = {"GraniteServiceVersion20100801": "cloudwatch"}

_models = {}

# GetMetricData as the CloudWatch API reference bounds it (API_GetMetricData.html,
# API_MetricDataQuery.html, API_MetricStat.html), which moto does not check: at most 500
# queries a call; an Id starts with a lowercase letter, then letters, digits and `_`, at
# most 255 characters, unique in the call; a Period of 1, 5, 10, 20, 30 or a multiple
# of 60 seconds.
GET_METRIC_DATA_MAX_QUERIES = 500
QUERY_ID = re.compile(r"^[a-z][a-zA-Z0-9_]{0,254}$")


def get_metric_data_refusal(params):
    """The ValidationError message AWS would answer `params` with, or None."""
    queries = params.get("MetricDataQueries") or []
    if len(queries) > GET_METRIC_DATA_MAX_QUERIES:
        return f"The collection MetricDataQueries must not have a size greater than {GET_METRIC_DATA_MAX_QUERIES}."
    ids = [query.get("Id", "") for query in queries]
    for query_id in ids:
        if not QUERY_ID.match(query_id):
            return f"The value {query_id} for parameter MetricDataQueries.member.Id is invalid."
    if len(set(ids)) != len(ids):
        return "The values for parameter id in MetricDataQueries are not unique."
    for query in queries:
        period = (query.get("MetricStat") or {}).get("Period")
        if period is not None and period not in (1, 5, 10, 20, 30) and period % 60:
            return "The parameter MetricDataQueries.member.MetricStat.Period must be a multiple of 60."
    return None


def is_rpcv2_cbor(environ):
    return environ.get(PROTOCOL_HEADER, "").lower() == PROTOCOL


def _service_model(name):
    if name not in _models:
        _models[name] = ServiceModel(Loader().load_service_model(name, "service-2"), name)
    return _models[name]


def _cbor_answer(start_response, status, body, headers=()):
    start_response(
        status,
        [
            ("Content-Type", "application/cbor"),
            ("smithy-protocol", PROTOCOL),
            ("Content-Length", str(len(body))),
            *headers,
        ],
    )
    return [body]


def _cbor_error(start_response, status, code, message):
    serializer = RpcV2CBORSerializer()
    document = {"__type": code, "message": message}
    body = bytearray(serializer._get_initial_byte(serializer.MAP_MAJOR_TYPE, len(document)))
    for name, value in document.items():
        serializer._serialize_type_string(body, name, None, None)
        serializer._serialize_type_string(body, str(value), None, None)
    return _cbor_answer(start_response, status, bytes(body))


def _parse(parser, body, shape):
    parsed = parser.parse({"body": body, "headers": {}, "status_code": 200}, shape)
    parsed.pop("ResponseMetadata", None)
    return parsed


def handle(app, environ, start_response):
    """Answers one RPC v2 CBOR request through moto's JSON protocol."""
    parts = environ.get("PATH_INFO", "").strip("/").split("/")
    if len(parts) != 4 or parts[0] != "service" or parts[2] != "operation":
        return _cbor_error(
            start_response, "404 Not Found", "UnknownOperationException", "no such path"
        )
    target_prefix, operation_name = parts[1], parts[3]
    if target_prefix not in SERVICES:
        return _cbor_error(
            start_response,
            "404 Not Found",
            "UnknownOperationException",
            f"the strict layer does not translate RPC v2 CBOR for {target_prefix}",
        )
    model = _service_model(SERVICES[target_prefix])
    try:
        operation = model.operation_model(operation_name)
    except Exception:  # botocore raises OperationNotFoundError
        return _cbor_error(
            start_response,
            "404 Not Found",
            "UnknownOperationException",
            f"{target_prefix} has no operation {operation_name}",
        )
    length = int(environ.get("CONTENT_LENGTH") or 0)
    raw = environ["wsgi.input"].read(length) if length else b""
    params = _parse(RpcV2CBORParser(), raw, operation.input_shape) if raw else {}

    if operation_name == "GetMetricData":
        refusal = get_metric_data_refusal(params)
        if refusal:
            return _cbor_error(start_response, "400 Bad Request", "ValidationError", refusal)
    request = JSONSerializer().serialize_to_request(params, operation)
    forwarded = dict(environ)
    forwarded["PATH_INFO"] = "/"
    forwarded["REQUEST_METHOD"] = "POST"
    forwarded["QUERY_STRING"] = ""
    forwarded["CONTENT_TYPE"] = request["headers"]["Content-Type"]
    forwarded["HTTP_X_AMZ_TARGET"] = request["headers"]["X-Amz-Target"]
    forwarded.pop(PROTOCOL_HEADER, None)
    forwarded["wsgi.input"] = io.BytesIO(request["body"])
    forwarded["CONTENT_LENGTH"] = str(len(request["body"]))

    answer = {}

    def capture(status, headers, exc_info=None):
        answer["status"] = status
        answer["headers"] = headers

    body = b"".join(app(forwarded, capture))
    status = answer["status"]
    passed_headers = [
        (name, value)
        for name, value in answer["headers"]
        if name.lower() in ("x-amzn-requestid", "x-amzn-query-error")
    ]
    if not status.startswith("2"):
        try:
            document = json.loads(body or b"{}")
        except ValueError:
            document = {"message": body.decode(errors="replace")}
        code = str(document.get("__type", "InternalFailure")).rsplit("#", 1)[-1]
        message = document.get("message", document.get("Message", ""))
        return _cbor_error(start_response, status, code, message)
    output = bytearray()
    if operation.output_shape is not None:
        result = _parse(JSONParser(), body or b"{}", operation.output_shape)
        RpcV2CBORSerializer()._serialize_data_item(output, result, operation.output_shape)
    return _cbor_answer(start_response, status, bytes(output), passed_headers)
