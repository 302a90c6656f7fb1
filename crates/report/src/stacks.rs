//! `report code --folded`: the samples in `report code`'s scope by call stack, for flame graphs.
//!
//! A sample's stack is its callers (recorded with `record --call-stacks`) and its own site; a
//! record without call stacks gives one-frame stacks, the sampled site alone
//! ([`StackProfile::has_stacks`] says which). Each stack counts its samples and the hot bytes
//! they stand for (see [`code`](crate::code)'s byte shares), averaged over the windows looked
//! at, so that a profile's bytes add up to the memory in scope that samples touched in an
//! average window. Memory is bounded by the distinct stacks, never by the record's length.
//! [`pprof`](crate::pprof) writes the same profile for pprof's tools.

use crate::Result;
use crate::code::{CodeOptions, Hit, LOST_SITE, Tables, walk};
use std::collections::HashMap;
use std::fmt::Write as _;
use udamon_record::model::{CodeSite, Frame};

/// One call stack and what its samples stand for.
#[derive(Debug, Clone, PartialEq)]
pub struct StackRow {
    /// Code-site indexes, innermost (the sampled instruction) first.
    pub sites: Vec<u32>,
    pub samples: u64,
    /// Hot bytes, averaged over the windows looked at.
    pub bytes: f64,
}

/// The samples in scope by call stack.
#[derive(Debug, Clone, PartialEq)]
pub struct StackProfile {
    /// Whether the record keeps call stacks (else every stack is the sampled site alone).
    pub has_stacks: bool,
    /// Samples in scope, and windows looked at.
    pub samples: u64,
    pub windows: u64,
    /// By samples, most first.
    pub stacks: Vec<StackRow>,
    /// The code sites the stacks name; absent when the record lost a site's description.
    pub sites: HashMap<u32, CodeSite>,
}

/// The profile over `frames` with `report code`'s scope and filters; fails when they hold no
/// samples.
pub fn stack_profile(
    frames: impl IntoIterator<Item = Frame>,
    opts: &CodeOptions,
) -> Result<StackProfile> {
    let mut rows: HashMap<Vec<u32>, (u64, f64)> = HashMap::new();
    let mut sites: HashMap<u32, CodeSite> = HashMap::new();
    let walked = walk(frames, opts, |hit: &Hit<'_>, tables: &Tables| {
        let mut stack = vec![hit.sample.site];
        stack.extend_from_slice(hit.callers.unwrap_or_default());
        for site in &stack {
            if let (false, Some(c)) = (sites.contains_key(site), tables.sites.get(site)) {
                sites.insert(*site, c.clone());
            }
        }
        let row = rows.entry(stack).or_default();
        row.0 += 1;
        row.1 += hit.bytes;
    })?;
    let windows = walked.windows.max(1) as f64;
    let mut stacks: Vec<StackRow> = rows
        .into_iter()
        .map(|(sites, (samples, bytes))| StackRow {
            sites,
            samples,
            bytes: bytes / windows,
        })
        .collect();
    stacks.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then_with(|| a.sites.cmp(&b.sites))
    });
    Ok(StackProfile {
        has_stacks: walked.stacks,
        samples: walked.samples,
        windows: walked.windows,
        stacks,
        sites,
    })
}

impl StackProfile {
    /// How a frame is named: its function, else its object in brackets (`[libc.so.6]`; the
    /// kernel's names, `[anon]`, `[vdso]`, are bracketed already), else `[unknown]` for a site
    /// the record lost.
    pub fn frame_name(&self, site: u32) -> String {
        match self.sites.get(&site) {
            Some(CodeSite {
                function: Some(f), ..
            }) => f.clone(),
            Some(CodeSite {
                object: Some(o), ..
            }) if o.starts_with('[') && o.ends_with(']') => o.clone(),
            Some(CodeSite {
                object: Some(o), ..
            }) => format!("[{}]", o.rsplit('/').next().unwrap_or(o)),
            _ => "[unknown]".into(),
        }
    }

    /// Why a frame has no function name, when it has none.
    pub fn frame_missing(&self, site: u32) -> Option<&str> {
        match self.sites.get(&site) {
            Some(c) if c.function.is_some() => None,
            Some(c) => c.missing.as_deref(),
            None => Some(LOST_SITE),
        }
    }
}

