//! Exit codes of the operator commands, and the error that carries one.
//!
//! Scripts branch on these, so they are part of the CLI's contract: documented in
//! `ephemera help exit-codes` and `ephemera --help` (see [`EXIT_CODES_HELP`]), pointed to
//! from every command's help, and in docs/operating.md ("Exit codes"), and
//! never renumbered.

use std::fmt;
use std::process::ExitCode;

/// Done.
pub const OK: u8 = 0;
/// Something failed that is not one of the cases below (AWS, files, network).
pub const FAILURE: u8 = 1;
/// The command line is wrong or incomplete (also clap's own code for usage errors), or
/// `jobs dlq redrive` or `destroy` would need a confirmation it cannot ask for.
pub const USAGE: u8 = 2;
/// GitHub refused to remove the runner because it is running a job (HTTP 422).
pub const BUSY: u8 = 3;
/// No such runner (or, for `jobs show`, job) in the table; for `runners logs`, also no
/// logs yet.
pub const NOT_FOUND: u8 = 4;
/// GitHub answered with an error other than "busy" (credentials, rate limit, outage).
pub const GITHUB: u8 = 5;
/// The record is in a status that does not allow what was asked (already being
/// deleted, already deleted, changed concurrently), or a push would change the
/// deployment name, or a redrive was not confirmed, or a runner to connect to has no
/// instance or no `ssm_access`, or `destroy` was not confirmed.
pub const REFUSED: u8 = 6;
/// The configuration file is invalid.
pub const INVALID_CONFIG: u8 = 7;
/// `doctor`: at least one check failed (each ✖ line says what to do).
pub const CHECK_FAILED: u8 = 8;

/// The exit codes, as `--help` shows them (a literal, for `concat!`).
macro_rules! exit_codes {
    () => {
        "Exit codes:
  0  done
  1  failure (AWS, files, network); runners connect: aws or session-manager-plugin
     is not on PATH (the command is printed)
  2  usage: a missing or wrong option; jobs dlq redrive or destroy without --yes off
     a terminal
  3  runners delete: the runner is running a job; GitHub refused to remove it (422)
  4  runners show/delete/connect/logs: no such runner; runners logs: no logs yet;
     jobs show: no such job
  5  GitHub error other than busy (credentials, rate limit, outage, App not installed)
  6  refused: the runner is already being deleted or deleted, or changed meanwhile;
     config push: the file names another deployment; jobs dlq redrive: not confirmed;
     runners connect: no instance (yet, or any more), or the pool has no ssm_access;
     destroy: not confirmed
  7  config validate/push: the configuration is invalid
  8  doctor: at least one check failed"
    };
}
pub(crate) use exit_codes;

/// The exit codes, as `--help` shows them.
pub const EXIT_CODES_HELP: &str = exit_codes!();

/// An error with the exit code it ends the process with.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub error: anyhow::Error,
}

impl Failure {
    pub fn new(code: u8, error: impl Into<anyhow::Error>) -> Failure {
        Failure {
            code,
            error: error.into(),
        }
    }

    /// A failure whose whole story is `message`.
    pub fn msg(
        code: u8,
        message: impl fmt::Display + fmt::Debug + Send + Sync + 'static,
    ) -> Failure {
        Failure::new(code, anyhow::Error::msg(message))
    }

    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(self.code)
    }
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(error: E) -> Failure {
        Failure::new(FAILURE, error)
    }
}

/// What an operator command returns.
pub type Outcome = Result<(), Failure>;
