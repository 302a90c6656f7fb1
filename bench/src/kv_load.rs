//! A memcached client written for the page-granularity bench (bench/page_granularity.sh): the
//! seed's memtier_benchmark runs, in a few lines of the text protocol over loopback.
//!
//! `kv-load PORT load KEYS VALUE_BYTES` sets keys 0..KEYS in order, pipelined, with `noreply`
//! (memcached lays their items out in that order), and returns once memcached has answered a
//! last `get`. `kv-load PORT run KEYS SECONDS SET_PERCENT` then gets and sets (SET_PERCENT of
//! the operations) for SECONDS, keys drawn from a power law, as memtier's Zipf-like `Z:Z`
//! pattern: half the operations go to a thousandth of the keys, and the hot keys are scattered
//! over the key space (and so over memcached's memory) by a fixed permutation. Prints the
//! operations a second it reached.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use udamon_core::Prng;

/// Operations written before their answers are read.
const PIPELINE: usize = 32;

/// The skew: P(key rank < x·KEYS) = x^SKEW (0.1: half the operations within the hottest 0.1 %).
const SKEW: f64 = 0.1;

fn usage() -> ! {
    eprintln!(
        "usage: kv-load PORT load KEYS VALUE_BYTES | kv-load PORT run KEYS SECONDS SET_PERCENT"
    );
    std::process::exit(2)
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize) -> T {
    args.get(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| usage())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let port: u16 = arg(&args, 1);
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| {
        eprintln!("kv-load: cannot connect to 127.0.0.1:{port}: {e}");
        std::process::exit(1)
    });
    stream.set_nodelay(true).expect("nodelay");
    match args.get(2).map(String::as_str) {
        Some("load") => load(stream, arg(&args, 3), arg(&args, 4)),
        Some("run") => run(stream, arg(&args, 3), arg(&args, 4), arg(&args, 5)),
        _ => usage(),
    }
}

fn value(bytes: usize, seed: u64) -> Vec<u8> {
    (0..bytes)
        .map(|i| b'a' + ((seed as usize + i) % 26) as u8)
        .collect()
}

fn load(stream: TcpStream, keys: u64, value_bytes: usize) {
    let mut out = std::io::BufWriter::with_capacity(1 << 20, stream.try_clone().expect("clone"));
    let started = Instant::now();
    for k in 0..keys {
        write!(out, "set k{k} 0 0 {value_bytes} noreply\r\n").expect("write");
        out.write_all(&value(value_bytes, k)).expect("write");
        out.write_all(b"\r\n").expect("write");
    }
    out.flush().expect("flush");
    // Everything before it was taken once this is answered.
    let mut input = BufReader::new(stream);
    write!(out, "get k{}\r\n", keys - 1).expect("write");
    out.flush().expect("flush");
    let found = read_get(&mut input);
    let s = started.elapsed().as_secs_f64();
    println!(
        "loaded {keys} keys of {value_bytes} bytes in {s:.1} s ({:.0} sets/s); last key {}",
        keys as f64 / s,
        if found { "found" } else { "MISSING" }
    );
}

/// Reads one `get`'s answer; whether it held a value.
fn read_get(input: &mut BufReader<TcpStream>) -> bool {
    let mut line = String::new();
    input.read_line(&mut line).expect("read");
    if line.starts_with("END") {
        return false;
    }
    // VALUE key flags bytes
    let bytes: usize = line
        .split_whitespace()
        .nth(3)
        .and_then(|b| b.parse().ok())
        .unwrap_or_else(|| panic!("unexpected answer {line:?}"));
    let mut data = vec![0; bytes + 2];
    input.read_exact(&mut data).expect("read value");
    line.clear();
    input.read_line(&mut line).expect("read END");
    true
}

fn run(stream: TcpStream, keys: u64, seconds: u64, set_percent: u64) {
    let mut out = std::io::BufWriter::new(stream.try_clone().expect("clone"));
    let mut input = BufReader::new(stream);
    let mut rng = Prng::seeded(29);
    // A multiplier coprime with the key count scatters the ranks over the keys.
    let mut mult = 2_654_435_761 % keys.max(2);
    while gcd(mult, keys) != 1 {
        mult += 1;
    }
    let value_bytes = 1000;
    let end = Instant::now() + Duration::from_secs(seconds);
    let (mut ops, mut hits) = (0u64, 0u64);
    let mut kinds = [false; PIPELINE];
    while Instant::now() < end {
        for kind in kinds.iter_mut() {
            let rank = ((keys as f64) * rng.unit().powf(1.0 / SKEW)) as u64;
            let k = (rank.min(keys - 1) as u128 * mult as u128 % keys as u128) as u64;
            *kind = rng.in_range(0, 100) < set_percent;
            if *kind {
                write!(out, "set k{k} 0 0 {value_bytes}\r\n").expect("write");
                out.write_all(&value(value_bytes, ops)).expect("write");
                out.write_all(b"\r\n").expect("write");
            } else {
                write!(out, "get k{k}\r\n").expect("write");
            }
        }
        out.flush().expect("flush");
        for &set in &kinds {
            if set {
                let mut line = String::new();
                input.read_line(&mut line).expect("read STORED");
            } else {
                hits += u64::from(read_get(&mut input));
            }
            ops += 1;
        }
    }
    println!(
        "{ops} operations in {seconds} s ({:.0}/s), {set_percent} % sets, {:.1} % of gets hit",
        ops as f64 / seconds as f64,
        100.0 * hits as f64 / (ops as f64 * (100 - set_percent) as f64 / 100.0).max(1.0)
    );
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}
