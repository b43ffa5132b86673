//! `ephemera destroy`: deletes a deployment, all of it, in the order that leaves nothing
//! behind: the main stack (its functions, so nothing launches any more; its tables with
//! their data, queues, log groups, roles, launch templates, alarms, and the secrets it
//! made), then the runner instances still tagged for the deployment, then the image stack,
//! then what no stack owns: the AMIs the image pipelines made (tagged
//! `ephemera:deployment` by the distribution's `AmiTags`, infra/image/template.yaml) and
//! their snapshots, the AMI parameters the bakes wrote and the pushed configuration.
//!
//! It names everything first, then asks (unless `--yes`), then says what it did and what
//! it keeps. Every call is made with the operator's credentials; [`ACTIONS`] lists them,
//! and infra/deployer-policy.json grants them (a test holds the two together). [`sweep`]
//! holds the AWS calls.

use crate::exit::{Failure, Outcome, REFUSED, USAGE};
use crate::target::{Deployment, DeploymentCommand, StackArgs, TargetArgs};
use clap::Args;
use std::io::{BufRead, IsTerminal, Write};

mod sweep;

use sweep::{Found, StackFound};

/// Every AWS action `destroy` calls itself. Deleting the stacks, CloudFormation also
/// deletes each of their resources with the same credentials (the templates name no
/// service role), so the deployer policy grants those deletes as well.
pub const ACTIONS: [&str; 13] = [
    "cloudformation:DescribeStacks",
    "cloudformation:ListStackResources",
    "cloudformation:DeleteStack",
    "ec2:DescribeInstances",
    "ec2:TerminateInstances",
    "ec2:DescribeImages",
    "ec2:DeregisterImage",
    "ec2:DeleteSnapshot",
    "ssm:GetParameters",
    "ssm:DeleteParameters",
    "s3:ListBucket",
    "s3:DeleteObject",
    "s3:DeleteBucket",
];

#[derive(Args, Debug)]
pub struct DestroyArgs {
    /// Do not ask (needed when stdin is not a terminal).
    #[arg(long, short = 'y')]
    yes: bool,
    /// The image stack (infra/image/template.yaml); default: the main stack's name
    /// followed by `-image`.
    #[arg(long, value_name = "NAME")]
    image_stack: Option<String>,
    /// The deployment (`DeploymentName`), when the main stack is gone already and cannot
    /// say it.
    #[arg(long, value_name = "NAME")]
    deployment: Option<String>,
    /// Keep the AMIs and snapshots the image pipelines made.
    #[arg(long)]
    keep_images: bool,
    #[command(flatten)]
    stack: StackArgs,
}

impl DeploymentCommand for DestroyArgs {
    fn target(&self) -> TargetArgs {
        TargetArgs::new(&self.stack)
    }

    async fn run(self, deployment: &mut Deployment) -> Outcome {
        destroy(deployment, self).await
    }
}

/// What is kept, always: what no stack of the deployment made.
const ALWAYS_KEPT: [&str; 3] = [
    "the SAM CLI's artifact bucket (stack aws-sam-cli-managed-default, shared by every SAM \
     application of the region) and the function packages `sam deploy` uploaded there",
    "Image Builder's image records (no charge; `aws imagebuilder list-images --owner Self`)",
    "the GitHub App and its installations (delete it on GitHub: the App's settings, \
     Advanced, Delete GitHub App)",
];

