#!/usr/bin/env bash
# A real Prometheus server (Debian's `prometheus` package) scrapes `udamon serve` on 127.0.0.1
# and the series arrive: udamon_working_set_bytes of a busy process, queried back through
# Prometheus's HTTP API.
#
# usage: bench/prometheus.sh [SECONDS]   (default 20: how long Prometheus scrapes)
# Needs the release build (cargo build --release -p udamon) and root for apt-get if
# prometheus is not installed yet.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
udamon=target/release/udamon
[ -x "$udamon" ] || { echo "build the release udamon first: cargo build --release -p udamon" >&2; exit 1; }
if ! command -v prometheus >/dev/null; then
    echo "prometheus.sh: installing Debian's prometheus package (apt-get install prometheus)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null
fi
work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# A busy target: random accesses over 64 MiB.
cc -O2 -o "$work/membound" bench/workloads/membound.c
"$work/membound" 64 "$work/counter" &
pids+=($!)
target=$!

udamon_port=$((20000 + RANDOM % 20000))
prom_port=$((udamon_port + 1))
"$udamon" serve --pid "$target" --listen "127.0.0.1:$udamon_port" --control "$work/ctl.sock" 2>"$work/udamon.log" &
pids+=($!)

cat >"$work/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: udamon
    static_configs:
      - targets: ["127.0.0.1:$udamon_port"]
YAML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
pids+=($!)

echo "prometheus.sh: Prometheus on 127.0.0.1:$prom_port scrapes udamon serve on 127.0.0.1:$udamon_port for ${seconds} s"
sleep "$seconds"
query() {
    curl -sf "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1"
}
health=$(curl -sf "http://127.0.0.1:$prom_port/api/v1/targets" | python3 -c '
import json, sys
t = json.load(sys.stdin)["data"]["activeTargets"][0]
print(t["health"], t.get("lastError", ""))')
echo "scrape target health: $health"
result=$(query "udamon_working_set_bytes{pid=\"$target\",horizon=\"10s\"}")
echo "$result" | python3 -c '
import json, sys
r = json.load(sys.stdin)["data"]["result"]
if not r:
    sys.exit("FAIL: no udamon_working_set_bytes series arrived in Prometheus")
v = float(r[0]["value"][1])
print(f"udamon_working_set_bytes{{horizon=\"10s\"}} in Prometheus: {v / 2**20:.1f} MiB (target touches 64 MiB)")
'
samples=$(query "count_over_time(udamon_working_set_bytes{pid=\"$target\",horizon=\"window\"}[1h])" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else 0)')
echo "points stored for the window series: $samples (about one per second of scraping)"
[ "${health%% *}" = up ] || { echo "FAIL: the scrape target is not up" >&2; exit 1; }
echo "OK"
