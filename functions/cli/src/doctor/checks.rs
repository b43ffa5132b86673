//! The checks of `ephemera doctor`, in the order a deployment depends on them: the
//! stack and its resources, the configuration (and the version each function runs),
//! the App key, GitHub's view of the App (JWT, permissions, events, webhook URL,
//! installations, recent deliveries), each pool's EC2 launch, then the account's quotas
//! and the roles' simulated permissions. A check whose input failed is not run (`-`), so
//! one broken setting is reported by exactly one ✖: the check that names it.

use super::iam::{simulate_roles, IamPort, Names};
use super::ports::{
    DryRunAnswer, DryRunLaunch, Ec2Port, GitHubConnector, GitHubPort, QuotaPort, StackPort,
};
use super::quotas;
use super::report::{Check, Report};
use crate::errors::describe;
use ephemera_aws::lambda::LoadedConfig;
use ephemera_aws::running::FUNCTIONS;
use ephemera_aws::stack::{
    CONFIG_PARAMETER_NAME, DEFAULT_CONFIG_PARAMETER_NAME, QUEUE_URL, TABLE_NAME, WEBHOOK_URL,
};
use ephemera_core::config::{Config, PoolConfig, Scope};
use ephemera_core::ports::ForgeError;
use std::collections::BTreeMap;

/// Output key of the App key secret's ARN.
pub const APP_KEY_SECRET: &str = "GitHubAppKeySecret";
/// Output key of the webhook secret's ARN.
pub const WEBHOOK_SECRET: &str = "WebhookSecret";
/// Output key of the JIT table's name.
pub const JIT_TABLE_NAME: &str = "JitTableName";
/// Output key of the runner launch template's name.
pub const LAUNCH_TEMPLATE_NAME: &str = "LaunchTemplateName";
/// What template.yaml puts into the App key secret it creates.
pub const APP_KEY_PLACEHOLDER: &str = "not-set-put-the-github-app-private-key-pem-here";

/// The outputs every other check reads.
const REQUIRED_OUTPUTS: [&str; 6] = [
    TABLE_NAME,
    QUEUE_URL,
    CONFIG_PARAMETER_NAME,
    DEFAULT_CONFIG_PARAMETER_NAME,
    APP_KEY_SECRET,
    LAUNCH_TEMPLATE_NAME,
];

/// What the operator asked for.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub stack: String,
    /// The webhook URL the App must have, instead of the stack's `WebhookUrl` output.
    pub webhook_url: Option<String>,
    /// The GitHub API URL, instead of the configuration's `github.api_url`.
    pub github_api_url: Option<String>,
    /// More organizations (`ORG`) or repositories (`OWNER/REPO`) the App must be
    /// installed on, beyond those the pools name.
    pub accounts: Vec<String>,
}

/// The ports the checks read through.
pub struct Ports<'a> {
    pub stack: &'a dyn StackPort,
    pub github: &'a dyn GitHubConnector,
    pub ec2: &'a dyn Ec2Port,
    pub quotas: &'a dyn QuotaPort,
    pub iam: &'a dyn IamPort,
}

/// Runs every check; never fails itself (a failed call is a failed check).
pub async fn diagnose(request: &Request, ports: &Ports<'_>) -> Report {
    let mut report = Report {
        stack: request.stack.clone(),
        checks: Vec::new(),
    };
    let Some((outputs, parameters)) = stack_checks(request, ports.stack, &mut report).await else {
        return report;
    };
    let loaded = config_check(request, &outputs, ports.stack, &mut report).await;
    running_checks(&outputs, loaded.as_ref(), ports.stack, &mut report).await;
    let config = loaded.map(|loaded| loaded.config);
    let github = app_key_check(request, &outputs, config.as_ref(), ports, &mut report).await;
    github_checks(
        request,
        &outputs,
        config.as_ref(),
        github.as_deref(),
        &mut report,
    )
    .await;
    match &config {
        Some(config) => {
            for pool in &config.pools {
                pool_checks(config, pool, &outputs, ports.ec2, &mut report).await;
            }
        }
        None => report.push(Check::skip("ec2.pools", "config.valid failed")),
    }
    quota_checks(config.as_ref(), &parameters, ports, &mut report).await;
    iam_checks(request, &outputs, config.as_ref(), ports, &mut report).await;
    report
}

