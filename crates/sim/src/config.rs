//! The workload file: masim's configuration format (docs/sources/sim.md#workload-files), parsed
//! into a [`Workload`] whose regions are already placed in the simulated address space.
//!
//! ```text
//! # lines starting with '#' are removed first
//! a, 268435456            <- regions paragraph: name, size_bytes[, init_file|none]
//! b, 64k, none
//!                         <- paragraphs are separated by empty lines
//! phase one               <- phase paragraph: name,
//! 2000                    <-   duration in milliseconds,
//! a, 1, 64, 80, wo        <-   patterns: region, random(1)/sequential(0), stride_bytes,
//! b, 0, 4096, 20          <-             probability (a relative weight)[, ro|wo|rw]
//! ```
//!
//! Where masim is fragile we are lenient: the file need not end with a newline; several empty
//! (or blank) lines count as one separator; fields may carry spaces around them; a `#` may be
//! indented; sizes and strides accept the `b`/`k`/`m`/`g`/`t` suffixes (either case; binary
//! units: `10m` = 10 MiB) that `masim.py` accepts, which masim itself does not.
//! Where it matters we are strict: masim silently reads `10x` as 10 and an unknown region as a
//! crash, while here every problem is a [`ConfigError`] naming the 1-based line, what is wrong
//! and what was expected. Zero-size regions, duplicate region names, phases without a positive
//! duration or without patterns, phases whose probabilities are all zero, randomness other than
//! 0/1 and a sequential stride of 0 are rejected.
//!
//! The init file and the read/write mode are kept but do not change the access model: a region's
//! initial content does not affect which pages are accessed, and reads and writes both set the
//! accessed bit.

use crate::layout;
use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use thiserror::Error;
use udamon_core::AddrRange;

/// A workload file that could not be used.
#[derive(Debug, Error)]
pub enum ConfigError {
    // The OS error is part of the message and not also a `source()`, so that a printed chain
    // says it once.
    #[error("cannot read workload file {path}: {cause}")]
    Read { path: String, cause: std::io::Error },
    /// `{source}:{line}: {message}`, or `line {line}: {message}` for a nameless source.
    #[error("{}", Located { source: source_name, line: *line, message })]
    Invalid {
        source_name: String,
        /// 1-based.
        line: usize,
        message: String,
    },
}

impl ConfigError {
    /// The 1-based line the error is about, if it is about the content.
    pub fn line(&self) -> Option<usize> {
        match self {
            ConfigError::Read { .. } => None,
            ConfigError::Invalid { line, .. } => Some(*line),
        }
    }
}

struct Located<'a> {
    source: &'a str,
    line: usize,
    message: &'a str,
}

impl fmt::Display for Located<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.source.is_empty() {
            write!(f, "line {}: {}", self.line, self.message)
        } else {
            write!(f, "{}:{}: {}", self.source, self.line, self.message)
        }
    }
}

/// masim's `-r/--default_rw_mode` default, used when a pattern line has 4 fields.
pub const DEFAULT_RW_MODE: RwMode = RwMode::WriteOnly;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RwMode {
    ReadOnly,
    WriteOnly,
    ReadWrite,
}

/// A memory region of the workload and where it lives in the simulated address space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadRegion {
    pub name: String,
    /// Bytes that accesses fall in, as configured.
    pub size: u64,
    /// The initial data file (`none` reads as `None`); recorded, not simulated.
    pub init_file: Option<String>,
    /// The region's mapping: page-aligned, `size` rounded up to whole pages.
    pub range: AddrRange,
}

/// One access pattern of a phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    /// Index into [`Workload::regions`].
    pub region: usize,
    /// Uniformly random bytes (masim's `1`) or a sequential sweep (`0`).
    pub random: bool,
    /// Bytes between consecutive sequential accesses; ignored by random patterns, as in masim.
    pub stride: u64,
    /// Relative weight among the phase's patterns.
    pub probability: u32,
    pub rw_mode: RwMode,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phase {
    pub name: String,
    pub duration_ms: u64,
    pub patterns: Vec<Pattern>,
}

