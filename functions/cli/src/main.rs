//! `ephemera`: the operator's command line, and `ephemera local`, which runs the whole
//! pipeline in one process against any AWS endpoint. Exit codes: `ephemera help exit-codes`.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    ephemera_cli::commands::run(ephemera_cli::commands::parse()).await
}
