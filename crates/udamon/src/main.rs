//! The `udamon` command: DAMON in user space.

mod cli;
mod cmd;
mod host;
mod input;
mod monitor;
mod output;
mod progress;
mod schemes_file;
mod units;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let result = match &cli.command {
        cli::Command::Demo(args) => cmd::demo::run(args),
        cli::Command::Record(args) => cmd::record::run(args),
        cli::Command::Report(args) => cmd::report::run(args),
        cli::Command::Convert(args) => cmd::convert::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line: the error and its causes.
            eprintln!("udamon: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
