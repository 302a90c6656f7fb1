//! The `udamon` command: DAMON in user space.

mod cli;
mod cmd;
mod host;
mod input;
mod monitor;
mod output;
mod progress;
mod schemes_file;
mod select;
mod serve;
mod small_file;
mod units;

use clap::Parser;
use clap::error::ErrorKind;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    if let cli::Command::Record(args) = &mut cli.command {
        args.resolve_target();
    }
    let result = match &cli.command {
        cli::Command::Demo(args) => cmd::demo::run(args),
        cli::Command::Record(args) => cmd::record::run(args),
        cli::Command::Report(args) => cmd::report::run(args),
        cli::Command::Top(args) => cmd::top::run(args),
        cli::Command::Convert(args) => cmd::convert::run(args),
        cli::Command::Serve(args) => serve::run(args),
        cli::Command::Ctl(args) => cmd::ctl::run(args),
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

/// A command line that clap refused: help and version print as clap prints them; anything else
/// is one `udamon: error:` line (clap's message, its tip, where to look) and status 2, the
/// usual status for a usage error, which tells it from a failure of the work itself (1).
fn usage_error(e: &clap::Error) -> ExitCode {
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit();
    }
    eprintln!("udamon: error: {}", one_line(&e.render().to_string()));
    ExitCode::from(2)
}

/// clap's multi-line error text as one line: the message (its first paragraph, which may list
/// arguments on lines of their own), its tips, and the `--help` of the command that was being
/// parsed.
fn one_line(rendered: &str) -> String {
    let mut paragraphs = rendered.split("\n\n");
    let message: Vec<&str> = paragraphs
        .next()
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .collect();
    let mut out = message.join(" ").trim_start_matches("error: ").to_string();
    for tip in paragraphs
        .flat_map(str::lines)
        .filter_map(|l| l.trim().strip_prefix("tip: "))
    {
        out = format!("{out}; {tip}");
    }
    format!(
        "{out}; see `{} --help`",
        command_path(
            std::env::args_os()
                .skip(1)
                .map_while(|a| a.into_string().ok())
        )
    )
}

/// `udamon` and the subcommands `args` start with (`udamon report access`).
fn command_path(args: impl Iterator<Item = String>) -> String {
    let mut command = <cli::Cli as clap::CommandFactory>::command();
    let mut path = vec![command.get_name().to_string()];
    for arg in args {
        let Some(sub) = command.find_subcommand(&arg).cloned() else {
            break;
        };
        path.push(sub.get_name().to_string());
        command = sub;
    }
    path.join(" ")
}
