//! Small text inputs read whole: a schemes file, a workload file, serve's configuration.
//! Whatever a path names (`/dev/zero`, a huge file, a FIFO), at most [`MAX_BYTES`] are read,
//! so that memory and time stay bounded by what such a file can sensibly hold; opening never
//! waits for a FIFO's writer.

use anyhow::{Context as _, Result, bail};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The most bytes read of a small input: a thousand times what a hand-written schemes or
/// workload file holds.
pub const MAX_BYTES: u64 = 16 << 20;

/// The text of `path`, a `what` (for the error: "schemes file").
pub fn read_text(path: &Path, what: &str) -> Result<String> {
    let read = || -> std::io::Result<Vec<u8>> {
        let file = std::fs::File::options()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)?;
        // Non-blocking only to open a FIFO without waiting: reads block as usual.
        clear_nonblocking(&file)?;
        let mut bytes = Vec::new();
        file.take(MAX_BYTES + 1).read_to_end(&mut bytes)?;
        Ok(bytes)
    };
    let bytes = read().with_context(|| format!("cannot read {}", path.display()))?;
    if bytes.len() as u64 > MAX_BYTES {
        bail!(
            "{} is larger than {} MiB: not a {what}",
            path.display(),
            MAX_BYTES >> 20
        );
    }
    String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("{} is not text (UTF-8): not a {what}", path.display()))
}

fn clear_nonblocking(file: &std::fs::File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor this function's caller owns.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_input_is_cut_at_the_limit() {
        let e = read_text(Path::new("/dev/zero"), "schemes file").unwrap_err();
        assert!(e.to_string().contains("larger than 16 MiB"), "{e}");
        assert!(e.to_string().contains("not a schemes file"), "{e}");
    }

    #[test]
    fn text_reads_and_binary_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("t");
        std::fs::write(&text, "x = 1\n").unwrap();
        assert_eq!(read_text(&text, "file").unwrap(), "x = 1\n");
        let binary = dir.path().join("b");
        std::fs::write(&binary, [0xff, 0xfe, 0]).unwrap();
        let e = read_text(&binary, "workload file").unwrap_err();
        assert!(e.to_string().contains("not text"), "{e}");
    }

    #[test]
    fn a_fifo_without_a_writer_does_not_hang() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid path string.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        assert_eq!(read_text(&fifo, "file").unwrap(), "");
    }
}
