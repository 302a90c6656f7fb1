//! What udamon's views cost, measured the way they are used (docs/benchmarks.md, "Views"):
//!
//! - `top`: `udamon top` in a real terminal (tmux, 200 × 60) on a simulated workload held at
//!   N regions and 100 ms windows, for S seconds: the CPU of its display thread (folding the
//!   frames in and drawing) against one core and against the monitoring thread, and whether
//!   it kept up (windows shown against windows made).
//! - `html`: `udamon report html` of a one-hour record at 100 ms windows and 1,000 regions:
//!   the time to make the page, its size, and the time headless Chromium takes to open it and
//!   draw (the page's own clock, and the browser's wall time against a blank page's).
//!
//! Needs the release udamon (`cargo build --release -p udamon`), tmux for `top` and chromium
//! for `html`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str, default: u64| -> u64 {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    match args.first().map(String::as_str) {
        Some("top") => top(flag("--seconds", 30), &[100, 1000, 4000]),
        Some("html") => html(flag("--minutes", 60)),
        _ => {
            eprintln!("usage: views-bench top [--seconds S] | html [--minutes M]");
            std::process::exit(2);
        }
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn udamon() -> PathBuf {
    let bin = repo().join("target/release/udamon");
    assert!(
        bin.exists(),
        "build the release udamon first: cargo build --release -p udamon"
    );
    bin
}

/// CPU time of a thread or process in ns: schedstat's first field, else stat's ticks.
fn cpu_ns(proc_dir: &Path) -> u64 {
    if let Ok(s) = std::fs::read_to_string(proc_dir.join("schedstat"))
        && let Some(ns) = s.split_whitespace().next().and_then(|v| v.parse().ok())
    {
        return ns;
    }
    let stat = std::fs::read_to_string(proc_dir.join("stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks: u64 =
        fields[11].parse::<u64>().unwrap_or(0) + fields[12].parse::<u64>().unwrap_or(0);
    ticks * 10_000_000
}

/// The CPU of every thread of `pid`, by name.
fn threads(pid: u32) -> Vec<(String, u64)> {
    let task = PathBuf::from(format!("/proc/{pid}/task"));
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&task).into_iter().flatten().flatten() {
        let dir = entry.path();
        let name = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        out.push((name.trim().to_string(), cpu_ns(&dir)));
    }
    out
}

struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.socket);
        c
    }

    fn capture(&self) -> String {
        let out = self.cmd().args(["capture-pane", "-p"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").status();
    }
}

/// The monitored time and the regions `udamon top`'s title shows.
fn shown(screen: &str) -> Option<(f64, u64)> {
    let title = screen.lines().next()?;
    let after = title.split("ms windows · ").nth(1)?;
    let seconds: f64 = after.split(' ').next()?.parse().ok()?;
    let regions = after.split(" · ").nth(1)?.split(' ').next()?.parse().ok()?;
    Some((seconds, regions))
}

fn top(seconds: u64, regions: &[u64]) {
    let dir = tempfile::tempdir().unwrap();
    let workload = repo().join("bench/workloads/soak.cfg");
    println!(
        "udamon top in tmux (200 x 60), {seconds} s per row: simulated workload {} at 5 ms sampling, 100 ms windows",
        workload.display()
    );
    println!(
        "| regions | windows shown / made | display thread CPU (% of a core) | ms per window | monitoring thread CPU (% of a core) | display / monitoring |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for &n in regions {
        let t = Tmux {
            socket: dir.path().join(format!("tmux-{n}.sock")),
        };
        let command = format!(
            "{} top --sim {} --monitoring_intervals 5ms 100ms 1s --monitoring_nr_regions_range {n} {n}",
            udamon().display(),
            workload.display()
        );
        let ok = t
            .cmd()
            .args(["new-session", "-d", "-x", "200", "-y", "60", &command])
            .status()
            .unwrap()
            .success();
        assert!(ok, "tmux new-session failed");
        // Warm up: regions adapt to the bound; then measure.
        std::thread::sleep(Duration::from_secs(5));
        let pane: u32 = String::from_utf8_lossy(
            &t.cmd()
                .args(["list-panes", "-F", "#{pane_pid}"])
                .output()
                .unwrap()
                .stdout,
        )
        .trim()
        .parse()
        .unwrap();
        // The pane's process is udamon, or a shell running it.
        let comm =
            |pid: u32| std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let pid = if comm(pane).trim() == "udamon" {
            pane
        } else {
            std::fs::read_to_string(format!("/proc/{pane}/task/{pane}/children"))
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .find(|&p| comm(p).trim() == "udamon")
                .expect("udamon under the pane")
        };
        let before = threads(pid);
        let (t0, _) = shown(&t.capture()).expect("top's title");
        let start = Instant::now();
        std::thread::sleep(Duration::from_secs(seconds));
        let after = threads(pid);
        let wall = start.elapsed().as_nanos() as f64;
        let screen = t.capture();
        let (t1, shown_regions) = shown(&screen).expect("top's title");
        let used = |name: &str| -> f64 {
            let of = |list: &[(String, u64)]| -> u64 {
                list.iter()
                    .filter(|(n, _)| n == name)
                    .map(|(_, ns)| ns)
                    .sum()
            };
            of(&after).saturating_sub(of(&before)) as f64
        };
        let display = used("udamon top");
        let monitoring = used("udamon");
        let made = wall / 1e8;
        let windows = (t1 - t0) / 0.1;
        println!(
            "| {shown_regions} | {:.0} / {:.0} | {:.3} | {:.3} | {:.3} | {:.3} |",
            windows,
            made,
            display * 100.0 / wall,
            display / 1e6 / windows.max(1.0),
            monitoring * 100.0 / wall,
            display / monitoring.max(1.0),
        );
    }
}

fn chromium() -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .flat_map(|d| ["chromium", "chromium-browser"].map(|n| d.join(n)))
        .find(|p| p.is_file())
}

