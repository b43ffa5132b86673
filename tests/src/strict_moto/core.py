"""The shared state of the strict layer: its settings, its clock, its refusal counts,
token buckets, and the helpers that read a request and write an AWS JSON error."""

import copy
import io
import json
import os
import sys
import threading
import time

# AWS's own limits and rates, each one a setting (see docs/testing.md, "The strict world:
# how the tests stand in for AWS", for the page that documents each).
DEFAULTS = {
    "enabled": True,
    # IAM: requests signed by a registered principal are evaluated against its role's
    # policies in the templates (iam.py); off lets every request through, as moto does.
    "iam_enforced": True,
    # SSM Parameter Store
    "ssm_standard_value_max_chars": 4096,
    "ssm_advanced_value_max_chars": 8192,
    "ssm_put_parameter_tps": 3,
    "ssm_high_throughput": False,
    "ssm_put_parameter_high_throughput_tps": 10,
    "ssm_delete_parameter_tps": 5,
    "ssm_standard_parameter_limit": 10000,
    # DynamoDB
    # Claims back off and are sent again, slot releases are tried again, and single-item
    # writes are retried by the SDK (TransactionConflictException).
    "dynamodb_transaction_conflicts": True,
    "dynamodb_transaction_in_flight_ms": 5,
    "dynamodb_item_max_bytes": 400 * 1024,
    "dynamodb_transact_max_actions": 100,
    # SQS and Lambda's event source mapping
    "sqs_max_message_bytes": 1024 * 1024,
    "sqs_max_delay_seconds": 900,
    "lambda_recursion_cutoff": 16,
    # EC2: off unless a test switches it on, e.g.
    # {"launch_at_most": 1, "unsupported_subnet": "subnet-123"}
    "ec2_create_fleet_fault": None,
    # EC2 StopInstances and StartInstances (instance_states.py): how long an instance stays
    # stopping and pending (short, for the tests' sake; EC2 publishes no figure), and how
    # many of the next starts are refused with InsufficientInstanceCapacity.
    "ec2_stop_seconds": 2,
    "ec2_start_seconds": 1,
    "ec2_start_insufficient_capacity": 0,
}

SETTINGS_ENV = "EPHEMERA_STRICT_SETTINGS"
SETTINGS_FILE_ENV = "EPHEMERA_STRICT_SETTINGS_FILE"


class SettingsError(ValueError):
    """A settings document that names an unknown key or gives a value of the wrong type."""


def checked_settings(base, changes):
    """`base` with `changes` applied, refusing unknown keys and mistyped values."""
    if not isinstance(changes, dict):
        raise SettingsError("settings must be a JSON object")
    merged = copy.deepcopy(base)
    for key, value in changes.items():
        if key not in DEFAULTS:
            raise SettingsError(f"unknown setting {key!r}")
        default = DEFAULTS[key]
        if key == "ec2_create_fleet_fault":
            if value is not None and not isinstance(value, dict):
                raise SettingsError(f"{key} must be an object or null")
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise SettingsError(f"{key} must be true or false")
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise SettingsError(f"{key} must be a number >= 0")
        merged[key] = value
    return merged


def startup_settings():
    """The defaults, overridden by the file named in EPHEMERA_STRICT_SETTINGS_FILE and
    then by the JSON object in EPHEMERA_STRICT_SETTINGS."""
    settings = copy.deepcopy(DEFAULTS)
    path = os.environ.get(SETTINGS_FILE_ENV)
    if path:
        with open(path, encoding="utf-8") as file:
            settings = checked_settings(settings, json.load(file))
    inline = os.environ.get(SETTINGS_ENV)
    if inline:
        settings = checked_settings(settings, json.loads(inline))
    return settings


class Clock:
    """Monotonic seconds that tests may pause and advance, so rates and windows can be
    tested without timing."""

    def __init__(self):
        self.offset = 0.0
        self.paused_at = None

    def now(self):
        if self.paused_at is not None:
            return self.paused_at
        return time.monotonic() + self.offset

    def pause(self):
        if self.paused_at is None:
            self.paused_at = self.now()

    def resume(self):
        if self.paused_at is not None:
            self.offset = self.paused_at - time.monotonic()
            self.paused_at = None

    def advance(self, seconds):
        if self.paused_at is not None:
            self.paused_at += seconds
        else:
            self.offset += seconds


class TokenBucket:
    """AWS's request-rate model: `rate` tokens a second, at most `capacity` held (the
    burst; `rate` unless given)."""

    def __init__(self):
        self.tokens = None
        self.updated = 0.0

    def take(self, rate, now, capacity=None):
        capacity = float(rate if capacity is None else capacity)
        if self.tokens is None:
            self.tokens, self.updated = capacity, now
        self.tokens = min(capacity, self.tokens + (now - self.updated) * rate)
        self.updated = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class State:
    """Everything the layer keeps; one instance, guarded by `lock`."""

    def __init__(self):
        self.lock = threading.RLock()
        self.initial = startup_settings()
        self.settings = copy.deepcopy(self.initial)
        self.clock = Clock()
        # Who signs with which access key (iam.py), and the grants requests needed:
        # kept across resets, since they are not resources.
        self.principals = {}
        self.coverage = {}
        self.reset()

    def reset(self):
        """Back to the start: settings as at start-up, no counts, full buckets."""
        with self.lock:
            self.settings = copy.deepcopy(self.initial)
            self.clock = Clock()
            self.refusals = {}
            self.log = []
            self.buckets = {}
            self.image_executions = []
            # Instances stopping or pending: id -> (instance, state, end state, due).
            self.instance_transitions = {}
            self.transactions = []

    def setting(self, key):
        return self.settings[key]

    def count(self, kind):
        with self.lock:
            self.refusals[kind] = self.refusals.get(kind, 0) + 1

    def write_log(self, line):
        with self.lock:
            self.log.append(line)
        print(line, file=sys.stderr, flush=True)

    def take_token(self, name, rate, capacity=None):
        with self.lock:
            bucket = self.buckets.setdefault(name, TokenBucket())
            return bucket.take(rate, self.clock.now(), capacity)

    def stats(self):
        with self.lock:
            return {"refusals": dict(self.refusals), "log": list(self.log)}


STATE = State()


def read_body(environ):
    """The request body, read once and put back for moto to read again."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    stream = environ["wsgi.input"]
    body = stream.read(length) if length else stream.read()
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    return body


def replace_body(environ, body):
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))


def region_of(environ):
    """The region in the request's SigV4 credential scope (us-east-1 if unsigned)."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    marker = "Credential="
    if marker in auth:
        scope = auth.split(marker, 1)[1].split(",", 1)[0].split("/")
        if len(scope) >= 3:
            return scope[2]
    return "us-east-1"


def account_of(environ):
    """The account moto files the request under (derived from the access key)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.iam.models import get_account_id_from

    auth = environ.get("HTTP_AUTHORIZATION", "")
    marker = "Credential="
    if marker in auth:
        access_key = auth.split(marker, 1)[1].split("/", 1)[0]
        return get_account_id_from(access_key)
    return DEFAULT_ACCOUNT_ID


def json_error(start_response, content_type, body, status="400 Bad Request", headers=()):
    """Answers with an AWS JSON-protocol error document."""
    payload = json.dumps(body).encode()
    start_response(
        status,
        [
            ("Content-Type", content_type),
            ("Content-Length", str(len(payload))),
            ("x-amzn-RequestId", "strict-" + str(time.monotonic_ns())),
            *headers,
        ],
    )
    return [payload]
