//! DAMOS actions on a live process: `process_madvise` through a pidfd, acting only inside the
//! process's current mappings and counting as applied only what changed.
//!
//! **Which actions.** `pageout` → `MADV_PAGEOUT`, `cold` and `lru_deprio` → `MADV_COLD` (both
//! deactivate pages), `willneed` and `lru_prio` → `MADV_WILLNEED` (the nearest user space can
//! do to prioritise memory: read it in), `collapse` → `MADV_COLLAPSE`, `stat` → nothing.
//! `process_madvise` accepts no other advice, so `hugepage` (`MADV_HUGEPAGE`), `nohugepage`,
//! `migrate_hot` and `migrate_cold` are refused by [`check_action`] with the reason.
//!
//! **Safety.** The pidfd is opened when monitoring starts, so an action can only reach that
//! process, never one that reused its pid. Right before acting, the region is intersected with
//! the process's mappings (`/proc/PID/maps`, read at most once per apply pass and confirmed to
//! be the pidfd's process); `[vvar]`, `[vdso]`, `[vsyscall]` and inaccessible (`---p`)
//! mappings are left alone.
//!
//! **Honesty.** The pages' state is scanned ([`pagescan`]) before and after acting; applied
//! bytes are those whose state changed:
//! - `pageout`: present before, not present after. Anonymous memory cannot be paged out
//!   without swap, so with `SwapTotal: 0` it stays and counts 0; a note says so once.
//! - `collapse`: not in a PMD-mapped huge page before, in one after. A huge page is all or
//!   nothing, and region boundaries rarely fall on 2 MiB. Without a quota a region acts on the
//!   2 MiB-aligned blocks whose middle it holds (every block belongs to exactly one region);
//!   with a quota only on the blocks wholly inside it, so that acting never exceeds the quota.
//!   A block is collapsed only if all of it is mapped and allowed by the filters.
//! - `willneed`/`lru_prio`: not present before, present after. `MADV_WILLNEED` reads pages
//!   into the page or swap cache without mapping them, which page tables do not show, so this
//!   is usually 0 even when it worked.
//! - `cold`/`lru_deprio`: always 0: deactivation changes no page's residency.
//!
//! `elapsed_ns` is the whole apply (scans and the system call), the time quota's real cost.
//!
//! **Target memory.** What pageouts took out is kept range by range ([`paged_out`]): the
//! paged-out bytes are what is still out, the refaulted bytes what came back.
//!
//! **Filters.** `anon` (a present page not file-backed nor shared; a missing page by its
//! mapping), `unmapped` (not present) and `hugepage_size` (2 MiB for a PMD-mapped huge page,
//! 4 KiB otherwise; a missing page has no size) are evaluated per run of pages. Page tables do
//! not tell `active`, `young` or a cgroup apart, so those filters never find memory of their
//! kind (as on the simulated address space). `tid` and `cpu` are about the window's samples,
//! which the caller keeps: it answers them for the whole region (`sampled_kind`).

pub mod paged_out;
pub mod pagescan;

use crate::maps::{MapPath, Maps, read_maps};
use paged_out::PagedOut;
use pagescan::{PAGE_IS_FILE, PAGE_IS_HUGE, PAGE_IS_PRESENT, PAGE_IS_SWAPPED, PageMap, PageRun};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Instant;
use udamon_core::damos::{Action, Applied, FilterKind, HUGE_PAGE, Scheme, huge_page_blocks};
use udamon_core::{AddrRange, PAGE_SIZE, Region, TargetMemory};

/// The `madvise` advice for `action`; `Ok(None)` for `stat`, which changes nothing; `Err`
/// with the reason for an action user space cannot do to another process.
pub fn advice(action: Action) -> Result<Option<libc::c_int>, &'static str> {
    match action {
        Action::Pageout => Ok(Some(libc::MADV_PAGEOUT)),
        Action::Cold | Action::LruDeprio => Ok(Some(libc::MADV_COLD)),
        Action::Willneed | Action::LruPrio => Ok(Some(libc::MADV_WILLNEED)),
        Action::Collapse => Ok(Some(libc::MADV_COLLAPSE)),
        Action::Stat => Ok(None),
        Action::Hugepage => Err(
            "MADV_HUGEPAGE only changes a process's own THP policy and process_madvise does not \
             accept it; use `collapse` to turn the memory into huge pages now",
        ),
        Action::Nohugepage => Err(
            "MADV_NOHUGEPAGE only changes a process's own THP policy and process_madvise does \
             not accept it",
        ),
        Action::MigrateHot | Action::MigrateCold => Err(
            "migration between NUMA nodes is done by the kernel's physical-address operations \
             and process_madvise has no advice for it",
        ),
    }
}

