"""IAM as AWS enforces it: every request signed with a principal's access key is
evaluated against the identity policies template.yaml (or infra/image/template.yaml) gives
that principal's role, before moto sees it; a request signed with any other key is the
operator's (full access, as an administrator's credentials on AWS).

Principals are registered through the control API (`POST /strict-api/iam/principals`:
access key id → template, role logical id, the stack's parameters, and for a runner host
its instance id). Evaluation follows IAM's policy evaluation logic
(https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html):
an explicit Deny wins over any Allow; without an Allow the request is implicitly denied.
`Action`/`NotAction` match with `*` and `?`, case-insensitively; `Resource`/`NotResource`
match case-sensitively, with policy variables (`${ec2:SourceInstanceARN}`) taken from the
request (a variable whose key is absent matches nothing). Every condition of a statement
must hold; the operators are IAM's (reference_policies_elements_condition_operators.html),
with `…IfExists`, `ForAllValues:` (holds for a missing key) and `ForAnyValue:` (does not).
A condition key the layer does not compute for the request, or an operator it does not
know, refuses the request and names it: fail closed, never open.

What a call needs beyond its own name (iam_requests.py): the per-item actions of a
DynamoDB transaction, and CreateFleet's ec2:RunInstances, ec2:CreateTags, iam:PassRole
and ssm:GetParameters. Every allowed request records which statement, action pattern
and resource allowed it: the grant coverage (`GET /strict-api/iam/coverage`, and lines
appended to a file in EPHEMERA_IAM_COVERAGE_DIR, one file per server process)."""

import json
import os
import re
import threading
import time

from .core import STATE, account_of, json_error, region_of
from .iam_policies import PolicyError, Stack
from . import iam_requests

COVERAGE_DIR_ENV = "EPHEMERA_IAM_COVERAGE_DIR"
_COVERAGE_LOCK = threading.Lock()

# The operators of IAM's condition element; each maps (pattern, value) to a match.
OPERATORS = {
    "StringEquals": lambda p, v: p == v,
    "StringNotEquals": lambda p, v: p == v,
    "StringEqualsIgnoreCase": lambda p, v: p.lower() == v.lower(),
    "StringNotEqualsIgnoreCase": lambda p, v: p.lower() == v.lower(),
    "StringLike": lambda p, v: glob(p, v),
    "StringNotLike": lambda p, v: glob(p, v),
    "ArnEquals": lambda p, v: glob(p, v),
    "ArnLike": lambda p, v: glob(p, v),
    "ArnNotEquals": lambda p, v: glob(p, v),
    "ArnNotLike": lambda p, v: glob(p, v),
    "Bool": lambda p, v: p.lower() == v.lower(),
}
NEGATED = {"StringNotEquals", "StringNotEqualsIgnoreCase", "StringNotLike", "ArnNotEquals", "ArnNotLike"}


class UnknownCondition(Exception):
    """A condition key or operator the layer cannot judge: the request is refused."""