/// Folded stacks: one line per stack, outermost frame first, frames joined by `;`, then a space
/// and the samples (the input of flamegraph.pl, inferno-flamegraph and speedscope). Stacks
/// that name the same functions are merged.
pub fn render_folded(profile: &StackProfile) -> String {
    let mut lines: HashMap<String, u64> = HashMap::new();
    for row in &profile.stacks {
        let names: Vec<String> = row
            .sites
            .iter()
            .rev()
            // `;` separates frames and the last space the count: neither may be in a name
            // (C++ and Rust names hold spaces, which the format allows before the last one).
            .map(|&s| profile.frame_name(s).replace(';', ":"))
            .collect();
        *lines.entry(names.join(";")).or_default() += row.samples;
    }
    let mut lines: Vec<(String, u64)> = lines.into_iter().collect();
    lines.sort_unstable();
    let mut out = String::new();
    for (stack, samples) in lines {
        let _ = writeln!(out, "{stack} {samples}");
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use udamon_record::model::{CallStack, Event, EventKind, SampleAccess, SampleFact};

    fn site(index: u32, function: Option<&str>) -> CodeSite {
        CodeSite {
            index,
            ip: 0x1000 + index as u64,
            function: function.map(Into::into),
            object: Some("/usr/lib/libfoo.so".into()),
            missing: function.is_none().then(|| "stripped".into()),
        }
    }

    /// Two windows over two hot regions, 0x1000-0x3000 (8 KiB) and 0x3000-0x4000 (4 KiB):
    /// `touch` reads them called from `caller_a` (region 1) and `caller_b` (region 2), and a
    /// stripped library function writes region 2 from `caller_b`.
    pub(crate) fn frames(with_stacks: bool) -> Vec<Frame> {
        let mut frames = Vec::new();
        for w in 1..=2u64 {
            let end_ns = w * 100;
            frames.push(crate::test_frames::snapshot(
                end_ns,
                &[(0x1000, 0x3000, 10), (0x3000, 0x4000, 10)],
            ));
            let sample = |addr: u64, site: u32, access| SampleFact {
                addr,
                site,
                tid: 7,
                cpu: 0,
                access,
            };
            use SampleAccess::*;
            frames.push(Frame::Event(Event {
                time_ns: end_ns,
                kind: EventKind::Samples {
                    target: 0,
                    window_ns: 100,
                    sites: if w == 1 {
                        vec![
                            site(0, Some("touch")),
                            site(1, Some("caller_a")),
                            site(2, Some("caller_b")),
                            site(3, Some("main")),
                            site(4, None),
                        ]
                    } else {
                        vec![]
                    },
                    samples: vec![
                        sample(0x1100, 0, Read),
                        sample(0x2100, 0, Read),
                        sample(0x3100, 0, Read),
                        sample(0x3200, 4, Write),
                    ],
                },
            }));
            if with_stacks {
                frames.push(Frame::Event(Event {
                    time_ns: end_ns,
                    kind: EventKind::Stacks {
                        target: 0,
                        stacks: if w == 1 {
                            vec![
                                CallStack {
                                    index: 0,
                                    sites: vec![1, 3],
                                },
                                CallStack {
                                    index: 1,
                                    sites: vec![2, 3],
                                },
                            ]
                        } else {
                            vec![]
                        },
                        samples: vec![0, 0, 1, 1],
                    },
                }));
            }
        }
        frames
    }

    #[test]
    fn folded_stacks_tell_the_callers_apart() {
        let p = stack_profile(frames(true), &CodeOptions::default()).unwrap();
        assert!(p.has_stacks);
        assert_eq!((p.samples, p.windows), (8, 2));
        assert_eq!(
            render_folded(&p),
            "main;caller_a;touch 4\nmain;caller_b;[libfoo.so] 2\nmain;caller_b;touch 2\n"
        );
        // Per window: region 1's 8 KiB shared by two samples, region 2's 4 KiB by two.
        let bytes: HashMap<Vec<u32>, f64> = p
            .stacks
            .iter()
            .map(|r| (r.sites.clone(), r.bytes))
            .collect();
        assert_eq!(bytes[&vec![0, 1, 3]], 8192.0);
        assert_eq!(bytes[&vec![0, 2, 3]], 2048.0);
        assert_eq!(bytes[&vec![4, 2, 3]], 2048.0);
        assert_eq!(p.frame_missing(4), Some("stripped"));
    }

    #[test]
    fn filters_and_scope_apply() {
        let writes = CodeOptions {
            writes: true,
            ..CodeOptions::default()
        };
        let p = stack_profile(frames(true), &writes).unwrap();
        assert_eq!(render_folded(&p), "main;caller_b;[libfoo.so] 2\n");
        assert_eq!(p.stacks[0].bytes, 4096.0, "alone in its region");
        let range = CodeOptions {
            address: Some(udamon_core::AddrRange::new(0x2000, 0x3000)),
            ..CodeOptions::default()
        };
        let p = stack_profile(frames(true), &range).unwrap();
        assert_eq!(render_folded(&p), "main;caller_a;touch 2\n");
        assert_eq!(p.stacks[0].bytes, 4096.0, "the region's part in the range");
    }

    #[test]
    fn stacks_that_do_not_match_their_samples_are_left_out() {
        let mut frames = frames(true);
        // The second window's stacks lost a sample: they cannot be paired with its samples.
        let Frame::Event(Event {
            kind: EventKind::Stacks { samples, .. },
            ..
        }) = &mut frames[5]
        else {
            panic!("the second window's stacks")
        };
        samples.pop();
        let p = stack_profile(frames, &CodeOptions::default()).unwrap();
        assert!(p.has_stacks);
        assert_eq!(
            render_folded(&p),
            "[libfoo.so] 1\nmain;caller_a;touch 2\nmain;caller_b;[libfoo.so] 1\n\
             main;caller_b;touch 1\ntouch 3\n"
        );
    }

    #[test]
    fn without_stacks_the_sampled_site_stands_alone() {
        let p = stack_profile(frames(false), &CodeOptions::default()).unwrap();
        assert!(!p.has_stacks);
        assert_eq!(render_folded(&p), "[libfoo.so] 2\ntouch 6\n");
        let total: f64 = p.stacks.iter().map(|r| r.bytes).sum();
        assert_eq!(total, 12288.0, "the hot bytes of a window");
    }

    #[test]
    fn frames_without_a_function_are_named_by_their_object_bracketed_once() {
        let profile = StackProfile {
            has_stacks: true,
            samples: 0,
            windows: 0,
            stacks: Vec::new(),
            sites: [
                (0, "/usr/lib/libfoo.so"),
                (1, "[anon]"),
                (2, "[anon:JIT code]"),
                (3, "[vdso]"),
            ]
            .into_iter()
            .map(|(i, object)| {
                let mut s = site(i, None);
                s.object = Some(object.into());
                (i, s)
            })
            .collect(),
        };
        let names: Vec<String> = (0..5).map(|i| profile.frame_name(i)).collect();
        assert_eq!(
            names,
            [
                "[libfoo.so]",
                "[anon]",
                "[anon:JIT code]",
                "[vdso]",
                "[unknown]"
            ]
        );
    }
}