/// Whether `action` can be done on a live process; the error is one line with the reason.
pub fn check_action(action: Action) -> Result<(), String> {
    advice(action)
        .map(|_| ())
        .map_err(|why| format!("action {action} cannot be done from user space: {why}"))
}

/// `pidfd_open(pid, 0)`.
pub fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    // SAFETY: a plain system call with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new file descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Whether opening a process's pidfd or `/proc` file failed because the process is gone.
fn is_gone(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ESRCH) || e.kind() == io::ErrorKind::NotFound
}

/// Whether the process the pidfd names has not exited.
fn is_alive(pidfd: &OwnedFd) -> bool {
    // SAFETY: signal 0 only checks; the pointer may be null.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    r == 0
}

/// `process_madvise(pidfd, range, advice)`: the bytes advised.
fn process_madvise(pidfd: &OwnedFd, range: AddrRange, advice: libc::c_int) -> io::Result<u64> {
    let iov = libc::iovec {
        iov_base: range.start as *mut libc::c_void,
        iov_len: range.size() as usize,
    };
    // SAFETY: the iovec describes addresses of the other process; the kernel only reads it.
    let n = unsafe {
        libc::syscall(
            libc::SYS_process_madvise,
            pidfd.as_raw_fd(),
            &iov as *const libc::iovec,
            1usize,
            advice,
            0u32,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as u64)
}

/// Swap configured on the system (`SwapTotal` in `/proc/meminfo`), bytes.
fn swap_total() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| crate::metrics::meminfo_bytes(&t, "SwapTotal"))
        .unwrap_or(0)
}

/// Where an apply acts: the advice (`None` for `stat`) and the mapped pieces of the region.
struct Plan {
    advice: Option<libc::c_int>,
    pieces: Vec<Piece>,
}

/// The pages of a plan before acting, as the scheme's filters see them.
struct Scan {
    /// The runs of pages the filters allow.
    before: Vec<PageRun>,
    /// The ranges to act on: those runs merged (whole huge-page blocks for `collapse`).
    targets: Vec<AddrRange>,
    sz_passed: u64,
    /// Present anonymous bytes, which pageout cannot take out without swap.
    anon_present: u64,
}

/// Pages of one mapping inside the region, and what the mapping is.
#[derive(Debug, Clone, Copy)]
struct Piece {
    start: u64,
    end: u64,
    /// File-backed or shared: a missing page there is not anonymous memory.
    file: bool,
}

/// What a dry run would have done in one apply pass, per action.
#[derive(Debug, Default)]
struct DryPass {
    pass: u64,
    now_us: u64,
    /// (action, regions, bytes inside mappings that passed the filters, bytes that would change)
    per_action: Vec<(Action, u64, u64, u64)>,
}

/// Acts on one process; see the module documentation.
#[derive(Debug)]
pub struct Actor {
    pid: u32,
    /// `None` when the pidfd could not be opened: nothing is done.
    pidfd: Option<OwnedFd>,
    pagemap: Option<PageMap>,
    /// The maps of the apply pass (by sampling-interval count) that read them.
    maps: Option<(u64, Maps)>,
    dry_run: bool,
    swap: u64,
    /// What this run's pageouts took out of memory and what came back.
    paged_out: PagedOut,
    dry: Option<DryPass>,
    /// Notes not yet taken, with their time (µs).
    notes: Vec<(u64, String)>,
    noted: Vec<String>,
}

