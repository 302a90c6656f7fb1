//! Prints the record size per region per snapshot for synthetic but realistic monitoring results:
//! udamon's format with and without zstd, and damo's json_compressed (frame and header overhead
//! included, the record header excluded), for docs/benchmarks.md. Run: `cargo run -p udamon-record --example
//! record_size`.
//!
//! The synthetic target looks like a live process under DAMON's default attributes: page-aligned
//! regions of one page to 4 MiB, mostly adjacent with a gap between mappings every 50 regions;
//! a quarter of the regions hot with 1..=20 accesses per aggregation (5 ms / 100 ms) and a few raw
//! samples; ages that grow by one per aggregation and restart when the access pattern changes;
//! boundaries that move a little between snapshots as regions split and merge.

use std::path::Path;
use udamon_record::damo;
use udamon_record::model::{
    AccessSource, Frame, Header, HostInfo, Intervals, RegionStat, Snapshot, TargetInfo,
    TargetSnapshot,
};
use udamon_record::{RecordWriter, WriterOptions};

const SNAPSHOTS: u64 = 200;

/// A fixed-seed xorshift generator: the output is the same on every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn initial_regions(rng: &mut Rng, n: usize) -> Vec<RegionStat> {
    let mut addr = 0x5555_5555_4000u64;
    (0..n)
        .map(|i| {
            if i % 50 == 49 {
                addr += (1 + rng.below(1 << 16)) << 12;
            }
            let start = addr;
            addr += (1 + rng.below(1024)) << 12;
            RegionStat {
                start,
                end: addr,
                nr_accesses: 0,
                age: rng.below(500) as u32,
                raw_samples: 0,
                read_samples: 0,
                write_samples: 0,
                touched_bytes: None,
            }
        })
        .collect()
}

/// One aggregation later: new access counts, ages, and a few moved boundaries.
fn evolve(rng: &mut Rng, regions: &mut [RegionStat]) {
    for i in 0..regions.len() {
        let r = &mut regions[i];
        let hot = rng.below(4) == 0;
        let nr_accesses = if hot { 1 + rng.below(20) as u32 } else { 0 };
        let changed = r.nr_accesses.abs_diff(nr_accesses) > 2;
        r.age = if changed { 0 } else { r.age + 1 };
        r.nr_accesses = nr_accesses;
        r.raw_samples = if hot { rng.below(6) as u32 } else { 0 };
        // Move the boundary with the next region when both are big enough (a split/merge).
        if i + 1 < regions.len() && rng.below(10) == 0 && regions[i].end == regions[i + 1].start {
            let (a, b) = regions.split_at_mut(i + 1);
            let (left, right) = (&mut a[i], &mut b[0]);
            if right.end - right.start > 2 << 12 {
                left.end += 1 << 12;
                right.start += 1 << 12;
            }
        }
    }
}

fn header() -> Header {
    Header {
        format_version: 1,
        udamon_version: env!("CARGO_PKG_VERSION").into(),
        access_source: AccessSource {
            name: "sim".into(),
            reason: "record_size example".into(),
        },
        intervals: Intervals {
            sample_us: 5_000,
            aggr_us: 100_000,
            update_us: 1_000_000,
        },
        min_nr_regions: 10,
        max_nr_regions: 10_000,
        seed: 1,
        targets: vec![TargetInfo {
            pid: Some(1),
            cmdline: "synthetic".into(),
            parent: None,
        }],
        host: HostInfo::default(),
        start_time_unix_ns: 0,
        adjustment: String::new(),
    }
}

/// The synthetic run's snapshots, the same on every call.
fn snapshots(nr_regions: usize) -> impl Iterator<Item = Snapshot> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut regions = initial_regions(&mut rng, nr_regions);
    (0..SNAPSHOTS).map(move |i| {
        evolve(&mut rng, &mut regions);
        Snapshot {
            start_ns: i * 100_000_000,
            end_ns: (i + 1) * 100_000_000,
            sample_us: 5_000,
            aggr_us: 100_000,
            targets: vec![TargetSnapshot {
                target: 0,
                regions: regions.clone(),
            }],
        }
    })
}

fn udamon_bytes(nr_regions: usize, compress: bool) -> u64 {
    let mut w = RecordWriter::new(Vec::new(), "memory", &header(), WriterOptions { compress })
        .expect("writing to memory");
    let after_header = w.bytes_written();
    for s in snapshots(nr_regions) {
        w.write_snapshot(&s).expect("writing to memory");
    }
    w.bytes_written() - after_header
}

fn damo_bytes(nr_regions: usize) -> u64 {
    let out = damo::write_json_compressed(Vec::new(), Path::new("memory"), &header(), || {
        Ok(snapshots(nr_regions).map(Frame::Snapshot))
    })
    .expect("writing to memory");
    out.len() as u64
}

fn main() {
    println!("# bytes per region per snapshot, {SNAPSHOTS} snapshots of one target");
    println!(
        "{:>8} {:>14} {:>14} {:>22}",
        "regions", "udamon plain", "udamon zstd", "damo json_compressed"
    );
    for n in [10, 100, 1000, 10_000] {
        let per_region = |bytes: u64| bytes as f64 / (SNAPSHOTS as f64 * n as f64);
        println!(
            "{n:>8} {:>14.2} {:>14.2} {:>22.2}",
            per_region(udamon_bytes(n, false)),
            per_region(udamon_bytes(n, true)),
            per_region(damo_bytes(n)),
        );
    }
}