/// `iam.simulate`, per role of the stack.
async fn iam_checks(
    request: &Request,
    outputs: &BTreeMap<String, String>,
    config: Option<&Config>,
    ports: &Ports<'_>,
    report: &mut Report,
) {
    let Some(config) = config else {
        report.push(Check::skip("iam.simulate", "config.valid failed"));
        return;
    };
    let output = |key: &str| outputs.get(key).cloned().unwrap_or_default();
    let roles = match ports.stack.stack_resources(&request.stack).await {
        Ok(resources) => resources,
        Err(err) => {
            report.push(Check::warn(
                "iam.simulate",
                format!("cannot list the stack's resources: {}", describe(&err)),
                "the credentials need cloudformation:DescribeStackResources",
            ));
            return;
        }
    };
    let names = Names {
        region: ports.stack.region(),
        account: String::new(),
        deployment: config.deployment.clone(),
        table: output(TABLE_NAME),
        jit_table: output(JIT_TABLE_NAME),
        queue_name: output(QUEUE_URL)
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned(),
        config_parameter: output(CONFIG_PARAMETER_NAME),
        default_config_parameter: output(DEFAULT_CONFIG_PARAMETER_NAME),
        app_key_secret_arn: output(APP_KEY_SECRET),
        webhook_secret_arn: output(WEBHOOK_SECRET),
        runner_role_arn: String::new(),
    };
    simulate_roles(&roles, names, ports.iam, report).await;
}

/// `quotas.vcpu` (per vCPU quota the pools count against) and `lambda.concurrency`.
async fn quota_checks(
    config: Option<&Config>,
    parameters: &BTreeMap<String, String>,
    ports: &Ports<'_>,
    report: &mut Report,
) {
    match config {
        Some(config) => {
            let mut types: Vec<String> = config
                .pools
                .iter()
                .flat_map(|pool| pool.instance_types.iter().cloned())
                .collect();
            types.sort();
            types.dedup();
            match ports.ec2.instance_types(&types).await {
                Ok(facts) => quotas::vcpu_checks(config, &facts, ports.quotas, report).await,
                Err(err) => report.push(Check::fail(
                    "quotas.vcpu",
                    describe(&err),
                    "the credentials need ec2:DescribeInstanceTypes",
                )),
            }
        }
        None => report.push(Check::skip("quotas.vcpu", "config.valid failed")),
    }
    quotas::lambda_check(parameters, ports.quotas, report).await;
    super::flood::webhook_concurrency_check(parameters, ports.quotas, report).await;
}