impl Actor {
    /// Opens the process's pidfd now, while `pid` is known to name it, and acts with
    /// `pagemap`, opened with it.
    pub fn new(pid: u32, pagemap: io::Result<PageMap>) -> Actor {
        let mut actor = Actor {
            pid,
            pidfd: None,
            pagemap: None,
            maps: None,
            dry_run: false,
            swap: swap_total(),
            paged_out: PagedOut::default(),
            dry: None,
            notes: Vec::new(),
            noted: Vec::new(),
        };
        match (pidfd_open(pid), pagemap) {
            (Ok(fd), Ok(pm)) => {
                actor.pidfd = Some(fd);
                actor.pagemap = Some(pm);
            }
            // A process already gone (a child that exited before its fork was handled) has
            // nothing to act on, and its exit is reported: no note.
            (Err(e), _) | (_, Err(e)) if is_gone(&e) => {}
            (Err(e), _) | (_, Err(e)) => actor.note_once(
                crate::vaddr::monotonic_us(),
                "open",
                format!(
                    "schemes cannot act on process {pid}: cannot open its pidfd or pagemap: {e}"
                ),
            ),
        }
        actor
    }

    /// The process exec'd: the pidfd still names it, but the pagemap opened before reads the
    /// address space that exec replaced (every scan fails with ESRCH).
    /// `pagemap` is the one opened after the exec.
    pub fn exec(&mut self, pagemap: io::Result<PageMap>) {
        if self.pidfd.is_none() {
            return;
        }
        self.maps = None;
        match pagemap {
            Ok(pm) => self.pagemap = Some(pm),
            Err(e) if is_gone(&e) => {}
            Err(e) => self.note_once(
                crate::vaddr::monotonic_us(),
                "open",
                format!(
                    "schemes cannot act on process {} after its exec: cannot open its pagemap: {e}",
                    self.pid
                ),
            ),
        }
    }

    /// Compute and report what would be done, without doing it.
    pub fn set_dry_run(&mut self, on: bool) {
        self.dry_run = on;
    }

    /// Notes since the last call, with their time (µs), oldest first.
    pub fn take_notes(&mut self) -> Vec<(u64, String)> {
        self.flush_dry(u64::MAX);
        std::mem::take(&mut self.notes)
    }

    fn note_once(&mut self, now_us: u64, key: &str, text: String) {
        if !self.noted.iter().any(|k| k == key) {
            self.noted.push(key.to_string());
            self.notes.push((now_us, text));
        }
    }

    /// The process's memory: resident from `/proc/PID/statm`; paged out = what this run's
    /// pageouts took out and is still out; refaulted = what of it came back into memory
    /// (see [`PagedOut`]).
    pub fn memory(&mut self) -> Option<TargetMemory> {
        let pidfd = self.pidfd.as_ref()?;
        let text = std::fs::read_to_string(format!("/proc/{}/statm", self.pid)).ok()?;
        self.paged_out.refresh(self.pagemap.as_ref()?).ok()?;
        // Read before the check: if the process is still alive, the pid was still its own.
        if !is_alive(pidfd) {
            return None;
        }
        Some(TargetMemory {
            resident_bytes: crate::metrics::statm_resident_pages(&text)? * PAGE_SIZE,
            paged_out_bytes: self.paged_out.bytes(),
            refaulted_bytes: self.paged_out.refaulted(),
        })
    }

    /// The mappings of apply pass `pass`, read once per pass.
    fn maps(&mut self, pass: u64) -> Option<&Maps> {
        if self.maps.as_ref().is_none_or(|(p, _)| *p != pass) {
            self.maps = None;
            let maps = read_maps(self.pid).ok()?;
            if !is_alive(self.pidfd.as_ref()?) {
                return None;
            }
            self.maps = Some((pass, maps));
        }
        self.maps.as_ref().map(|(_, m)| m)
    }

    /// Apply `scheme.action` to `region` in apply pass `pass` (the context's sampling-interval
    /// count) at `now_us`: plan where to act, scan the pages there, act (or, in a dry run,
    /// work out what acting would change), and measure what changed. `sampled_kind` says
    /// whether the region is of a filter kind about samples (`tid`, `cpu`).
    pub fn apply(
        &mut self,
        region: &Region,
        scheme: &Scheme,
        pass: u64,
        now_us: u64,
        sampled_kind: &dyn Fn(&FilterKind) -> bool,
    ) -> Applied {
        let started = Instant::now();
        let Some(plan) = self.plan(region, scheme, pass, now_us) else {
            return Applied::default();
        };
        let Some(scan) = self.scan(&plan, scheme, now_us, sampled_kind) else {
            return Applied::default();
        };
        let sz_applied = match plan.advice {
            Some(advice) if !self.dry_run => {
                self.act(scheme.action, advice, &scan.targets, now_us);
                self.measure(scheme.action, &scan, now_us)
            }
            _ => {
                if self.dry_run {
                    let would = self.would_change(scheme.action, &scan.before, &scan.targets);
                    self.record_dry(pass, now_us, scheme.action, scan.sz_passed, would);
                }
                0
            }
        };
        Applied {
            sz_applied,
            sz_ops_filter_passed: scan.sz_passed,
            elapsed_ns: started.elapsed().as_nanos() as u64,
        }
    }

