//! `core-bench --smoke`: every section of the core benchmark at its smallest size, so that a
//! change to the core's limits or interfaces that breaks the benchmark (as the region cap once
//! did, in section 1 at 100,000 regions) fails here rather than when someone next measures.

use std::process::Command;

#[test]
fn every_section_runs_to_the_end_at_its_smallest_size() {
    let out = Command::new(env!("CARGO_BIN_EXE_core-bench"))
        .arg("--smoke")
        .output()
        .expect("run core-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "core-bench --smoke failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    for section in 1..=6 {
        assert!(
            stdout.contains(&format!("\n## {section}. ")),
            "section {section} missing:\n{stdout}"
        );
    }
    // Every table row holds numbers, not the NaN or infinity of a section that measured nothing.
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("| ") && l.as_bytes()[2].is_ascii_digit())
        .collect();
    assert!(rows.len() >= 12, "{stdout}");
    for row in rows {
        let lower = row.to_lowercase();
        assert!(!lower.contains("nan") && !lower.contains("inf"), "{row}");
    }
    // Page granularity holds one region a page: 1 GiB is 262,144 of them, twice what a
    // constant once allowed.
    assert!(stdout.contains("| 1024 MiB | 262144 |"), "{stdout}");
}