/// `stack.status`, `stack.outputs`, `stack.table`, `stack.queue`; the outputs and the
/// parameters, unless the stack cannot be read.
async fn stack_checks(
    request: &Request,
    stack: &dyn StackPort,
    report: &mut Report,
) -> Option<(BTreeMap<String, String>, BTreeMap<String, String>)> {
    let name = &request.stack;
    let facts = match stack.describe_stack(name).await {
        Ok(facts) => facts,
        Err(err) => {
            report.push(Check::fail(
                "stack.status",
                format!("cannot read stack {name}: {}", describe(&err)),
                format!(
                    "check the name, the region and the credentials: aws cloudformation \
                     describe-stacks --stack-name {name}"
                ),
            ));
            return None;
        }
    };
    let status = facts.status.as_str();
    report.push(
        if status == "CREATE_COMPLETE" || status == "UPDATE_COMPLETE" {
            Check::pass("stack.status", status)
        } else if status.ends_with("_IN_PROGRESS") {
            Check::warn(
                "stack.status",
                format!("{status}: the stack is changing"),
                "run ephemera doctor again when the deploy has finished",
            )
        } else if status == "UPDATE_ROLLBACK_COMPLETE" {
            Check::warn(
                "stack.status",
                format!("{status}: the last update failed and was rolled back"),
                format!("see why: aws cloudformation describe-stack-events --stack-name {name}"),
            )
        } else {
            Check::fail(
                "stack.status",
                format!("{status}: the stack is not deployed"),
                format!(
                    "see why: aws cloudformation describe-stack-events --stack-name {name}; then \
                 make deploy"
                ),
            )
        },
    );
    let missing: Vec<&str> = REQUIRED_OUTPUTS
        .into_iter()
        .filter(|key| facts.outputs.get(*key).is_none_or(|v| v.is_empty()))
        .collect();
    report.push(if missing.is_empty() {
        Check::pass(
            "stack.outputs",
            format!("{} outputs readable", facts.outputs.len()),
        )
    } else {
        Check::fail(
            "stack.outputs",
            format!("the stack has no output {}", missing.join(", ")),
            "deploy the stack again from this version's template.yaml: make deploy",
        )
    });
    let outputs = facts.outputs;
    match outputs.get(TABLE_NAME) {
        Some(table) => report.push(match stack.table_status(table).await {
            Ok(status) if status == "ACTIVE" => {
                Check::pass("stack.table", format!("{table} ACTIVE"))
            }
            Ok(status) => Check::warn(
                "stack.table",
                format!("{table} is {status}"),
                "wait until the table is ACTIVE",
            ),
            Err(err) => Check::fail(
                "stack.table",
                format!("table {table}: {}", describe(&err)),
                "the stack's table is gone or unreadable: make deploy; the credentials need \
                 dynamodb:DescribeTable",
            ),
        }),
        None => report.push(Check::skip("stack.table", "stack.outputs failed")),
    }
    match outputs.get(QUEUE_URL) {
        Some(url) => report.push(match stack.queue_reachable(url).await {
            Ok(()) => Check::pass("stack.queue", url.as_str()),
            Err(err) => Check::fail(
                "stack.queue",
                format!("queue {url}: {}", describe(&err)),
                "the stack's jobs queue is gone or unreadable: make deploy; the credentials \
                 need sqs:GetQueueAttributes",
            ),
        }),
        None => report.push(Check::skip("stack.queue", "stack.outputs failed")),
    }
    Some((outputs, facts.parameters))
}

/// `config.valid`: the configuration the functions read parses and validates.
async fn config_check(
    request: &Request,
    outputs: &BTreeMap<String, String>,
    stack: &dyn StackPort,
    report: &mut Report,
) -> Option<LoadedConfig> {
    let Some(parameter) = outputs.get(CONFIG_PARAMETER_NAME) else {
        report.push(Check::skip("config.valid", "stack.outputs failed"));
        return None;
    };
    let default = outputs
        .get(DEFAULT_CONFIG_PARAMETER_NAME)
        .map(String::as_str);
    match stack.load_config(parameter, default).await {
        Ok(loaded) => {
            report.push(Check::pass(
                "config.valid",
                format!(
                    "{} version {}: deployment {}, {} pool(s)",
                    loaded.parameter,
                    loaded.version,
                    loaded.config.deployment,
                    loaded.config.pools.len()
                ),
            ));
            Some(loaded)
        }
        Err(err) => {
            report.push(Check::fail(
                "config.valid",
                describe(&err),
                format!(
                    "check the file with `ephemera config validate FILE`, then `ephemera \
                     config push FILE --stack {}`",
                    request.stack
                ),
            ));
            None
        }
    }
}

