//! The account: vCPU and Lambda concurrency quotas, and the roles' simulated
//! permissions.

use super::*;

#[tokio::test]
async fn an_on_demand_vcpu_quota_too_low_fails_the_vcpu_check_naming_the_quota() {
    let mut world = healthy();
    // 4 runners of 2 vCPUs need 8.
    world.quotas.insert("ec2/L-1216C47A".into(), 5.0);
    let report = run(&world).await;
    let (check, message, fix) = only_failure(&report);
    assert_eq!(check, "quotas.vcpu");
    assert!(message.contains("Running On-Demand Standard"), "{message}");
    assert!(message.contains("need 8"), "{message}");
    assert!(fix.contains("L-1216C47A"), "{fix}");
    assert!(fix.contains("max_runners of pool linux-arm64"), "{fix}");
}

#[tokio::test]
async fn a_pools_max_vcpus_caps_what_the_vcpu_check_asks() {
    let mut world = healthy();
    // 4 runners of 2 vCPUs would need 8; the pool caps them at 4.
    world.config = Ok(CONFIG.replace("max_runners: 4", "max_runners: 4\n    max_vcpus: 4"));
    world.quotas.insert("ec2/L-1216C47A".into(), 5.0);
    let report = run(&world).await;
    let checks = report.named("quotas.vcpu");
    assert_eq!(checks.len(), 1, "{}", report.text());
    assert!(report.text().contains("cover 4"), "{}", report.text());
}

#[tokio::test]
async fn a_spot_pool_counts_against_the_spot_quota_and_on_demand_its_fallback() {
    let mut world = healthy();
    world.config = Ok(CONFIG.replace("max_runners: 4", "max_runners: 4\n    spot: true"));
    world.quotas.insert("ec2/L-34B43A08".into(), 6.0);
    let report = run(&world).await;
    let (check, message, fix) = only_failure(&report);
    assert_eq!(check, "quotas.vcpu");
    assert!(message.contains("Spot Instance Requests"), "{message}");
    assert!(fix.contains("L-34B43A08"), "{fix}");
    // The on-demand quota is checked too (spot falls back to it), and suffices.
    let on_demand = report.named("quotas.vcpu");
    assert_eq!(on_demand.len(), 2, "{}", report.text());
}

#[tokio::test]
async fn a_gpu_type_counts_against_the_g_quota_not_the_standard_one() {
    let mut world = healthy();
    world.config = Ok(CONFIG.replace("t4g.small", "g5g.xlarge"));
    world
        .types
        .insert("g5g.xlarge".into(), vec!["arm64".into()]);
    world.quotas.insert("ec2/L-DB2E81BA".into(), 8.0);
    let report = run(&world).await;
    // 4 runners of 4 vCPUs: 16 against G's 8; the Standard quota is not asked.
    let (check, message, _) = only_failure(&report);
    assert_eq!(check, "quotas.vcpu");
    assert!(message.contains("G and VT"), "{message}");
    assert!(message.contains("need 16"), "{message}");
    assert_eq!(report.named("quotas.vcpu").len(), 1, "{}", report.text());
}

#[tokio::test]
async fn a_quota_service_quotas_does_not_know_is_a_warning() {
    let mut world = healthy();
    world.quotas.clear();
    let report = run(&world).await;
    assert!(report.ok(), "{}", report.text());
    for check in ["quotas.vcpu", "lambda.concurrency"] {
        let lines = report.named(check);
        assert_eq!(lines.len(), 1, "{}", report.text());
        assert_eq!(lines[0].status, Status::Warn, "{}", report.text());
    }
}

