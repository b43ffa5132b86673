"""What IAM authorizes for one request: each (action, resource ARN, request context) the
call needs, as the Service Authorization Reference gives them
(https://docs.aws.amazon.com/service-authorization/latest/reference/reference_policies_actions-resources-contextkeys.html),
with the condition keys the layer computes for it (`known`): a policy that uses any other
key on that action is refused, naming the key.

- DynamoDB (list_amazondynamodb.html): the table, or `table/T/index/I` for a query of an
  index. dynamodb:LeadingKeys (the partition key values the request touches),
  dynamodb:Attributes (the top-level attribute names it names: key, item, expressions,
  projections), dynamodb:ReturnValues, dynamodb:Select, as "Using IAM policy conditions
  for fine-grained access control" defines them
  (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/specifying-conditions.html).
  TransactWriteItems and TransactGetItems are authorized per item, by PutItem, UpdateItem,
  DeleteItem, ConditionCheckItem and GetItem, with dynamodb:EnclosingOperation ("Using IAM
  with DynamoDB transactions",
  https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html).
- EC2 (list_amazonec2.html): Describe* on `*`. CreateFleet needs ec2:CreateFleet and
  ec2:RunInstances on every resource of the launch (fleet, launch template with its tags
  as aws:ResourceTag, image, subnets, security groups, network interface, volume, and the
  instance with the request's tags as aws:RequestTag), ec2:CreateTags on the instance for
  tags given at launch (ec2:CreateAction = CreateFleet; "Grant permission to tag Amazon EC2
  resources during creation", https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/supported-iam-actions-tagging.html),
  iam:PassRole on the launch template's instance profile role (iam:PassedToService =
  ec2.amazonaws.com), and ssm:GetParameters on the parameter of a `resolve:ssm:` image
  ("Permissions for EC2 Fleet users",
  https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-fleet-prerequisites.html#ec2-fleet-iam-users;
  EC2 Auto Scaling guide, "Use AWS Systems Manager parameters instead of AMI IDs in launch
  templates"). TerminateInstances, StartInstances, StopInstances: each instance, with its
  tags as aws:ResourceTag (Service Authorization Reference, Amazon EC2: the three take the
  instance resource and its aws:ResourceTag/${TagKey} condition key). ModifyInstanceAttribute:
  its one instance, the same way.
- SQS, SSM, Secrets Manager, CloudWatch Logs: the queue, parameter, secret, log stream.
  Batch calls need the single action (sqs:SendMessage for SendMessageBatch).
- S3 and Image Builder: iam_s3.py.
- Price List GetProducts and STS GetCallerIdentity: `*`; GetCallerIdentity needs no
  permission (STS API reference).

A request the layer cannot take apart (an unknown service or protocol) raises Unjudged:
the principal's call is refused rather than let through."""

import json
import re
from urllib.parse import parse_qs, unquote, urlparse

from .core import read_body

TARGET_SERVICES = {
    "DynamoDB_20120810": "dynamodb",
    "AmazonSQS": "sqs",
    "AmazonSSM": "ssm",
    "secretsmanager": "secretsmanager",
    "Logs_20140328": "logs",
    "AWSPriceListService": "pricing",
}
DYNAMODB_KEYS = {
    "dynamodb:leadingkeys",
    "dynamodb:attributes",
    "dynamodb:returnvalues",
    "dynamodb:select",
    "dynamodb:enclosingoperation",
}
TAG_KEYS = {"aws:resourcetag/*", "aws:requesttag/*", "aws:tagkeys"}
EXPRESSION_WORDS = {
    "set", "remove", "add", "delete", "and", "or", "not", "between", "in", "size",
    "attribute_exists", "attribute_not_exists", "attribute_type", "begins_with",
    "contains", "if_not_exists", "list_append",
}


class Unjudged(Exception):
    """A request whose needs the layer cannot tell."""


