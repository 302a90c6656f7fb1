//! Where udamon's output goes: stdout the way a command-line tool should (a closed pipe ends
//! output quietly), and files by one rule for every command that writes them.
//!
//! The rule for files: an output never destroys a file. It is refused when it is a directory or
//! one of the command's inputs (the same file by device and inode, however it is spelled); an
//! existing non-empty file at the output path is kept under the first free name of
//! `FILE.old`, `FILE.old.1`, `FILE.old.2`, ... and the user is told where. A finished output
//! (a converted record, an image) is written to a temporary file beside the destination and
//! renamed into place only once complete, so a failure leaves the destination as it was. A
//! record is different: it is streamed under its own name from the start, so that a monitor
//! killed at any moment leaves every frame written so far where the user looks for it.
//! Devices and pipes (`/dev/null`, a FIFO) are written in place: they hold nothing to keep.
//!
//! And outputs are written only where no other user can redirect them (udamon often runs as
//! root, in directories other users share). Every file is created new (`O_EXCL`, which follows
//! no link) and renamed into place; a link or file at the output path that another user owns is
//! refused rather than followed or replaced; and the directory written in, and every directory
//! above it, must belong to the caller or root (or, under sudo, to the user who ran it) and be
//! writable by no one else unless sticky like /tmp, where no one can rename or replace another's
//! entries. Records are private to the caller (0600), like serve's: they name processes and, with
//! `--host`, physical frames.

use anyhow::{Context as _, Result, bail};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use tempfile::TempPath;

pub fn print(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Pretty JSON of a report, with a final newline, written as it is made: a report's JSON may
/// be far larger than the report (a region's mapping names, repeated for each region).
pub fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut out = io::BufWriter::new(io::stdout().lock());
    let written = serde_json::to_writer_pretty(&mut out, value)
        .map_err(io::Error::from)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    match written {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// A report's one ending: JSON with `--json` (`json`), else its text. Every report goes
/// through here, so that each prints both forms the same way.
pub fn emit<R: serde::Serialize>(
    report: &R,
    json: bool,
    text: impl FnOnce(&R) -> String,
) -> anyhow::Result<()> {
    if json {
        print_json(report)
    } else {
        Ok(print(&text(report))?)
    }
}

/// The users whose directories and files an output may be written through: the caller, root,
/// and under sudo the user who ran it (who could do anything as root already).
fn trusted(uid: u32) -> bool {
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    uid == me
        || uid == 0
        || (me == 0 && std::env::var("SUDO_UID").is_ok_and(|s| s.parse() == Ok(uid)))
}

/// The name of `uid` for messages: "nobody (uid 65534)".
fn user_name(uid: u32) -> String {
    let name = fs::read_to_string("/etc/passwd").ok().and_then(|passwd| {
        passwd.lines().find_map(|line| {
            let mut fields = line.split(':');
            let name = fields.next()?;
            (fields.nth(1)?.parse() == Ok(uid)).then(|| name.to_string())
        })
    });
    match name {
        Some(name) => format!("{name} (uid {uid})"),
        None => format!("uid {uid}"),
    }
}

/// Refuses `dir` as a place to write when another user could change what is in it, or
/// replace it or a directory above it with a link to elsewhere: each must belong to a
/// [`trusted`] user and be writable by no one else, unless sticky.
pub fn check_dir(dir: &Path) -> Result<()> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let real =
        fs::canonicalize(dir).with_context(|| format!("cannot write in {}", dir.display()))?;
    for d in real.ancestors() {
        let meta = fs::metadata(d).with_context(|| format!("cannot write in {}", d.display()))?;
        if !trusted(meta.uid()) {
            bail!(
                "{} belongs to {}, who could redirect what udamon writes in {} with a link: \
                 write in a directory of your own",
                d.display(),
                user_name(meta.uid()),
                real.display()
            );
        }
        if meta.mode() & 0o022 != 0 && meta.mode() & 0o1000 == 0 {
            bail!(
                "{} may be changed by other users (mode {:o}), who could redirect what udamon \
                 writes in {} with a link: write in a directory only you can change",
                d.display(),
                meta.mode() & 0o7777,
                real.display()
            );
        }
    }
    Ok(())
}

/// What is at an output path now.
enum Existing {
    Nothing,
    /// A regular file (possibly empty) at this path, symbolic links resolved.
    File {
        path: PathBuf,
        len: u64,
    },
    /// A device, pipe or socket.
    Special,
}

/// Checks `dest` against the rule: not a directory, none of `inputs`, nothing another user
/// could have planted, in a directory no other user can change.
fn check(dest: &Path, inputs: &[&Path]) -> Result<Existing> {
    let refuse_foreign = |meta: &fs::Metadata, what: &str| {
        if trusted(meta.uid()) {
            return Ok(());
        }
        bail!(
            "{} is {what} that belongs to {}: udamon writes neither through nor over another \
             user's files; remove it or give another output path",
            dest.display(),
            user_name(meta.uid())
        )
    };
    let link = match fs::symlink_metadata(dest) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            check_dir(dest.parent().unwrap_or(Path::new(".")))?;
            return Ok(Existing::Nothing);
        }
        Err(e) => return Err(e).with_context(|| format!("cannot write {}", dest.display())),
    };
    if link.is_symlink() {
        refuse_foreign(&link, "a symbolic link")?;
    }
    let meta = match fs::metadata(dest) {
        Ok(meta) => meta,
        // A link of one's own to nothing: replaced by the output.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            check_dir(dest.parent().unwrap_or(Path::new(".")))?;
            return Ok(Existing::Nothing);
        }
        Err(e) => return Err(e).with_context(|| format!("cannot write {}", dest.display())),
    };
    if meta.is_dir() {
        bail!(
            "{} is a directory: give the output a file name, e.g. {}",
            dest.display(),
            dest.join("udamon.data").display()
        );
    }
    for input in inputs {
        if fs::metadata(input).is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino()) {
            bail!(
                "{} is the input {}: writing it would destroy what is being read; give another \
                 output path",
                dest.display(),
                input.display()
            );
        }
    }
    refuse_foreign(&meta, "a file")?;
    if !meta.is_file() {
        return Ok(Existing::Special);
    }
    // Write where a symbolic link of one's own points, not over the link.
    let path = fs::canonicalize(dest).unwrap_or_else(|_| dest.to_path_buf());
    check_dir(path.parent().unwrap_or(Path::new(".")))?;
    Ok(Existing::File {
        path,
        len: meta.len(),
    })
}