/// `config.running`, per function: the configuration version it last built its handler
/// from (its `RUNNING#<function>` item) is the parameter's.
async fn running_checks(
    outputs: &BTreeMap<String, String>,
    loaded: Option<&LoadedConfig>,
    stack: &dyn StackPort,
    report: &mut Report,
) {
    let (Some(loaded), Some(table)) = (loaded, outputs.get(TABLE_NAME)) else {
        report.push(Check::skip("config.running", "config.valid failed"));
        return;
    };
    for function in FUNCTIONS {
        let check = match stack.running_config(table, function).await {
            Ok(Some(running))
                if running.parameter == loaded.parameter && running.version == loaded.version =>
            {
                Check::pass(
                    "config.running",
                    format!("runs version {} (since {})", running.version, running.at),
                )
            }
            Ok(Some(running)) => Check::warn(
                "config.running",
                format!(
                    "runs version {} of {}; the functions read version {} of {}",
                    running.version, running.parameter, loaded.version, loaded.parameter
                ),
                format!(
                    "a function reads the parameter again within EPHEMERA_RELOAD_SECONDS \
                     (30 s by default) of its next invocation; if this stays, see the \
                     {function} function's log for why it cannot use the new version"
                ),
            ),
            Ok(None) => Check::warn(
                "config.running",
                "has not run yet (no record of the configuration it runs)",
                format!(
                    "it records its version at its first invocation; if jobs have come \
                     and this stays, see the {function} function's log"
                ),
            ),
            Err(err) => Check::warn(
                "config.running",
                describe(&err),
                "the credentials need dynamodb:GetItem on the table",
            ),
        };
        report.push(check.on(function));
    }
}

/// `github.app_key`: the secret holds a real RSA private key; the GitHub port built
/// with it.
async fn app_key_check(
    request: &Request,
    outputs: &BTreeMap<String, String>,
    config: Option<&Config>,
    ports: &Ports<'_>,
    report: &mut Report,
) -> Option<Box<dyn GitHubPort>> {
    let Some(secret) = outputs.get(APP_KEY_SECRET) else {
        report.push(Check::skip("github.app_key", "stack.outputs failed"));
        return None;
    };
    let put_key = format!(
        "put the App's private key (App settings → Private keys → Generate) into the \
         secret: aws secretsmanager put-secret-value --secret-id {secret} --secret-string \
         file://app.pem"
    );
    let pem = match ports.stack.secret_value(secret).await {
        Ok(pem) => pem,
        Err(err) => {
            report.push(Check::fail(
                "github.app_key",
                describe(&err),
                format!("the credentials need secretsmanager:GetSecretValue on {secret}"),
            ));
            return None;
        }
    };
    if pem.trim() == APP_KEY_PLACEHOLDER {
        report.push(Check::fail(
            "github.app_key",
            format!("secret {secret} still holds the stack's placeholder, not a key"),
            put_key,
        ));
        return None;
    }
    let Some(config) = config else {
        report.push(Check::skip("github.app_key", "config.valid failed"));
        return None;
    };
    let api_url = request
        .github_api_url
        .clone()
        .unwrap_or_else(|| config.github.api_url.clone());
    match ports.github.connect(&api_url, config.github.app_id, &pem) {
        Ok(github) => {
            report.push(Check::pass(
                "github.app_key",
                format!("secret {secret} holds an RSA private key"),
            ));
            Some(github)
        }
        Err(why) => {
            report.push(Check::fail(
                "github.app_key",
                format!("secret {secret}: {why}"),
                put_key,
            ));
            None
        }
    }
}

/// The App permissions ephemera's calls need: runners registered and removed on the
/// organization (`scope: org`) or the repositories (`scope: repo`), and jobs read by
/// the reaper.
pub fn needed_permissions(scope: Scope) -> Vec<(&'static str, &'static str)> {
    let runners = match scope {
        Scope::Org => ("organization_self_hosted_runners", "write"),
        Scope::Repo => ("administration", "write"),
    };
    vec![runners, ("actions", "read")]
}

/// Whether `granted` (`read`/`write`) covers `needed`.
fn covers(granted: &str, needed: &str) -> bool {
    granted == needed || (granted == "write" && needed == "read")
}

/// The organizations and repositories the App must be installed on: those the pools
/// name for their warm runners, then those asked for.
pub fn accounts_to_check(config: &Config, asked: &[String]) -> Vec<String> {
    let mut accounts: Vec<String> = Vec::new();
    for pool in &config.pools {
        if let Some(owner) = &pool.warm_owner {
            let account = match (&config.github.scope, &pool.warm_repo) {
                (Scope::Repo, Some(repo)) => format!("{owner}/{repo}"),
                _ => owner.clone(),
            };
            accounts.push(account);
        }
    }
    accounts.extend(asked.iter().cloned());
    let mut seen = std::collections::BTreeSet::new();
    accounts.retain(|a| seen.insert(a.to_lowercase()));
    accounts
}

