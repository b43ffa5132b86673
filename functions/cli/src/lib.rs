//! The `ephemera` command line: the operator's commands, which talk to a deployment's
//! DynamoDB table, SSM parameter and GitHub with the operator's own credentials, and
//! `local`, which runs the pipeline in one process.
//!
//! Layout: [`commands`] is the clap grammar and the dispatch; [`target`] resolves which
//! deployment is meant (stack outputs, table, configuration, GitHub App); [`runners`],
//! [`pools`], [`dlq`], [`config_cmd`] and [`doctor`] are the commands; [`views`] holds the stable
//! `--json` shapes, [`render`] the tables and progress lines, [`exit`] the exit codes,
//! [`errors`] how an error is said. `local`'s pieces (the webhook route, the queue
//! drain, the reaper timer) are public so the end-to-end tests drive exactly what
//! `ephemera local` runs.

pub mod commands;
pub mod config_cmd;
pub mod dlq;
pub mod doctor;
pub mod errors;
pub mod exit;
pub mod local;
pub mod pools;
pub mod render;
pub mod runners;
pub mod target;
pub mod views;