/// Keeps a non-empty file at `path` under the first free `.old` name; an empty one holds
/// nothing and is left to be replaced.
fn keep_existing(path: &Path, len: u64) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    for n in 0u32.. {
        let mut name = path.as_os_str().to_owned();
        name.push(".old");
        if n > 0 {
            name.push(format!(".{n}"));
        }
        let backup = PathBuf::from(name);
        // A hard link never replaces an existing backup and leaves `path` in place until the
        // new output is renamed over it; a file system without hard links gets a rename.
        let kept = match fs::hard_link(path, &backup) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(_) if backup.symlink_metadata().is_ok() => continue,
            Err(_) => fs::rename(path, &backup),
            ok => ok,
        };
        kept.with_context(|| {
            format!(
                "cannot keep the existing {} as {}",
                path.display(),
                backup.display()
            )
        })?;
        eprintln!(
            "udamon: kept the previous {} as {}",
            path.display(),
            backup.display()
        );
        return Ok(());
    }
    unreachable!("some backup name is free")
}

/// A finished output being written: [`Output::path`] is where to write it, and
/// [`Output::commit`] puts it in place. Dropped without a commit, it leaves nothing behind.
pub struct Output {
    dest: PathBuf,
    /// The temporary file, unless the destination is a device or pipe written in place.
    temp: Option<TempPath>,
}

impl Output {
    /// Prepares to write `dest`, the output of a command that reads `inputs`. The temporary
    /// file keeps `dest`'s extension, for writers that choose a format by it.
    pub fn create(dest: &Path, inputs: &[&Path]) -> Result<Output> {
        let existing = check(dest, inputs)?;
        let dest = match existing {
            Existing::Special => {
                return Ok(Output {
                    dest: dest.to_path_buf(),
                    temp: None,
                });
            }
            Existing::File { path, .. } => path,
            Existing::Nothing => dest.to_path_buf(),
        };
        let dir = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let name = dest.file_name().unwrap_or_default().to_string_lossy();
        // Made as any file the user writes is: 0666 less the umask (a temporary file would
        // otherwise stay 0600 under its final name).
        let temp = tempfile::Builder::new()
            .prefix(".udamon-")
            .suffix(&format!("-{name}"))
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
            .tempfile_in(dir)
            .with_context(|| format!("cannot write in {}", dir.display()))?
            .into_temp_path();
        Ok(Output {
            dest,
            temp: Some(temp),
        })
    }

    /// Where to write the output now.
    pub fn path(&self) -> &Path {
        self.temp.as_deref().unwrap_or(&self.dest)
    }