fn github_error(err: &ForgeError) -> String {
    match err {
        ForgeError::Transient(cause) => format!("{err}: {cause}"),
        other => other.to_string(),
    }
}

/// `github.app`, `github.permissions`, `github.events`, `github.webhook_url`,
/// `github.installation` (per account), `github.deliveries`.
async fn github_checks(
    request: &Request,
    outputs: &BTreeMap<String, String>,
    config: Option<&Config>,
    github: Option<&dyn GitHubPort>,
    report: &mut Report,
) {
    const GITHUB_CHECKS: [&str; 6] = [
        "github.app",
        "github.permissions",
        "github.events",
        "github.webhook_url",
        "github.installation",
        "github.deliveries",
    ];
    let (Some(github), Some(config)) = (github, config) else {
        for check in GITHUB_CHECKS {
            report.push(Check::skip(check, "github.app_key failed"));
        }
        return;
    };
    let app_id = config.github.app_id;
    let secret = outputs.get(APP_KEY_SECRET).cloned().unwrap_or_default();
    let app = match github.describe_app().await {
        Ok(app) => {
            report.push(Check::pass(
                "github.app",
                format!("GitHub accepts the JWT of App {} (id {})", app.name, app.id),
            ));
            app
        }
        Err(err) => {
            let fix = match err {
                ForgeError::Unauthorized => format!(
                    "the key is not one of App {app_id}'s keys, or github.app_id is not the \
                     App's id: compare the App's settings (App ID, Private keys) with the \
                     configuration and the secret {secret}"
                ),
                _ => format!(
                    "check github.api_url ({}) and that GitHub is reachable from here",
                    request
                        .github_api_url
                        .as_deref()
                        .unwrap_or(&config.github.api_url)
                ),
            };
            report.push(Check::fail(
                "github.app",
                format!("GET /app: {}", github_error(&err)),
                fix,
            ));
            for check in &GITHUB_CHECKS[1..] {
                report.push(Check::skip(check, "github.app failed"));
            }
            return;
        }
    };
    let settings = app
        .slug
        .as_deref()
        .map(|slug| format!("https://github.com/settings/apps/{slug}"))
        .unwrap_or_else(|| "the App's settings".to_owned());
    let lacking: Vec<String> = needed_permissions(config.github.scope)
        .into_iter()
        .filter(|(name, level)| {
            !app.permissions
                .get(*name)
                .is_some_and(|granted| covers(granted, level))
        })
        .map(|(name, level)| {
            let has = app.permissions.get(name).map_or("none", String::as_str);
            format!("{name}: {level} (has {has})")
        })
        .collect();
    report.push(if lacking.is_empty() {
        let needed: Vec<String> = needed_permissions(config.github.scope)
            .into_iter()
            .map(|(name, level)| format!("{name}: {level}"))
            .collect();
        Check::pass("github.permissions", needed.join(", "))
    } else {
        Check::fail(
            "github.permissions",
            format!("the App lacks {}", lacking.join(", ")),
            format!(
                "grant them in {settings} → Permissions & events, then accept the new \
                 permissions on every installation"
            ),
        )
    });
    report.push(if app.events.iter().any(|e| e == "workflow_job") {
        Check::pass("github.events", "subscribed to workflow_job")
    } else {
        Check::fail(
            "github.events",
            format!(
                "the App is not subscribed to workflow_job (it gets: {})",
                if app.events.is_empty() {
                    "nothing".to_owned()
                } else {
                    app.events.join(", ")
                }
            ),
            format!("tick \"Workflow job\" under Subscribe to events in {settings} → Permissions & events"),
        )
    });
    webhook_check(request, outputs, github, &settings, report).await;
    installation_checks(config, request, github, &app.slug, report).await;
    deliveries_check(github, report).await;
}

