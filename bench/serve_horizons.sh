#!/usr/bin/env bash
# serve's working-set horizons on a steady load, beside `udamon record` on the same process and
# the kernel's accessed bits: the judge's Go map program (narrow: random reads of 1 % of 10 M
# keys), served and recorded at once (tick); five scrapes 10 s apart after 70 s, then `report
# wss --horizons` of the record, then the kernel's Referenced bytes over three 10 s intervals.
# Run: cargo build --release -p udamon -p udamon-bench, and the judge once (it builds
# target/judge-workloads/go_map), then, as root: bench/serve_horizons.sh [narrow|wide]
set -euo pipefail
cd "$(dirname "$0")/.."
phase=${1:-narrow}
udamon=$(pwd)/target/release/udamon
go_map=$(pwd)/target/judge-workloads/go_map
referenced=$(pwd)/../shared/tools/referenced
work=$(mktemp -d)
cd "$work"
mkfifo phase
sleep 1000 > phase &
hold=$!
"$go_map" 400 < phase > go.out 2>&1 &
go=$!
trap 'kill $go $hold 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 60); do grep -q ready go.out && break; sleep 1; done
[ "$phase" = wide ] && echo wide > phase
sleep 5
"$udamon" serve --pid $go --listen 127.0.0.1:19464 --control "$work/ctl.sock" \
    --access-source tick > serve.log 2>&1 &
serve=$!
"$udamon" record --pid $go --access-source tick --duration 130s -o rec.data > record.log 2>&1 &
record=$!
sleep 70
for i in 1 2 3 4 5; do
    echo "scrape $i"
    curl -s 127.0.0.1:19464/metrics | grep '^udamon_working_set_bytes' | sed 's/.*horizon=//'
    sleep 10
done
wait $record
kill $serve
wait $serve 2>/dev/null || true
"$udamon" report wss rec.data --horizons 2s 10s 30s 60s | tail -4
for _ in 1 2 3; do "$referenced" $go 10 | grep "total referenced"; done