def service_of(environ):
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    prefix = target.partition(".")[0]
    if prefix in TARGET_SERVICES:
        return TARGET_SERVICES[prefix]
    auth = environ.get("HTTP_AUTHORIZATION", "")
    if "Credential=" in auth:
        scope = auth.split("Credential=", 1)[1].split(",", 1)[0].split("/")
        if len(scope) >= 4:
            return scope[3]
    return "unknown"


def base_context(principal, account, region):
    """The global keys every request carries, and those the layer vouches for."""
    context = {"aws:requestedregion": [region], "aws:securetransport": ["false"]}
    known = {"aws:requestedregion", "aws:securetransport", "ec2:sourceinstancearn"}
    if principal.get("source_instance"):
        context["ec2:sourceinstancearn"] = [
            f"arn:aws:ec2:{region}:{account}:instance/{principal['source_instance']}"
        ]
    return context, known


def need(action, resource, context, known, extra=None, extra_known=()):
    merged = dict(context)
    merged.update(extra or {})
    return {"action": action, "resource": resource, "context": merged, "known": set(known) | set(extra_known)}


def needs(environ, service, account, region, principal):
    context, known = base_context(principal, account, region)
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    operation = target.partition(".")[2]
    if service == "dynamodb":
        return dynamodb_needs(environ, operation, account, region, context, known)
    if service == "sqs" and operation:
        return sqs_needs(environ, operation, account, region, context, known)
    if service == "ssm":
        return ssm_needs(environ, operation, account, region, context, known)
    if service == "secretsmanager":
        return secrets_needs(environ, operation, account, region, context, known)
    if service == "logs":
        return logs_needs(environ, operation, account, region, context, known)
    if service == "pricing":
        return [need(f"pricing:{operation}", "*", context, known)]
    if service in ("s3", "imagebuilder"):
        from . import iam_s3

        judge = iam_s3.s3_needs if service == "s3" else iam_s3.imagebuilder_needs
        try:
            return judge(environ, need, context, known)
        except iam_s3.Unjudged as err:
            raise Unjudged(str(err)) from err
    if service in ("ec2", "sts", "iam"):
        form = query_form(environ)
        action = form.get("Action", [""])[0]
        if not action:
            raise Unjudged(f"a {service} request without an Action")
        if service == "sts":
            if action == "GetCallerIdentity":
                return [{"free": True}]
            return [need(f"sts:{action}", form.get("RoleArn", ["*"])[0], context, known)]
        if service == "iam":
            return [need(f"iam:{action}", "*", context, known)]
        return ec2_needs(action, form, account, region, context, known)
    raise Unjudged(f"a request to {service} ({target or environ.get('PATH_INFO', '')})")


# ---------------------------------------------------------------------- DynamoDB


def table_arn(region, account, table):
    return f"arn:aws:dynamodb:{region}:{account}:table/{table}"


def key_schema(account, region, table_name):
    """(partition key name, sort key name) of a table moto holds; (None, None) if none."""
    from moto.dynamodb.models import dynamodb_backends

    try:
        table = dynamodb_backends[account][region].get_table(table_name)
        return table.hash_key_attr, table.range_key_attr
    except Exception:
        return None, None


def scalar(value):
    """A DynamoDB attribute value as the string IAM compares."""
    if not isinstance(value, dict) or not value:
        return None
    kind, inner = next(iter(value.items()))
    return str(inner) if kind in ("S", "N", "B") else None


def expression_names(expression, names):
    """The top-level attribute names an expression refers to."""
    if not expression:
        return set()
    text = re.sub(r":[A-Za-z0-9_]+", " ", expression)
    found = set()
    for match in re.finditer(r"(?<![.\w#\]])(#?[A-Za-z_][A-Za-z0-9_]*)", text):
        token = match.group(1)
        after = text[match.end() :].lstrip()
        if after.startswith("("):
            continue  # a function
        if token.startswith("#"):
            found.add((names or {}).get(token, token))
        elif token.lower() not in EXPRESSION_WORDS:
            found.add(token)
    return found


