//! template.yaml on the emulator: the stack a real `sam deploy` would create, made in moto
//! so the end-to-end tests and `make demo` run on the resources the template declares
//! (table with its GSI, queue with its DLQ, config parameter, launch template) rather
//! than on ones the tests make themselves.
//!
//! moto does not apply the SAM transform, so the template is translated offline with
//! `aws-sam-translator` (pinned in requirements-dev.txt) in the Python of `.venv`, the way
//! `sam package` + CloudFormation would: each function's `CodeUri` becomes an S3 object
//! (a stub zip uploaded to moto first). Two known gaps of moto are bridged in the open,
//! and the result says what was bridged:
//! - resource types moto has no model for (the Function URL, the alarms, the queue
//!   policy) are removed before `CreateStack`, with the outputs that refer to them;
//! - moto ignores a table's `TimeToLiveSpecification`, so the template's TTL setting is
//!   applied with `UpdateTimeToLive` afterwards.
//!
//! The secrets are created in moto and passed by ARN (moto cannot create
//! `AWS::SecretsManager::Secret` from a template either), which is the template's
//! "bring your own secret" path.

use crate::moto::{moto_server_path, Moto};
use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// What the stack is created with.
#[derive(Debug, Clone, Serialize)]
pub struct StackSpec {
    pub stack_name: String,
    /// The `DeploymentName` parameter.
    pub deployment: String,
    pub app_id: u64,
    /// The `GitHubApiUrl` parameter (the simulator, in tests).
    pub github_api_url: String,
    /// Value of the webhook secret created in moto and passed by ARN.
    pub webhook_secret: String,
    /// Value of the App private key secret created in moto and passed by ARN.
    pub app_key_pem: String,
    /// The `PoolsConfig` parameter; `None` keeps the template's default pool.
    pub pools_config: Option<String>,
}

/// A stack created in moto from template.yaml.
#[derive(Debug, Clone, Deserialize)]
pub struct Stack {
    pub status: String,
    /// Output key → value, as `DescribeStacks` reports them.
    pub outputs: BTreeMap<String, String>,
    /// (logical id, type, physical id) of every resource moto made.
    pub resources: Vec<(String, String, String)>,
    /// The environment of each function (by logical id), as the stack configured it.
    pub functions: BTreeMap<String, BTreeMap<String, String>>,
    /// Logical ids removed before `CreateStack` because moto cannot model their type.
    pub stripped_resources: Vec<String>,
    /// Outputs removed with them.
    pub stripped_outputs: Vec<String>,
}

impl Stack {
    /// The output `key`, or an error naming it.
    pub fn output(&self, key: &str) -> anyhow::Result<&str> {
        self.outputs
            .get(key)
            .map(String::as_str)
            .with_context(|| format!("the stack has no output {key}"))
    }

    /// The environment variable `name` of the function `logical_id`.
    pub fn function_env(&self, logical_id: &str, name: &str) -> anyhow::Result<&str> {
        self.functions
            .get(logical_id)
            .with_context(|| format!("the stack has no function {logical_id}"))?
            .get(name)
            .map(String::as_str)
            .with_context(|| format!("function {logical_id} has no variable {name}"))
    }

    /// Whether moto made the resource `logical_id` of type `kind`.
    pub fn has_resource(&self, logical_id: &str, kind: &str) -> bool {
        self.resources
            .iter()
            .any(|(id, t, _)| id == logical_id && t == kind)
    }
}

/// Resource types moto 5.2.5's CloudFormation has no model for; see the module docs.
pub const MOTO_CANNOT_CREATE: [&str; 3] = [
    "AWS::Lambda::Url",
    "AWS::CloudWatch::Alarm",
    "AWS::SQS::QueuePolicy",
];

/// The Python that translates and creates the stack; JSON request on stdin, JSON out.
const CREATE_STACK_PY: &str = r##"
import io, json, sys, time, zipfile
import boto3
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

class NoManagedPolicies:
    # The template names no managed policy: nothing to look up.
    def load(self):
        return {}

def translate(template_path, bucket):
    with open(template_path) as f:
        template = yaml_parse(f.read())
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] == "AWS::Serverless::Function":
            resource["Properties"]["CodeUri"] = f"s3://{bucket}/{logical_id}.zip"
    return transform(template, {}, NoManagedPolicies())