    /// Puts the finished output in place, keeping what was there by the rule.
    pub fn commit(self) -> Result<()> {
        let Some(temp) = self.temp else {
            return Ok(());
        };
        // On disk before it replaces anything, so that a power loss leaves one or the other.
        File::open(&temp)
            .and_then(|f| f.sync_all())
            .with_context(|| format!("cannot write {}", self.dest.display()))?;
        // Checked again: the destination may have changed while the output was made.
        if let Existing::File { path, len } = check(&self.dest, &[])? {
            keep_existing(&path, len)?;
        }
        temp.persist(&self.dest)
            .with_context(|| format!("cannot write {}", self.dest.display()))?;
        Ok(())
    }
}

/// Opens `dest` for a record streamed under its own name (see the module documentation),
/// keeping what was there by the rule.
pub fn stream(dest: &Path, inputs: &[&Path]) -> Result<File> {
    let path = match check(dest, inputs)? {
        Existing::Special => {
            return OpenOptions::new()
                .write(true)
                .open(dest)
                .with_context(|| format!("cannot write {}", dest.display()));
        }
        Existing::File { path, len } => {
            keep_existing(&path, len)?;
            // The backup is a hard link to the same data (an empty file has none): unlink the
            // name rather than truncate, and create the record anew.
            fs::remove_file(&path)
                .or_else(|e| match e.kind() {
                    io::ErrorKind::NotFound => Ok(()),
                    _ => Err(e),
                })
                .with_context(|| format!("cannot replace {}", path.display()))?;
            path
        }
        Existing::Nothing => dest.to_path_buf(),
    };
    let file = new_file(&path, 0o600)?;
    hold_writer_lock(&file);
    Ok(file)
}

/// Creates `path`, which must not exist (not even as a link), with `mode` less the umask.
pub fn new_file(path: &Path, mode: u32) -> Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// A new file named `name` in a new directory of its own that only the caller may enter,
/// under the temporary directory: for what must outlive the command (a spawned command's
/// output) without a name another user could guess and plant first.
pub fn private_file(prefix: &str, name: &str) -> Result<(File, PathBuf)> {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .context("cannot make a private directory under the temporary directory")?
        .keep();
    let path = dir.join(name);
    Ok((new_file(&path, 0o600)?, path))
}

