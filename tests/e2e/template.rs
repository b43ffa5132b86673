//! template.yaml, tested rather than only linted: its IAM posture read from the
//! translated template (the runner role's evaluated request by request), and one job run
//! end to end on the stack it creates in moto, a redeploy that keeps a pushed
//! configuration, and stack updates that reach the next launch; every request `ephemera
//! doctor` simulates for a role is one the template's policies allow; the baked
//! runner image's stack (infra/image/) as far as moto carries it; the webhook's default
//! reserved concurrency, which any account can deploy; and the GitHub App manifests'
//! permissions.

mod app_manifest;
mod iam;
mod image;
mod instance_role;
mod launch_version;
mod log_stream;
mod policy;
mod redeploy;
mod simulations;
mod ssm_access;
mod ssm_role;
mod stack_job;
mod webhook_concurrency;
