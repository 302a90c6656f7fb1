//! Records of a long-running monitor: one file per target at a time, rotated by age or size,
//! and a retention limit on the directory, so that a week of serving never fills a disk.
//!
//! Records hold what serve saw of processes that may be anyone's, so they are private to serve's
//! user (mode 0600, or `--record-mode`), and each is a new file: never a path that someone
//! else put there (a link to elsewhere), whatever the directory.
//!
//! Each record is a complete udamon record of its own (header, snapshots, events, a stop
//! event), named `COMM-PID-UNIXSECONDS.data` (`COMM-simN-...` for the N-th simulated workload), so that
//! every report reads any one of them. A rotation finishes the current file and starts the next
//! with a fresh header; the retention limit then removes the oldest finished records of the
//! directory until the rest fit. A record still being written is never removed.
//!
//! What a record would otherwise take from the one before it is carried over: a new record
//! starts with the target's last mappings and resident bytes, and a samples event names again
//! every code site its samples use that the new record has not described yet (the operations
//! number sites once per run, not once per file). Only the sites whose numbers can still come
//! are kept: those within [`SITES_KEPT`] of the newest.

use super::target::Labels;
use crate::host::unix_now_ns;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use udamon_core::{Callbacks, Context, Flow};
use udamon_linux::vaddr::facts::SITES_KEPT;
use udamon_record::model::{CodeSite, EventKind, Header};
use udamon_record::{RecordError, RecordWriter, Recorder, WriterOptions};

/// Where and how records are kept.
#[derive(Debug)]
pub struct RecordPolicy {
    pub dir: PathBuf,
    /// Start a new record after this long (µs).
    pub every_us: Option<u64>,
    /// ... or once a record holds this many bytes.
    pub max_bytes: Option<u64>,
    /// Remove the oldest finished records while the directory's records hold more.
    pub retain_bytes: u64,
    /// The permissions of each record.
    pub mode: u32,
    /// Records being written now: retention leaves them alone.
    open: Mutex<BTreeSet<PathBuf>>,
}

impl RecordPolicy {
    pub fn new(
        dir: PathBuf,
        every_us: Option<u64>,
        max_bytes: Option<u64>,
        retain_bytes: u64,
        mode: u32,
    ) -> Result<Self, String> {
        // A directory made here lets in whom the records let in: x where they give r.
        let dir_mode = mode | (mode & 0o444) >> 2;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(dir_mode)
            .create(&dir)
            .map_err(|e| format!("cannot create the record directory {}: {e}", dir.display()))?;
        check_record_dir(&dir)?;
        Ok(RecordPolicy {
            dir,
            every_us,
            max_bytes,
            retain_bytes,
            mode,
            open: Mutex::new(BTreeSet::new()),
        })
    }

    /// A new record file of `labels` under a free name, with the policy's permissions: created
    /// here, never opened through a link.
    fn create(&self, labels: &Labels) -> Result<(File, PathBuf), String> {
        let comm: String = labels
            .comm
            .chars()
            .map(|c| if c.is_alphanumeric() { c } else { '_' })
            .collect();
        let pid = labels.id.to_string().replace(':', "");
        let secs = unix_now_ns() / 1_000_000_000;
        let base = format!("{comm}-{pid}-{secs}");
        for n in 0u32.. {
            let path = match n {
                0 => self.dir.join(format!("{base}.data")),
                n => self.dir.join(format!("{base}.{n}.data")),
            };
            let created = File::options()
                .write(true)
                .create_new(true)
                .mode(self.mode)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path);
            match created {
                // Exactly the mode asked for, whatever the umask.
                Ok(file) => {
                    crate::output::hold_writer_lock(&file);
                    return file
                        .set_permissions(std::fs::Permissions::from_mode(self.mode))
                        .map(|()| (file, path.clone()))
                        .map_err(|e| format!("cannot record to {}: {e}", path.display()));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(format!("cannot record to {}: {e}", path.display())),
            }
        }
        unreachable!("some name is free")
    }