impl Phase {
    /// The sum of the patterns' probability weights; positive.
    pub fn total_probability(&self) -> u64 {
        self.patterns.iter().map(|p| p.probability as u64).sum()
    }

    pub fn duration_us(&self) -> u64 {
        self.duration_ms * 1000
    }
}

/// A parsed and placed workload: regions, and phases that run in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    name: String,
    regions: Vec<WorkloadRegion>,
    phases: Vec<Phase>,
}

/// Longest run through all phases we accept (about 580 years), so that microsecond arithmetic
/// keeps a factor of 1000 of headroom for repeats.
const MAX_TOTAL_MS: u64 = u64::MAX / 1000 / 1000;

impl Workload {
    /// Parse masim-format `text`; `name` (usually the file name) prefixes error messages.
    pub fn parse(text: &str, name: &str) -> Result<Workload, ConfigError> {
        Parser { source: name }.parse(text)
    }

    /// Read and parse a workload file; errors name the file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Workload, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|cause| ConfigError::Read {
            path: path.display().to_string(),
            cause,
        })?;
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        Workload::parse(&text, &name)
    }

    /// A built-in workload ([`crate::builtin`]) by name, parsed.
    pub fn builtin(name: &str) -> Option<Workload> {
        let text = crate::builtin(name)?;
        let name = format!("{}.cfg", name.trim_end_matches(".cfg"));
        Some(Workload::parse(text, &name).expect("built-in workloads parse"))
    }

    /// The name given to [`Workload::parse`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// In configuration order.
    pub fn regions(&self) -> &[WorkloadRegion] {
        &self.regions
    }

    /// In run order.
    pub fn phases(&self) -> &[Phase] {
        &self.phases
    }

    /// One run through every phase, in microseconds.
    pub fn cycle_us(&self) -> u64 {
        self.phases.iter().map(Phase::duration_us).sum()
    }
}

/// Lines that survived comment removal, numbered from 1, grouped in paragraphs.
type Paragraph<'a> = Vec<(usize, &'a str)>;

struct Parser<'a> {
    source: &'a str,
}