#[tokio::test]
async fn lambda_concurrency_below_the_scalers_fails_the_lambda_check() {
    let mut world = healthy();
    // A new account's 10 against ScalerMaxConcurrency 10 and the other functions' 3.
    world.quotas.insert("lambda/L-B99A9384".into(), 10.0);
    world
        .parameters
        .insert("ScalerMaxConcurrency".into(), "10".into());
    // Deployed as such an account must be, reserving nothing for the webhook.
    world
        .parameters
        .insert("WebhookReservedConcurrency".into(), "0".into());
    let report = run(&world).await;
    let (check, message, fix) = only_failure(&report);
    assert_eq!(check, "lambda.concurrency");
    assert!(message.contains("needs 13"), "{message}");
    assert!(fix.contains("L-B99A9384"), "{fix}");
    assert!(fix.contains("ScalerMaxConcurrency (at most 7)"), "{fix}");
}

#[test]
fn instance_families_map_to_their_vcpu_quotas() {
    use crate::cmd::doctor::quotas::{vcpu_quota, Purchase};
    let code = |t: &str, p| vcpu_quota(t, p).map(|q| q.code);
    assert_eq!(code("m7i.large", Purchase::OnDemand), Some("L-1216C47A"));
    assert_eq!(code("c7gn.medium", Purchase::Spot), Some("L-34B43A08"));
    assert_eq!(code("t4g.small", Purchase::OnDemand), Some("L-1216C47A"));
    assert_eq!(code("g5.xlarge", Purchase::OnDemand), Some("L-DB2E81BA"));
    assert_eq!(code("vt1.3xlarge", Purchase::Spot), Some("L-3819A6DF"));
    assert_eq!(code("p4d.24xlarge", Purchase::OnDemand), Some("L-417A185B"));
    assert_eq!(code("inf2.xlarge", Purchase::OnDemand), Some("L-1945791B"));
    assert_eq!(code("dl1.24xlarge", Purchase::Spot), Some("L-85EED4F7"));
    assert_eq!(code("trn1.2xlarge", Purchase::OnDemand), Some("L-2C3B7624"));
    assert_eq!(code("x2gd.large", Purchase::OnDemand), Some("L-7295265B"));
    assert_eq!(code("u-6tb1.metal", Purchase::OnDemand), Some("L-43DA4232"));
    assert_eq!(code("hpc7g.4xlarge", Purchase::OnDemand), None);
}

fn deny(world: &mut World, role: &str, action: &str, decision: crate::cmd::doctor::iam::Decision) {
    world
        .denied
        .entry(format!("arn:aws:iam::123456789012:role/eph-{role}"))
        .or_default()
        .insert(action.into(), decision);
}

#[tokio::test]
async fn a_role_without_an_action_fails_its_simulation_naming_the_action() {
    let mut world = healthy();
    deny(
        &mut world,
        "ScalerRole",
        "iam:PassRole",
        crate::cmd::doctor::iam::Decision::ImplicitDeny,
    );
    let report = run(&world).await;
    let (check, message, fix) = only_failure(&report);
    assert_eq!(check, "iam.simulate");
    assert!(
        message.contains("iam:PassRole on arn:aws:iam::123456789012:role/eph-RunnerRole"),
        "{message}"
    );
    assert!(message.contains("not allowed"), "{message}");
    assert!(fix.contains("make deploy"), "{fix}");
    let failed = report
        .named("iam.simulate")
        .into_iter()
        .find(|c| c.status == Status::Fail)
        .expect("failed line");
    assert_eq!(failed.subject.as_deref(), Some("ScalerRole"));
}

#[tokio::test]
async fn an_explicit_deny_names_boundaries_and_scps() {
    let mut world = healthy();
    deny(
        &mut world,
        "RunnerRole",
        "dynamodb:GetItem",
        crate::cmd::doctor::iam::Decision::ExplicitDeny,
    );
    let report = run(&world).await;
    let (check, message, fix) = only_failure(&report);
    assert_eq!(check, "iam.simulate");
    assert!(message.contains("explicitly denied"), "{message}");
    assert!(fix.contains("permissions boundary"), "{fix}");
}