    /// The advice and the mapped pieces of `region` to act on; `None` when there is nothing
    /// this actor can do (an action user space cannot do, noted once; no pidfd; no huge-page
    /// block for `collapse`; the process gone).
    fn plan(&mut self, region: &Region, scheme: &Scheme, pass: u64, now_us: u64) -> Option<Plan> {
        let Ok(advice) = advice(scheme.action) else {
            self.note_once(
                now_us,
                scheme.action.name(),
                check_action(scheme.action).unwrap_err(),
            );
            return None;
        };
        self.pidfd.as_ref()?;
        let region = if scheme.action == Action::Collapse {
            let blocks = scheme.huge_page_blocks(AddrRange::new(region.start, region.end))?;
            Region::new(blocks.start, blocks.end)
        } else {
            *region
        };
        let pieces = pieces(self.maps(pass)?, &region);
        Some(Plan { advice, pieces })
    }

    /// The pages of the plan's pieces as they are before acting, what of them the scheme's
    /// filters allow, and the ranges to act on; `None` if the pages cannot be read (noted
    /// once).
    fn scan(
        &mut self,
        plan: &Plan,
        scheme: &Scheme,
        now_us: u64,
        sampled_kind: &dyn Fn(&FilterKind) -> bool,
    ) -> Option<Scan> {
        let pm = self.pagemap.as_ref().expect("opened with the pidfd");
        let mut runs = Vec::new();
        let mut scanned = Vec::new();
        for p in &plan.pieces {
            runs.clear();
            if let Err(e) = pm.scan(p.start, p.end, &mut runs) {
                let text = format!("cannot scan the pages of process {}: {e}", self.pid);
                self.note_once(now_us, "scan", text);
                return None;
            }
            scanned.extend(runs.iter().map(|r| (*r, p.file)));
        }
        let check_filters =
            !scheme.filters.ops().is_empty() && !scheme.state().core_filters_allowed;
        let passed: Vec<(PageRun, bool)> = scanned
            .into_iter()
            .filter(|(r, file)| {
                !check_filters
                    || scheme
                        .filters
                        .ops_allow(|k| is_of_kind(k, r, *file, sampled_kind))
            })
            .collect();
        let mut targets = merge(passed.iter().map(|(r, _)| r.range()));
        if scheme.action == Action::Collapse {
            targets = huge_blocks(&targets);
        }
        let before: Vec<PageRun> = passed.iter().map(|(r, _)| *r).collect();
        Some(Scan {
            sz_passed: before.iter().map(PageRun::size).sum(),
            anon_present: before
                .iter()
                .filter(|r| r.is(PAGE_IS_PRESENT) && !r.is(PAGE_IS_FILE))
                .map(PageRun::size)
                .sum(),
            before,
            targets,
        })
    }

    /// `process_madvise` on every target range; each kind of failure is noted once.
    fn act(&mut self, action: Action, advice: libc::c_int, targets: &[AddrRange], now_us: u64) {
        let pidfd = self.pidfd.as_ref().expect("planned with the pidfd");
        let errors: Vec<io::Error> = targets
            .iter()
            .filter_map(|&range| process_madvise(pidfd, range, advice).err())
            .collect();
        for err in errors {
            let key = format!("{action}:{:?}", err.raw_os_error());
            let text = format!(
                "process_madvise({action}) on process {} failed: {err}",
                self.pid
            );
            self.note_once(now_us, &key, text);
        }
    }

