"""Image Builder's rules that the image stack relies on, checked where nothing can run it.

moto has no Image Builder and cfn-lint checks each property alone, so a stack can pass
both and still never publish an image. `python infra/image/lint.py [TEMPLATE...]`
(make lint-infra, on infra/image/template.yaml) checks these rules, each with the page
that states it, and prints each failure with its rule's id; it exits 1 on any failure.
tests/fixtures/image-lint/ holds a template that fails each rule
(infra/image/test_lint.py runs them).

- ssm-output-execution-role: a pipeline whose distribution writes an SSM parameter runs
  with an execution role that may ssm:PutParameter on that parameter, and
  ec2:DescribeImages when its data type is aws:ec2:image. Image Builder's service-linked
  role may write only parameter/imagebuilder/*. User guide, "Create and update AMI
  distribution configurations", prerequisites for SSM output parameters:
  https://docs.aws.amazon.com/imagebuilder/latest/userguide/cr-upd-ami-distribution-settings.html#ami-distribution-prereqs-ssm-param
  and Systems Manager's "Native parameter support for Amazon Machine Image IDs":
  https://docs.aws.amazon.com/systems-manager/latest/userguide/parameter-store-ec2-aliases.html
- component-size: a component's inline document (CreateComponent `data`) is at most
  16,000 characters. API reference, CreateComponent:
  https://docs.aws.amazon.com/imagebuilder/latest/APIReference/API_CreateComponent.html
- schedule-cron: a pipeline's ScheduleExpression is cron(...) of six fields; Image
  Builder takes no rate(...). A parameter that feeds it restricts itself to that form
  (AllowedPattern refusing rate(...)). User guide, "Use cron expressions in Image Builder":
  https://docs.aws.amazon.com/imagebuilder/latest/userguide/cron-expressions.html
- ssm-parent-image: a recipe's parent image that names an SSM parameter does so as
  Image Builder reads it, `ssm:` then the parameter's name or ARN, resolved at each bake;
  CloudFormation's `resolve:ssm:` would pin the image at deploy time. CloudFormation
  reference, AWS::ImageBuilder::ImageRecipe ParentImage:
  https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-imagebuilder-imagerecipe.html
"""

import fnmatch
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPONENT_DATA_LIMIT = 16000
CRON = re.compile(r"cron\([^ ()]+( [^ ()]+){5}\)")
# Forms a schedule parameter must refuse: rate(...), and cron(...) of five fields.
NOT_IMAGE_BUILDER_SCHEDULES = ["rate(7 days)", "rate(1 day)", "cron(0 4 * * ?)"]
SSM_PARAMETER_NAME = re.compile(r"/?[a-zA-Z0-9_.\-/]+")
SSM_PARAMETER_ARN = re.compile(r"arn:[a-z-]+:ssm:[a-z0-9-]*:[0-9]*:parameter/[a-zA-Z0-9_.\-/]+")


class CfnLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short forms, read as their long forms."""


def _short_form(loader, suffix, node):
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


CfnLoader.add_multi_constructor("!", _short_form)


def load(path):
    with open(path, encoding="utf-8") as f:
        return yaml.load(f, Loader=CfnLoader)


def text_of(value):
    """A string property as text: a literal, or the template of its Fn::Sub."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Sub" in value:
        sub = value["Fn::Sub"]
        return sub if isinstance(sub, str) else sub[0]
    return None


def referenced(value):
    """The logical id a Ref or Fn::GetAtt names, if the value is one."""
    if isinstance(value, dict):
        if "Ref" in value:
            return value["Ref"]
        if "Fn::GetAtt" in value:
            return value["Fn::GetAtt"][0]
    return None


def as_list(value):
    return value if isinstance(value, list) else [value]


def of_type(template, kind):
    for name, resource in (template.get("Resources") or {}).items():
        if resource.get("Type") == kind:
            yield name, resource.get("Properties") or {}


def allows(role, action, resource):
    """Whether an Allow statement of the role's inline policies grants `action` on
    `resource` (both as text, ${...} left as they are)."""
    for policy in role.get("Policies") or []:
        for statement in as_list(policy.get("PolicyDocument", {}).get("Statement", [])):
            if statement.get("Effect") != "Allow":
                continue
            actions = [a.lower() for a in as_list(statement.get("Action", []))]
            if not any(fnmatch.fnmatchcase(action.lower(), a) for a in actions):
                continue
            for granted in as_list(statement.get("Resource", [])):
                granted = text_of(granted)
                if granted is not None and fnmatch.fnmatchcase(resource, granted):
                    return True
    return False


