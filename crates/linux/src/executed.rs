//! The path a process was executed by, to name its main executable in reports.
//!
//! `/proc/PID/maps` and `/proc/PID/exe` name the file a process runs with every symbolic link
//! resolved: Debian's `/usr/bin/redis-server` is a link to `redis-check-rdb`, and a user who ran
//! redis-server expects to read redis-server. The path given to execve is in the process's
//! auxiliary vector (`AT_EXECFN`), and argv[0] usually repeats it; both are the process's to
//! choose, so one is used only when it provably names the same file: absolute, printable, and
//! resolved in the process's root directory to the device and inode of `/proc/PID/exe`. When
//! udamon runs as root, the lookup has the process's own file-system rights, so that
//! `udamon serve` tells no caller whether a path it could not look up names anything. The file
//! read for symbols stays the one maps name.

use crate::maps::MapPath;
use crate::perf::ProcessMemory;
use crate::proc_status::ProcStatus;
use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The longest path the kernel resolves, with its terminating NUL.
const PATH_MAX: usize = libc::PATH_MAX as usize;

/// A process's executable as maps name it, and the path it was executed by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutedName {
    file: MapPath,
    name: MapPath,
}

impl ExecutedName {
    /// Process `pid`'s, when it was executed by a path other than its file's (a symbolic link)
    /// that still names that file; `None` otherwise, or when that cannot be told.
    pub fn read(pid: u32) -> Option<ExecutedName> {
        let auxv = auxiliary_vector(pid)?;
        let exe = format!("/proc/{pid}/exe");
        let file = std::fs::read_link(&exe).ok()?;
        let identity = std::fs::metadata(&exe).ok()?;
        let root = File::options()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(format!("/proc/{pid}/root"))
            .ok()?;
        let candidates: Vec<PathBuf> = [exec_fn(pid, &auxv), argv0(pid)]
            .into_iter()
            .flatten()
            .filter(|c| printable_absolute(c))
            .collect();
        // Executed by its file's own path, as most processes are: no other name, and no lookup
        // (a thread each, as root) for every process a host runs.
        if candidates.first().is_none_or(|c| *c == file) {
            return None;
        }
        let status = ProcStatus::read(pid)?;
        // The path execve was given comes first: argv[0] is only a convention.
        let name = with_rights_of(&status, || {
            candidates.into_iter().find(|c| {
                open_in_root(&root, c)
                    .and_then(|f| f.metadata().ok())
                    .is_some_and(|m| (m.dev(), m.ino()) == (identity.dev(), identity.ino()))
            })
        })?;
        (name != file).then_some(ExecutedName {
            file: MapPath::File(file),
            name: MapPath::File(name),
        })
    }

    /// How reports name a mapping of `path`: the executed name for the executable's file.
    pub fn rename<'a>(&'a self, path: &'a MapPath) -> &'a MapPath {
        if *path == self.file { &self.name } else { path }
    }

    /// [`rename`](Self::rename) for a mapping's name as text (`/proc/PID/smaps`'s).
    pub fn rename_text(&self, name: &mut String) {
        if *name == self.file.to_string() {
            *name = self.name.to_string();
        }
    }
}

/// The process's auxiliary vector, once its exec is done. A parent learns that an exec
/// succeeded (a vfork returns, a close-on-exec pipe closes) when the process has its new, empty
/// address space, a little before the kernel writes the vector and the arguments there: until
/// then the vector holds only its terminator. A process that exited has none.
fn auxiliary_vector(pid: u32) -> Option<Vec<u8>> {
    for _ in 0..20 {
        let auxv = std::fs::read(format!("/proc/{pid}/auxv")).ok()?;
        if auxv.is_empty() {
            return None;
        }
        if auxv.len() > 16 || auxv.iter().any(|&b| b != 0) {
            return Some(auxv);
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    None
}

/// The path given to execve, from the auxiliary vector's `AT_EXECFN` (a pointer into the
/// process's stack: reading it takes the rights to read its memory).
fn exec_fn(pid: u32, auxv: &[u8]) -> Option<PathBuf> {
    let word = |b: &[u8]| u64::from_ne_bytes(b.try_into().unwrap());
    let addr = auxv
        .chunks_exact(16)
        .map(|e| (word(&e[..8]), word(&e[8..])))
        .take_while(|&(key, _)| key != libc::AT_NULL)
        .find(|&(key, _)| key == libc::AT_EXECFN)?
        .1;
    // 4 KiB-aligned pieces, none past a page: the string ends near the top of the stack, where a
    // longer read would fail.
    let mut memory = ProcessMemory::new(pid);
    let mut path = Vec::new();
    let mut at = addr;
    while path.len() < PATH_MAX {
        let page_end = (at | 0xfff).checked_add(1)?;
        let mut chunk = vec![0; (page_end - at) as usize];
        if !memory.read_code(at, &mut chunk) {
            return None;
        }
        if let Some(nul) = chunk.iter().position(|&b| b == 0) {
            path.extend_from_slice(&chunk[..nul]);
            return Some(PathBuf::from(std::ffi::OsStr::from_bytes(&path)));
        }
        path.extend_from_slice(&chunk);
        at = page_end;
    }
    None
}

/// argv[0], as `/proc/PID/cmdline` holds it now.
fn argv0(pid: u32) -> Option<PathBuf> {
    let mut head = Vec::new();
    File::open(format!("/proc/{pid}/cmdline"))
        .ok()?
        .take(PATH_MAX as u64)
        .read_to_end(&mut head)
        .ok()?;
    let nul = head.iter().position(|&b| b == 0)?;
    head.truncate(nul);
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(&head)))
}

