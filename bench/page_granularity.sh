#!/usr/bin/env bash
# bench/page_granularity.sh: seed 000's experiment (the perf-event access check RFC: memcached of
# about 100 GB monitored at page granularity) at this machine's scale. For each memcached size,
# largest first: start memcached (apt's), load it with 1,000-byte values to just under its memory
# limit (kv-load, in key order), put a skewed get/set load on it (kv-load: 10 % sets, half the
# operations on a thousandth of the keys, scattered over memory), and monitor it with the
# scheduler-tick source at one region a page (page-monitor): CPU per sampling interval, memory,
# and the 10 s working set against the kernel's accessed bits (/work/shared/tools/referenced).
# The largest size is also monitored with the tick source's own region bounds, to compare.
#
# Usage: bench/page_granularity.sh [MEMCACHED_MIB...]   (default: 7680 1920 480)
# Environment: PORT (7777), MONITOR_S (seconds each monitor runs, 45).
# Needs root (the tick source; clear_refs of memcached) and memcached (apt-get install memcached).
# Memory: memcached's limit plus about 100 bytes a page of it for the monitor (7680: about 8.5 GiB in all).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v memcached > /dev/null || { echo "needs memcached: apt-get install memcached" >&2; exit 1; }
cargo build --release --quiet -p udamon-bench --bin kv-load --bin page-monitor
bin=target/release
port=${PORT:-7777}
monitor_s=${MONITOR_S:-45}
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(7680 1920 480)

echo "| memcached -m | monitored | regions | samples/s | intervals | µs per interval (mean) | p99 | most | ms per window's last interval | CPU of one core | peak RSS MiB | bytes per region | 10 s working set: udamon / kernel MiB |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
for mib in "${sizes[@]}"; do
    # Items of 1,000-byte values take 1,184-byte slab chunks: fill 95 % of the limit.
    keys=$(( mib * 1024 * 1024 / 1184 * 95 / 100 ))
    memcached -p "$port" -U 0 -l 127.0.0.1 -m "$mib" -t 2 -u nobody &
    mc=$!
    trap 'kill $mc 2> /dev/null || true' EXIT
    sleep 1
    "$bin/kv-load" "$port" load "$keys" 1000 >&2
    grep VmRSS "/proc/$mc/status" >&2
    runs=(pages)
    [ "$mib" = "${sizes[0]}" ] && runs+=(default)
    "$bin/kv-load" "$port" run "$keys" $(( ${#runs[@]} * (monitor_s + 5) + 5 )) 10 >&2 &
    client=$!
    sleep 3
    for regions in "${runs[@]}"; do
        row=$("$bin/page-monitor" "$mc" "$monitor_s" "$regions")
        echo "| $mib ($regions) ${row#| }"
        sleep 2
    done
    wait "$client"
    kill "$mc"
    wait "$mc" 2> /dev/null || true
done
