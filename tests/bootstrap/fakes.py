# The endpoints a runner's boot talks to, faked on 127.0.0.1 for tests/bootstrap: IMDS
# (IMDSv2, with the instance role's credentials), GitHub (the runner's release downloads,
# and the release API whose notes publish each tarball's SHA-256, at a GHES-shaped /api/v3,
# held to GitHub's 60 unauthenticated requests an hour per source address), a front of
# the deployment's runner bucket and a DynamoDB front, each checking every request's SigV4
# signature against the role's keys, as AWS does, then forwarding it to the strict moto
# emulator (which judges it as the runner role and holds the bucket and the table), or
# answering an AWS error itself, and CloudWatch Logs (CreateLogStream and PutLogEvents,
# signed, held to CreateLogStream's account-wide rate and PutLogEvents' documented batch
# rules). Also the stub runner's tarball, per version.

import hashlib
import hmac
import http.server
import io
import json
import re
import secrets
import tarfile
import threading
import time
import urllib.error
import urllib.request

REGION = "us-east-1"
ACCOUNT = "123456789012"
INSTANCE = "i-0123456789abcdef0"
ARN = f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/{INSTANCE}"
ROLE = "eph-runner"
TABLE = "eph-jit"
LATEST = "2.337.0"  # GitHub's newest runner release
PREVIOUS = "2.336.0"  # the release before it (what a baked image one release behind has)
LOG_GROUP = "/ephemera/eph/runners"
# The deployment's runner bucket (CloudFormation names it STACK-LOGICALID-SUFFIX), in moto;
# hosts reach it through the front at BUCKET_PREFIX, which checks the signature and hands
# the request to moto as path-style /BUCKET/runner/... .
BUCKET = "eph-runnerbucket-1q2w3e4r5t6y"
BUCKET_PREFIX = f"/s3/{BUCKET}/runner"
# GitHub's primary rate limit for unauthenticated REST API requests: 60 an hour, counted
# per originating IP address ("Rate limits for the REST API",
# https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api).
UNAUTHENTICATED_API_PER_HOUR = 60

# AWS errors as DynamoDB answers them: (HTTP status, JSON body).
ACCESS_DENIED = (
    400,
    {
        "__type": "com.amazon.coral.service#AccessDeniedException",
        "Message": f"User: arn:aws:sts::{ACCOUNT}:assumed-role/{ROLE}/{INSTANCE} is not authorized to "
        f"perform: dynamodb:GetItem on resource: arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{TABLE}",
    },
)
THROTTLED = (400, {"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException", "message": "Rate exceeded"})
UNAVAILABLE = (503, {"__type": "com.amazon.coral.availability#ServiceUnavailableException", "message": ""})
EXPIRED = (
    400,
    {"__type": "com.amazon.coral.service#ExpiredTokenException", "message": "The security token included in the request is expired"},
)
# CloudWatch Logs' answer to a call over its quota, and to a fault of its own.
LOGS_THROTTLED = (400, {"__type": "ThrottlingException", "message": "Rate exceeded"})
LOGS_UNAVAILABLE = (503, {"__type": "ServiceUnavailableException", "message": "The service cannot complete the request."})
# CreateLogStream: 50 transactions a second for the account in the Region, then throttled
# (https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/logs/cloudwatch_limits.html,
# https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_CreateLogStream.html).
CREATE_LOG_STREAM_TPS = 50



def sha256(data):
    return hashlib.sha256(data).hexdigest()


def sigv4_problem(method, path, headers, body, world, service):
    """None when the request is signed with the role's credentials for `service`, as
    AWS checks it (SigV4: canonical request, string to sign, derived key); else why not."""
    auth = headers.get("Authorization", "")
    found = re.fullmatch(
        r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request,"
        r" ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})",
        auth,
    )
    if not found:
        return "not signed with SigV4"
    key_id, day, region, signed_service, signed, signature = found.groups()
    if key_id != world.key_id or region != REGION or signed_service != service:
        return f"signed as {key_id} for {region}/{signed_service}"
    if headers.get("X-Amz-Security-Token") != world.session_token:
        return "no x-amz-security-token with the role's session token"
    names = signed.split(";")
    if "host" not in names:
        return "host not signed"
    # "host and any x-amz-* headers that you plan to include in your request" are signed
    # (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html):
    # curl before 7.86.0 sends X-Amz-Target and x-amz-security-token unsigned.
    unsigned = sorted({n.lower() for n in headers.keys() if n.lower().startswith("x-amz-")} - set(names))
    if unsigned:
        return f"x-amz-* headers not signed: {', '.join(unsigned)}"
    canonical = "\n".join(
        [
            method,
            path.split("?")[0],
            path.partition("?")[2],
            "".join(f"{n}:{' '.join((headers.get(n) or '').split())}\n" for n in names),
            signed,
            headers.get("x-amz-content-sha256") or sha256(body),
        ]
    )
    amz_date = headers.get("X-Amz-Date", "")
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", amz_date, f"{day}/{region}/{service}/aws4_request", sha256(canonical.encode())]
    )
    key = ("AWS4" + world.secret_key).encode()
    for part in [day, region, service, "aws4_request"]:
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    if not hmac.compare_digest(hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest(), signature):
        return "signature does not match"
    return None


