#!/usr/bin/env bash
# Record size of live processes, compressed (the default) against --no-compress: the same
# programs recorded twice, one after the other, with the bytes per second of monitoring, the
# ratio, and the monitor's own CPU time for each.
#
# usage: bench/record_size.sh [SECONDS]   (default 30: each recording's length)
# Needs the release build (cargo build --release -p udamon), stress-ng and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
udamon=$(pwd)/target/release/udamon
[ -x "$udamon" ] || { echo "build the release udamon first: cargo build --release -p udamon" >&2; exit 1; }
for tool in stress-ng python3; do
    command -v "$tool" >/dev/null || { echo "record_size.sh: $tool is not installed" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Each program: a name and its command line, run for longer than the recording.
programs=(
    "stress-ng --vm 2|stress-ng --vm 2 --vm-bytes 256M --timeout $((seconds + 5))s"
    "python3 dict|python3 -c 'import time
d = {i: str(i) for i in range(2_000_000)}
end = time.time() + $((seconds + 5))
while time.time() < end:
    sum(len(d[k]) for k in range(0, 2_000_000, 7))'"
)

# Prints "bytes cpu_seconds" for one recording of $1 with the extra record options $2.
record() {
    local cmd=$1 opts=$2 out="$work/r.udamon"
    rm -f "$out"
    bash -c "exec $cmd" >/dev/null 2>&1 &
    local pid=$!
    sleep 1
    # The monitor's own CPU: it monitors by --pid, so the target is not its child.
    /usr/bin/time -o "$work/time" -f "%U %S" "$udamon" record --pid "$pid" --children \
        --duration "${seconds}s" $opts -o "$out" >/dev/null 2>&1
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    echo "$(stat -c %s "$out") $(awk '{ printf "%.2f", $1 + $2 }' "$work/time")"
}

printf '%-16s %14s %14s %8s %16s\n' program "plain KiB/s" "zstd KiB/s" ratio "monitor CPU s"
for entry in "${programs[@]}"; do
    name=${entry%%|*}
    cmd=${entry#*|}
    read -r plain plain_cpu < <(record "$cmd" --no-compress)
    read -r zstd zstd_cpu < <(record "$cmd" "")
    awk -v n="$name" -v p="$plain" -v z="$zstd" -v s="$seconds" -v pc="$plain_cpu" -v zc="$zstd_cpu" \
        'BEGIN { printf "%-16s %14.1f %14.1f %8.2f %8s / %-6s\n", n, p / 1024 / s, z / 1024 / s, p / z, pc, zc }'
done
echo "(monitor CPU: plain / zstd, user + system over the whole recording)"
