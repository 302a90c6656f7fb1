//! Naming sampled instruction pointers while monitoring runs, so that reports name the code
//! after the binary is gone or rebuilt.
//!
//! An IP in a file-backed mapping is looked up in that file (its ELF symbol table, and DWARF
//! where present) by its file offset, worked out from the process's mappings as udamon last read
//! them: this stays right for samples handled after the process exec'd or exited, which its
//! `/proc/PID/maps` no longer describes. An IP in anonymous memory (JIT code) is looked up in
//! the process's perf map (`/tmp/perf-PID.map`), and one in the vDSO in the vDSO itself; both need
//! the process alive. [blazesym](https://docs.rs/blazesym) does the reading and keeps every file
//! it parsed open and indexed, so a file's symbols are read once per run.

use crate::maps::{MapPath, Mapping, Maps};
use blazesym::Pid;
use blazesym::symbolize::source::{Elf, Process, Source};
use blazesym::symbolize::{Input, Reason, Symbolized, Symbolizer as Blaze};
use std::path::PathBuf;

/// What a sampled IP was found to be.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SiteName {
    /// The function (demangled) whose code holds the IP.
    pub function: Option<String>,
    /// The mapping that holds the IP, as `/proc/PID/maps` names it (`[anon]` when unnamed), or
    /// for the process's executable, the path it was executed by ([`Maps::shown_path`]).
    pub object: Option<String>,
    /// Why no function was found; `None` when one was.
    pub missing: Option<String>,
}

/// Names sampled IPs; one per monitoring run (it caches every file it read).
pub struct Symbolizer {
    blaze: Blaze,
}

impl Default for Symbolizer {
    fn default() -> Self {
        Symbolizer {
            // File and line would cost a DWARF line-table walk per IP, and no report shows them.
            blaze: Blaze::builder().enable_code_info(false).build(),
        }
    }
}

impl Symbolizer {
    /// Names `ip` of process `pid`, whose mappings are `maps`.
    pub fn name(&self, pid: u32, maps: &Maps, ip: u64) -> SiteName {
        let Some(m) = maps.lookup(ip) else {
            return SiteName {
                missing: Some("the address is in no mapping of the process".into()),
                ..SiteName::default()
            };
        };
        let shown = maps.shown_path(m);
        let object = shown.to_string();
        let (source, input) = match &m.path {
            MapPath::File(path) => {
                let file = readable_path(pid, m, path);
                let offset = ip - m.start + m.offset;
                (Source::Elf(Elf::new(file)), Input::FileOffset(offset))
            }
            _ => {
                let mut process = Process::new(Pid::from(pid));
                // Paths from maps, not map_files: these mappings have none, and map_files
                // needs CAP_SYS_ADMIN.
                process.map_files = false;
                (Source::Process(process), Input::AbsAddr(ip))
            }
        };
        let found = self.blaze.symbolize_single(&source, input);
        let (function, missing) = match found {
            Ok(Symbolized::Sym(sym)) => (Some(sym.name.into_owned()), None),
            Ok(Symbolized::Unknown(reason)) => (None, Some(why_unknown(reason, shown))),
            Err(e) => (
                None,
                Some(format!("{object}: {}", first_line(&e.to_string()))),
            ),
        };
        SiteName {
            function,
            object: Some(object),
            missing,
        }
    }
}

/// The file to read for a mapping: its path, or, once the file was deleted or replaced (a
/// rebuilt binary), the kernel's handle on the mapped one.
fn readable_path(pid: u32, m: &Mapping, path: &std::path::Path) -> PathBuf {
    const DELETED: &str = " (deleted)";
    match path.to_str() {
        Some(p) if p.ends_with(DELETED) => {
            PathBuf::from(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end))
        }
        _ => path.to_path_buf(),
    }
}

/// A sentence saying why an IP in a mapping of `path` (as reports name it) has no function,
/// for the report to show.
fn why_unknown(reason: Reason, path: &MapPath) -> String {
    match (path, reason) {
        (MapPath::File(p), Reason::MissingSyms) => format!(
            "{} is stripped: only its exported functions have names (install its debug symbols)",
            p.display()
        ),
        (MapPath::File(p), _) => format!("no symbol of {} covers the address", p.display()),
        (MapPath::Anon | MapPath::Other(_), _) => {
            "anonymous code (JIT) without a perf map naming it (/tmp/perf-PID.map)".into()
        }
        (path, reason) => format!("{path}: {}", reason_text(reason)),
    }
}

fn reason_text(reason: Reason) -> String {
    let bytes = reason.as_bytes();
    String::from_utf8_lossy(bytes.strip_suffix(b"\0").unwrap_or(bytes)).into_owned()
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::maps::read_maps;

    #[inline(never)]
    fn a_named_function(x: u64) -> u64 {
        std::hint::black_box(x).wrapping_mul(3)
    }

    #[test]
    fn an_ip_of_this_test_names_its_function() {
        let ip = a_named_function as *const () as u64 + 1;
        assert_eq!(a_named_function(1), 3);
        let pid = std::process::id();
        let maps = read_maps(pid).unwrap();
        let name = Symbolizer::default().name(pid, &maps, ip);
        let function = name.function.expect("a test binary keeps its symbols");
        assert!(function.ends_with("a_named_function"), "{function}");
        assert!(name.missing.is_none());
        let exe = std::env::current_exe().unwrap();
        assert_eq!(name.object.as_deref(), exe.to_str());
    }

    #[test]
    fn an_ip_outside_the_mappings_says_so() {
        let name = Symbolizer::default().name(std::process::id(), &Maps::default(), 16);
        assert_eq!(name.function, None);
        assert!(name.missing.unwrap().contains("no mapping"));
    }
}