#[tokio::test]
async fn a_simulator_that_cannot_answer_is_a_warning_per_role() {
    let mut world = healthy();
    world.simulation_fails = true;
    let report = run(&world).await;
    assert!(report.ok(), "{}", report.text());
    let lines = report.named("iam.simulate");
    assert_eq!(lines.len(), 4, "{}", report.text());
    assert!(
        lines.iter().all(|c| c.status == Status::Warn),
        "{}",
        report.text()
    );
    assert!(
        lines[0].message.contains("cannot simulate"),
        "{}",
        report.text()
    );
}

#[test]
fn every_role_asks_for_the_calls_ephemera_makes_with_it() {
    use crate::cmd::doctor::iam::{requests, Names, Role};
    let names = Names {
        partition: "aws".into(),
        region: "us-east-1".into(),
        account: "123456789012".into(),
        deployment: "eph".into(),
        table: "eph-runners".into(),
        jit_table: "eph-jit".into(),
        queue_name: "eph-jobs".into(),
        config_parameter: "/ephemera/eph/config".into(),
        default_config_parameter: "/ephemera/eph/config-default".into(),
        app_key_secret_arn: "arn:aws:secretsmanager:us-east-1:123456789012:secret:key".into(),
        more_app_key_secret_arns: vec![
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:app-43-AbCdEf".into(),
        ],
        webhook_secret_arn: "arn:aws:secretsmanager:us-east-1:123456789012:secret:hook".into(),
        runner_role_arn: "arn:aws:iam::123456789012:role/eph-RunnerRole".into(),
    };
    let actions = |role| -> Vec<&str> { requests(role, &names).iter().map(|r| r.action).collect() };
    assert!(actions(Role::Webhook).contains(&"sqs:SendMessage"));
    assert!(!actions(Role::Webhook).contains(&"ec2:CreateFleet"));
    for needed in [
        "ec2:CreateFleet",
        "iam:PassRole",
        "dynamodb:UpdateItem",
        "ec2:CreateTags",
    ] {
        assert!(actions(Role::Scaler).contains(&needed), "{needed}");
    }
    // IAM authorizes a DynamoDB transaction per item ("Using IAM with DynamoDB
    // transactions"): no role is asked for an action of the transaction itself. The
    // scaler neither terminates nor reads an index.
    for not_an_action in ["dynamodb:TransactWriteItems", "dynamodb:ConditionCheckItem"] {
        assert!(!actions(Role::Scaler).contains(&not_an_action));
        assert!(!actions(Role::Reaper).contains(&not_an_action));
    }
    assert!(!actions(Role::Scaler).contains(&"ec2:TerminateInstances"));
    assert!(!actions(Role::Scaler).contains(&"dynamodb:Query"));
    for needed in [
        "ec2:TerminateInstances",
        "pricing:GetProducts",
        "ec2:DescribeSpotPriceHistory",
    ] {
        assert!(actions(Role::Reaper).contains(&needed), "{needed}");
    }
    assert_eq!(
        actions(Role::Runner),
        [
            "dynamodb:GetItem",
            "dynamodb:UpdateItem",
            "logs:CreateLogStream",
            "logs:PutLogEvents"
        ]
    );
    // The scaler and the reaper read every App's key; the webhook none but its secret.
    let reads_second_key = |role| {
        requests(role, &names)
            .iter()
            .any(|r| r.action == "secretsmanager:GetSecretValue" && r.resource.contains("app-43"))
    };
    assert!(reads_second_key(Role::Scaler) && reads_second_key(Role::Reaper));
    assert!(!reads_second_key(Role::Webhook));
    let launch = requests(Role::Scaler, &names)
        .into_iter()
        .find(|r| r.action == "ec2:RunInstances" && r.resource.contains(":instance/"))
        .expect("a launch of an instance");
    assert_eq!(
        launch.context,
        [(
            "aws:RequestTag/ephemera:deployment",
            vec!["eph".to_string()]
        )]
    );
}
