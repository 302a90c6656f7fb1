//! Opening a record for a report: any supported format, streamed, with damage found by the
//! reader collected so that it can be told to the user once the frames are read.

use crate::select::Selection;
use anyhow::Result;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use udamon_record::model::{Frame, Header};
use udamon_record::{AnyRecord, RecordError, open_any};

pub struct Input {
    path: PathBuf,
    selection: Selection,
    damage: Rc<RefCell<Vec<String>>>,
    /// The targets the record's snapshots hold, when a target was selected.
    targets: Rc<RefCell<BTreeSet<u32>>>,
}

/// A record's frames, as far as the [`Selection`] lets a report see them; on reaching the end
/// it hands the reader's damage to its [`Input`].
pub struct Frames {
    record: AnyRecord,
    selection: Selection,
    damage: Rc<RefCell<Vec<String>>>,
    targets: Rc<RefCell<BTreeSet<u32>>>,
}

impl Iterator for Frames {
    type Item = Frame;

    fn next(&mut self) -> Option<Frame> {
        let selection = self.selection;
        let targets = &self.targets;
        let frame = self.record.by_ref().find_map(|f| {
            if let (Some(_), Frame::Snapshot(s)) = (selection.target, &f) {
                targets
                    .borrow_mut()
                    .extend(s.targets.iter().map(|t| t.target));
            }
            selection.keep(f)
        });
        if frame.is_none() {
            *self.damage.borrow_mut() = self
                .record
                .damage()
                .iter()
                .map(ToString::to_string)
                .collect();
        }
        frame
    }
}

/// The record a report reads when given none.
const DEFAULT_RECORD: &str = "udamon.data";

/// A missing `udamon.data` is most often a report run without naming its record: say so.
fn missing_default(path: &Path, e: RecordError) -> anyhow::Error {
    match &e {
        RecordError::Io { cause, .. }
            if cause.kind() == std::io::ErrorKind::NotFound
                && path == Path::new(DEFAULT_RECORD) =>
        {
            anyhow::anyhow!(
                "no record named {DEFAULT_RECORD} here (the record a report reads when given \
                 none): name one, e.g. `udamon report wss myprog.data`, or make one with \
                 `udamon record -- ./myprog`"
            )
        }
        _ => e.into(),
    }
}

impl Input {
    pub fn open(path: &Path) -> Result<(Input, Header, Frames)> {
        Input::open_selected(path, Selection::default())
    }

    /// [`Input::open`], for a report that reads only part of the record.
    pub fn open_selected(path: &Path, selection: Selection) -> Result<(Input, Header, Frames)> {
        let input = Input {
            path: path.to_path_buf(),
            selection,
            damage: Rc::default(),
            targets: Rc::default(),
        };
        let frames = input.frames().map_err(|e| missing_default(path, e))?;
        let header = frames.record.header().clone();
        Ok((input, header, frames))
    }

    /// The frames again, from the start (for reports that read twice).
    pub fn frames(&self) -> Result<Frames, RecordError> {
        self.frames_of(self.selection.target)
    }

    /// [`Input::frames`] of `target` (`None`: of every target) instead of the selected one.
    pub fn frames_of(&self, target: Option<u32>) -> Result<Frames, RecordError> {
        let record = open_any(&self.path)?;
        Ok(Frames {
            record,
            selection: Selection {
                target,
                ..self.selection
            },
            damage: Rc::clone(&self.damage),
            targets: Rc::clone(&self.targets),
        })
    }

    /// Why the report's answer is not about the selected target: the record's snapshots never
    /// held it (complete once the frames were read).
    pub fn missing_target(&self) -> Option<anyhow::Error> {
        let want = self.selection.target?;
        let targets = self.targets.borrow();
        if targets.contains(&want) {
            return None;
        }
        let list: Vec<String> = targets.iter().map(u32::to_string).collect();
        Some(anyhow::anyhow!(
            "--target {want}: the record has no regions of target {want}; its targets with regions are {} (`udamon report info` names them)",
            if list.is_empty() {
                "none".to_string()
            } else {
                list.join(", ")
            }
        ))
    }

    /// The part of the record its frames show.
    pub fn selection(&self) -> Selection {
        self.selection
    }

    /// Damage the reader reported, as one-line messages (complete once the frames were read).
    pub fn damage(&self) -> Vec<String> {
        self.damage.borrow().clone()
    }

    /// Tells the user about damage on stderr; the report itself used every good frame.
    pub fn warn_damage(&self) {
        for d in self.damage.borrow().iter() {
            eprintln!("udamon: warning: {d} (the report uses every frame that checked)");
        }
    }
}

/// A monitor writing the record at `path` right now: `Some` with its pid when /proc/locks names
/// it, `None` when no one holds the writer's lock (see `output::stream`), so that a record
/// without a stop event was left by a monitor that was killed or crashed.
pub fn writer_of(path: &Path) -> Option<Option<u32>> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    let file = std::fs::File::open(path).ok()?;
    // SAFETY: flock on a descriptor we own; the shared lock goes with the file, at once.
    let held = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } != 0
        && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock;
    if !held {
        return None;
    }
    let inode = file.metadata().ok()?.ino();
    // "1: FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF": the pid before device:inode.
    let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    let pid = locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let at = fields.iter().position(|f| f.matches(':').count() == 2)?;
        let ino: u64 = fields[at].rsplit(':').next()?.parse().ok()?;
        (fields.get(1) == Some(&"FLOCK") && ino == inode)
            .then(|| fields.get(at - 1)?.parse().ok())
            .flatten()
    });
    Some(pid)
}