pub async fn destroy(deployment: &mut Deployment, args: DestroyArgs) -> Outcome {
    let Some(stack_name) = args.stack.stack.clone() else {
        return Err(Failure::msg(
            USAGE,
            "which deployment? give --stack NAME (the main stack)",
        ));
    };
    let image_stack_name = args
        .image_stack
        .clone()
        .unwrap_or_else(|| format!("{stack_name}-image"));
    let clients = sweep::Clients::new(&deployment.sdk);
    let main = clients.stack(&stack_name).await?;
    let image = clients.stack(&image_stack_name).await?;
    let name = match (&args.deployment, &main, &image) {
        (Some(name), _, _) => name.clone(),
        (None, Some(stack), _) | (None, None, Some(stack)) => {
            stack.deployment.clone().ok_or_else(|| {
                Failure::msg(
                    USAGE,
                    "the stack has no DeploymentName: give --deployment NAME",
                )
            })?
        }
        (None, None, None) => {
            return Err(Failure::msg(
                USAGE,
                format!(
                    "neither stack {stack_name} nor {image_stack_name} exists; to sweep what \
                     a deleted deployment left, give --deployment NAME"
                ),
            ))
        }
    };
    let named = main
        .as_ref()
        .or(image.as_ref())
        .and_then(|s| s.deployment.as_deref());
    if let Some(stack_says) = named.filter(|said| *said != name) {
        return Err(Failure::msg(
            USAGE,
            format!("--deployment {name}, but the stack's DeploymentName is {stack_says}"),
        ));
    }
    let found = clients.find(&name, main, image, args.keep_images).await?;
    print_plan(&name, &stack_name, &image_stack_name, &found);
    if found.is_empty() {
        println!("\nnothing to delete");
        print_kept(&found);
        return Ok(());
    }
    confirm(args.yes, &name)?;
    clients
        .delete(&name, &found, &mut deployment.progress)
        .await?;
    println!("\ndeployment {name} deleted");
    print_kept(&found);
    Ok(())
}

fn print_stack(role: &str, name: &str, stack: Option<&StackFound>) {
    match stack {
        Some(stack) => {
            println!("  {role} stack {name} ({}), and with it:", stack.status);
            for line in &stack.summary {
                println!("    {line}");
            }
        }
        None => println!("  {role} stack {name}: none"),
    }
}

fn print_plan(name: &str, stack_name: &str, image_stack_name: &str, found: &Found) {
    println!("deployment {name}, what destroy deletes:");
    print_stack("main", stack_name, found.main.as_ref());
    list("terminate runner and build instances", &found.instances);
    let amis: Vec<String> = found
        .images
        .iter()
        .map(|image| format!("{} ({})", image.id, image.name))
        .collect();
    print_stack("image", image_stack_name, found.image.as_ref());
    list("deregister AMIs the image pipelines made", &amis);
    list("delete their snapshots", &found.snapshots);
    list("delete parameters no stack owns", &found.parameters);
    let buckets: Vec<String> = found
        .main
        .iter()
        .chain(&found.image)
        .flat_map(|s| s.buckets.clone())
        .collect();
    list(
        "then delete the buckets the stacks retain, with their objects (the runner copies)",
        &buckets,
    );
}

fn list(what: &str, items: &[String]) {
    if items.is_empty() {
        println!("  {what}: none");
    } else {
        println!("  {what} ({}): {}", items.len(), items.join(", "));
    }
}

fn print_kept(found: &Found) {
    println!("\nkept:");
    for secret in &found.kept_secrets {
        println!("  - secret {secret} (passed to the stack by ARN)");
    }
    if found.kept_images {
        println!("  - the AMIs and snapshots the image pipelines made (--keep-images)");
    }
    for line in ALWAYS_KEPT {
        println!("  - {line}");
    }
}

/// Asks on the terminal unless `yes`; refuses to go on without an answer.
fn confirm(yes: bool, name: &str) -> Result<(), Failure> {
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(Failure::msg(
            USAGE,
            "not deleting without confirmation: stdin is not a terminal to ask on; pass --yes",
        ));
    }
    eprint!("\ndelete all of the above? type the deployment's name ({name}) to go on: ");
    std::io::stderr().flush().map_err(Failure::from)?;
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(Failure::from)?;
    if answer.trim() == name {
        Ok(())
    } else {
        Err(Failure::msg(REFUSED, "nothing deleted: not confirmed"))
    }
}

#[cfg(test)]
mod policy_tests;