# ---------------------------------------------------------------- the fake endpoints


class World:
    """What the fake endpoints answer, and what they were asked."""

    def __init__(self, moto_url):
        self.moto_url = moto_url
        self.token = "imds-token-" + secrets.token_hex(16)
        self.key_id = "ASIA" + secrets.token_hex(8).upper()
        self.secret_key = secrets.token_urlsafe(30).replace("-", "+").replace("_", "/")
        self.session_token = "IQoJb3JpZ2luX2Vj" + secrets.token_urlsafe(300)
        self.imds_secret_key = self.secret_key  # what IMDS hands out (a test may make it wrong)
        self.token_failures = 0  # the next N token requests answer 500
        self.read_failures = 0  # the next N metadata reads answer 500
        self.dynamo_answer = None  # an AWS error (status, body) to answer instead of the emulator
        self.dynamo_errors = []  # AWS errors (status, body) for the next requests, in turn
        self.lock = threading.Lock()
        self.requests = []  # (method, path, status)
        self.dynamo = []  # "get-item item", "get-item none", "update-item ok", "<op> <code>"
        self.before_update = None  # called before an UpdateItem reaches the emulator
        self.before_get = None  # called before a GetItem reaches the emulator
        self.bad_signatures = []
        self.tarballs = {}  # arch -> bytes of the newest release (LATEST)
        self.sums = {}  # arch -> its published SHA-256
        self.older = {}  # (version, arch) -> bytes of an older release
        self.versions = {LATEST, PREVIOUS}  # the runner releases GitHub has
        self.api_calls = []  # (path, authenticated, status) of every GitHub API request
        self.api_quota = {}  # source address -> [unauthenticated requests used, reset epoch]
        self.streams = {}  # log stream name -> [(timestamp, message)] put in LOG_GROUP
        self.log_calls = []  # "CreateLogStream ok", "PutLogEvents <n> events", "<op> <error>"
        self.iam_denials = []  # the messages of the calls the runner role's policy refused
        self.logs_answer = None  # an AWS error (status, body) to answer every Logs call with
        self.logs_errors = {}  # Logs operation -> AWS errors (status, body) for its next calls, in turn
        self.create_log_stream_times = []  # when the account's CreateLogStream calls came (by logs_clock)
        self.logs_clock = time.monotonic  # a test of the rate rule freezes it

    def publish(self, arch, tarball, version=LATEST):
        if version == LATEST:
            self.tarballs[arch] = tarball
            self.sums[arch] = sha256(tarball)
        else:
            self.older[(version, arch)] = tarball
        self.versions.add(version)

    def tarball(self, version, arch):
        return self.tarballs.get(arch) if version == LATEST else self.older.get((version, arch))

    def release_notes(self, version):
        lines = [
            f"- actions-runner-linux-{a}-{version}.tar.gz <!-- BEGIN SHA linux-{a} -->{sha256(self.tarball(version, a))}<!-- END SHA linux-{a} -->"
            for a in ("arm64", "x64")
            if self.tarball(version, a)
        ]
        return "## SHA-256 Checksums\r\n\r\n" + "\r\n".join(lines) + "\r\n"

    def api_quota_left(self, address, now):
        """Counts an unauthenticated API request from `address`: (limit, remaining, reset, used)
        as GitHub's x-ratelimit-* headers give them; remaining < 0 means refused."""
        with self.lock:
            used, reset = self.api_quota.get(address, (0, int(now) + 3600))
            if now >= reset:
                used, reset = 0, int(now) + 3600
            used += 1
            self.api_quota[address] = (used, reset)
        return UNAUTHENTICATED_API_PER_HOUR, UNAUTHENTICATED_API_PER_HOUR - used, reset, used