async fn webhook_check(
    request: &Request,
    outputs: &BTreeMap<String, String>,
    github: &dyn GitHubPort,
    settings: &str,
    report: &mut Report,
) {
    let Some(expected) = request
        .webhook_url
        .clone()
        .or_else(|| outputs.get(WEBHOOK_URL).cloned())
    else {
        report.push(Check::fail(
            "github.webhook_url",
            "the stack has no WebhookUrl output to compare the App's webhook URL with",
            "deploy the stack from this version's template.yaml (make deploy), or give \
             --webhook-url URL",
        ));
        return;
    };
    let same = |a: &str, b: &str| a.trim_end_matches('/') == b.trim_end_matches('/');
    report.push(match github.webhook_url().await {
        Ok(Some(url)) if same(&url, &expected) => Check::pass("github.webhook_url", url),
        Ok(actual) => Check::fail(
            "github.webhook_url",
            match actual {
                Some(url) => format!("the App's webhook URL is {url}, the stack's is {expected}"),
                None => format!("the App has no webhook URL; the stack's is {expected}"),
            },
            format!("set Webhook URL to {expected} in {settings} → General → Webhook"),
        ),
        Err(err) => Check::fail(
            "github.webhook_url",
            format!("GET /app/hook/config: {}", github_error(&err)),
            "check that GitHub is reachable and try again",
        ),
    });
}

async fn installation_checks(
    config: &Config,
    request: &Request,
    github: &dyn GitHubPort,
    slug: &Option<String>,
    report: &mut Report,
) {
    let accounts = accounts_to_check(config, &request.accounts);
    if accounts.is_empty() {
        report.push(Check::warn(
            "github.installation",
            "no pool names an organization or repository (warm_owner) to check",
            "give --owner ORG (or --owner OWNER/REPO) for where jobs run",
        ));
        return;
    }
    let install = slug
        .as_deref()
        .map(|slug| format!("https://github.com/apps/{slug}/installations/new"))
        .unwrap_or_else(|| "the App's public page → Install".to_owned());
    for account in accounts {
        let (owner, repo) = match account.split_once('/') {
            Some((owner, repo)) => (owner, Some(repo)),
            None => (account.as_str(), None),
        };
        report.push(
            match github.installation(owner, repo).await {
                Ok(Some(id)) => Check::pass(
                    "github.installation",
                    format!("installed (installation {id})"),
                ),
                Ok(None) => Check::fail(
                    "github.installation",
                    format!("the App is not installed on {account}"),
                    format!("install it on {account}: {install}"),
                ),
                Err(err) => Check::fail(
                    "github.installation",
                    github_error(&err),
                    "check that GitHub is reachable and try again",
                ),
            }
            .on(account.clone()),
        );
    }
}

/// Why a delivery failed, from its status code (0: GitHub got no answer).
fn failure_reason(status_code: u16) -> String {
    match status_code {
        0 => "no answer (connection failed or timed out)".to_owned(),
        401 => "401 (signature refused: webhook secret mismatch)".to_owned(),
        code => format!("HTTP {code}"),
    }
}

async fn deliveries_check(github: &dyn GitHubPort, report: &mut Report) {
    let deliveries = match github.recent_deliveries().await {
        Ok(deliveries) => deliveries,
        Err(err) => {
            report.push(Check::fail(
                "github.deliveries",
                format!("GET /app/hook/deliveries: {}", github_error(&err)),
                "check that GitHub is reachable and try again",
            ));
            return;
        }
    };
    let failed: Vec<_> = deliveries.iter().filter(|d| !d.delivered()).collect();
    if failed.is_empty() {
        report.push(Check::pass(
            "github.deliveries",
            format!("{} recent deliveries, none failed", deliveries.len()),
        ));
        return;
    }
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for delivery in &failed {
        *reasons
            .entry(failure_reason(delivery.status_code))
            .or_default() += 1;
    }
    let reasons: Vec<String> = reasons
        .into_iter()
        .map(|(reason, n)| format!("{n}× {reason}"))
        .collect();
    report.push(Check::warn(
        "github.deliveries",
        format!(
            "{} of {} recent deliveries failed: {}",
            failed.len(),
            deliveries.len(),
            reasons.join(", ")
        ),
        "see the webhook function's log for those times; ephemera redelivers failed \
         deliveries of the last hours on its own (the reaper's sweep)",
    ));
}

