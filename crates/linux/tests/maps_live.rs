//! Reading live /proc/PID/maps: our own process and a workload.

mod workload;

use std::process::{Command, Stdio};
use udamon_core::layout::three_regions;
use udamon_linux::maps::{MapPath, MapsError, read_maps};
use workload::memloop;

#[test]
fn own_maps_locate_code_heap_and_stack() {
    let maps = read_maps(std::process::id()).unwrap();
    let exe = std::fs::canonicalize(std::env::current_exe().unwrap()).unwrap();

    let code = maps
        .lookup(own_maps_locate_code_heap_and_stack as fn() as usize as u64)
        .unwrap();
    assert!(code.perms.exec && code.perms.read && !code.perms.write);
    assert_eq!(code.path, MapPath::File(exe));
    assert!(code.inode != 0 && code.dev != (0, 0));

    let boxed = Box::new([7u8; 64]);
    let heap = maps.lookup(boxed.as_ptr() as u64).unwrap();
    assert!(heap.perms.read && heap.perms.write && !heap.perms.exec && !heap.perms.shared);

    let local = 5u64;
    let stack = maps.lookup(&local as *const u64 as u64).unwrap();
    assert!(
        stack.perms.write,
        "a test thread's stack is a writable anonymous mapping"
    );

    assert!(maps.iter().any(|m| m.path == MapPath::Stack));
    assert!(maps.iter().any(|m| m.path == MapPath::Vdso));
    assert!(maps.windows(2).all(|w| w[0].end <= w[1].start));
}

#[test]
fn workload_maps_give_three_regions() {
    let mut child = Command::new(memloop())
        .args(["-t", "2", "-n", "1", "-m", "64"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the workload has started its worker (its stdout says "ready").
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("ready") {
        line.clear();
        assert_ne!(std::io::BufRead::read_line(&mut out, &mut line).unwrap(), 0);
    }
    let maps = read_maps(child.id()).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();

    let real = std::fs::canonicalize(memloop()).unwrap();
    assert!(
        maps.iter()
            .any(|m| m.path == MapPath::File(real.clone()) && m.perms.exec)
    );
    // The two 64 MiB buffers (the main thread's and the worker's) are anonymous mappings.
    let big = maps
        .iter()
        .filter(|m| m.path == MapPath::Anon && m.size() >= 64 << 20)
        .count();
    assert!(big >= 1, "{maps:?}");

    let ranges = maps.vma_ranges();
    assert!(
        !ranges.iter().any(|r| r.start == 0xffff_ffff_ff60_0000),
        "[vsyscall] is not counted"
    );
    let three = three_regions(&ranges, 4096).unwrap();
    // The regions start at the lowest mapping (the executable) and end at the highest counted
    // one (near the stack), and exclude the two biggest holes.
    assert_eq!(three[0].start, ranges[0].start);
    assert_eq!(three[2].end, ranges.last().unwrap().end);
    for m in maps.iter().filter(|m| m.path != MapPath::Vsyscall) {
        assert!(
            three.iter().any(|r| r.start <= m.start && m.end <= r.end),
            "{m:?} not covered by {three:?}"
        );
    }
}

#[test]
fn missing_process_is_a_clear_error() {
    let e = read_maps(1 << 23).unwrap_err();
    assert!(matches!(e, MapsError::NoSuchProcess(_)));
    assert_eq!(
        e.to_string(),
        format!("process {} does not exist (it may have exited)", 1 << 23)
    );
}