    /// The bytes whose state the action changed, from a scan after acting; a pageout's are
    /// kept as paged out.
    fn measure(&mut self, action: Action, scan: &Scan, now_us: u64) -> u64 {
        let mut after = Vec::new();
        let pm = self.pagemap.as_ref().expect("opened with the pidfd");
        for range in &scan.targets {
            if pm.scan(range.start, range.end, &mut after).is_err() {
                break;
            }
        }
        let changed = applied_ranges(action, &scan.before, &after);
        let applied: u64 = changed.iter().map(AddrRange::size).sum();
        if action == Action::Pageout {
            // What a dry run would have promised, against what the kernel took.
            let could = self.would_change(action, &scan.before, &scan.targets);
            if applied < could {
                self.note_once(
                    now_us,
                    "pageout-short",
                    format!(
                        "pageout on process {} took {:.1} of {:.1} MiB of pages it could have: \
                         the kernel leaves pages shared with other processes, file pages the \
                         monitor may not write, locked pages and pages under writeback; they \
                         count as tried, not applied",
                        self.pid,
                        applied as f64 / (1 << 20) as f64,
                        could as f64 / (1 << 20) as f64
                    ),
                );
            }
            self.paged_out.add(&changed);
            if self.swap == 0 && scan.anon_present > 0 {
                self.note_once(
                    now_us,
                    "noswap",
                    format!(
                        "pageout cannot take anonymous memory out without swap (SwapTotal is 0): \
                         process {}'s anonymous pages stay resident and count 0 bytes applied; \
                         add swap or zram, or filter anonymous memory out",
                        self.pid
                    ),
                );
            }
        }
        applied
    }

    /// What acting would change, from the state before: an upper bound for pageout, whose
    /// pages the kernel may leave (see [`Actor::measure`]'s note).
    fn would_change(&self, action: Action, before: &[PageRun], targets: &[AddrRange]) -> u64 {
        let bytes = |f: &dyn Fn(&PageRun) -> bool| -> u64 {
            before.iter().filter(|r| f(r)).map(PageRun::size).sum()
        };
        match action {
            Action::Pageout => {
                bytes(&|r| r.is(PAGE_IS_PRESENT) && (r.is(PAGE_IS_FILE) || self.swap > 0))
            }
            Action::Collapse => {
                let huge_in_targets: u64 = before
                    .iter()
                    .filter(|r| r.is(PAGE_IS_HUGE))
                    .map(|r| overlap(r, targets))
                    .sum();
                targets.iter().map(AddrRange::size).sum::<u64>() - huge_in_targets
            }
            _ => 0,
        }
    }

    fn record_dry(&mut self, pass: u64, now_us: u64, action: Action, passed: u64, would: u64) {
        self.flush_dry(pass);
        let dry = self.dry.get_or_insert_with(|| DryPass {
            pass,
            now_us,
            per_action: Vec::new(),
        });
        match dry.per_action.iter_mut().find(|a| a.0 == action) {
            Some(a) => {
                a.1 += 1;
                a.2 += passed;
                a.3 += would;
            }
            None => dry.per_action.push((action, 1, passed, would)),
        }
    }

    /// Turns a finished dry pass (any other than `pass`) into a note.
    fn flush_dry(&mut self, pass: u64) {
        if self.dry.as_ref().is_none_or(|d| d.pass == pass) {
            return;
        }
        let d = self.dry.take().expect("checked");
        for (action, regions, passed, would) in d.per_action {
            self.notes.push((
                d.now_us,
                format!(
                    "dry run: {action} on process {} would act on {regions} regions \
                     ({:.1} MiB mapped and allowed by the filters) and change up to {:.1} MiB{}",
                    self.pid,
                    passed as f64 / (1 << 20) as f64,
                    would as f64 / (1 << 20) as f64,
                    if action == Action::Pageout {
                        " (an upper bound: the pages present now; the kernel leaves those \
                         shared with other processes, file pages the monitor may not write, \
                         locked pages and pages under writeback)"
                    } else {
                        ""
                    }
                ),
            ));
        }
    }
}

/// Bytes of `r` inside the sorted, disjoint `ranges`.
fn overlap(r: &PageRun, ranges: &[AddrRange]) -> u64 {
    ranges.iter().map(|range| range.overlap(r.range())).sum()
}