impl Parser<'_> {
    fn err(&self, line: usize, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            source_name: self.source.to_string(),
            line,
            message: message.into(),
        }
    }

    fn parse(&self, text: &str) -> Result<Workload, ConfigError> {
        // Editors on Windows start UTF-8 files with a byte-order mark; it is not part of line 1.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut paragraphs: Vec<Paragraph> = Vec::new();
        let mut current: Paragraph = Vec::new();
        let mut last_line = 1;
        for (i, line) in text.lines().enumerate() {
            last_line = i + 1;
            if line.trim_start().starts_with('#') {
                continue;
            }
            if line.trim().is_empty() {
                if !current.is_empty() {
                    paragraphs.push(std::mem::take(&mut current));
                }
                continue;
            }
            current.push((i + 1, line));
        }
        if !current.is_empty() {
            paragraphs.push(current);
        }

        let mut paragraphs = paragraphs.into_iter();
        let Some(region_lines) = paragraphs.next() else {
            return Err(self.err(
                last_line,
                "the workload is empty: expected a paragraph of regions (`name, size_bytes[, init_file|none]`) \
                 followed by phase paragraphs",
            ));
        };
        let (regions, by_name) = self.regions(&region_lines)?;
        let regions_end = region_lines.last().map_or(1, |l| l.0);
        let mut phases = Vec::new();
        let mut total_ms: u64 = 0;
        for paragraph in paragraphs {
            let (phase, duration_line) = self.phase(&paragraph, &regions, &by_name)?;
            total_ms = total_ms.saturating_add(phase.duration_ms);
            if total_ms > MAX_TOTAL_MS {
                return Err(self.err(
                    duration_line,
                    format!("the phases last more than {MAX_TOTAL_MS} ms in total"),
                ));
            }
            phases.push(phase);
        }
        if phases.is_empty() {
            return Err(self.err(
                regions_end,
                "the workload has no phase: after the regions, add an empty line and a phase \
                 (a name line, a duration-in-ms line, then `region, random(1)/sequential(0), stride_bytes, probability` lines)",
            ));
        }
        Ok(Workload {
            name: self.source.to_string(),
            regions,
            phases,
        })
    }

    /// The regions, placed, and their indexes by name (looked up once per pattern line, so a
    /// map keeps parsing linear in the number of regions).
    fn regions<'t>(
        &self,
        lines: &Paragraph<'t>,
    ) -> Result<(Vec<WorkloadRegion>, HashMap<&'t str, usize>), ConfigError> {
        let mut regions: Vec<WorkloadRegion> = Vec::with_capacity(lines.len());
        let mut by_name: HashMap<&str, usize> = HashMap::with_capacity(lines.len());
        let mut defined_on: Vec<usize> = Vec::with_capacity(lines.len());
        for &(no, line) in lines {
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            if fields.len() != 2 && fields.len() != 3 {
                return Err(self.err(
                    no,
                    format!(
                        "expected a region as `name, size_bytes[, init_file|none]`, found {} comma-separated fields",
                        fields.len()
                    ),
                ));
            }
            let name = fields[0];
            if name.is_empty() {
                return Err(self.err(no, "region name is empty"));
            }
            if let Some(&i) = by_name.get(name) {
                return Err(self.err(
                    no,
                    format!(
                        "region \"{name}\" is defined twice (first on line {})",
                        defined_on[i]
                    ),
                ));
            }
            by_name.insert(name, regions.len());
            let size = parse_bytes(fields[1])
                .map_err(|why| self.err(no, format!("size \"{}\" {why}", fields[1])))?;
            if size == 0 {
                return Err(self.err(
                    no,
                    format!("region \"{name}\" has size 0; a region needs at least one byte"),
                ));
            }
            let init_file = match fields.get(2) {
                None | Some(&"none") => None,
                Some(&"") => {
                    return Err(
                        self.err(no, "the init file field is empty; write `none` or a path")
                    );
                }
                Some(f) => Some(f.to_string()),
            };
            regions.push(WorkloadRegion {
                name: name.to_string(),
                size,
                init_file,
                range: AddrRange::new(0, 0),
            });
            defined_on.push(no);
        }
        let sizes: Vec<u64> = regions.iter().map(|r| r.size).collect();
        let ranges = layout::place(&sizes).map_err(|i| {
            self.err(
                defined_on[i],
                format!(
                    "region \"{}\" does not fit: the simulated mmap area holds {} bytes in total \
                     (the regions of 128 KiB or more share it)",
                    regions[i].name,
                    layout::mmap_capacity(&sizes)
                ),
            )
        })?;
        for (r, range) in regions.iter_mut().zip(ranges) {
            r.range = range;
        }
        Ok((regions, by_name))
    }

    /// The phase and the line of its duration.
    fn phase(
        &self,
        lines: &Paragraph,
        regions: &[WorkloadRegion],
        by_name: &HashMap<&str, usize>,
    ) -> Result<(Phase, usize), ConfigError> {
        let (name_no, name) = lines[0];
        let name = name.trim().to_string();
        let Some(&(dur_no, dur)) = lines.get(1) else {
            return Err(self.err(
                name_no,
                format!(
                    "phase \"{name}\" has no duration: expected its duration in milliseconds on the next line, \
                     then its access patterns"
                ),
            ));
        };
        let dur = dur.trim();
        let duration_ms: u64 = parse_decimal(dur).ok_or_else(|| {
            self.err(
                dur_no,
                format!("duration \"{dur}\" is not a whole number of milliseconds"),
            )
        })?;
        if duration_ms == 0 {
            return Err(self.err(
                dur_no,
                format!("phase \"{name}\" lasts 0 ms; give it a positive duration"),
            ));
        }
        if lines.len() < 3 {
            return Err(self.err(
                dur_no,
                format!(
                    "phase \"{name}\" has no access pattern: expected lines \
                     `region, random(1)/sequential(0), stride_bytes, probability[, ro|wo|rw]` after the duration"
                ),
            ));
        }
        let patterns = lines[2..]
            .iter()
            .map(|&(no, line)| self.pattern(no, line, regions, by_name))
            .collect::<Result<Vec<_>, _>>()?;
        let phase = Phase {
            name,
            duration_ms,
            patterns,
        };
        if phase.total_probability() == 0 {
            return Err(self.err(
                name_no,
                format!(
                    "every pattern of phase \"{}\" has probability 0, so the phase would access nothing; \
                     give at least one pattern a positive weight",
                    phase.name
                ),
            ));
        }
        Ok((phase, dur_no))
    }

    fn pattern(
        &self,
        no: usize,
        line: &str,
        regions: &[WorkloadRegion],
        by_name: &HashMap<&str, usize>,
    ) -> Result<Pattern, ConfigError> {
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if fields.len() != 4 && fields.len() != 5 {
            return Err(self.err(
                no,
                format!(
                    "expected an access pattern as `region, random(1)/sequential(0), stride_bytes, probability[, ro|wo|rw]`, \
                     found {} comma-separated fields",
                    fields.len()
                ),
            ));
        }
        let region = by_name.get(fields[0]).copied().ok_or_else(|| {
            self.err(
                no,
                format!(
                    "unknown region \"{}\" (regions are {})",
                    fields[0],
                    describe_names(regions)
                ),
            )
        })?;
        let random = match fields[1] {
            "0" => false,
            "1" => true,
            other => {
                return Err(self.err(
                    no,
                    format!("randomness \"{other}\" must be 0 (sequential) or 1 (random)"),
                ));
            }
        };
        let stride = parse_bytes(fields[2])
            .map_err(|why| self.err(no, format!("stride \"{}\" {why}", fields[2])))?;
        if !random && stride == 0 {
            return Err(self.err(
                no,
                "a sequential pattern needs a positive stride (bytes between accesses)",
            ));
        }
        let probability = parse_decimal(fields[3])
            .and_then(|p| u32::try_from(p).ok())
            .ok_or_else(|| {
                self.err(
                    no,
                    format!(
                        "probability \"{}\" is not a whole number from 0 to {} (a relative weight)",
                        fields[3],
                        u32::MAX
                    ),
                )
            })?;
        let rw_mode = match fields.get(4) {
            None => DEFAULT_RW_MODE,
            Some(&"ro") => RwMode::ReadOnly,
            Some(&"wo") => RwMode::WriteOnly,
            Some(&"rw") => RwMode::ReadWrite,
            Some(other) => {
                return Err(self.err(no, format!("access mode \"{other}\" must be ro, wo or rw")));
            }
        };
        Ok(Pattern {
            region,
            random,
            stride,
            probability,
            rw_mode,
        })
    }
}

