//! The service's log: one line per event on stderr, in a form journald understands. Under
//! systemd (which sets `JOURNAL_STREAM`) each line starts with its syslog priority (`<6>` info,
//! `<4>` warning, `<3>` error), which journald files as the entry's priority and strips;
//! elsewhere the line starts with `udamon:` as the other commands' messages do.

fn line(priority: u8, text: &str) {
    // One line whatever the message holds: a multi-line entry would split in the journal.
    let text = text.replace('\n', " ");
    if std::env::var_os("JOURNAL_STREAM").is_some() {
        eprintln!("<{priority}>{text}");
    } else {
        eprintln!("udamon: {text}");
    }
}

pub fn info(text: &str) {
    line(6, text);
}

pub fn warn(text: &str) {
    line(4, text);
}

pub fn error(text: &str) {
    line(3, text);
}