def item_context(request, account, region, table, key_field, enclosing=None):
    """dynamodb:LeadingKeys/Attributes/ReturnValues/EnclosingOperation of one item request."""
    names = request.get("ExpressionAttributeNames") or {}
    item = request.get(key_field) or {}
    attributes = set(item)
    for field in ("UpdateExpression", "ConditionExpression", "ProjectionExpression", "FilterExpression"):
        attributes |= expression_names(request.get(field), names)
    attributes |= set(request.get("AttributesToGet") or [])
    attributes |= set(request.get("AttributeUpdates") or {})
    attributes |= set(request.get("Expected") or {})
    hash_key, _ = key_schema(account, region, table)
    context = {"dynamodb:attributes": sorted(attributes)}
    leading = scalar(item.get(hash_key)) if hash_key else None
    if leading is not None:
        context["dynamodb:leadingkeys"] = [leading]
    if request.get("ReturnValues"):
        context["dynamodb:returnvalues"] = [request["ReturnValues"]]
    if enclosing:
        context["dynamodb:enclosingoperation"] = [enclosing]
    return context


def query_context(request, account, region, table):
    names = request.get("ExpressionAttributeNames") or {}
    values = request.get("ExpressionAttributeValues") or {}
    context = {}
    attributes = set()
    for field in ("KeyConditionExpression", "ProjectionExpression", "FilterExpression"):
        attributes |= expression_names(request.get(field), names)
    attributes |= set(request.get("AttributesToGet") or [])
    if attributes:
        context["dynamodb:attributes"] = sorted(attributes)
    if request.get("Select"):
        context["dynamodb:select"] = [request["Select"]]
    expression = request.get("KeyConditionExpression") or ""
    hash_key, _ = key_schema(account, region, table)
    if hash_key and not request.get("IndexName"):
        for match in re.finditer(r"(#?[A-Za-z_][A-Za-z0-9_]*)\s*=\s*(:[A-Za-z0-9_]+)", expression):
            name = names.get(match.group(1), match.group(1))
            if name == hash_key and scalar(values.get(match.group(2))) is not None:
                context["dynamodb:leadingkeys"] = [scalar(values[match.group(2)])]
    return context


TRANSACT_ACTIONS = {
    "Put": ("dynamodb:PutItem", "Item"),
    "Update": ("dynamodb:UpdateItem", "Key"),
    "Delete": ("dynamodb:DeleteItem", "Key"),
    "ConditionCheck": ("dynamodb:ConditionCheckItem", "Key"),
    "Get": ("dynamodb:GetItem", "Key"),
}
ITEM_ACTIONS = {"GetItem": "Key", "PutItem": "Item", "UpdateItem": "Key", "DeleteItem": "Key"}


def dynamodb_needs(environ, operation, account, region, context, known):
    request = json.loads(read_body(environ) or b"{}")
    known = known | DYNAMODB_KEYS
    if operation in ITEM_ACTIONS:
        table = request.get("TableName", "")
        extra = item_context(request, account, region, table, ITEM_ACTIONS[operation])
        return [need(f"dynamodb:{operation}", table_arn(region, account, table), context, known, extra)]
    if operation in ("TransactWriteItems", "TransactGetItems"):
        found = []
        for entry in request.get("TransactItems") or []:
            kind, body = next(iter(entry.items()))
            if kind not in TRANSACT_ACTIONS:
                raise Unjudged(f"{operation} item {kind}")
            action, key_field = TRANSACT_ACTIONS[kind]
            table = body.get("TableName", "")
            extra = item_context(body, account, region, table, key_field, enclosing=operation)
            found.append(need(action, table_arn(region, account, table), context, known, extra))
        return found
    if operation in ("Query", "Scan"):
        table = request.get("TableName", "")
        resource = table_arn(region, account, table)
        if request.get("IndexName"):
            resource += f"/index/{request['IndexName']}"
        extra = query_context(request, account, region, table) if operation == "Query" else {}
        return [need(f"dynamodb:{operation}", resource, context, known, extra)]
    if operation in ("BatchGetItem", "BatchWriteItem"):
        tables = request.get("RequestItems") or {}
        return [need(f"dynamodb:{operation}", table_arn(region, account, t), context, known) for t in tables]
    if operation in ("ListTables", "DescribeLimits", "DescribeEndpoints"):
        return [need(f"dynamodb:{operation}", "*", context, known)]
    table = request.get("TableName")
    if not table:
        raise Unjudged(f"dynamodb:{operation}")
    return [need(f"dynamodb:{operation}", table_arn(region, account, table), context, known)]