/// The ranges whose state changed the way `action` changes it.
fn applied_ranges(action: Action, before: &[PageRun], after: &[PageRun]) -> Vec<AddrRange> {
    use pagescan::changed_ranges;
    let present = |c: u64| c & PAGE_IS_PRESENT != 0;
    match action {
        Action::Pageout => changed_ranges(before, after, present, |c| !present(c)),
        Action::Willneed | Action::LruPrio => {
            changed_ranges(before, after, |c| !present(c), present)
        }
        Action::Collapse => changed_ranges(
            before,
            after,
            |c| c & PAGE_IS_HUGE == 0,
            |c| c & PAGE_IS_HUGE != 0,
        ),
        _ => Vec::new(),
    }
}

/// Whether a run of pages (in a file-backed mapping or not) is of a filter's kind; kinds about
/// samples are the region's (`sampled_kind`).
fn is_of_kind(
    kind: &FilterKind,
    r: &PageRun,
    file_mapping: bool,
    sampled_kind: &dyn Fn(&FilterKind) -> bool,
) -> bool {
    let present = r.is(PAGE_IS_PRESENT);
    match kind {
        FilterKind::Anon => {
            if present {
                !r.is(PAGE_IS_FILE)
            } else {
                r.is(PAGE_IS_SWAPPED) || !file_mapping
            }
        }
        FilterKind::Unmapped => !present,
        FilterKind::HugepageSize { min, max } => {
            present
                && (min..=max).contains(&&if r.is(PAGE_IS_HUGE) {
                    HUGE_PAGE
                } else {
                    PAGE_SIZE
                })
        }
        FilterKind::Active | FilterKind::Young | FilterKind::Memcg { .. } => false,
        FilterKind::Tid(_) | FilterKind::Cpu(_) => sampled_kind(kind),
        // Decided by the core before the operations set is asked.
        FilterKind::Addr(_)
        | FilterKind::Target { .. }
        | FilterKind::Reads
        | FilterKind::Writes => false,
    }
}

/// The parts of `region` inside mappings that can be acted on.
fn pieces(maps: &Maps, region: &Region) -> Vec<Piece> {
    let first = maps.partition_point(|m| m.end <= region.start);
    maps[first..]
        .iter()
        .take_while(|m| m.start < region.end)
        .filter(|m| {
            !matches!(m.path, MapPath::Vvar | MapPath::Vsyscall | MapPath::Vdso)
                && (m.perms.read || m.perms.write || m.perms.exec)
        })
        .map(|m| Piece {
            start: m.start.max(region.start),
            end: m.end.min(region.end),
            file: matches!(m.path, MapPath::File(_)) || m.perms.shared,
        })
        .collect()
}

/// Sorted ranges with touching ones joined.
fn merge(ranges: impl Iterator<Item = AddrRange>) -> Vec<AddrRange> {
    let mut out: Vec<AddrRange> = Vec::new();
    for range in ranges {
        match out.last_mut() {
            Some(last) if last.end == range.start => last.end = range.end,
            _ => out.push(range),
        }
    }
    out
}