def glob(pattern, text, fold=False):
    """IAM's `*` (any run) and `?` (one character) wildcards."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, text, re.IGNORECASE | re.DOTALL if fold else re.DOTALL) is not None


def expand(pattern, context):
    """`pattern` with its policy variables replaced from the request; None when one of
    them has no single value (IAM: the statement then does not match)."""
    out, rest = [], pattern
    while "${" in rest:
        start = rest.index("${")
        end = rest.find("}", start)
        if end < 0:
            break
        key = rest[start + 2 : end]
        out.append(rest[:start])
        if key in ("*", "?", "$"):
            out.append(key)
        else:
            values = context.get(key.lower())
            if not values or len(values) != 1:
                return None
            out.append(values[0])
        rest = rest[end + 1 :]
    out.append(rest)
    return "".join(out)


def as_list(value):
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def key_known(key, known):
    key = key.lower()
    return key in known or any(k.endswith("/*") and key.startswith(k[:-1]) for k in known)


def condition_holds(operator, block, context, known):
    """Whether one operator block of a Condition element holds for the request."""
    qualifier, _, base = operator.rpartition(":")
    if qualifier not in ("", "ForAllValues", "ForAnyValue"):
        raise UnknownCondition(f"condition operator {operator}")
    if_exists = base.endswith("IfExists")
    base = base[: -len("IfExists")] if if_exists else base
    for key, wanted in block.items():
        if not key_known(key, known):
            raise UnknownCondition(f"condition key {key}")
        values = context.get(key.lower()) or []
        if base == "Null":
            absent = not values
            if any(str(w).lower() == "true" for w in as_list(wanted)) != absent:
                return False
            continue
        if base not in OPERATORS:
            raise UnknownCondition(f"condition operator {operator}")
        patterns = [expand(str(w), context) for w in as_list(wanted)]
        match = OPERATORS[base]

        def any_pattern(value):
            return any(p is not None and match(p, value) for p in patterns)

        negated = base in NEGATED
        if not values:
            if if_exists or qualifier == "ForAllValues" or (negated and qualifier != "ForAnyValue"):
                continue
            return False
        if qualifier == "ForAllValues":
            holds = all((not any_pattern(v)) if negated else any_pattern(v) for v in values)
        elif qualifier == "ForAnyValue":
            holds = any((not any_pattern(v)) if negated else any_pattern(v) for v in values)
        elif negated:
            holds = not any(any_pattern(v) for v in values)
        else:
            holds = any(any_pattern(v) for v in values)
        if not holds:
            return False
    return True


def statement_matches(entry, need):
    """The (action pattern, resource position) pairs of `entry` that match `need`, or []
    when the statement does not apply to it (its conditions included)."""
    statement = entry["statement"]
    action = need["action"]
    if "NotAction" in statement:
        if any(glob(a, action, fold=True) for a in as_list(statement["NotAction"])):
            return []
        actions = ["NotAction"]
    else:
        actions = [a for a in as_list(statement.get("Action")) if glob(a, action, fold=True)]
        if not actions:
            return []
    context = need["context"]
    matched = []
    for position, pattern in entry["resources"]:
        expanded = expand(pattern, context)
        if expanded is not None and glob(expanded, need["resource"]):
            matched.append(position)
    if "NotResource" in statement:
        if matched:
            return []
        matched = [None]
    if not matched:
        return []
    for operator, block in (statement.get("Condition") or {}).items():
        if not condition_holds(operator, block, context, need["known"]):
            return []
    return [(a, p) for a in actions for p in matched]


def decide(entries, need):
    """("allow", [grants]) | ("deny", entry) | ("none", None) for one needed action."""
    allowed = []
    for entry in entries:
        pairs = statement_matches(entry, need)
        if not pairs:
            continue
        if entry["statement"].get("Effect") == "Deny":
            return "deny", entry
        allowed.extend((entry, action, position) for action, position in pairs)
    return ("allow", allowed) if allowed else ("none", None)


# ---------------------------------------------------------------------- principals


def register(document):
    """Registers a principal (the control API's body); its summary."""
    key = document.get("access_key_id")
    template = document.get("template", "template.yaml")
    role = document.get("role")
    parameters = document.get("parameters") or {}
    resources = document.get("resources") or {}
    if not isinstance(resources, dict) or not all(isinstance(v, str) for v in resources.values()):
        raise ValueError("resources must map logical ids to the names the test gave them")
    if not isinstance(key, str) or not key:
        raise ValueError("access_key_id must be a non-empty string")
    if not isinstance(role, str) or not role:
        raise ValueError("role must name a role of the template (its logical id)")
    if not isinstance(parameters, dict) or "DeploymentName" not in parameters:
        raise ValueError("parameters must be an object with at least DeploymentName")
    stack = Stack(template, parameters, "123456789012", "us-east-1", resources)
    stack.role(role)  # refuses an unknown role now, not at the first request
    principal = {
        "template": template,
        "role": role,
        "parameters": {k: v for k, v in parameters.items()},
        "resources": dict(resources),
        "source_instance": document.get("source_instance"),
        "session": document.get("session") or role,
    }
    with STATE.lock:
        STATE.principals[key] = principal
    return principal


def access_key_of(environ):
    auth = environ.get("HTTP_AUTHORIZATION", "")
    if "Credential=" in auth:
        return auth.split("Credential=", 1)[1].split("/", 1)[0]
    query = environ.get("QUERY_STRING", "")
    found = re.search(r"X-Amz-Credential=([^%/&]+)", query)
    return found.group(1) if found else None


def principal_arn(stack, principal, account):
    """The assumed-role ARN AWS names the caller by in a refusal."""
    role = principal["role"]
    role_name = stack.physical.get(role) or f"{principal['parameters']['DeploymentName']}-{role}"
    return f"arn:aws:sts::{account}:assumed-role/{role_name}/{principal['session']}"


# ---------------------------------------------------------------------- coverage


def record(principal, grants):
    """Adds the grants that allowed a request to the coverage (and its file)."""
    lines = []
    with _COVERAGE_LOCK:
        for entry, action, position in grants:
            grant = {
                "template": principal["template"],
                "role": principal["role"],
                "policy": entry["policy"],
                "sid": entry["sid"],
                "action": action,
                "resource_index": position,
            }
            key = json.dumps(grant, sort_keys=True)
            if key not in STATE.coverage:
                STATE.coverage[key] = grant
                lines.append(key)
        directory = os.environ.get(COVERAGE_DIR_ENV)
        if lines and directory:
            os.makedirs(directory, exist_ok=True)
            with open(os.path.join(directory, f"moto-{os.getpid()}.jsonl"), "a", encoding="utf-8") as out:
                out.write("".join(line + "\n" for line in lines))


def coverage():
    with _COVERAGE_LOCK:
        return sorted(STATE.coverage.values(), key=lambda g: json.dumps(g, sort_keys=True))


# ---------------------------------------------------------------------- refusals


def denial_message(who, need, explicit):
    action, resource = need["action"], need["resource"]
    if explicit:
        why = "with an explicit deny in an identity-based policy"
    else:
        why = f"because no identity-based policy allows the {action} action"
    return f"User: {who} is not authorized to perform: {action} on resource: {resource} {why}"


def xml_error(start_response, status, body):
    payload = body.encode()
    start_response(status, [("Content-Type", "text/xml"), ("Content-Length", str(len(payload)))])
    return [payload]


def access_denied(start_response, service, message):
    """The service's own AccessDenied answer (the shape its SDK parses)."""
    request_id = "strict-" + str(time.monotonic_ns())
    if service == "dynamodb":
        body = {"__type": "com.amazonaws.dynamodb.v20120810#AccessDeniedException", "message": message}
        return json_error(start_response, "application/x-amz-json-1.0", body)
    if service == "sqs":
        body = {"__type": "com.amazon.coral.service#AccessDeniedException", "message": message}
        headers = [("x-amzn-query-error", "AccessDenied;Sender")]
        return json_error(start_response, "application/x-amz-json-1.0", body, "403 Forbidden", headers)
    if service == "ec2":
        # EC2 answers UnauthorizedOperation, 403, with the reason in the message
        # (EC2 API reference, "Error codes for the Amazon EC2 API").
        text = f"You are not authorized to perform this operation. {message}"
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
            f"<Code>UnauthorizedOperation</Code><Message>{escape(text)}</Message>"
            f"</Error></Errors><RequestID>{request_id}</RequestID></Response>"
        )
        return xml_error(start_response, "403 Forbidden", body)
    if service == "s3":
        # S3's REST XML error, 403 AccessDenied (Amazon S3 API reference, "Error responses").
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
            f"<Message>{escape(message)}</Message><RequestId>{request_id}</RequestId></Error>"
        )
        return xml_error(start_response, "403 Forbidden", body)
    if service == "imagebuilder":
        # Image Builder's REST JSON: AccessDeniedException, 403.
        body = {"message": message}
        headers = [("x-amzn-ErrorType", "AccessDeniedException")]
        return json_error(start_response, "application/json", body, "403 Forbidden", headers)
    if service in ("sts", "iam"):
        body = (
            f'<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code>'
            f"<Message>{escape(message)}</Message></Error><RequestId>{request_id}</RequestId></ErrorResponse>"
        )
        return xml_error(start_response, "403 Forbidden", body)
    # SSM, Secrets Manager, CloudWatch Logs, Price List: awsJson1_1 with the short type.
    body = {"__type": "AccessDeniedException", "message": message, "Message": message}
    return json_error(start_response, "application/x-amz-json-1.1", body)