# ---------------------------------------------------------------------- SQS, SSM, Secrets, Logs


SQS_SINGLE = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}


def sqs_needs(environ, operation, account, region, context, known):
    request = json.loads(read_body(environ) or b"{}")
    action = "sqs:" + SQS_SINGLE.get(operation, operation)
    if request.get("QueueUrl"):
        parts = urlparse(request["QueueUrl"]).path.strip("/").split("/")
        owner, name = (parts[-2], parts[-1]) if len(parts) >= 2 else (account, parts[-1])
        return [need(action, f"arn:aws:sqs:{region}:{owner}:{name}", context, known)]
    if request.get("QueueName"):
        owner = request.get("QueueOwnerAWSAccountId") or account
        return [need(action, f"arn:aws:sqs:{region}:{owner}:{request['QueueName']}", context, known)]
    return [need(action, "*", context, known)]


def parameter_arn(name, account, region):
    """An SSM parameter's ARN (a name without a leading '/' gets one; AWS's public
    parameters, /aws/service/..., have no account in theirs)."""
    if name.startswith("arn:"):
        return name
    name = name.split(":", 1)[0]  # a :version or :label selector names the same parameter
    path = name if name.startswith("/") else "/" + name
    owner = "" if path.startswith("/aws/service/") else account
    return f"arn:aws:ssm:{region}:{owner}:parameter{path}"


def ssm_needs(environ, operation, account, region, context, known):
    request = json.loads(read_body(environ) or b"{}")
    action = f"ssm:{operation}"
    if request.get("Name"):
        return [need(action, parameter_arn(request["Name"], account, region), context, known)]
    if request.get("Names"):
        return [need(action, parameter_arn(n, account, region), context, known) for n in request["Names"]]
    if request.get("Path"):
        return [need(action, parameter_arn(request["Path"], account, region), context, known)]
    return [need(action, "*", context, known)]


def secrets_needs(environ, operation, account, region, context, known):
    from .iam_policies import secret_arn

    request = json.loads(read_body(environ) or b"{}")
    action = f"secretsmanager:{operation}"
    ident = request.get("SecretId") or request.get("Name")
    if not ident:
        return [need(action, "*", context, known)]
    arn = secret_arn(ident, account, region) or (
        ident if ident.startswith("arn:") else f"arn:aws:secretsmanager:{region}:{account}:secret:{ident}"
    )
    return [need(action, arn, context, known)]


def logs_needs(environ, operation, account, region, context, known):
    request = json.loads(read_body(environ) or b"{}")
    group = request.get("logGroupName") or request.get("logGroupIdentifier")
    stream = request.get("logStreamName")
    action = f"logs:{operation}"
    if group and stream:
        return [need(action, f"arn:aws:logs:{region}:{account}:log-group:{group}:log-stream:{stream}", context, known)]
    if group:
        return [need(action, f"arn:aws:logs:{region}:{account}:log-group:{group}:*", context, known)]
    return [need(action, "*", context, known)]


# ---------------------------------------------------------------------- EC2


def query_form(environ):
    body = read_body(environ)
    form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    for key, values in parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True).items():
        form.setdefault(key, values)
    return form


def numbered(form, prefix):
    """The members of a query-protocol list `prefix.N.…` as dicts of their rest keys."""
    members = {}
    for key, values in form.items():
        if not key.startswith(prefix + "."):
            continue
        rest = key[len(prefix) + 1 :]
        index, _, field = rest.partition(".")
        if index.isdigit():
            members.setdefault(int(index), {})[field] = values[0]
    return [members[i] for i in sorted(members)]


def submembers(member, prefix):
    return numbered({k: [v] for k, v in member.items()}, prefix)