/// Runs headless Chromium on `url`; its DOM, and how long it took.
fn browse(url: &str) -> (String, Duration) {
    let profile = tempfile::tempdir().unwrap();
    let start = Instant::now();
    let out = Command::new(chromium().expect("chromium on PATH"))
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(url)
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        start.elapsed(),
    )
}

/// A masim workload of `minutes` one-minute phases, its hot area moving among four.
fn long_workload(path: &Path, minutes: u64) {
    let mut text = String::from(
        "hot0, 67108864\nhot1, 67108864\nwarm, 268435456\ncold, 536870912\nhot2, 67108864\nhot3, 67108864\n\n",
    );
    for m in 0..minutes {
        text.push_str(&format!(
            "minute {m}\n60000\nhot{}, 1, 64, 2500\nwarm, 1, 64, 100\n\n",
            m % 4
        ));
    }
    std::fs::write(path, text).unwrap();
}

fn html(minutes: u64) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("long.cfg");
    long_workload(&cfg, minutes);
    let record = dir.path().join("long.data");
    let start = Instant::now();
    let ok = Command::new(udamon())
        .args(["record", "--sim"])
        .arg(&cfg)
        .args([
            "--monitoring_intervals",
            "5ms",
            "100ms",
            "1s",
            "--monitoring_nr_regions_range",
            "1000",
            "1000",
            "-o",
        ])
        .arg(&record)
        .status()
        .unwrap()
        .success();
    assert!(ok, "recording failed");
    let recorded = start.elapsed();
    let page = dir.path().join("long.html");
    let start = Instant::now();
    let ok = Command::new(udamon())
        .args(["report", "html"])
        .arg(&record)
        .arg("-o")
        .arg(&page)
        .status()
        .unwrap()
        .success();
    assert!(ok, "report html failed");
    let made = start.elapsed();
    let record_mib = std::fs::metadata(&record).unwrap().len() as f64 / (1 << 20) as f64;
    let page_mib = std::fs::metadata(&page).unwrap().len() as f64 / (1 << 20) as f64;
    println!(
        "record: {minutes} min simulated, 100 ms windows, 1000 regions: {record_mib:.1} MiB, recorded in {:.1} s",
        recorded.as_secs_f64()
    );
    println!(
        "| page | size | made in | drawn by (page clock) | Chromium wall time | blank page wall time | ratio |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    if chromium().is_none() {
        println!(
            "| one hour | {page_mib:.2} MiB | {:.1} s | (no chromium) | | | |",
            made.as_secs_f64()
        );
        return;
    }
    let blank = dir.path().join("blank.html");
    std::fs::write(&blank, "<!DOCTYPE html><html><body>blank</body></html>").unwrap();
    // Each twice, the second counted: the first warms the disk cache.
    let _ = browse(&format!("file://{}", blank.display()));
    let (_, blank_wall) = browse(&format!("file://{}", blank.display()));
    let _ = browse(&format!("file://{}#selftest", page.display()));
    let (dom, wall) = browse(&format!("file://{}#selftest", page.display()));
    let drawn_ms = dom
        .split("\"drawn_ms\":")
        .nth(1)
        .and_then(|s| s.split([',', '}']).next())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .expect("the page's selftest result");
    println!(
        "| {minutes} min | {page_mib:.2} MiB | {:.1} s | {:.0} ms | {:.2} s | {:.2} s | {:.2} |",
        made.as_secs_f64(),
        drawn_ms,
        wall.as_secs_f64(),
        blank_wall.as_secs_f64(),
        wall.as_secs_f64() / blank_wall.as_secs_f64()
    );
}
