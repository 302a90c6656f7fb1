//! `udamon ctl`: one request to a running `udamon serve` over its control socket, its answer
//! on stdout (or the refusal as the error). Files a request names (schemes, a workload) are
//! read here, with the caller's own rights, and sent as text: serve opens no file for a
//! caller.

use crate::cli::{CtlArgs, CtlRequest};
use crate::cmd::serve::control::Request;
use crate::small_file::read_text;
use anyhow::{Result, bail};
use std::path::Path;
use udamon_report::human::one_line;

pub fn run(args: &CtlArgs) -> Result<()> {
    let request = match &args.request {
        CtlRequest::Targets => Request::Targets,
        CtlRequest::Add { pid, sim, fast } => {
            let (sim, config) = match sim.as_deref() {
                Some(spec) if !spec.starts_with("builtin:") => {
                    let path = Path::new(spec);
                    let name = path
                        .file_name()
                        .map_or_else(|| spec.to_string(), |n| n.to_string_lossy().into_owned());
                    (Some(name), Some(read_text(path, "workload file")?))
                }
                other => (other.map(str::to_string), None),
            };
            Request::Add {
                pid: *pid,
                sim,
                config,
                fast: *fast,
            }
        }
        CtlRequest::Remove { target } => Request::Remove {
            target: target.clone(),
        },
        CtlRequest::Tune { target, overrides } => Request::Tune {
            target: target.clone(),
            tune: *overrides,
        },
        CtlRequest::AddSchemes { target, schemes } => Request::AddSchemes {
            target: target.clone(),
            schemes: read_text(schemes, "schemes file")?,
        },
        CtlRequest::RemoveScheme { target, index } => Request::RemoveScheme {
            target: target.clone(),
            index: *index,
        },
        CtlRequest::Snapshot { target, json } => Request::Snapshot {
            target: target.clone(),
            json: *json,
        },
        CtlRequest::Status { target } => Request::Status {
            target: target.clone(),
        },
    };
    let path = args
        .control
        .clone()
        .unwrap_or_else(crate::cmd::serve::default_control);
    let answer = crate::cmd::serve::request(&path, &request)?;
    match (answer.ok, answer.text, answer.error) {
        (true, text, _) => Ok(crate::output::print(&printable(&text.unwrap_or_default()))?),
        (false, _, error) => bail!("{}", error.unwrap_or_else(|| "refused".to_string())),
    }
}

/// An answer as the terminal is to show it: its lines, each ended, and its tab-separated
/// fields, with every other control character escaped as reports escape them. The text holds
/// names that others chose (a process's name, set with prctl; a cgroup's), which must not
/// reach the terminal as escape sequences.
fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 1);
    for line in text.lines() {
        let fields: Vec<String> = line.split('\t').map(|f| one_line(f, usize::MAX)).collect();
        out.push_str(&fields.join("\t"));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_shows_names_escaped_and_keeps_its_lines() {
        let answer = "1 sleep\n2 \x1b]0;owned\x07\x1b[8m\u{9b}2J\ttail";
        assert_eq!(
            printable(answer),
            "1 sleep\n2 \\u{1b}]0;owned\\u{7}\\u{1b}[8m\\u{9b}2J\ttail\n"
        );
        assert_eq!(printable(""), "");
    }
}