# What the runner role's UpdateItem statement allows (template.yaml, StampOwnJitRead):
# these attributes only (dynamodb:Attributes), and nothing asked back
# (dynamodb:ReturnValues NONE). The key is the instance's own (dynamodb:LeadingKeys).
STAMP_ATTRIBUTES = {
    "instance_arn", "jit_config", "jit_read_at", "runner_version", "runner_image_version", "runner_swap_ms",
}  # fmt: skip


def beyond_the_runner_role(request):
    """Why IAM would refuse this UpdateItem of the runner role, or None."""
    if request.get("ReturnValues", "NONE") != "NONE":
        return f"ReturnValues {request['ReturnValues']} is not allowed"
    if request.get("Key") != {"instance_arn": {"S": ARN}}:
        return "not the instance's own item"
    names = request.get("ExpressionAttributeNames", {})
    expressions = " ".join(request.get(k, "") for k in ("UpdateExpression", "ConditionExpression"))
    # Names, not the :values.
    words = set(re.findall(r"(?<![:\w#])#?[A-Za-z_]\w*", expressions))
    keywords = {"SET", "REMOVE", "ADD", "DELETE", "AND", "OR", "NOT", "attribute_exists", "attribute_not_exists"}
    attributes = {names.get(w, w) for w in words - keywords}
    if not attributes <= STAMP_ATTRIBUTES:
        return f"attributes {sorted(attributes - STAMP_ATTRIBUTES)} are not allowed"
    return None


