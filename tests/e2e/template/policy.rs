//! A small evaluator of the identity policies in the translated template, enough to ask
//! "may this role do ACTION on RESOURCE with this request context?" the way IAM answers:
//! actions and resources match as case-insensitive / case-sensitive globs, every
//! condition of a statement must hold, policy variables (`${ec2:SourceInstanceARN}`)
//! take their value from the request context and fail the condition when it is absent,
//! and `ForAllValues:` and `…IfExists` hold for a missing key while `ForAnyValue:` does
//! not. An operator
//! it does not know is an error, never a silent yes or no.

use anyhow::{bail, Context};
use serde_json::Value;
use std::collections::HashMap;

pub const REGION: &str = "us-east-1";
pub const ACCOUNT: &str = "123456789012";

/// The request context: key (lower case) → values.
pub type RequestContext = HashMap<String, Vec<String>>;

/// Builds a context from (key, values) pairs.
pub fn context(pairs: Vec<(&str, Vec<&str>)>) -> RequestContext {
    pairs
        .into_iter()
        .map(|(k, v)| (k.to_lowercase(), v.into_iter().map(str::to_owned).collect()))
        .collect()
}

/// The translated template, with its parameters' defaults, for resolving intrinsics.
pub struct Stack<'a> {
    pub template: &'a Value,
}