def main():
    req = json.load(sys.stdin)
    if req["mode"] == "translate":
        json.dump(translate(req["template"], "code"), sys.stdout)
        return
    kw = dict(endpoint_url=req["endpoint"], region_name="us-east-1",
              aws_access_key_id="testing", aws_secret_access_key="testing")
    if req["mode"] == "disable-queue-sources":
        sqs = boto3.client("sqs", **kw)
        arn = sqs.get_queue_attributes(QueueUrl=req["queue_url"],
                                       AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        lam = boto3.client("lambda", **kw)
        disabled = []
        for mapping in lam.list_event_source_mappings(EventSourceArn=arn)["EventSourceMappings"]:
            lam.update_event_source_mapping(UUID=mapping["UUID"], Enabled=False)
            disabled.append(mapping["UUID"])
        json.dump(disabled, sys.stdout)
        return
    spec = req["spec"]
    name = spec["stack_name"]
    bucket = f"{name}-code"
    cfn_json = translate(req["template"], bucket)
    stripped = [k for k, r in cfn_json["Resources"].items() if r["Type"] in req["strip"]]
    for k in stripped:
        del cfn_json["Resources"][k]
    outputs = cfn_json.get("Outputs", {})
    stripped_outputs = [k for k, o in outputs.items()
                        if any(json.dumps(o).find(f'"{s}"') >= 0 for s in stripped)]
    for k in stripped_outputs:
        del outputs[k]

    updating = req["mode"] == "update"
    s3 = boto3.client("s3", **kw)
    if not updating:
        s3.create_bucket(Bucket=bucket)
    stub = io.BytesIO()
    with zipfile.ZipFile(stub, "w") as z:
        z.writestr("bootstrap", "#!/bin/sh\nexit 1\n")
    for k, r in cfn_json["Resources"].items():
        if r["Type"] == "AWS::Lambda::Function":
            s3.put_object(Bucket=bucket, Key=f"{k}.zip", Body=stub.getvalue())

    ec2 = boto3.client("ec2", **kw)
    vpc = ec2.describe_vpcs(Filters=[{"Name": "isDefault", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    subnets = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"]
    groups = ec2.describe_security_groups(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["SecurityGroups"]
    sm = boto3.client("secretsmanager", **kw)
    if updating:
        key_arn = sm.describe_secret(SecretId=f"{name}/github-app-key")["ARN"]
        hook_arn = sm.describe_secret(SecretId=f"{name}/webhook-secret")["ARN"]
    else:
        key_arn = sm.create_secret(Name=f"{name}/github-app-key", SecretString=spec["app_key_pem"])["ARN"]
        hook_arn = sm.create_secret(Name=f"{name}/webhook-secret", SecretString=spec["webhook_secret"])["ARN"]
    params = {
        "DeploymentName": spec["deployment"],
        "GitHubAppId": str(spec["app_id"]),
        "GitHubApiUrl": spec["github_api_url"],
        "GitHubAppKeySecretArn": key_arn,
        "WebhookSecretArn": hook_arn,
        "RunnerSubnets": subnets[0]["SubnetId"],
        "RunnerSecurityGroups": groups[0]["GroupId"],
    }
    if spec.get("pools_config"):
        params["PoolsConfig"] = spec["pools_config"]
    params.update(req.get("overrides", {}))

    cfn = boto3.client("cloudformation", **kw)
    apply = cfn.update_stack if updating else cfn.create_stack
    apply(StackName=name, TemplateBody=json.dumps(cfn_json),
          Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"],
          Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in params.items()])
    for _ in range(600):
        stack = cfn.describe_stacks(StackName=name)["Stacks"][0]
        if not stack["StackStatus"].endswith("_IN_PROGRESS"):
            break
        time.sleep(0.1)
    # moto also lists the stack itself, without a logical id.
    resources = [(r["LogicalResourceId"], r["ResourceType"], r.get("PhysicalResourceId", ""))
                 for r in cfn.list_stack_resources(StackName=name)["StackResourceSummaries"]
                 if r.get("LogicalResourceId")]

    # moto ignores TimeToLiveSpecification in templates: apply the template's own setting.
    ddb = boto3.client("dynamodb", **kw)
    for logical_id, kind, physical in resources:
        ttl = cfn_json["Resources"][logical_id]["Properties"].get("TimeToLiveSpecification")
        if kind == "AWS::DynamoDB::Table" and ttl and not updating:
            ddb.update_time_to_live(TableName=physical, TimeToLiveSpecification=ttl)

    lam = boto3.client("lambda", **kw)
    functions = {}
    for logical_id, kind, physical in resources:
        if kind == "AWS::Lambda::Function":
            conf = lam.get_function_configuration(FunctionName=physical)
            functions[logical_id] = conf.get("Environment", {}).get("Variables", {})
    json.dump({
        "status": stack["StackStatus"],
        "outputs": {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])},
        "resources": resources,
        "functions": functions,
        "stripped_resources": stripped,
        "stripped_outputs": stripped_outputs,
    }, sys.stdout)

main()
"##;

/// The workspace's template.yaml.
/// Creates the image stack (infra/image/template.yaml) `name` in the emulator, for
/// `deployment`, naming `runner_bucket` as the main stack's bucket the bakes read from.
pub async fn create_image_stack(
    cfn: &aws_sdk_cloudformation::Client,
    name: &str,
    deployment: &str,
    runner_bucket: &str,
) -> anyhow::Result<()> {
    use aws_sdk_cloudformation::types::{Capability, Parameter};
    let template =
        std::fs::read_to_string(crate::pipeline::workspace_path("infra/image/template.yaml"))?;
    let parameter = |key: &str, value: &str| {
        Parameter::builder()
            .parameter_key(key)
            .parameter_value(value)
            .build()
    };
    cfn.create_stack()
        .stack_name(name)
        .template_body(template)
        .parameters(parameter("DeploymentName", deployment))
        .parameters(parameter("RunnerBucket", runner_bucket))
        .capabilities(Capability::CapabilityIam)
        .send()
        .await?;
    Ok(())
}

pub fn template_path() -> std::path::PathBuf {
    crate::pipeline::workspace_path("template.yaml")
}

async fn run_python(request: serde_json::Value) -> anyhow::Result<Vec<u8>> {
    let python = moto_server_path().with_file_name("python");
    if !python.exists() {
        bail!("{} not found: run `make venv`", python.display());
    }
    let mut child = Command::new(&python)
        .args(["-c", CREATE_STACK_PY])
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", python.display()))?;
    let mut stdin = child.stdin.take().context("python has no stdin")?;
    stdin.write_all(&serde_json::to_vec(&request)?).await?;
    drop(stdin);
    let output = child.wait_with_output().await?;
    if !output.status.success() {
        bail!(
            "translating or creating the stack failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(output.stdout)
}

/// template.yaml as plain CloudFormation (JSON), translated by aws-sam-translator.
pub async fn translate_template(template: &Path) -> anyhow::Result<serde_json::Value> {
    let request = serde_json::json!({ "mode": "translate", "template": template });
    let stdout = run_python(request).await?;
    serde_json::from_slice(&stdout).context("reading the translated template")
}

/// Translates `template` and creates it as a stack in `moto`.
pub async fn create_stack(moto: &Moto, template: &Path, spec: &StackSpec) -> anyhow::Result<Stack> {
    apply_stack(moto, template, spec, "create", &[]).await
}

/// Translates `template` and creates it as a stack in `moto`, with `overrides` of the
/// parameters `spec` gives (e.g. `RunnerAmi`).
pub async fn create_stack_with(
    moto: &Moto,
    template: &Path,
    spec: &StackSpec,
    overrides: &[(&str, &str)],
) -> anyhow::Result<Stack> {
    apply_stack(moto, template, spec, "create", overrides).await
}

/// Disables the event source mappings of the queue `queue_url` (the stack's scaler on
/// its jobs queue), for a stack whose queue `ephemera local` drains itself: moto runs an
/// enabled mapping at every `SendMessage`, receiving the message (a receive that counts
/// towards the DLQ's maxReceiveCount) and invoking the function's stub, which fails;
/// and a receive of `ephemera local` at that moment finds the message in flight. The
/// UUIDs of the mappings disabled.
pub async fn disable_queue_event_sources(
    moto: &Moto,
    queue_url: &str,
) -> anyhow::Result<Vec<String>> {
    let request = serde_json::json!({
        "mode": "disable-queue-sources",
        "endpoint": moto.endpoint,
        "queue_url": queue_url,
    });
    let stdout = run_python(request).await?;
    serde_json::from_slice(&stdout).context("reading the mappings disabled")
}

/// Translates `template` again and updates the stack `spec` created with it, as a
/// redeploy (`sam deploy`) does: the same parameters, but for `overrides`.
pub async fn update_stack(
    moto: &Moto,
    template: &Path,
    spec: &StackSpec,
    overrides: &[(&str, &str)],
) -> anyhow::Result<Stack> {
    apply_stack(moto, template, spec, "update", overrides).await
}

async fn apply_stack(
    moto: &Moto,
    template: &Path,
    spec: &StackSpec,
    mode: &str,
    overrides: &[(&str, &str)],
) -> anyhow::Result<Stack> {
    let overrides: BTreeMap<&str, &str> = overrides.iter().copied().collect();
    let request = serde_json::json!({
        "mode": mode,
        "endpoint": moto.endpoint,
        "template": template,
        "spec": spec,
        "strip": MOTO_CANNOT_CREATE,
        "overrides": overrides,
    });
    let stdout = run_python(request).await?;
    let stack: Stack = serde_json::from_slice(&stdout).context("reading the stack")?;
    let done = format!("{}_COMPLETE", mode.to_uppercase());
    if stack.status != done {
        bail!("stack {} ended {}", spec.stack_name, stack.status);
    }
    Ok(stack)
}
