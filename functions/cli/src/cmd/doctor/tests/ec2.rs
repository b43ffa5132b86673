//! Each pool's EC2 launch: subnets, security groups, architecture and the dry run.

use super::*;

#[tokio::test]
async fn a_subnet_ec2_does_not_know_fails_the_subnets_check_and_skips_the_dry_run() {
    let mut world = healthy();
    world.subnets.clear();
    let report = run(&world).await;
    let (check, message, fix) = only_failure(&report);
    assert_eq!(check, "ec2.subnets");
    assert!(message.contains("subnet-1"), "{message}");
    assert!(fix.contains("RunnerSubnets"), "{fix}");
    assert_eq!(report.named("ec2.dry_run")[0].status, Status::Skip);
}

#[tokio::test]
async fn a_missing_security_group_fails_its_check() {
    let mut world = healthy();
    world.template_groups = vec!["sg-gone".into()];
    let (check, message, _) = only_failure(&run(&world).await);
    assert_eq!(check, "ec2.security_groups");
    assert!(message.contains("sg-gone"), "{message}");
}

#[tokio::test]
async fn types_that_cannot_run_the_image_fail_the_architecture_check() {
    let mut world = healthy();
    world.config = Ok(CONFIG.replace("[t4g.small]", "[t4g.small, t3.micro]"));
    let (check, message, _) = only_failure(&run(&world).await);
    assert_eq!(check, "ec2.architecture");
    assert!(
        message.contains("image ami-1 is arm64; t3.micro (i386, x86_64) cannot run it"),
        "{message}"
    );
    world.config = Ok(CONFIG.replace("[t4g.small]", "[t9z.huge]"));
    let (check, message, _) = only_failure(&run(&world).await);
    assert_eq!(check, "ec2.architecture");
    assert!(message.contains("no instance type t9z.huge"), "{message}");
}

#[tokio::test]
async fn a_refused_dry_run_fails_with_ec2s_reason() {
    let mut world = healthy();
    world.dry_run = DryRunAnswer::Refused {
        code: "UnauthorizedOperation".into(),
        message: "You are not authorized to perform this operation.".into(),
    };
    let (check, _, fix) = only_failure(&run(&world).await);
    assert_eq!(check, "ec2.dry_run");
    assert!(fix.contains("ec2:RunInstances"), "{fix}");
}
