//! The `ephemera` command line: the operator's commands, which talk to a deployment's
//! DynamoDB table, SSM parameter and GitHub with the operator's own credentials, and
//! `local`, which runs the pipeline in one process.
//!
//! Layout: [`commands`] is the clap grammar and the dispatch; [`cmd`] holds one module
//! per command; [`target`] resolves which deployment is meant (stack outputs, table,
//! configuration, GitHub App) and sets it up once for every command; [`views`] holds the
//! stable `--json` shapes, [`render`] the tables and progress lines, [`exit`] the exit
//! codes, [`errors`] how an error is said. `local`'s pieces (the webhook route, the
//! queue drain, the reaper timer) are public so the end-to-end tests drive exactly what
//! `ephemera local` runs.

pub mod cmd;
pub mod commands;
pub mod errors;
pub mod exit;
pub mod render;
pub mod target;
pub mod views;
