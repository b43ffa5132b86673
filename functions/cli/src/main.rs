//! `ephemera`: the operator's command line, and `ephemera local`, which runs the whole
//! pipeline in one process against any AWS endpoint.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "ephemera",
    version,
    about = "Autoscaled, just-in-time GitHub Actions runners on AWS"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the webhook, scaler and reaper in one process (on a laptop against the moto
    /// emulator, or against real AWS).
    Local(ephemera_cli::local::LocalArgs),
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Local(args) => ephemera_cli::local::run(args).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