/// The whole huge-page blocks inside `ranges`: a block is collapsed only if all of it is
/// mapped and allowed by the filters.
fn huge_blocks(ranges: &[AddrRange]) -> Vec<AddrRange> {
    ranges
        .iter()
        .filter_map(|&range| huge_page_blocks(range, true))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_already_gone_gets_no_note() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let mut actor = Actor::new(pid, PageMap::open(pid));
        assert!(actor.pidfd.is_none());
        assert_eq!(actor.take_notes(), []);
    }

    #[test]
    fn actions_user_space_cannot_do_are_refused_with_the_reason() {
        for a in [
            Action::Pageout,
            Action::Cold,
            Action::Willneed,
            Action::Collapse,
            Action::LruPrio,
            Action::LruDeprio,
            Action::Stat,
        ] {
            assert_eq!(check_action(a), Ok(()), "{a}");
        }
        let err = check_action(Action::MigrateHot).unwrap_err();
        assert!(
            err.starts_with("action migrate_hot cannot be done from user space: "),
            "{err}"
        );
        assert!(
            check_action(Action::Hugepage)
                .unwrap_err()
                .contains("use `collapse`")
        );
        assert!(check_action(Action::Nohugepage).is_err());
        assert!(check_action(Action::MigrateCold).is_err());
    }

    #[test]
    fn pieces_skip_special_and_inaccessible_mappings() {
        let maps = Maps::parse(
            b"1000-3000 r--p 0 08:01 7 /lib/x.so\n\
              3000-4000 ---p 0 00:00 0\n\
              4000-8000 rw-p 0 00:00 0\n\
              8000-9000 r--p 0 00:00 0 [vvar]\n\
              9000-a000 rw-s 0 00:01 9 /dev/zero (deleted)\n",
        )
        .unwrap();
        let got: Vec<(u64, u64, bool)> = pieces(&maps, &Region::new(0x2000, 0x9800))
            .into_iter()
            .map(|p| (p.start, p.end, p.file))
            .collect();
        assert_eq!(
            got,
            [
                (0x2000, 0x3000, true),
                (0x4000, 0x8000, false),
                (0x9000, 0x9800, true)
            ]
        );
    }

    #[test]
    fn collapse_acts_on_whole_aligned_blocks_only() {
        let m = HUGE_PAGE;
        let r = AddrRange::new;
        assert_eq!(
            huge_blocks(&[r(4096, 3 * m + 4096), r(5 * m, 6 * m - 1)]),
            [r(m, 3 * m)]
        );
        assert_eq!(
            merge([r(0, 1), r(1, 2), r(3, 4)].into_iter()),
            [r(0, 2), r(3, 4)]
        );
    }

    #[test]
    fn filters_see_anon_unmapped_and_huge_pages() {
        let run = |c| PageRun {
            start: 0,
            end: 4096,
            categories: c,
        };
        // The region got samples from thread 7 only.
        let sampled_kind = |k: &FilterKind| *k == FilterKind::Tid(7);
        let is_of_kind = |k: &FilterKind, r: &PageRun, file| is_of_kind(k, r, file, &sampled_kind);
        assert!(is_of_kind(&FilterKind::Tid(7), &run(0), false));
        assert!(!is_of_kind(
            &FilterKind::Tid(8),
            &run(PAGE_IS_PRESENT),
            false
        ));
        assert!(
            !is_of_kind(&FilterKind::Writes, &run(PAGE_IS_PRESENT), false),
            "the core's"
        );
        let anon = FilterKind::Anon;
        assert!(is_of_kind(&anon, &run(PAGE_IS_PRESENT), true), "a COW page");
        assert!(!is_of_kind(
            &anon,
            &run(PAGE_IS_PRESENT | PAGE_IS_FILE),
            false
        ));
        assert!(is_of_kind(&anon, &run(0), false));
        assert!(
            !is_of_kind(&anon, &run(0), true),
            "a file page not in memory"
        );
        assert!(is_of_kind(&anon, &run(PAGE_IS_SWAPPED), true));
        assert!(is_of_kind(&FilterKind::Unmapped, &run(0), true));
        assert!(!is_of_kind(
            &FilterKind::Unmapped,
            &run(PAGE_IS_PRESENT),
            true
        ));
        let huge = FilterKind::HugepageSize {
            min: HUGE_PAGE,
            max: HUGE_PAGE,
        };
        assert!(is_of_kind(
            &huge,
            &run(PAGE_IS_PRESENT | PAGE_IS_HUGE),
            false
        ));
        assert!(!is_of_kind(&huge, &run(PAGE_IS_PRESENT), false));
        assert!(!is_of_kind(&huge, &run(0), false));
    }

    #[test]
    fn applied_counts_only_changes_in_the_action_direction() {
        let applied = |action, before: &[PageRun], after: &[PageRun]| -> u64 {
            let ranges = applied_ranges(action, before, after);
            ranges.iter().map(AddrRange::size).sum()
        };
        let run = |s: u64, e: u64, c| PageRun {
            start: s * 4096,
            end: e * 4096,
            categories: c,
        };
        let p = PAGE_IS_PRESENT;
        let before = [run(0, 4, p), run(4, 8, 0)];
        let after = [run(0, 1, p), run(1, 8, 0)];
        assert_eq!(applied(Action::Pageout, &before, &after), 3 * 4096);
        assert_eq!(applied(Action::Cold, &before, &after), 0);
        let h = p | PAGE_IS_HUGE;
        let after = [run(0, 512, h)];
        let before = [run(0, 256, p), run(256, 512, 0)];
        assert_eq!(applied(Action::Collapse, &before, &after), HUGE_PAGE);
        assert_eq!(applied(Action::Collapse, &after, &after), 0);
    }
}
