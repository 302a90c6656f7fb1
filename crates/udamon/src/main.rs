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
    if matches!(
        cli.command,
        cli::Command::Report(_) | cli::Command::Convert(_)
    ) {
        // A record's large buffers (a snapshot's regions, a decompressed frame) go to their
        // own mappings and back to the system when freed. glibc raises this threshold each
        // time such a buffer is freed, after which the next ones come from the heap, where
        // freed memory stays counted against the process: a report's peak resident memory
        // then follows the allocator's history rather than what it holds (240 MiB for
        // 168 MiB of heap on a crafted record).
        // SAFETY: mallopt only sets an allocator parameter, before any thread starts.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
        }
    }
    if let cli::Command::Record(args) = &mut cli.command {
        args.resolve_target();
    }
    let result = match &cli.command {
        cli::Command::Demo(args) => cmd::demo::run(args),
        cli::Command::Record(args) => cmd::record::run(args),
        cli::Command::Report(args) => cmd::report::run(args),
        cli::Command::Top(args) => cmd::top::run(args),
        cli::Command::Convert(args) => cmd::convert::run(args),
        cli::Command::Serve(args) => cmd::serve::run(args),
        cli::Command::Ctl(args) => cmd::ctl::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line: the error and its causes.
            eprintln!("udamon: error: {}", printable(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}

/// The most characters of an error line: values echoed in it (a path, a field, a line of a
/// file) may be of any length.
const MAX_ERROR_CHARS: usize = 1000;

/// An error message as one printable line: control characters escaped (a file name may hold a
/// newline or an escape sequence), and a message longer than [`MAX_ERROR_CHARS`] cut in the
/// middle, which keeps what failed (its start) and what to do (its end).
fn printable(message: &str) -> String {
    let chars: Vec<String> = message
        .chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect();
    if chars.len() <= MAX_ERROR_CHARS {
        return chars.concat();
    }
    let head = MAX_ERROR_CHARS * 2 / 3;
    let tail = MAX_ERROR_CHARS - head - 3;
    let cut = chars.len() - head - tail;
    format!(
        "{} … ({cut} characters left out) … {}",
        chars[..head].concat(),
        chars[chars.len() - tail..].concat()
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_lines_are_printable_and_bounded() {
        assert_eq!(printable("a\nb\x1b[31m"), "a\\nb\\u{1b}[31m");
        let long = format!("cannot read {}: do this", "x".repeat(100_000));
        let line = printable(&long);
        assert!(
            line.chars().count() < MAX_ERROR_CHARS + 40,
            "{}",
            line.len()
        );
        assert!(line.starts_with("cannot read xxx") && line.ends_with("xx: do this"));
        assert!(line.contains("characters left out"));
    }
}