/// `ec2.launch_template`, `ec2.subnets`, `ec2.security_groups`, `ec2.architecture` and
/// `ec2.dry_run` for one pool.
async fn pool_checks(
    config: &Config,
    pool: &PoolConfig,
    outputs: &BTreeMap<String, String>,
    ec2: &dyn Ec2Port,
    report: &mut Report,
) {
    let subject = format!("pool {}", pool.name);
    let push = |report: &mut Report, check: Check| report.push(check.on(subject.clone()));
    let template_name = pool.launch_template.clone().unwrap_or_else(|| {
        outputs
            .get(LAUNCH_TEMPLATE_NAME)
            .cloned()
            .unwrap_or_else(|| format!("{}-runner", config.deployment))
    });
    let template = match ec2.launch_template(&template_name).await {
        Ok(Some(template)) => {
            push(
                report,
                Check::pass("ec2.launch_template", template_name.clone()),
            );
            Some(template)
        }
        Ok(None) => {
            push(
                report,
                Check::fail(
                    "ec2.launch_template",
                    format!("launch template {template_name} does not exist"),
                    format!(
                        "name an existing template in the pool's launch_template, or drop it \
                         to use the stack's {}",
                        outputs
                            .get(LAUNCH_TEMPLATE_NAME)
                            .map_or("DEPLOYMENT-runner", String::as_str)
                    ),
                ),
            );
            None
        }
        Err(err) => {
            push(
                report,
                Check::fail(
                    "ec2.launch_template",
                    describe(&err),
                    "the credentials need ec2:DescribeLaunchTemplates and \
                     ec2:DescribeLaunchTemplateVersions",
                ),
            );
            None
        }
    };
    let subnets_ok = if pool.subnets.is_empty() {
        push(
            report,
            Check::pass("ec2.subnets", "none named: EC2 uses the default VPC's"),
        );
        true
    } else {
        match ec2.missing_subnets(&pool.subnets).await {
            Ok(missing) if missing.is_empty() => {
                push(report, Check::pass("ec2.subnets", pool.subnets.join(", ")));
                true
            }
            Ok(missing) => {
                push(
                    report,
                    Check::fail(
                        "ec2.subnets",
                        format!("EC2 knows no subnet {}", missing.join(", ")),
                        "list the runners' subnets (aws ec2 describe-subnets) and set them in \
                         the pool's subnets (RunnerSubnets for the stack's default pool), \
                         then push or deploy",
                    ),
                );
                false
            }
            Err(err) => {
                push(
                    report,
                    Check::fail(
                        "ec2.subnets",
                        describe(&err),
                        "the credentials need ec2:DescribeSubnets",
                    ),
                );
                false
            }
        }
    };
    let groups_ok = match &template {
        None => {
            push(
                report,
                Check::skip("ec2.security_groups", "ec2.launch_template failed"),
            );
            false
        }
        Some(template) if template.security_groups.is_empty() => {
            push(
                report,
                Check::pass(
                    "ec2.security_groups",
                    "the template names none: the subnet's VPC default group",
                ),
            );
            true
        }
        Some(template) => match ec2.missing_security_groups(&template.security_groups).await {
            Ok(missing) if missing.is_empty() => {
                push(
                    report,
                    Check::pass("ec2.security_groups", template.security_groups.join(", ")),
                );
                true
            }
            Ok(missing) => {
                push(
                    report,
                    Check::fail(
                        "ec2.security_groups",
                        format!(
                            "launch template {template_name} names security group {}, which \
                             EC2 does not know",
                            missing.join(", ")
                        ),
                        "deploy again with RunnerSecurityGroups set to existing groups of the \
                         subnets' VPC",
                    ),
                );
                false
            }
            Err(err) => {
                push(
                    report,
                    Check::fail(
                        "ec2.security_groups",
                        describe(&err),
                        "the credentials need ec2:DescribeSecurityGroups",
                    ),
                );
                false
            }
        },
    };
    let image = pool
        .ami
        .clone()
        .or_else(|| template.as_ref().and_then(|t| t.image_id.clone()));
    let types_ok = architecture_check(pool, image.as_deref(), ec2, report, &subject).await;
    if template.is_none() || !subnets_ok || !groups_ok || !types_ok {
        push(
            report,
            Check::skip(
                "ec2.dry_run",
                "the launch template, subnets, security groups or types failed above",
            ),
        );
        return;
    }
    let launch = DryRunLaunch {
        launch_template: template_name,
        instance_type: pool.instance_types.first().cloned().unwrap_or_default(),
        subnet: pool.subnets.first().cloned(),
        image: pool.ami.clone(),
    };
    push(
        report,
        match ec2.dry_run(&launch).await {
            Ok(DryRunAnswer::WouldSucceed) => Check::pass(
                "ec2.dry_run",
                format!(
                    "RunInstances would launch {}{}",
                    launch.instance_type,
                    launch
                        .subnet
                        .as_deref()
                        .map(|s| format!(" in {s}"))
                        .unwrap_or_default()
                ),
            ),
            Ok(DryRunAnswer::Refused { code, message }) if code == "UnauthorizedOperation" => {
                Check::fail(
                    "ec2.dry_run",
                    format!("{code}: {message}"),
                    "these credentials may not launch from the template (ec2:RunInstances, \
                     ec2:CreateFleet, iam:PassRole on the runner role); the scaler's role \
                     has them in template.yaml",
                )
            }
            Ok(DryRunAnswer::Refused { code, message }) => Check::fail(
                "ec2.dry_run",
                format!("EC2 would refuse the launch: {code}: {message}"),
                "fix what EC2 names in the pool (instance_types, subnets, ami) or the launch \
                 template",
            ),
            Err(err) => Check::fail(
                "ec2.dry_run",
                describe(&err),
                "check that EC2 is reachable and try again",
            ),
        },
    );
}

