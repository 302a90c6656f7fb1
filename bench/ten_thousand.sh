#!/usr/bin/env bash
# bench/ten_thousand.sh: 10,000 matching processes under one `udamon serve --match` whose
# open-files limit (4,096) cannot hold them all: /metrics and `ctl targets` must keep answering,
# and serve must say that it stopped adding targets. Prints, every 10 s for 2 minutes, how long
# a scrape and a `ctl targets` took, serve's resident memory and descriptors; then serve's log
# lines about the descriptors and its CPU. Uses the release build (cargo build --release -p udamon).
set -u
cd "$(dirname "$0")/.."
udamon=$(pwd)/target/release/udamon
work=$(mktemp -d)
cp /bin/sleep "$work/uds10k"
cd "$work"
for i in $(seq 1 10000); do ./uds10k 900 & done 2>/dev/null
echo "spawned: $(pgrep -c -x uds10k)"
free -m | head -2
(ulimit -n 4096; exec $udamon serve --match '^uds10k$' --listen 127.0.0.1:9311 --control $work/ctl.sock > $work/serve.log 2>&1) &
sp=$!
sleep 5
for t in $(seq 1 12); do
  s=$(date +%s.%N)
  n=$(curl -s -m 20 http://127.0.0.1:9311/metrics | grep -c '^udamon_working_set_bytes')
  m=$(echo "$(date +%s.%N) - $s" | bc)
  c0=$(date +%s.%N)
  ct=$(timeout 20 $udamon ctl --control $work/ctl.sock targets 2>&1 | wc -l)
  c=$(echo "$(date +%s.%N) - $c0" | bc)
  echo "t=$((t*10))s metrics ${m}s working_set series $n; ctl targets ${c}s lines $ct; serve RSS $(grep VmRSS /proc/$sp/status 2>/dev/null| awk '{print $2}') kB; fds $(ls /proc/$sp/fd 2>/dev/null | wc -l)"
  sleep 8
done
grep -i "not serving\|descriptor" $work/serve.log | head -5
ps -o pcpu,etimes,time -p $sp
kill $sp; pkill -x uds10k
rm -rf "$work"
