//! Writing to stdout the way a command-line tool should: a closed pipe (`| head`) ends output
//! quietly instead of panicking.

use std::io::{self, Write};

pub fn print(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Pretty JSON of a report, with a final newline.
pub fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    Ok(print(&text)?)
}