/// `ec2.architecture`: EC2 knows every type, and each runs the image's architecture.
/// Returns whether the types can launch the image.
async fn architecture_check(
    pool: &PoolConfig,
    image: Option<&str>,
    ec2: &dyn Ec2Port,
    report: &mut Report,
    subject: &str,
) -> bool {
    let fail = |report: &mut Report, message: String, fix: &str| {
        report.push(Check::fail("ec2.architecture", message, fix).on(subject));
        false
    };
    let types = match ec2.instance_types(&pool.instance_types).await {
        Ok(types) => types,
        Err(err) => {
            return fail(
                report,
                describe(&err),
                "the credentials need ec2:DescribeInstanceTypes",
            )
        }
    };
    let unknown: Vec<&str> = pool
        .instance_types
        .iter()
        .filter(|t| !types.contains_key(*t))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        return fail(
            report,
            format!("EC2 knows no instance type {}", unknown.join(", ")),
            "fix the pool's instance_types (aws ec2 describe-instance-types)",
        );
    }
    let Some(image) = image else {
        report.push(
            Check::warn(
                "ec2.architecture",
                "neither the pool nor its launch template names an image",
                "set ImageId in the launch template or the pool's ami",
            )
            .on(subject),
        );
        return true;
    };
    let arch = match ec2.image_architecture(image).await {
        Ok(Some(arch)) => arch,
        Ok(None) => {
            return fail(
                report,
                format!("EC2 knows no image {image}"),
                "set the pool's ami (or the stack's RunnerAmi) to an image of this region",
            )
        }
        Err(err) => {
            return fail(
                report,
                describe(&err),
                "the credentials need ec2:DescribeImages",
            )
        }
    };
    let wrong: Vec<String> = pool
        .instance_types
        .iter()
        .filter(|t| !types[*t].architectures.contains(&arch))
        .map(|t| format!("{t} ({})", types[t].architectures.join(", ")))
        .collect();
    if wrong.is_empty() {
        report.push(
            Check::pass(
                "ec2.architecture",
                format!("image {image} is {arch}; every type runs it"),
            )
            .on(subject),
        );
        true
    } else {
        fail(
            report,
            format!(
                "image {image} is {arch}; {} cannot run it",
                wrong.join(", ")
            ),
            "pick instance types of the image's architecture (arm64: Graviton types such \
             as t4g, m7g), or an image of theirs",
        )
    }
}
