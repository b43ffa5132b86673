//! template.yaml, tested rather than only linted: its IAM posture read from the
//! translated template (the runner role's evaluated request by request), and one job run
//! end to end on the stack it creates in moto, a redeploy that keeps a pushed
//! configuration, and stack updates that reach the next launch; and every request
//! `ephemera doctor` simulates for a role is one the template's policies allow.

mod iam;
mod instance_role;
mod launch_version;
mod policy;
mod redeploy;
mod simulations;
mod stack_job;