    /// Removes the oldest finished records until the directory's records fit the limit.
    /// Returns the files removed. Only serve's own records count, and only they are removed:
    /// files of serve's user named as [`RecordPolicy::create`] names them that begin as a
    /// record does; whatever else is in the directory is someone else's.
    pub fn enforce_retention(&self) -> Vec<PathBuf> {
        let open = self.open.lock().expect("not poisoned").clone();
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut records: Vec<(std::time::SystemTime, u64, PathBuf)> = entries
            .flatten()
            .filter(|e| is_record_name(&e.file_name().to_string_lossy()))
            .filter_map(|e| {
                // The entry itself (a link is no record), of serve's user, begun as a record.
                let meta = e.metadata().ok().filter(|m| m.is_file())?;
                // SAFETY: geteuid cannot fail.
                if meta.uid() != unsafe { libc::geteuid() } || !begins_as_record(&e.path()) {
                    return None;
                }
                Some((meta.modified().ok()?, meta.len(), e.path()))
            })
            .collect();
        records.sort();
        let mut total: u64 = records.iter().map(|r| r.1).sum();
        let mut removed = Vec::new();
        for (_, len, path) in records {
            if total <= self.retain_bytes {
                break;
            }
            if open.contains(&path) {
                continue;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
                removed.push(path);
            }
        }
        removed
    }

    fn opened(&self, path: &Path) {
        self.open
            .lock()
            .expect("not poisoned")
            .insert(path.to_path_buf());
    }

    fn closed(&self, path: &Path) {
        self.open.lock().expect("not poisoned").remove(path);
    }
}

/// Refuses a record directory that is a link, belongs to another user, or that others may
/// write: retention removes files there, and others could plant links or records in it.
fn check_record_dir(dir: &Path) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| format!("cannot use the record directory {}: {e}", dir.display()))?;
    if meta.is_symlink() {
        return Err(format!(
            "the record directory {} is a symbolic link: give the directory it points to, if it \
             is yours",
            dir.display()
        ));
    }
    // SAFETY: geteuid cannot fail.
    if meta.uid() != unsafe { libc::geteuid() } {
        return Err(format!(
            "the record directory {} belongs to uid {}, not to serve's user: give a directory \
             of serve's own",
            dir.display(),
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "the record directory {} may be written by others (mode {:o}): `chmod go-w` it or \
             give another",
            dir.display(),
            meta.mode() & 0o7777
        ));
    }
    crate::output::check_dir(dir).map_err(|e| format!("{e:#}"))
}