/// Digits only: no sign, no spaces inside.
fn parse_decimal(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A byte count with masim.py's optional suffix: b, k, m, g, t (either case, powers of 1024).
/// The error completes a sentence that starts with the quoted input.
fn parse_bytes(s: &str) -> Result<u64, &'static str> {
    const NOT_BYTES: &str =
        "is not a number of bytes (expected digits with an optional k/m/g/t suffix)";
    let (digits, unit) = match s.as_bytes().last().map(u8::to_ascii_lowercase) {
        Some(b'b') => (&s[..s.len() - 1], 1u64),
        Some(b'k') => (&s[..s.len() - 1], 1 << 10),
        Some(b'm') => (&s[..s.len() - 1], 1 << 20),
        Some(b'g') => (&s[..s.len() - 1], 1 << 30),
        Some(b't') => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(NOT_BYTES);
    }
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or("is too large for a 64-bit address space")
}

/// `s0..s9` for a numbered family, otherwise the names (abridged when there are many).
fn describe_names(regions: &[WorkloadRegion]) -> String {
    let names: Vec<&str> = regions.iter().map(|r| r.name.as_str()).collect();
    if let Some(range) = numbered_family(&names) {
        return range;
    }
    if names.len() <= 6 {
        return names.join(", ");
    }
    format!(
        "{}, ..., {} ({} regions)",
        names[..3].join(", "),
        names[names.len() - 1],
        names.len()
    )
}