impl Stack<'_> {
    fn parameter(&self, name: &str) -> String {
        match name {
            "AWS::Partition" => "aws".to_owned(),
            "AWS::Region" => REGION.to_owned(),
            "AWS::AccountId" => ACCOUNT.to_owned(),
            // A removed list item: an empty pattern matches no resource.
            "AWS::NoValue" => String::new(),
            _ => match &self.template["Parameters"][name]["Default"] {
                Value::String(s) => s.clone(),
                Value::Null => format!("{name}-value"),
                other => other.to_string(),
            },
        }
    }

    /// The ARN of resource `id`, by its type and name, as AWS forms it.
    pub fn arn_of(&self, id: &str) -> anyhow::Result<String> {
        let resource = &self.template["Resources"][id];
        let props = &resource["Properties"];
        let name = |key: &str| -> anyhow::Result<String> {
            self.resolve(&props[key])
                .with_context(|| format!("{id} has no resolvable {key}"))
        };
        let (r, a) = (REGION, ACCOUNT);
        Ok(match resource["Type"].as_str().unwrap_or_default() {
            "AWS::DynamoDB::Table" => {
                format!("arn:aws:dynamodb:{r}:{a}:table/{}", name("TableName")?)
            }
            "AWS::SQS::Queue" => format!("arn:aws:sqs:{r}:{a}:{}", name("QueueName")?),
            "AWS::SSM::Parameter" => format!("arn:aws:ssm:{r}:{a}:parameter{}", name("Name")?),
            "AWS::SecretsManager::Secret" => {
                format!(
                    "arn:aws:secretsmanager:{r}:{a}:secret:{}-AbCdEf",
                    name("Name")?
                )
            }
            "AWS::Logs::LogGroup" => {
                format!("arn:aws:logs:{r}:{a}:log-group:{}", name("LogGroupName")?)
            }
            "AWS::Lambda::Function" => {
                format!("arn:aws:lambda:{r}:{a}:function:{}", name("FunctionName")?)
            }
            "AWS::EC2::LaunchTemplate" => format!("arn:aws:ec2:{r}:{a}:launch-template/lt-0123"),
            "AWS::IAM::Role" => format!("arn:aws:iam::{a}:role/{id}"),
            other => bail!("no ARN known for {id} ({other})"),
        })
    }

    /// What `Fn::GetAtt ID.Arn` gives: the ARN, but for a log group the form with a
    /// trailing `:*` that CloudFormation returns (AWS::Logs::LogGroup, "Return values").
    fn get_att_arn(&self, id: &str) -> anyhow::Result<String> {
        let arn = self.arn_of(id)?;
        Ok(match self.template["Resources"][id]["Type"].as_str() {
            Some("AWS::Logs::LogGroup") => format!("{arn}:*"),
            _ => arn,
        })
    }

    /// A value with its intrinsics (Ref, Fn::Sub, Fn::GetAtt ...Arn) resolved, or `None`.
    pub fn resolve(&self, value: &Value) -> Option<String> {
        match value {
            Value::String(s) => Some(s.clone()),
            Value::Object(map) if map.len() == 1 => {
                let (function, arg) = map.iter().next()?;
                match function.as_str() {
                    "Ref" => {
                        let name = arg.as_str()?;
                        Some(if self.template["Resources"].get(name).is_some() {
                            self.reference(name)
                        } else {
                            self.parameter(name)
                        })
                    }
                    "Fn::GetAtt" => {
                        let parts: Vec<&str> = match arg {
                            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                            Value::String(s) => s.split('.').collect(),
                            _ => return None,
                        };
                        (parts.get(1) == Some(&"Arn"))
                            .then(|| self.get_att_arn(parts[0]).ok())
                            .flatten()
                    }
                    "Fn::Sub" => self.substitute(arg),
                    "Fn::If" => {
                        let branches = arg.as_array()?;
                        let chosen = if self.condition(branches.first()?.as_str()?)? {
                            branches.get(1)?
                        } else {
                            branches.get(2)?
                        };
                        self.resolve(chosen)
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Whether the template's condition `name` holds with the parameters' defaults.
    fn condition(&self, name: &str) -> Option<bool> {
        self.holds(&self.template["Conditions"][name])
    }

    fn holds(&self, expression: &Value) -> Option<bool> {
        let (function, arg) = expression.as_object()?.iter().next()?;
        let args = || arg.as_array().into_iter().flatten();
        match function.as_str() {
            "Fn::Equals" => {
                let values: Vec<Option<String>> = args().map(|v| self.resolve(v)).collect();
                Some(values.len() == 2 && values[0].is_some() && values[0] == values[1])
            }
            "Fn::Not" => Some(!self.holds(args().next()?)?),
            "Fn::And" => args()
                .map(|v| self.holds(v))
                .collect::<Option<Vec<_>>>()
                .map(|v| v.iter().all(|b| *b)),
            "Fn::Or" => args()
                .map(|v| self.holds(v))
                .collect::<Option<Vec<_>>>()
                .map(|v| v.iter().any(|b| *b)),
            "Condition" => self.condition(arg.as_str()?),
            _ => None,
        }
    }

    /// What `Ref` of resource `id` gives, as CloudFormation documents it: a parameter's
    /// or a log group's name, a secret's ARN; a placeholder for other types.
    fn reference(&self, id: &str) -> String {
        let resource = &self.template["Resources"][id];
        match resource["Type"].as_str().unwrap_or_default() {
            "AWS::SSM::Parameter" => self
                .resolve(&resource["Properties"]["Name"])
                .unwrap_or_else(|| format!("{id}-physical-id")),
            "AWS::Logs::LogGroup" => self
                .resolve(&resource["Properties"]["LogGroupName"])
                .unwrap_or_else(|| format!("{id}-physical-id")),
            "AWS::SecretsManager::Secret" => self
                .arn_of(id)
                .unwrap_or_else(|_| format!("{id}-physical-id")),
            _ => format!("{id}-physical-id"),
        }
    }

    fn substitute(&self, arg: &Value) -> Option<String> {
        let (text, vars) = match arg {
            Value::String(s) => (s.as_str(), None),
            Value::Array(a) => (a.first()?.as_str()?, a.get(1)),
            _ => return None,
        };
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let end = rest[start..].find('}')? + start;
            let name = &rest[start + 2..end];
            let value = match vars.and_then(|v| v.get(name)) {
                Some(v) => self.resolve(v)?,
                None if name.starts_with('!') => format!("${{{}}}", &name[1..]),
                None => match name.split_once('.') {
                    Some((id, "Arn")) => self.get_att_arn(id).ok()?,
                    Some(_) => return None,
                    None if self.template["Resources"].get(name).is_some() => self.reference(name),
                    None => self.parameter(name),
                },
            };
            out.push_str(&value);
            rest = &rest[end + 1..];
        }
        out.push_str(rest);
        Some(out)
    }
}

/// `*` and `?` wildcards; `fold` compares case-insensitively.
pub fn glob(pattern: &str, text: &str, fold: bool) -> bool {
    let (p, t) = if fold {
        (pattern.to_lowercase(), text.to_lowercase())
    } else {
        (pattern.to_owned(), text.to_owned())
    };
    let (p, t): (Vec<char>, Vec<char>) = (p.chars().collect(), t.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

fn as_list(value: &Value) -> Vec<&Value> {
    match value {
        Value::Array(items) => items.iter().collect(),
        Value::Null => Vec::new(),
        other => vec![other],
    }
}

/// Replaces `${key}` with the context's single value of `key`; `None` if it is absent.
fn expand(value: &str, request: &RequestContext) -> Option<String> {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}')? + start;
        let key = rest[start + 2..end].to_lowercase();
        match request.get(&key).map(Vec::as_slice) {
            Some([single]) => out.push_str(single),
            _ => return None,
        }
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    Some(out)
}

/// Whether one condition operator block holds.
fn operator_holds(
    stack: &Stack,
    operator: &str,
    block: &Value,
    request: &RequestContext,
) -> anyhow::Result<bool> {
    let (set, base) = match operator.split_once(':') {
        Some((set @ ("ForAllValues" | "ForAnyValue"), base)) => (Some(set), base),
        _ => (None, operator),
    };
    // `…IfExists` holds for a missing key, and is the operator without it otherwise.
    let (base, if_exists) = match base.strip_suffix("IfExists") {
        Some(base) => (base, true),
        None => (base, false),
    };
    let matches = |pattern: &str, value: &str| -> anyhow::Result<bool> {
        Ok(match base {
            "StringEquals" | "ArnEquals" => pattern == value,
            "StringLike" | "ArnLike" => glob(pattern, value, false),
            "Bool" => pattern.eq_ignore_ascii_case(value),
            other => bail!("the evaluator does not know the operator {other}"),
        })
    };
    for (key, wanted) in block.as_object().context("condition block")? {
        let patterns: Vec<Option<String>> = as_list(wanted)
            .into_iter()
            .map(|v| stack.resolve(v).and_then(|p| expand(&p, request)))
            .collect();
        let any_pattern = |value: &str| -> anyhow::Result<bool> {
            for pattern in patterns.iter().flatten() {
                if matches(pattern, value)? {
                    return Ok(true);
                }
            }
            Ok(false)
        };
        let values = request
            .get(&key.to_lowercase())
            .cloned()
            .unwrap_or_default();
        let holds = match set {
            _ if if_exists && values.is_empty() => true,
            Some("ForAllValues") => {
                let mut all = true;
                for v in &values {
                    all &= any_pattern(v)?;
                }
                all
            }
            _ if values.is_empty() => false,
            _ => {
                let mut any = false;
                for v in &values {
                    any |= any_pattern(v)?;
                }
                any
            }
        };
        if !holds {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A statement as a policy holds it: a conditional one (`Fn::If` of a condition, the
/// statement, and `AWS::NoValue`) is taken as if its condition held, the stricter
/// reading for a posture (every permission the stack could grant); `None` for a
/// removed one.
pub fn unconditional(statement: &Value) -> Option<&Value> {
    match statement["Fn::If"].as_array() {
        Some(branches) => branches[1..]
            .iter()
            .find(|branch| branch.get("Ref").is_none_or(|r| r != "AWS::NoValue")),
        None => Some(statement),
    }
}

/// Whether `statements` (Allow only) let a request of `action` on `resource` through.
pub fn allows(
    stack: &Stack,
    statements: &[&Value],
    action: &str,
    resource: &str,
    request: &RequestContext,
) -> anyhow::Result<bool> {
    for statement in statements {
        if statement["Effect"] != "Allow" {
            bail!("only Allow statements are evaluated: {statement}");
        }
        let acts = as_list(&statement["Action"]);
        if !acts
            .iter()
            .any(|a| a.as_str().is_some_and(|a| glob(a, action, true)))
        {
            continue;
        }
        let mut reaches = false;
        for r in as_list(&statement["Resource"]) {
            let pattern = stack.resolve(r).with_context(|| format!("resource {r}"))?;
            reaches |= expand(&pattern, request).is_some_and(|p| glob(&p, resource, false));
        }
        if !reaches {
            continue;
        }
        let mut holds = true;
        for (operator, block) in statement["Condition"].as_object().into_iter().flatten() {
            holds &= operator_holds(stack, operator, block, request)?;
        }
        if holds {
            return Ok(true);
        }
    }
    Ok(false)
}

#[test]
fn globs_match_as_iam_matches() {
    assert!(glob("dynamodb:Get*", "dynamodb:getitem", true));
    assert!(!glob("dynamodb:Get*", "dynamodb:DeleteItem", true));
    assert!(glob(
        "arn:aws:ec2:*:*:instance/*",
        "arn:aws:ec2:r:1:instance/i-1",
        false
    ));
    assert!(!glob(
        "arn:aws:ec2:r:1:instance/i-1",
        "arn:aws:ec2:r:1:instance/i-12",
        false
    ));
    assert!(glob("a?c", "abc", false));
}
