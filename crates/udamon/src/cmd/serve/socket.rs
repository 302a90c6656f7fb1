//! Where the control socket lives, and what each end checks of the other before a request
//! crosses it (docs/serve.md, "Control").
//!
//! The default path is in a directory only its owner can create files in: the user's runtime
//! directory (`$XDG_RUNTIME_DIR`), `/run` for root, and otherwise `udamon-UID` in the
//! temporary directory, a directory serve makes with mode 0700 and refuses when someone else
//! made it first. `udamon ctl`, before it sends a byte, checks that the path leads to a
//! socket of its own user or root, and once connected, that the process listening
//! (SO_PEERCRED, fixed when the server listened: it cannot be forged) runs as its own user or
//! root. A socket another user made first, under any path, gets nothing. (A socket that
//! others may also connect to, as an administrator may make serve's, is no danger to the
//! client: what matters is who made it and who listens.)

use anyhow::{Context as _, Result, bail};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use udamon_linux::discover::peer_credentials;

fn euid() -> u32 {
    // SAFETY: geteuid cannot fail and touches no memory of ours.
    unsafe { libc::geteuid() }
}

/// Whether a socket or directory owned by `uid` may be trusted: this user's or root's.
fn trusted(uid: u32) -> bool {
    uid == euid() || uid == 0
}

/// The directory of the default socket for users without a runtime directory.
fn private_dir() -> PathBuf {
    std::env::temp_dir().join(format!("udamon-{}", euid()))
}

/// The control socket's default path: the runtime directory of the user, or of the system for
/// root, or the user's private directory in the temporary directory.
pub fn default_path() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir).join("udamon.sock"),
        _ if euid() == 0 => PathBuf::from("/run/udamon.sock"),
        _ => private_dir().join("udamon.sock"),
    }
}

/// For serve, before it binds `path` (`what`: which socket, for messages): makes the private
/// directory when the path is in it, and checks that no other user can put anything in the
/// socket's directory (a directory others may write to must be sticky, as `/tmp` is).
pub fn prepare(path: &Path, what: &str) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let private = dir == private_dir();
    if private {
        match std::fs::DirBuilder::new().mode(0o700).create(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err(e).with_context(|| format!("cannot create {}", dir.display()));
            }
            _ => {}
        }
    }
    let meta = std::fs::symlink_metadata(dir)
        .with_context(|| format!("cannot use {} for the {what}", dir.display()))?;
    let mode = meta.mode() & 0o7777;
    let owned = meta.is_dir() && trusted(meta.uid()) && (!private || meta.uid() == euid());
    let closed = if private {
        mode & 0o077 == 0
    } else {
        mode & 0o022 == 0 || mode & 0o1000 != 0
    };
    if !owned || !closed {
        bail!(
            "{} (uid {}, mode {mode:04o}) is not a place for the {what}: another user could {} \
             it; remove it, or give a path in a directory of your own",
            dir.display(),
            meta.uid(),
            if owned {
                "replace the socket in"
            } else {
                "have made"
            }
        );
    }
    Ok(())
}

/// For `udamon ctl`: the connection to the socket at `path`, once sure that the process
/// listening there is serve running as this user or root.
pub fn connect(path: &Path) -> Result<UnixStream> {
    let unreachable = |why: String| {
        anyhow::anyhow!(
            "cannot reach udamon serve at {}: {why} (is it running? give its --control path)",
            path.display()
        )
    };
    let meta = std::fs::metadata(path).map_err(|e| unreachable(e.to_string()))?;
    let refuse = |why: String| {
        anyhow::anyhow!(
            "{} {why}: it may be another user's, set to catch requests; not speaking to it",
            path.display()
        )
    };
    if !meta.file_type().is_socket() {
        return Err(refuse("is not a socket".to_string()));
    }
    if !trusted(meta.uid()) {
        return Err(refuse(format!(
            "belongs to uid {}, not to you or root",
            meta.uid()
        )));
    }
    let stream = UnixStream::connect(path).map_err(|e| unreachable(e.to_string()))?;
    let server = peer_credentials(&stream)
        .with_context(|| format!("cannot tell who listens at {}", path.display()))?;
    if !trusted(server.uid) {
        return Err(refuse(format!(
            "is served by process {} of uid {}, not by you or root",
            server.pid, server.uid
        )));
    }
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::net::UnixListener;

    #[test]
    fn a_socket_of_ones_own_is_spoken_to_and_other_files_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let _listener = UnixListener::bind(&path).unwrap();
        assert!(connect(&path).is_ok());
        let file = dir.path().join("f");
        std::fs::write(&file, "").unwrap();
        let e = connect(&file).unwrap_err().to_string();
        assert!(e.contains("not a socket"), "{e}");
        let e = connect(&dir.path().join("none")).unwrap_err().to_string();
        assert!(e.contains("cannot reach"), "{e}");
    }

    #[test]
    fn a_directory_others_can_write_is_no_place_for_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        assert!(prepare(&dir.path().join("s.sock"), "control socket").is_ok());
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = prepare(&open.join("s.sock"), "control socket")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a place for the control socket"), "{e}");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(
            prepare(&open.join("s.sock"), "control socket").is_ok(),
            "sticky, as /tmp"
        );
    }
}