/// Marks a record as being written: an advisory lock that lasts while the file is open, which
/// is the monitor's life however it ends (the kernel drops it when a killed monitor's files
/// close). Readers test it ([`crate::input::writer_of`]) to tell a record still being written
/// from one whose monitor was killed. A file system without locks only loses that distinction.
pub fn hold_writer_lock(file: &File) {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor we own.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        fs::write(path, text).unwrap();
    }

    #[test]
    fn an_output_is_refused_when_it_is_an_input_however_spelled() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("v.data");
        write(&input, "record");
        let link = dir.path().join("link.data");
        std::os::unix::fs::symlink(&input, &link).unwrap();
        let dotted = dir.path().join(".").join("v.data");
        for dest in [&input, &link, &dotted] {
            let e = Output::create(dest, &[&input]).err().expect("refused");
            assert!(e.to_string().contains("is the input"), "{e}");
            assert!(!format!("{e:#}").contains('\n'), "one line: {e:#}");
            let e = stream(dest, &[&input]).expect_err("refused");
            assert!(e.to_string().contains("is the input"), "{e}");
        }
        assert_eq!(fs::read_to_string(&input).unwrap(), "record");
    }

    #[test]
    fn a_directory_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        fs::create_dir(&out).unwrap();
        write(&out.join("inside"), "x");
        for e in [
            stream(&out, &[]).expect_err("refused"),
            Output::create(&out, &[]).err().expect("refused"),
        ] {
            assert!(e.to_string().contains("is a directory"), "{e}");
        }
        assert!(out.join("inside").is_file());
        assert!(!dir.path().join("out.old").exists());
    }

    #[test]
    fn every_previous_output_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("r.data");
        for run in ["first", "second", "third"] {
            let mut f = stream(&dest, &[]).unwrap();
            f.write_all(run.as_bytes()).unwrap();
        }
        let out = Output::create(&dest, &[]).unwrap();
        write(out.path(), "fourth");
        out.commit().unwrap();
        let read = |name: &str| fs::read_to_string(dir.path().join(name)).unwrap();
        assert_eq!(read("r.data"), "fourth");
        assert_eq!(read("r.data.old"), "first");
        assert_eq!(read("r.data.old.1"), "second");
        assert_eq!(read("r.data.old.2"), "third");
    }

    #[test]
    fn an_uncommitted_output_leaves_the_destination_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("heat.png");
        write(&dest, "old image");
        let out = Output::create(&dest, &[]).unwrap();
        assert_eq!(out.path().extension().unwrap(), "png");
        write(out.path(), "half");
        drop(out);
        assert_eq!(fs::read_to_string(&dest).unwrap(), "old image");
        let left: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file left: {left:?}");
    }

    fn is_root() -> bool {
        // SAFETY: geteuid cannot fail.
        unsafe { libc::geteuid() == 0 }
    }

    /// A shared directory like /tmp (sticky, writable by all) with `victim` beside it.
    fn shared_dir() -> (tempfile::TempDir, PathBuf, PathBuf) {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let shared = dir.path().join("shared");
        fs::create_dir(&shared).unwrap();
        fs::set_permissions(&shared, fs::Permissions::from_mode(0o1777)).unwrap();
        let victim = dir.path().join("victim");
        write(&victim, "precious");
        (dir, shared, victim)
    }

    #[test]
    fn a_link_or_file_another_user_planted_is_neither_followed_nor_replaced() {
        if !is_root() {
            return; // only root can plant a file of another user's
        }
        let (_dir, shared, victim) = shared_dir();
        let link = shared.join("out.data");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
        let planted = shared.join("heat.png");
        write(&planted, "");
        std::os::unix::fs::chown(&planted, Some(65534), Some(65534)).unwrap();
        for dest in [&link, &planted] {
            let e = stream(dest, &[]).expect_err("refused");
            assert!(e.to_string().contains("uid 65534"), "{e}");
            let e = Output::create(dest, &[]).err().expect("refused");
            assert!(e.to_string().contains("another user's"), "{e}");
        }
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
        assert!(!victim.with_extension("old").exists());
        // A link of one's own is followed, as before.
        let mine = shared.join("mine.data");
        std::os::unix::fs::symlink(&victim, &mine).unwrap();
        let out = Output::create(&mine, &[]).unwrap();
        write(out.path(), "new");
        out.commit().unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "new");
    }

    #[test]
    fn a_directory_others_could_change_is_refused_and_a_sticky_one_is_not() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, shared, _) = shared_dir();
        let mut f = stream(&shared.join("r.data"), &[]).unwrap();
        f.write_all(b"record").unwrap();
        for mode in [0o777, 0o775] {
            let open = dir.path().join(format!("open-{mode:o}"));
            fs::create_dir(&open).unwrap();
            fs::set_permissions(&open, fs::Permissions::from_mode(mode)).unwrap();
            let below = open.join("below");
            fs::create_dir(&below).unwrap();
            for dest in [open.join("r.data"), below.join("r.data")] {
                let e = stream(&dest, &[]).expect_err("refused");
                assert!(
                    e.to_string().contains("may be changed by other users"),
                    "{e}"
                );
                let e = Output::create(&dest, &[]).err().expect("refused");
                assert!(e.to_string().contains(&open.display().to_string()), "{e}");
                assert!(!dest.exists());
            }
        }
        if is_root() {
            let theirs = dir.path().join("theirs");
            fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            let e = stream(&theirs.join("r.data"), &[]).expect_err("refused");
            assert!(e.to_string().contains("belongs to"), "{e}");
        }
    }

    #[test]
    fn records_are_private_and_a_private_file_is_in_a_directory_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("r.data");
        drop(stream(&rec, &[]).unwrap());
        assert_eq!(fs::metadata(&rec).unwrap().mode() & 0o777, 0o600);
        let (_file, first) = private_file("udamon-test-", "command.log").unwrap();
        let (_file, second) = private_file("udamon-test-", "command.log").unwrap();
        assert_ne!(first, second);
        for log in [&first, &second] {
            let parent = log.parent().unwrap();
            assert_eq!(fs::metadata(parent).unwrap().mode() & 0o777, 0o700);
            assert_eq!(fs::metadata(log).unwrap().mode() & 0o777, 0o600);
            fs::remove_dir_all(parent).unwrap();
        }
    }

    #[test]
    fn an_empty_file_is_replaced_and_a_device_written_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("empty");
        write(&dest, "");
        drop(stream(&dest, &[]).unwrap());
        assert!(!dir.path().join("empty.old").exists());
        let null = Path::new("/dev/null");
        let out = Output::create(null, &[]).unwrap();
        assert_eq!(out.path(), null);
        out.commit().unwrap();
        assert!(null.exists());
    }
}
