//! What naming a new code site costs the monitor: the first IP of a file (which opens and
//! indexes its symbols) and each further new IP, for libc and for this program.
//!
//! Run: `cargo run --release -p udamon-linux --example symbolize_cost`

use std::time::Instant;
use udamon_linux::maps::{MapPath, read_maps};
use udamon_linux::symbolize::Symbolizer;

/// IPs named per file after the first.
const IPS: u64 = 2000;

fn main() {
    let pid = std::process::id();
    let maps = read_maps(pid).expect("our own mappings");
    let exe = std::env::current_exe().expect("our own path");
    println!("# file, first IP (ms), each further new IP (us), share named");
    for m in maps.iter().filter(|m| m.perms.exec) {
        let MapPath::File(path) = &m.path else {
            continue;
        };
        let libc = path.to_string_lossy().contains("libc.so");
        if !libc && *path != exe {
            continue;
        }
        let symbolizer = Symbolizer::default();
        let start = Instant::now();
        symbolizer.name(pid, &maps, m.start);
        let first = start.elapsed();
        let step = (m.size() / IPS).max(1);
        let start = Instant::now();
        let named = (1..=IPS)
            .filter(|i| {
                let ip = m.start + i * step - 1;
                symbolizer.name(pid, &maps, ip).function.is_some()
            })
            .count();
        let each = start.elapsed() / IPS as u32;
        println!(
            "{}  {:.2}  {:.2}  {:.0} %",
            path.display(),
            first.as_secs_f64() * 1e3,
            each.as_secs_f64() * 1e6,
            named as f64 * 100.0 / IPS as f64
        );
    }
}