def ec2_backend(account, region):
    from moto.ec2.models import ec2_backends

    return ec2_backends[account][region]


def tag_context(tags, prefix):
    context = {f"{prefix}/{k}".lower(): [v] for k, v in tags.items()}
    return context


def requested_tags(form, resource_type):
    tags = {}
    for spec in numbered(form, "TagSpecification"):
        if spec.get("ResourceType") == resource_type:
            for tag in submembers(spec, "Tag"):
                tags[tag.get("Key", "")] = tag.get("Value", "")
    return tags


def launch_template(backend, spec):
    try:
        if spec.get("LaunchTemplateId"):
            template = backend.get_launch_template(spec["LaunchTemplateId"])
        else:
            template = backend.get_launch_template_by_name(spec.get("LaunchTemplateName"))
    except Exception:
        return None, None
    version = spec.get("Version") or "$Default"
    try:
        if version == "$Latest":
            data = template.latest_version().data
        elif version == "$Default":
            data = template.default_version().data
        else:
            data = template.get_version(int(version)).data
    except Exception:
        data = {}
    return template, data or {}


def resource_tags(backend, resource_id):
    try:
        return {t["key"]: t["value"] for t in backend.describe_tags(filters={"resource-id": [resource_id]})}
    except Exception:
        return {}


def instance_profile_role(account, profile):
    """The ARN of the role of an instance profile given by Arn or Name, if moto has it."""
    from moto.iam.models import iam_backends

    try:
        backend = iam_backends[account]["aws"]
        if profile.get("Arn"):
            found = backend.get_instance_profile_by_arn(profile["Arn"])
        else:
            found = backend.get_instance_profile(profile.get("Name"))
        return [role.arn for role in found.roles]
    except Exception:
        return []


def ec2_needs(action, form, account, region, context, known):
    arn = f"arn:aws:ec2:{region}:{account}"
    if action.startswith("Describe") or action in ("GetLaunchTemplateData",):
        return [need(f"ec2:{action}", "*", context, known)]
    backend = ec2_backend(account, region)
    if action in ("TerminateInstances", "StartInstances", "StopInstances"):
        found = []
        for instance_id in [v for k, v in sorted(form.items()) if k.startswith("InstanceId.")]:
            instance_id = instance_id[0]
            try:
                backend.get_instance(instance_id)
            except Exception:
                continue  # an unknown instance: EC2's own error (moto's) answers it
            extra = tag_context(resource_tags(backend, instance_id), "aws:resourcetag")
            found.append(need(f"ec2:{action}", f"{arn}:instance/{instance_id}", context, known, extra, TAG_KEYS))
        return found
    if action == "ModifyInstanceAttribute":
        # One instance (InstanceId), with its tags as aws:ResourceTag (Service
        # Authorization Reference, Amazon EC2: ModifyInstanceAttribute takes the instance
        # resource and its aws:ResourceTag/${TagKey} condition key).
        instance_id = (form.get("InstanceId") or [""])[0]
        try:
            backend.get_instance(instance_id)
        except Exception:
            return []  # an unknown instance: EC2's own error (moto's) answers it
        extra = tag_context(resource_tags(backend, instance_id), "aws:resourcetag")
        return [need("ec2:ModifyInstanceAttribute", f"{arn}:instance/{instance_id}", context, known, extra, TAG_KEYS)]
    if action == "CreateTags":
        tags = {t.get("Key", ""): t.get("Value", "") for t in numbered(form, "Tag")}
        extra = tag_context(tags, "aws:requesttag")
        extra["aws:tagkeys"] = sorted(tags)
        found = []
        for values in [v for k, v in sorted(form.items()) if k.startswith("ResourceId.")]:
            ident = values[0]
            kind = {"i": "instance", "vol": "volume", "lt": "launch-template", "fleet": "fleet"}.get(ident.split("-")[0], "*")
            own = dict(extra)
            own.update(tag_context(resource_tags(backend, ident), "aws:resourcetag"))
            found.append(need("ec2:CreateTags", f"{arn}:{kind}/{ident}", context, known, own, TAG_KEYS | {"ec2:createaction"}))
        return found
    if action == "CreateFleet":
        return fleet_needs(form, backend, account, region, context, known)
    raise Unjudged(f"ec2:{action}")