/// Whether `name` is one [`RecordPolicy::create`] gives: `COMM-ID-SECONDS.data` or
/// `COMM-ID-SECONDS.N.data`.
fn is_record_name(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".data") else {
        return false;
    };
    let stem = match stem.rsplit_once('.') {
        Some((stem, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => stem,
        _ => stem,
    };
    let mut parts = stem.rsplitn(3, '-');
    let secs = parts.next().unwrap_or_default();
    let id = parts.next().unwrap_or_default();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits(secs)
        && (digits(id) || id.strip_prefix("sim").is_some_and(digits))
        && parts.next().is_some()
}

/// Whether the file at `path` begins with a record's signature.
fn begins_as_record(path: &Path) -> bool {
    use std::io::Read;
    let mut start = [0u8; 8];
    File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .and_then(|mut f| f.read_exact(&mut start))
        .is_ok_and(|()| start == udamon_record::MAGIC)
}

/// The record a target is writing now, and when to start the next.
pub struct Rotation {
    policy: Arc<RecordPolicy>,
    labels: Labels,
    /// The header of every record of this target (its start time renewed at each rotation).
    header: Header,
    recorder: Recorder,
    path: PathBuf,
    opened_us: u64,
    carried: Carried,
}

/// What each record must repeat of what came before it.
#[derive(Default)]
struct Carried {
    /// The code sites seen whose numbers can still come, by index.
    sites: HashMap<u32, CodeSite>,
    /// The highest site number seen.
    newest: u32,
    /// The sites the current record has described.
    described: HashSet<u32>,
    /// The last `mappings` and `resident` events.
    mappings: Option<EventKind>,
    resident: Option<EventKind>,
}

impl Carried {
    /// Notes what `kind` tells, and completes a samples event with the sites it uses that the
    /// current record has not described.
    fn complete(&mut self, kind: &mut EventKind) {
        match kind {
            EventKind::Mappings { .. } => self.mappings = Some(kind.clone()),
            EventKind::Resident { .. } => self.resident = Some(kind.clone()),
            EventKind::Samples { sites, samples, .. } => {
                for site in sites.iter() {
                    self.described.insert(site.index);
                    self.sites.insert(site.index, site.clone());
                    self.newest = self.newest.max(site.index);
                }
                self.forget_spent_sites();
                let mut missing: Vec<CodeSite> = samples
                    .iter()
                    .filter(|s| self.described.insert(s.site))
                    .filter_map(|s| self.sites.get(&s.site).cloned())
                    .collect();
                if !missing.is_empty() {
                    sites.append(&mut missing);
                    sites.sort_by_key(|s| s.index);
                }
            }
            _ => {}
        }
    }

    /// Forgets the sites whose numbers the operations will not use again, once they are a
    /// quarter more than can still come (so that forgetting costs little per site).
    fn forget_spent_sites(&mut self) {
        let limit = SITES_KEPT as usize + SITES_KEPT as usize / 4;
        if self.sites.len() > limit || self.described.len() > limit {
            let oldest = self.newest.saturating_sub(SITES_KEPT);
            self.sites.retain(|&i, _| i >= oldest);
            self.described.retain(|&i| i >= oldest);
        }
    }

    /// The events a new record starts with; it has described no site yet.
    fn restart(&mut self) -> Vec<EventKind> {
        self.described.clear();
        self.mappings
            .iter()
            .chain(&self.resident)
            .cloned()
            .collect()
    }
}

impl Rotation {
    /// Starts the target's first record.
    pub fn open(
        policy: Arc<RecordPolicy>,
        labels: &Labels,
        header: Header,
        now_us: u64,
    ) -> Result<Self, String> {
        let (recorder, path) = start_record(&policy, labels, &header, now_us)?;
        Ok(Rotation {
            policy,
            labels: labels.clone(),
            header,
            recorder,
            path,
            opened_us: now_us,
            carried: Carried::default(),
        })
    }

    pub fn write_event(&mut self, t_us: u64, mut kind: EventKind) -> Result<(), RecordError> {
        self.carried.complete(&mut kind);
        let time_ns = self.recorder.time_ns(t_us);
        self.recorder.write_event(time_ns, kind)
    }

    /// Writes the window, then rotates when the record is old or big enough.
    pub fn after_aggregation(&mut self, ctx: &Context) -> Flow {
        let flow = self.recorder.after_aggregation(ctx)?;
        let now_us = ctx.now_us();
        let old = self
            .policy
            .every_us
            .is_some_and(|every| now_us.saturating_sub(self.opened_us) >= every);
        let big = self
            .policy
            .max_bytes
            .is_some_and(|max| self.recorder.bytes_written() >= max);
        if old || big {
            self.rotate(now_us)?;
        }
        Ok(flow)
    }

    fn rotate(&mut self, now_us: u64) -> Result<(), String> {
        self.header.start_time_unix_ns = unix_now_ns();
        let (recorder, path) = start_record(&self.policy, &self.labels, &self.header, now_us)?;
        let previous = std::mem::replace(&mut self.recorder, recorder);
        let previous_path = std::mem::replace(&mut self.path, path);
        self.opened_us = now_us;
        for kind in self.carried.restart() {
            self.recorder
                .write_event(0, kind)
                .map_err(|e| e.to_string())?;
        }
        let finished = end_record(previous, now_us, "rotated: the next record continues");
        self.policy.closed(&previous_path);
        finished.map_err(|e| format!("{}: {e}", previous_path.display()))?;
        for removed in self.policy.enforce_retention() {
            super::log::info(&format!(
                "removed {} (the records exceed the retention limit)",
                removed.display()
            ));
        }
        Ok(())
    }

    /// Ends the target's last record with why monitoring stopped.
    pub fn finish(self, now_us: u64, why: &str) -> Result<(), RecordError> {
        let result = end_record(self.recorder, now_us, why);
        self.policy.closed(&self.path);
        result
    }
}

fn start_record(
    policy: &RecordPolicy,
    labels: &Labels,
    header: &Header,
    now_us: u64,
) -> Result<(Recorder, PathBuf), String> {
    let (file, path) = policy.create(labels)?;
    let writer = RecordWriter::new(
        file,
        &path,
        header,
        // Compressed, as `record` writes by default: a week of serving is mostly mappings
        // and samples, which compress 2-3 times.
        WriterOptions { compress: true },
    )
    .map_err(|e| format!("cannot record to {}: {e}", path.display()))?;
    policy.opened(&path);
    Ok((Recorder::new(writer, now_us), path))
}

fn end_record(mut recorder: Recorder, now_us: u64, why: &str) -> Result<(), RecordError> {
    let time_ns = recorder.time_ns(now_us);
    let stopped = recorder.write_event(
        time_ns,
        EventKind::Stopped {
            reason: why.to_string(),
        },
    );
    let finished = recorder.finish().map(drop);
    stopped.and(finished)
}

#[cfg(test)]
mod tests {
    use super::*;
    use udamon_record::model::{SampleAccess, SampleFact};

    fn site(index: u32) -> CodeSite {
        CodeSite {
            index,
            ip: 0x1000 + u64::from(index),
            function: Some(format!("f{index}")),
            object: None,
            missing: None,
        }
    }

    fn samples(sites: Vec<CodeSite>, used: &[u32]) -> EventKind {
        EventKind::Samples {
            target: 0,
            window_ns: 1,
            sites,
            samples: used
                .iter()
                .map(|&site| SampleFact {
                    addr: 0x10,
                    site,
                    tid: 1,
                    cpu: 0,
                    access: SampleAccess::Read,
                })
                .collect(),
        }
    }

    fn sites_of(kind: &EventKind) -> Vec<u32> {
        match kind {
            EventKind::Samples { sites, .. } => sites.iter().map(|s| s.index).collect(),
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_new_record_describes_again_the_sites_and_mappings_it_uses() {
        let mut c = Carried::default();
        let mut first = samples(vec![site(0), site(1)], &[0, 1]);
        c.complete(&mut first);
        assert_eq!(
            sites_of(&first),
            [0, 1],
            "nothing added to a complete event"
        );
        let mut maps = EventKind::Mappings {
            target: 0,
            mappings: Vec::new(),
        };
        c.complete(&mut maps);
        let restart = c.restart();
        assert_eq!(restart, [maps], "the next record starts with the mappings");
        let mut next = samples(vec![site(2)], &[1, 2, 1]);
        c.complete(&mut next);
        assert_eq!(sites_of(&next), [1, 2], "site 1 is described again, once");
        let mut later = samples(vec![], &[1, 2]);
        c.complete(&mut later);
        assert_eq!(sites_of(&later), Vec::<u32>::new(), "and not twice");
    }

    #[test]
    fn only_the_sites_whose_numbers_can_still_come_are_carried() {
        let mut c = Carried::default();
        let total = SITES_KEPT + SITES_KEPT / 4 + 1;
        for chunk in (0..total).collect::<Vec<_>>().chunks(4096) {
            let mut event = samples(chunk.iter().map(|&i| site(i)).collect(), chunk);
            c.complete(&mut event);
        }
        assert!(c.sites.len() <= SITES_KEPT as usize + SITES_KEPT as usize / 4);
        assert!(c.described.len() <= c.sites.len());
        c.restart();
        let (newest, still, spent) = (total - 1, total - SITES_KEPT, 0);
        let mut next = samples(vec![], &[newest, still, spent]);
        c.complete(&mut next);
        assert_eq!(
            sites_of(&next),
            [still, newest],
            "sites within SITES_KEPT of the newest are described again; older ones are gone"
        );
    }

    #[test]
    fn retention_removes_the_oldest_finished_records_first() {
        let dir = tempfile::tempdir().unwrap();
        let policy = RecordPolicy::new(dir.path().to_path_buf(), None, None, 250, 0o600).unwrap();
        let mut paths = Vec::new();
        let mut record = udamon_record::MAGIC.to_vec();
        record.resize(100, 0);
        for i in 0..4 {
            let path = dir.path().join(format!("w-{i}-170000000{i}.data"));
            std::fs::write(&path, &record).unwrap();
            let t = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000 + i);
            std::fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(t)
                .unwrap();
            paths.push(path);
        }
        std::fs::write(dir.path().join("notes.txt"), [0u8; 1000]).unwrap();
        // Files serve did not write, however old and large: a backup under a record's
        // extension, one under a record's name that is no record, and a link to a record.
        let backup = dir.path().join("important-db-backup.data");
        std::fs::write(&backup, [0u8; 1000]).unwrap();
        let named = dir.path().join("db-1-1600000000.data");
        std::fs::write(&named, [0u8; 1000]).unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("x-1-1500000000.data");
        std::fs::write(&target, &record).unwrap();
        let link = dir.path().join("x-1-1500000000.data");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for old in [&backup, &named] {
            let t = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(10);
            let f = std::fs::File::options().write(true).open(old).unwrap();
            f.set_modified(t).unwrap();
        }
        // The oldest is still being written: it stays, and the next oldest go.
        policy.opened(&paths[0]);
        let removed = policy.enforce_retention();
        assert_eq!(removed, [paths[1].clone(), paths[2].clone()]);
        assert!(paths[0].exists() && paths[3].exists());
        assert!(dir.path().join("notes.txt").exists(), "only records count");
        for kept in [&backup, &named, &link, &target] {
            assert!(kept.exists(), "{} is not serve's: kept", kept.display());
        }
    }

    #[test]
    fn a_record_directory_others_could_change_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let e = RecordPolicy::new(link, None, None, 1, 0o600).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = RecordPolicy::new(open, None, None, 1, 0o600).unwrap_err();
        assert!(e.contains("may be written by others"), "{e}");
        // Another user's directory, where root is the one who can make it so.
        if unsafe { libc::geteuid() } == 0 {
            let theirs = dir.path().join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            let e = RecordPolicy::new(theirs, None, None, 1, 0o600).unwrap_err();
            assert!(e.contains("belongs to uid 65534"), "{e}");
        }
    }

    #[test]
    fn records_are_private_new_files_and_never_follow_a_link() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let records = dir.path().join("records");
        let policy = RecordPolicy::new(records.clone(), None, None, u64::MAX, 0o600).unwrap();
        let labels = Labels {
            id: super::super::target::TargetId::Pid(7),
            comm: "x".into(),
            cgroup: String::new(),
            named: true,
        };
        // Links planted where the next record's name will be.
        let secs = unix_now_ns() / 1_000_000_000;
        for s in [secs, secs + 1] {
            std::os::unix::fs::symlink(&victim, records.join(format!("x-7-{s}.data"))).unwrap();
        }
        let (_file, path) = policy.create(&labels).unwrap();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.is_file(), "{}", path.display());
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        let shared = RecordPolicy::new(dir.path().join("shared"), None, None, 1, 0o640).unwrap();
        let (_file, path) = shared.create(&labels).unwrap();
        assert_eq!(path.metadata().unwrap().mode() & 0o777, 0o640);
        let dir_mode = dir.path().join("shared").metadata().unwrap().mode() & 0o777;
        assert_eq!(dir_mode & 0o750, 0o750, "{dir_mode:o}");
    }
}