/// A name fit to show: an absolute path (a relative one was relative to the working directory
/// at the exec), shorter than the kernel's limit, and text without control characters.
fn printable_absolute(path: &Path) -> bool {
    path.is_absolute()
        && path.as_os_str().len() < PATH_MAX
        && path
            .to_str()
            .is_some_and(|s| !s.chars().any(char::is_control))
}

/// `path` opened (`O_PATH`) as the process would resolve it: its absolute symbolic links within
/// `root`, and no `/proc` magic link (`/proc/self/exe` would be udamon's).
fn open_in_root(root: &File, path: &Path) -> Option<File> {
    let path = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: open_how is plain data; all-zero is its "no options" value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: `path` is NUL-terminated and `how` is an open_how of the size given; both outlive
    // the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root.as_raw_fd(),
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    // SAFETY: a descriptor openat2 just returned is ours alone.
    (fd >= 0).then(|| File::from(unsafe { OwnedFd::from_raw_fd(fd as i32) }))
}

/// `lookup`'s result, run with the file-system rights of the process `status` describes when
/// udamon is root, else with udamon's own (which are then its caller's).
fn with_rights_of<T: Send>(
    status: &ProcStatus,
    lookup: impl FnOnce() -> Option<T> + Send,
) -> Option<T> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return lookup();
    }
    let uid = *status.ids("Uid").get(3)?;
    let gid = *status.ids("Gid").get(3)?;
    let groups = status.ids("Groups");
    // Credentials are the thread's: a thread of its own takes the process's and ends with the
    // lookup. glibc's setgroups would change every thread's; the system call changes this one's.
    std::thread::scope(|s| {
        s.spawn(move || {
            // SAFETY: `groups` is a slice of gid_t of the length given; setfsgid and setfsuid
            // take plain ids. Asked for an invalid id (-1), they change nothing and tell the
            // current one, which says whether the switch took.
            let switched = unsafe {
                libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) == 0 && {
                    libc::setfsgid(gid);
                    libc::setfsuid(uid);
                    libc::setfsgid(u32::MAX) as u32 == gid && libc::setfsuid(u32::MAX) as u32 == uid
                }
            };
            if switched { lookup() } else { None }
        })
        .join()
        .ok()
        .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command};

    /// Kills and reaps its child when dropped, so that a failed assertion leaves no process.
    struct Running(Child);

    impl Drop for Running {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    fn sleep_binary() -> PathBuf {
        std::fs::canonicalize("/bin/sleep").unwrap()
    }

    #[test]
    fn a_program_run_through_a_symbolic_link_is_named_by_it() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("snooze");
        symlink(sleep_binary(), &link).unwrap();
        let child = Running(Command::new(&link).arg("30").spawn().unwrap());
        let named = ExecutedName::read(child.0.id()).expect("a name other than the file's");
        assert_eq!(named.file, MapPath::File(sleep_binary()));
        assert_eq!(named.name, MapPath::File(link.clone()));
        let library = MapPath::File("/usr/lib/x86_64-linux-gnu/libc.so.6".into());
        assert_eq!(named.rename(&named.file), &MapPath::File(link.clone()));
        assert_eq!(named.rename(&library), &library, "only the executable");
        let mut text = sleep_binary().to_str().unwrap().to_string();
        named.rename_text(&mut text);
        assert_eq!(text, link.to_str().unwrap());
    }

    #[test]
    fn a_program_run_by_its_own_path_needs_no_other_name() {
        let child = Running(Command::new(sleep_binary()).arg("30").spawn().unwrap());
        assert_eq!(ExecutedName::read(child.0.id()), None);
    }

    #[test]
    fn argv0_is_believed_only_when_it_names_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("snooze");
        symlink(sleep_binary(), &link).unwrap();
        let liar = dir.path().join("liar");
        symlink(std::fs::canonicalize("/bin/true").unwrap(), &liar).unwrap();
        let named = |program: &Path, argv0: &Path| {
            let child = Running(
                Command::new(program)
                    .current_dir(dir.path())
                    .arg0(argv0)
                    .arg("30")
                    .spawn()
                    .unwrap(),
            );
            ExecutedName::read(child.0.id()).map(|n| n.name)
        };
        // Executed by a relative path, which is not used: argv[0] is the only candidate.
        let relative = Path::new("./snooze");
        assert_eq!(named(relative, &link), Some(MapPath::File(link.clone())));
        assert_eq!(named(relative, &liar), None, "argv[0] names another file");
        assert_eq!(
            named(&link, &liar),
            Some(MapPath::File(link.clone())),
            "the path execve was given comes first"
        );
    }

    #[test]
    fn a_path_the_process_could_not_look_up_is_not_looked_up_for_it() {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: only root looks paths up with another user's rights");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o755)).unwrap();
        symlink(sleep_binary(), dir.path().join("snooze")).unwrap();
        let private = dir.path().join("private");
        std::fs::create_dir(&private).unwrap();
        let alias = private.join("alias");
        symlink(sleep_binary(), &alias).unwrap();
        let as_nobody = |mode: u32| {
            std::fs::set_permissions(&private, PermissionsExt::from_mode(mode)).unwrap();
            let child = Running(
                Command::new("./snooze")
                    .current_dir(dir.path())
                    .arg0(&alias)
                    .arg("30")
                    .uid(65534)
                    .gid(65534)
                    .spawn()
                    .unwrap(),
            );
            ExecutedName::read(child.0.id()).map(|n| n.name)
        };
        assert_eq!(
            as_nobody(0o755),
            Some(MapPath::File(alias.clone())),
            "a path nobody may look up"
        );
        assert_eq!(as_nobody(0o700), None, "root's directory is not nobody's");
    }
}
