#!/usr/bin/env bash
# The monitor's CPU in steady state: `udamon record --pid` on `membound MIB` (pinned to CPU 1,
# the monitor to CPU 0) for 30 s, its utime+stime counted over the last 20 s only, so that the
# start (perf setup, first page-table walks, naming each file's first code site) is left out;
# `live-bench overhead` counts whole 2 s runs, start included.
# Run: cargo build --release -p udamon && bench/monitor_steady.sh [MIB] (default 256), as root
# for tick.
set -euo pipefail
cd "$(dirname "$0")/.."
mib=${1:-256}
udamon=target/release/udamon
work=$(mktemp -d)
trap 'kill "$target" 2>/dev/null || true; rm -rf "$work"' EXIT
cc -O2 -o "$work/membound" bench/workloads/membound.c
taskset -c 1 "$work/membound" "$mib" "$work/counter" &
target=$!
sleep 2
echo "# monitor CPU in steady state (last 20 s of 30), target: membound $mib"
for source in tick cpuclock; do
    taskset -c 0 "$udamon" record --pid "$target" --access-source "$source" --duration 30s \
        -o "$work/$source.data" >/dev/null 2>&1 &
    monitor=$!
    sleep 8
    ticks() { awk '{print $14 + $15}' "/proc/$monitor/stat"; }
    hz=$(getconf CLK_TCK)
    a=$(ticks)
    sleep 20
    b=$(ticks)
    wait "$monitor"
    awk -v t=$((b - a)) -v hz="$hz" -v s="$source" \
        'BEGIN { printf "%s: %.2f %% of one core (goal <= 1 %%)\n", s, t / hz / 20 * 100 }'
done