def escape(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def refuse(start_response, service, message, kind):
    STATE.count(kind)
    STATE.write_log(f"IAM: {message}")
    return access_denied(start_response, service, message)


# ---------------------------------------------------------------------- the check


def check(environ, start_response):
    """None when the request may go on to moto, else the refusal."""
    if not STATE.setting("iam_enforced"):
        return None
    key = access_key_of(environ)
    with STATE.lock:
        principal = STATE.principals.get(key) if key else None
    if principal is None:
        return None  # the operator
    account, region = account_of(environ), region_of(environ)
    service = iam_requests.service_of(environ)
    try:
        stack = Stack(principal["template"], principal["parameters"], account, region, principal.get("resources"))
        entries = stack.statements(principal["role"])
        who = principal_arn(stack, principal, account)
    except (PolicyError, OSError) as err:
        message = f"the strict layer cannot read the policies of {principal['role']}: {err}"
        return refuse(start_response, service, message, "iam_policy_unreadable")
    try:
        needs = iam_requests.needs(environ, service, account, region, principal)
    except iam_requests.Unjudged as err:
        message = f"User: {who} is refused: the strict layer cannot tell what {err} needs (fail closed)"
        return refuse(start_response, service, message, "iam_unjudged_request")
    granted = []
    for need in needs:
        if need.get("free"):
            continue
        try:
            verdict, detail = decide(entries, need)
        except UnknownCondition as err:
            message = (
                f"User: {who} is refused {need['action']} on resource: {need['resource']}: "
                f"the strict layer does not know the {err}, so it cannot judge it (fail closed)"
            )
            return refuse(start_response, service, message, "iam_unknown_condition")
        if verdict != "allow":
            message = denial_message(who, need, verdict == "deny")
            managed = stack.managed_policies(principal["role"])
            if managed and verdict == "none":
                message += f" (managed policies not evaluated: {', '.join(managed)})"
            return refuse(start_response, service, message, "iam_access_denied")
        granted.extend(detail)
    record(principal, granted)
    return None