def check_ssm_output_execution_role(template):
    resources = template.get("Resources") or {}
    for name, pipeline in of_type(template, "AWS::ImageBuilder::ImagePipeline"):
        distribution = resources.get(referenced(pipeline.get("DistributionConfigurationArn")))
        if distribution is None:
            continue
        outputs = [
            ssm
            for region in (distribution.get("Properties") or {}).get("Distributions", [])
            for ssm in region.get("SsmParameterConfigurations") or []
        ]
        if not outputs:
            continue
        role_id = referenced(pipeline.get("ExecutionRole"))
        role = resources.get(role_id, {})
        if role.get("Type") != "AWS::IAM::Role":
            yield (
                f"{name} writes the SSM parameter(s) "
                f"{[text_of(o.get('ParameterName')) for o in outputs]} and has no "
                "ExecutionRole of this template: the service-linked role may write only "
                "parameter/imagebuilder/*"
            )
            continue
        role = role.get("Properties") or {}
        trust = str(role.get("AssumeRolePolicyDocument"))
        if "imagebuilder.amazonaws.com" not in trust:
            yield f"{name}'s ExecutionRole {role_id} is not trusted by imagebuilder.amazonaws.com"
        for output in outputs:
            parameter = text_of(output.get("ParameterName"))
            if parameter is None:
                yield f"{name}: cannot read the parameter name {output.get('ParameterName')}"
                continue
            arn = (
                "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter"
                + ("" if parameter.startswith("/") else "/")
                + parameter
            )
            if not allows(role, "ssm:PutParameter", arn):
                yield f"{name}'s ExecutionRole {role_id} may not ssm:PutParameter on {arn}"
            if output.get("DataType") == "aws:ec2:image" and not allows(
                role, "ec2:DescribeImages", "*"
            ):
                yield (
                    f"{name}'s ExecutionRole {role_id} may not ec2:DescribeImages, which a "
                    f"parameter of data type aws:ec2:image ({parameter}) needs"
                )


def check_component_size(template):
    for name, component in of_type(template, "AWS::ImageBuilder::Component"):
        data = component.get("Data")
        if isinstance(data, str) and len(data) > COMPONENT_DATA_LIMIT:
            yield (
                f"{name}'s Data is {len(data)} characters, over Image Builder's "
                f"{COMPONENT_DATA_LIMIT}"
            )


def check_schedule_cron(template):
    parameters = template.get("Parameters") or {}
    checked = set()
    for name, pipeline in of_type(template, "AWS::ImageBuilder::ImagePipeline"):
        expression = (pipeline.get("Schedule") or {}).get("ScheduleExpression")
        if expression is None:
            continue
        if isinstance(expression, str):
            if not CRON.fullmatch(expression):
                yield f"{name}'s ScheduleExpression {expression!r} is not cron(...) of six fields"
            continue
        parameter = referenced(expression)
        if parameter not in parameters:
            yield f"{name}'s ScheduleExpression is neither a literal nor a parameter"
            continue
        if parameter in checked:
            continue
        checked.add(parameter)
        spec = parameters[parameter]
        default = spec.get("Default")
        if default is not None and not CRON.fullmatch(str(default)):
            yield f"{parameter}'s default {default!r} is not cron(...) of six fields"
        pattern = spec.get("AllowedPattern")
        if pattern is None:
            yield f"{parameter} feeds {name}'s schedule and has no AllowedPattern"
            continue
        for wrong in NOT_IMAGE_BUILDER_SCHEDULES:
            if re.fullmatch(pattern, wrong):
                yield f"{parameter}'s AllowedPattern accepts {wrong!r}, which Image Builder refuses"


def parent_images(template, value):
    """The values a ParentImage may take: a literal, or every value of the mapping
    entry a Fn::FindInMap names."""
    if isinstance(value, dict) and "Fn::FindInMap" in value:
        mapping, _, key = value["Fn::FindInMap"]
        entries = (template.get("Mappings") or {}).get(mapping, {}).values()
        return [e.get(key) for e in entries if isinstance(e, dict) and key in e]
    text = text_of(value)
    return [text] if text is not None else []


def check_ssm_parent_image(template):
    for name, recipe in of_type(template, "AWS::ImageBuilder::ImageRecipe"):
        for image in parent_images(template, recipe.get("ParentImage")):
            if not isinstance(image, str):
                continue
            if "resolve:ssm" in image:
                yield (
                    f"{name}'s parent image {image!r} is CloudFormation's dynamic reference, "
                    "fixed at deploy time; Image Builder's own form is ssm:NAME"
                )
            elif image.startswith("ssm:"):
                parameter = image[len("ssm:") :]
                if not (
                    SSM_PARAMETER_ARN.fullmatch(parameter)
                    or SSM_PARAMETER_NAME.fullmatch(parameter)
                ):
                    yield f"{name}'s parent image {image!r} names no SSM parameter after ssm:"


RULES = {
    "ssm-output-execution-role": check_ssm_output_execution_role,
    "component-size": check_component_size,
    "schedule-cron": check_schedule_cron,
    "ssm-parent-image": check_ssm_parent_image,
}


def failures(path):
    """(rule, message) for every rule `path` breaks."""
    template = load(path)
    return [(rule, message) for rule, check in RULES.items() for message in check(template)]


def main(paths):
    failed = False
    for path in paths or [ROOT / "infra/image/template.yaml"]:
        for rule, message in failures(path):
            print(f"{path}: [{rule}] {message}", file=sys.stderr)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