def fleet_needs(form, backend, account, region, context, known):
    arn = f"arn:aws:ec2:{region}:{account}"
    launch_resources = [(f"{arn}:fleet/*", {}), (f"{arn}:network-interface/*", {}), (f"{arn}:volume/*", {})]
    instance_tags = requested_tags(form, "instance")
    request_tags = tag_context(instance_tags, "aws:requesttag")
    request_tags["aws:tagkeys"] = sorted(instance_tags)
    launch_resources.append((f"{arn}:instance/*", request_tags))
    images, subnets, groups, roles, parameters = set(), set(), set(), set(), set()
    for config in numbered(form, "LaunchTemplateConfigs"):
        spec = {
            k.split(".", 1)[1]: v
            for k, v in config.items()
            if k.startswith("LaunchTemplateSpecification.")
        }
        template, data = launch_template(backend, spec)
        if template is not None:
            tags = tag_context(resource_tags(backend, template.id), "aws:resourcetag")
            launch_resources.append((f"{arn}:launch-template/{template.id}", tags))
        overrides = submembers(config, "Overrides") or [{}]
        for override in overrides:
            image = override.get("ImageId") or data.get("ImageId")
            if image and image.startswith("resolve:ssm:"):
                parameters.add(image[len("resolve:ssm:") :])
                from .image_params import resolved_image

                image = resolved_image(backend, image)
            if image and not image.startswith("resolve:ssm:"):
                images.add(image)
            subnets.add(override.get("SubnetId") or "*")
        for group in data.get("SecurityGroupId") or data.get("SecurityGroupIds") or []:
            groups.add(group)
        for interface in data.get("NetworkInterface") or data.get("NetworkInterfaces") or []:
            if isinstance(interface, dict):
                subnet = interface.get("SubnetId")
                if subnet:
                    subnets.add(subnet)
                for group in interface.get("SecurityGroupId") or interface.get("Groups") or []:
                    groups.add(group)
        profile = data.get("IamInstanceProfile")
        if isinstance(profile, dict) and profile:
            roles.update(instance_profile_role(account, profile))
    launch_resources += [(f"arn:aws:ec2:{region}::image/{i}", {}) for i in sorted(images)]
    launch_resources += [(f"{arn}:subnet/{s}", {}) for s in sorted(subnets)]
    launch_resources += [(f"{arn}:security-group/{g}", {}) for g in sorted(groups)]
    target = {k: v[0] for k, v in form.items() if k.startswith("TargetCapacitySpecification.")}
    if "spot" in (target.get("TargetCapacitySpecification.DefaultTargetCapacityType"), None) and int(
        target.get("TargetCapacitySpecification.SpotTargetCapacity") or 0
    ) or target.get("TargetCapacitySpecification.DefaultTargetCapacityType") == "spot":
        launch_resources.append((f"{arn}:spot-instances-request/*", {}))
    found = []
    for action in ("ec2:CreateFleet", "ec2:RunInstances"):
        for resource, extra in launch_resources:
            if action == "ec2:RunInstances" and ":fleet/" in resource:
                continue  # the fleet is CreateFleet's own resource, not RunInstances'
            found.append(need(action, resource, context, known, extra, TAG_KEYS))
    if instance_tags:
        extra = dict(request_tags)
        extra["ec2:createaction"] = ["CreateFleet"]
        found.append(need("ec2:CreateTags", f"{arn}:instance/*", context, known, extra, TAG_KEYS | {"ec2:createaction"}))
    for role in sorted(roles):
        extra = {"iam:passedtoservice": ["ec2.amazonaws.com"]}
        found.append(need("iam:PassRole", role, context, known, extra, {"iam:passedtoservice", "iam:associatedresourcearn"}))
    for name in sorted(parameters):
        found.append(need("ssm:GetParameters", parameter_arn(unquote(name), account, region), context, known))
    return found