class Handler(http.server.BaseHTTPRequestHandler):
    world: World = None

    def log_message(self, *args):
        pass

    def answer(self, status, body=b"", headers=()):
        with self.world.lock:
            self.world.requests.append((self.command, self.path, status))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self):
        if self.path != "/latest/api/token" or not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            return self.answer(400)
        with self.world.lock:
            failing = self.world.token_failures > 0
            if failing:
                self.world.token_failures -= 1
        if failing:
            return self.answer(500, b"hiccup")
        self.answer(200, self.world.token.encode())

    def metadata(self, path):
        if self.headers.get("X-aws-ec2-metadata-token") != self.world.token:
            return self.answer(401)
        with self.world.lock:
            failing = self.world.read_failures > 0
            if failing:
                self.world.read_failures -= 1
        if failing:
            return self.answer(500, b"hiccup")
        document = json.dumps({"accountId": ACCOUNT, "region": REGION, "instanceId": INSTANCE})
        credentials = json.dumps(
            {
                "Code": "Success",
                "LastUpdated": "2026-11-25T19:00:00Z",
                "Type": "AWS-HMAC",
                "AccessKeyId": self.world.key_id,
                "SecretAccessKey": self.world.imds_secret_key,
                "Token": self.world.session_token,
                "Expiration": "2026-11-26T01:00:00Z",
            },
            indent=2,
        )
        values = {
            "/latest/meta-data/instance-id": INSTANCE,
            "/latest/meta-data/placement/region": REGION,
            "/latest/meta-data/services/partition": "aws",
            "/latest/meta-data/services/domain": "amazonaws.com",
            "/latest/dynamic/instance-identity/document": document,
            "/latest/meta-data/iam/security-credentials/": ROLE,
            f"/latest/meta-data/iam/security-credentials/{ROLE}": credentials,
        }
        if path in values:
            return self.answer(200, values[path].encode())
        return self.answer(404)

    def do_GET(self):
        path = self.path
        if path.startswith("/latest/"):
            return self.metadata(path)
        if path.startswith("/s3/"):
            return self.bucket_get(path)
        if path.startswith("/api/v3/"):
            return self.github_api(path)
        download = re.fullmatch(r"/actions/runner/releases/download/v([0-9.]+)/actions-runner-linux-(\w+)-\1\.tar\.gz", path)
        tarball = download and download[1] in self.world.versions and self.world.tarball(download[1], download[2])
        if tarball:
            return self.answer(200, tarball)
        self.answer(404)

    def bucket_get(self, path):
        """A signed GET of the runner bucket: the signature checked here, then the request
        as S3 gets it, path-style, to moto, where the strict layer judges s3:GetObject as
        the runner role and moto's S3 answers."""
        problem = sigv4_problem("GET", path, self.headers, b"", self.world, "s3")
        if problem:
            self.world.bad_signatures.append(f"GET {path}: {problem}")
            return self.answer(403, b"<Error><Code>SignatureDoesNotMatch</Code></Error>")
        names = ["Authorization", "X-Amz-Date", "X-Amz-Security-Token", "x-amz-content-sha256"]
        request = urllib.request.Request(
            self.world.moto_url + path.removeprefix("/s3"),
            headers={n: self.headers[n] for n in names if self.headers.get(n)},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return self.answer(response.status, response.read())
        except urllib.error.HTTPError as err:
            body = err.read()
            if err.code == 403:
                self.world.iam_denials.append(body.decode(errors="replace"))
            return self.answer(err.code, body)

    def github_api(self, path):
        """GitHub's REST API (GHES-shaped, under /api/v3) for the runner's releases; an
        unauthenticated request counts against its source address's 60 an hour and, past
        them, is refused as GitHub refuses it: 403, the x-ratelimit-* headers, the message
        naming the address ("Rate limits for the REST API": "Exceeding the rate limit")."""
        authenticated = bool(self.headers.get("Authorization"))
        headers = [("Content-Type", "application/json; charset=utf-8")]
        if not authenticated:
            address = self.client_address[0]
            limit, remaining, reset, used = self.world.api_quota_left(address, time.time())
            headers += [
                ("x-ratelimit-limit", str(limit)),
                ("x-ratelimit-remaining", str(max(remaining, 0))),
                ("x-ratelimit-reset", str(reset)),
                ("x-ratelimit-used", str(min(used, limit))),
                ("x-ratelimit-resource", "core"),
            ]
            if remaining < 0:
                self.world.api_calls.append((path, authenticated, 403))
                message = {
                    "message": f"API rate limit exceeded for {address}. (But here's the good news: Authenticated "
                    "requests get a higher rate limit. Check out the documentation for more details.)",
                    "documentation_url": "https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting",
                }
                return self.answer(403, json.dumps(message).encode(), headers)
        release = re.fullmatch(r"/api/v3/repos/actions/runner/releases/(latest|tags/v([0-9.]+))", path)
        version = release and (LATEST if release[1] == "latest" else release[2])
        if version not in self.world.versions:
            self.world.api_calls.append((path, authenticated, 404))
            return self.answer(404, b'{"message":"Not Found"}', headers)
        assets = [
            {
                "name": f"actions-runner-linux-{arch}-{version}.tar.gz",
                "size": len(self.world.tarball(version, arch)),
                "browser_download_url": f"/actions/runner/releases/download/v{version}/actions-runner-linux-{arch}-{version}.tar.gz",
            }
            for arch in ("arm64", "x64")
            if self.world.tarball(version, arch)
        ]
        self.world.api_calls.append((path, authenticated, 200))
        notes = {"tag_name": f"v{version}", "body": self.world.release_notes(version), "assets": assets}
        return self.answer(200, json.dumps(notes).encode(), headers)

    def do_POST(self):
        if self.path == "/logs":
            return self.logs()
        if self.path != "/dynamodb":
            return self.answer(404)
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        operation = {"DynamoDB_20120810.GetItem": "get-item", "DynamoDB_20120810.UpdateItem": "update-item"}.get(
            self.headers.get("X-Amz-Target", ""), "unexpected"
        )
        problem = sigv4_problem("POST", self.path, self.headers, body, self.world, "dynamodb")
        if problem:
            self.world.bad_signatures.append(f"{operation}: {problem}")
            error = {"__type": "com.amazon.coral.service#InvalidSignatureException", "message": problem}
            return self.answer(400, json.dumps(error).encode())
        with self.world.lock:
            error = self.world.dynamo_answer
            if error is None and self.world.dynamo_errors:
                error = self.world.dynamo_errors.pop(0)
        if error is not None:
            self.world.dynamo.append(f"{operation} {error[1]['__type'].split('#')[1]}")
            return self.answer(error[0], json.dumps(error[1]).encode())
        if operation == "update-item":
            refused = beyond_the_runner_role(json.loads(body))
            if refused:
                self.world.dynamo.append(f"{operation} AccessDeniedException")
                error = {"__type": "com.amazon.coral.service#AccessDeniedException", "message": refused}
                return self.answer(400, json.dumps(error).encode())
            if self.world.before_update:
                self.world.before_update()
        if operation == "get-item" and self.world.before_get:
            self.world.before_get()
        status, answer = self.forward(body)
        if status != 200:
            outcome = json.loads(answer).get("__type", "?").split("#")[-1]
        elif operation == "get-item":
            outcome = "item" if "Item" in json.loads(answer) else "none"
        else:
            outcome = "ok"
        self.world.dynamo.append(f"{operation} {outcome}")
        self.answer(status, answer, [("Content-Type", "application/x-amz-json-1.0")])

    def logs(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        operation = self.headers.get("X-Amz-Target", "").removeprefix("Logs_20140328.")
        problem = sigv4_problem("POST", self.path, self.headers, body, self.world, "logs")
        request = None
        if problem:
            self.world.bad_signatures.append(f"{operation}: {problem}")
            error = (400, {"__type": "InvalidSignatureException", "message": problem})
        elif self.headers.get("Content-Type") != "application/x-amz-json-1.1":
            error = (400, {"__type": "SerializationException", "message": "not awsJson1_1"})
        else:
            # A JSON body is UTF-8 (RFC 8259, 8.1; awsJson1_1): one byte that is not
            # refuses the whole call, every event of the batch with it.
            try:
                request = json.loads(body.decode("utf-8", errors="strict"))
                error = None
            except (UnicodeDecodeError, ValueError) as err:
                error = (400, {"__type": "SerializationException", "message": f"not UTF-8 JSON: {err}"})
        if request is not None:
            with self.world.lock:
                queued = self.world.logs_errors.get(operation)
                error = self.world.logs_answer or (queued.pop(0) if queued else None)
            # The role's policy decides first, as on AWS: the strict layer evaluates the
            # signed call as the instance's runner role (the rest of moto's answer is not
            # this fake's: it keeps the Logs rules and the streams itself).
            error = error or self.iam_denial(body)
            if error is None:
                with self.world.lock:
                    error = self.log_call(operation, request)
        if error is not None:
            self.world.log_calls.append(f"{operation} {error[1]['__type'].split('#')[-1]}")
            return self.answer(error[0], json.dumps(error[1]).encode())
        self.answer(200, b"{}", [("Content-Type", "application/x-amz-json-1.1")])

    def log_call(self, operation, request):
        """Applies a Logs call to the world; an AWS error (status, body) or None."""
        invalid = lambda message: (400, {"__type": "InvalidParameterException", "message": message})
        stream = request.get("logStreamName", "")
        if request.get("logGroupName") != LOG_GROUP:
            return (400, {"__type": "ResourceNotFoundException", "message": "The specified log group does not exist."})
        if operation == "CreateLogStream":
            now = self.world.logs_clock()
            recent = [t for t in self.world.create_log_stream_times if now - t < 1.0]
            self.world.create_log_stream_times = recent + [now]
            if len(recent) >= CREATE_LOG_STREAM_TPS:
                return LOGS_THROTTLED
            if stream in self.world.streams:
                return (400, {"__type": "ResourceAlreadyExistsException", "message": "The specified log stream already exists"})
            if not stream or ":" in stream or "*" in stream:
                return invalid(f"bad stream name {stream!r}")
            self.world.streams[stream] = []
            self.world.log_calls.append("CreateLogStream ok")
            return None
        if operation != "PutLogEvents":
            return (400, {"__type": "UnknownOperationException", "message": operation})
        if stream not in self.world.streams:
            return (400, {"__type": "ResourceNotFoundException", "message": "The specified log stream does not exist."})
        # https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_PutLogEvents.html:
        # 1 to 10,000 events, 1,048,576 bytes (the messages in UTF-8, and 26 bytes an event),
        # in time order, no event over 256 KB or empty, the batch within 24 hours and of now.
        events = request.get("logEvents", [])
        stamps = [e["timestamp"] for e in events]
        size = sum(len(e["message"].encode()) + 26 for e in events)
        if not 1 <= len(events) <= 10_000 or size > 1_048_576 or stamps != sorted(stamps):
            return invalid(f"{len(events)} events, {size} bytes, in time order: {stamps == sorted(stamps)}")
        if any(not e["message"] or len(e["message"].encode()) > 256 * 1024 for e in events):
            return invalid("an empty message or one over 256 KB")
        if max(stamps) - min(stamps) > 24 * 3600 * 1000:
            return invalid("the batch spans more than 24 hours")
        if min(stamps) / 1000 < time.time() - 14 * 86400 or max(stamps) / 1000 > time.time() + 2 * 3600:
            return invalid("an event over 14 days old or 2 hours ahead")
        self.world.streams[stream].extend((e["timestamp"], e["message"]) for e in events)
        self.world.log_calls.append(f"PutLogEvents {len(events)} events")
        return None

    def iam_denial(self, body):
        """The strict layer's refusal of this signed call, as an AWS error, or None."""
        status, answer = self.forward(body)
        try:
            kind = json.loads(answer or b"{}").get("__type", "")
        except ValueError:
            kind = ""
        if status in (400, 403) and "AccessDenied" in kind:
            self.world.iam_denials.append(json.loads(answer).get("message", kind))
            return (status, json.loads(answer))
        return None

    def forward(self, body):
        names = ["Authorization", "X-Amz-Date", "X-Amz-Target", "X-Amz-Security-Token", "Content-Type"]
        request = urllib.request.Request(
            self.world.moto_url + "/",
            data=body,
            method="POST",
            headers={n: self.headers[n] for n in names if self.headers.get(n)},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()


RUN_SH = """#!/bin/bash
# Stub Actions runner: records its arguments, the user sudo ran it as, where, and its
# version; writes _diag logs as the runner does (one naming its arguments, the JIT config
# among them, as a careless runner version might), $STUB_DIAG_LINES long lines more, when
# $STUB_DIAG_LATIN1 is set a line in Latin-1 (not UTF-8) among them, and runs
# $STUB_RUNNER_SECONDS. A runner older than the server's ($STUB_SERVER_RUNNER) updates
# itself once a job is assigned, as the real one does ("Communicating with self-hosted
# runners"): the stub records that update in self-updates.log, so a test sees it.
{
  printf 'user=%s\\n' "${STUB_RAN_AS:-}"
  printf 'cwd=%s\\n' "$PWD"
  printf 'version=%s\\n' "$(cat bin/stub-version)"
  printf 'arg=%s\\n' "$@"
} >"$STUB_DIR/runner.log"
echo "runner $(cat bin/stub-version)" >>"$STUB_DIR/runs.log"
if [ "$(cat bin/stub-version)" != "${STUB_SERVER_RUNNER:-$(cat bin/stub-version)}" ]; then
  echo "self-update from $(cat bin/stub-version) to $STUB_SERVER_RUNNER after the job was assigned" >>"$STUB_DIR/self-updates.log"
fi
mkdir -p _diag
{
  echo "[2026-11-26 04:00:00Z INFO Runner] Arguments: $*"
  echo "[2026-11-26 04:00:00Z INFO Runner] settings: $2"
  echo "[2026-11-26 04:00:00Z INFO Runner] as JSON: \\"${2//_/\\\\/}\\""
  [ -z "${STUB_DIAG_LATIN1:-}" ] || printf '[2026-11-26 04:00:00Z INFO Runner] caf\\351 cr\\350me\\n'
  echo '[2026-11-26 04:00:01Z INFO Runner] Listening for Jobs: "quoted" \\ back'
} >>_diag/Runner_20261126-040000-utc.log
echo "[2026-11-26 04:00:02Z INFO Worker] Job build completed with result: Succeeded" \\
  >>_diag/Worker_20261126-040002-utc.log
printf -v long '%*s' 1500 ''
for ((i = 0; i < ${STUB_DIAG_LINES:-0}; i++)); do
  echo "[line $i] ${long// /w }" >>_diag/Worker_20261126-040002-utc.log
done
sleep "${STUB_RUNNER_SECONDS:-0}"
exit "${STUB_RUNNER_EXIT:-0}"
"""
INSTALL_DEPENDENCIES = """#!/bin/bash
# Stub of the runner's bin/installdependencies.sh.
echo installdependencies >>"$STUB_DIR/calls.log"
"""


def runner_tarball(extra=(), version=LATEST):
    """The stub runner's tarball of `version`; `extra` (name, text) files make another one."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in [
            ("run.sh", RUN_SH),
            ("config.sh", "#!/bin/bash\nexit 0\n"),
            ("bin/installdependencies.sh", INSTALL_DEPENDENCIES),
            ("bin/stub-version", version + "\n"),
            *extra,
        ]:
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o755
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
