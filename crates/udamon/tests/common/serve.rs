//! A running `udamon serve` for the CLI tests: started on a free port with a control socket
//! in the test's directory, its log read line by line, its metrics scraped and parsed, `udamon
//! ctl` spoken to it, and SIGTERM to stop it.

use super::udamon;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Generous: these machines are shared and slow; nothing here is a timing assertion.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// A running `udamon serve`, stopped with SIGTERM when dropped.
pub struct Serve {
    pub child: Child,
    pub addr: SocketAddr,
    pub control: PathBuf,
    pub log: mpsc::Receiver<String>,
}

impl Serve {
    pub fn start(dir: &Path, args: &[&str]) -> Serve {
        Serve::start_limited(dir, args, None)
    }

    /// [`Serve::start`] with its open-files limit, soft and hard, at `open_files`.
    pub fn start_limited(dir: &Path, args: &[&str], open_files: Option<u64>) -> Serve {
        Serve::start_at(dir, "127.0.0.1:0", args, open_files)
    }

    /// [`Serve::start_limited`] with its metrics on `listen` (`addr` is set for TCP only).
    pub fn start_at(dir: &Path, listen: &str, args: &[&str], open_files: Option<u64>) -> Serve {
        let control = dir.join("ctl.sock");
        let mut serve = Command::new(env!("CARGO_BIN_EXE_udamon"));
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            serve.pre_exec(move || {
                // A soft open-files limit below the hard one, as systemd gives services, for
                // serve to raise.
                let mut limit = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_max > 512 {
                    limit.rlim_cur = 512;
                    libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
                }
                if let Some(n) = open_files {
                    limit.rlim_cur = n;
                    limit.rlim_max = n;
                    libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
                }
                Ok(())
            });
        }
        let mut child = serve
            .arg("serve")
            .args(["--listen", listen, "--rescan", "200ms", "--control"])
            .arg(&control)
            .args(args)
            .env_remove("JOURNAL_STREAM")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, log) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut serve = Serve {
            child,
            addr: "0.0.0.0:0".parse().unwrap(),
            control,
            log,
        };
        let line = serve.wait_log("metrics on ");
        if let Some(addr) = line
            .split("http://")
            .nth(1)
            .and_then(|r| r.split('/').next())
        {
            serve.addr = addr.parse().unwrap();
        }
        serve
    }

    /// Waits for a log line containing `text`; returns it.
    pub fn wait_log(&mut self, text: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.log.recv_timeout(left) {
                Ok(line) if line.contains(text) => return line,
                Ok(_) => {}
                Err(_) => panic!("no log line with '{text}'"),
            }
        }
    }

    pub fn get(&self, path: &str) -> (u16, String) {
        let mut s = TcpStream::connect(self.addr).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
        let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        (status, body.to_string())
    }

    pub fn metrics(&self) -> Vec<super::Sample> {
        let (status, body) = self.get("/metrics");
        assert_eq!(status, 200, "{body}");
        super::parse_prometheus(&body)
    }

    /// Scrapes until `found` holds for the samples; returns them.
    pub fn metrics_until(
        &self,
        what: &str,
        found: impl Fn(&[super::Sample]) -> bool,
    ) -> Vec<super::Sample> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let samples = self.metrics();
            if found(&samples) {
                return samples;
            }
            assert!(Instant::now() < deadline, "never saw {what}: {samples:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub fn ctl(&self, args: &[&str]) -> assert_cmd::assert::Assert {
        udamon()
            .arg("ctl")
            .arg("--control")
            .arg(&self.control)
            .args(args)
            .assert()
    }

    pub fn ctl_ok(&self, args: &[&str]) -> String {
        let out = self.ctl(args).success().get_output().stdout.clone();
        String::from_utf8(out).unwrap()
    }

    /// Sends signal `sig` (SIGHUP to read the configuration again, say).
    pub fn signal(&self, sig: i32) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// SIGTERM; waits for the exit and returns its success.
    pub fn stop(mut self) -> bool {
        self.signal(libc::SIGTERM);
        let status = self.child.wait().unwrap();
        status.success()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn series<'a>(samples: &'a [super::Sample], name: &str, pid: &str) -> Vec<&'a super::Sample> {
    samples
        .iter()
        .filter(|s| s.name == name && s.labels.get("pid").map(String::as_str) == Some(pid))
        .collect()
}

pub fn which(program: &str) -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{program} is on PATH"))
}