/// `prefix<lo>..prefix<hi>` when the names are `prefix` plus consecutive numbers, in order.
fn numbered_family(names: &[&str]) -> Option<String> {
    if names.len() < 3 {
        return None;
    }
    let (prefix, first) = split_number(names[0])?;
    for (i, n) in names.iter().enumerate() {
        let (p, v) = split_number(n)?;
        if p != prefix || first.checked_add(i as u64) != Some(v) {
            return None;
        }
    }
    Some(format!("{}..{}", names[0], names[names.len() - 1]))
}

/// `("s", 12)` for `s12`; `None` without a trailing number or with a leading zero (which would
/// make `s01` and `s1` look alike).
fn split_number(name: &str) -> Option<(&str, u64)> {
    let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
    let (prefix, number) = name.split_at(name.len() - digits);
    if number.len() > 1 && number.starts_with('0') {
        return None;
    }
    Some((prefix, number.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> (usize, String) {
        let e = Workload::parse(text, "t.cfg").expect_err("should be rejected");
        (e.line().unwrap(), e.to_string())
    }

    const MASIM_DEFAULT: &str = "#regions\n# name, length, initial data file\na, 256, none\nb, 64, none\nc, 128, none\n\n\
        # phase 1\n# name of phase\nexample phase 1\n# time in ms\n1000\n# access patterns\n\
        # name of region, randomness, stride, probability, read/write mode\na, 1, 64, 80, wo\n\n\
        # phase 2\nexample phase 2\n# time in ms\n1000\n# access patterns\n\
        # name of region, randomness, stride, probability\nc, 1, 64, 50, ro\nb, 0, 4096, 50, rw\n";

    #[test]
    fn parses_masim_default_config() {
        let w = Workload::parse(MASIM_DEFAULT, "default").unwrap();
        let names: Vec<&str> = w.regions().iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(w.regions()[0].size, 256);
        assert_eq!(w.regions()[0].init_file, None);
        assert_eq!(w.phases().len(), 2);
        let p2 = &w.phases()[1];
        assert_eq!(
            (p2.name.as_str(), p2.duration_ms),
            ("example phase 2", 1000)
        );
        assert_eq!(
            p2.patterns[1],
            Pattern {
                region: 1,
                random: false,
                stride: 4096,
                probability: 50,
                rw_mode: RwMode::ReadWrite
            }
        );
        assert_eq!(w.phases()[0].patterns[0].rw_mode, RwMode::WriteOnly);
        assert_eq!(w.cycle_us(), 2_000_000);
    }

    #[test]
    fn lenient_where_masim_is_fragile() {
        // No trailing newline, blank lines with spaces, several separators, CRLF, suffixes,
        // indented comments.
        let text =
            "r1 , 10m\r\nr2,1G, /dev/zero\n  \n\n   # note\nP\n 5 \n r1 ,0, 4k, 3\nr2, 1, 0, 1, ro";
        let w = Workload::parse(text, "x").unwrap();
        assert_eq!(w.regions()[0].size, 10 << 20);
        assert_eq!(w.regions()[1].size, 1 << 30);
        assert_eq!(w.regions()[1].init_file.as_deref(), Some("/dev/zero"));
        assert_eq!(w.phases()[0].patterns[0].stride, 4096);
        assert_eq!(w.phases()[0].duration_ms, 5);
        assert_eq!(parse_bytes("7b"), Ok(7));
        assert_eq!(parse_bytes("2T"), Ok(2 << 40));
        assert_eq!(parse_bytes("3K"), Ok(3 << 10));
    }

    #[test]
    fn error_lines_and_messages() {
        let stairs = |pattern: &str| {
            let mut t = String::from("#regions\n");
            for i in 0..10 {
                t += &format!("s{i}, 1000000\n");
            }
            t + "\nphase\n100\n" + pattern + "\n"
        };
        assert_eq!(
            err(&stairs("s11, 0, 4096, 1")),
            (
                15,
                "t.cfg:15: unknown region \"s11\" (regions are s0..s9)".to_string()
            )
        );
        let (line, msg) = err("a, 1\nb, 10x\n\np\n1\na, 0, 1, 1\n");
        assert_eq!(
            (line, msg.as_str()),
            (
                2,
                "t.cfg:2: size \"10x\" is not a number of bytes (expected digits with an optional k/m/g/t suffix)"
            )
        );
        let e = Workload::parse("a, 1\n\np\n1\nzz, 0, 1, 1\n", "").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 5: unknown region \"zz\" (regions are a)"
        );

        let cases: [(&str, usize, &str); 16] = [
            ("", 1, "the workload is empty"),
            ("# only a comment\n", 1, "the workload is empty"),
            ("a, 4096\nb, 10\n", 2, "no phase"),
            ("a, 0\n\np\n1\na, 0, 1, 1\n", 1, "has size 0"),
            (
                "a, 1\na, 2\n\np\n1\na, 0, 1, 1\n",
                2,
                "defined twice (first on line 1)",
            ),
            (
                "a\n\np\n1\na, 0, 1, 1\n",
                1,
                "found 1 comma-separated fields",
            ),
            ("a, 1\n\np\n1\n\n", 4, "has no access pattern"),
            ("a, 1\n\np\n", 3, "has no duration"),
            (
                "a, 1\n\np\n1s\na, 0, 1, 1\n",
                4,
                "duration \"1s\" is not a whole number of milliseconds",
            ),
            ("a, 1\n\np\n0\na, 0, 1, 1\n", 4, "lasts 0 ms"),
            ("a, 1\n\np\n1\na, 0, 1, 0\na, 1, 1, 0\n", 3, "probability 0"),
            (
                "a, 1\n\np\n1\na, 2, 1, 1\n",
                5,
                "randomness \"2\" must be 0 (sequential) or 1 (random)",
            ),
            ("a, 1\n\np\n1\na, 0, 0, 1\n", 5, "positive stride"),
            ("a, 1\n\np\n1\na, 0, 1, -1\n", 5, "probability \"-1\""),
            (
                "a, 1\n\np\n1\na, 0, 1, 1, xx\n",
                5,
                "access mode \"xx\" must be ro, wo or rw",
            ),
            (
                "a, 1\n\np\n1\na, 0, 1\n",
                5,
                "found 3 comma-separated fields",
            ),
        ];
        for (text, want_line, want_msg) in cases {
            let (line, msg) = err(text);
            assert_eq!(line, want_line, "{text:?}: {msg}");
            assert!(msg.contains(want_msg), "{text:?}: {msg}");
            assert!(msg.starts_with(&format!("t.cfg:{want_line}: ")), "{msg}");
        }
        // A later phase's error points into that phase, after comments and blank lines.
        let (line, _) = err("a, 1\n\np\n1\na, 0, 1, 1\n\n\n# c\nq\nx\na, 0, 1, 1\n");
        assert_eq!(line, 10);
    }

    #[test]
    fn sizes_that_do_not_fit_are_rejected() {
        assert!(
            err("a, 99999999999999999999\n\np\n1\na, 0, 1, 1\n")
                .1
                .contains("too large")
        );
        assert!(
            err("a, 18446744073709551615b\n\np\n1\na, 0, 1, 1\n")
                .1
                .contains("does not fit")
        );
        let (line, msg) = err("a, 30t\nb, 30t\n\np\n1\na, 0, 1, 1\n");
        assert_eq!(line, 2, "{msg}");
    }

    #[test]
    fn region_names_are_described_briefly() {
        let regions = |names: &[&str]| -> Vec<WorkloadRegion> {
            names
                .iter()
                .map(|n| WorkloadRegion {
                    name: n.to_string(),
                    size: 1,
                    init_file: None,
                    range: AddrRange::new(0, 0),
                })
                .collect()
        };
        assert_eq!(describe_names(&regions(&["a", "b"])), "a, b");
        assert_eq!(describe_names(&regions(&["x1", "x2", "x3"])), "x1..x3");
        assert_eq!(describe_names(&regions(&["x1", "x3", "x4"])), "x1, x3, x4");
        assert_eq!(
            describe_names(&regions(&["x01", "x02", "x03"])),
            "x01, x02, x03"
        );
        let many: Vec<String> = (0..8).map(|i| format!("r{}", 7 - i)).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(
            describe_names(&regions(&many)),
            "r7, r6, r5, ..., r0 (8 regions)"
        );
    }

    #[test]
    fn from_file_names_the_file() {
        let dir = std::env::temp_dir().join(format!("udamon-sim-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.cfg");
        std::fs::write(&path, "a, 1\n\np\n1\nb, 0, 1, 1\n").unwrap();
        let e = Workload::from_file(&path).unwrap_err();
        assert_eq!(
            e.to_string(),
            "bad.cfg:5: unknown region \"b\" (regions are a)"
        );
        let missing = Workload::from_file(dir.join("missing.cfg")).unwrap_err();
        assert!(missing.line().is_none());
        assert!(
            missing.to_string().starts_with("cannot read workload file"),
            "{missing}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_byte_order_mark_is_not_part_of_line_one() {
        let with_bom = format!("\u{feff}{MASIM_DEFAULT}");
        let w = Workload::parse(&with_bom, "t.cfg").unwrap();
        assert_eq!(w, Workload::parse(MASIM_DEFAULT, "t.cfg").unwrap());
        assert_eq!(w.regions()[0].name, "a");
        // Only at the very start: elsewhere it is a character of the name, as any other.
        let (line, msg) = err("a, 4096\n\np\n10\n\u{feff}a, 1, 64, 1\n");
        assert_eq!(line, 5);
        assert!(msg.contains("unknown region \"\u{feff}a\""), "{msg}");
    }

    /// Each pattern line finds its region by name in a map: 80 000 regions and as many pattern
    /// lines parse, each pattern pointing at its own region, and a duplicate is still found
    /// (this took seconds when every lookup scanned the regions).
    #[test]
    fn many_regions_parse_and_resolve() {
        const N: usize = 80_000;
        let mut text = String::new();
        for i in 0..N {
            text.push_str(&format!("r{i}, 4096\n"));
        }
        text.push_str("\nall\n1000\n");
        for i in (0..N).rev() {
            text.push_str(&format!("r{i}, 1, 64, 1\n"));
        }
        let w = Workload::parse(&text, "t.cfg").unwrap();
        assert_eq!(w.regions().len(), N);
        let patterns = &w.phases()[0].patterns;
        assert_eq!(patterns.len(), N);
        for (j, p) in patterns.iter().enumerate() {
            assert_eq!(w.regions()[p.region].name, format!("r{}", N - 1 - j));
        }
        let dup = text.replacen("r79999, 4096\n", "r5, 4096\n", 1);
        let (line, msg) = err(&dup);
        assert_eq!(line, N);
        assert!(
            msg.contains("region \"r5\" is defined twice (first on line 6)"),
            "{msg}"
        );
    }
}
