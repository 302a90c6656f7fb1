#!/usr/bin/env bash
# The Grafana dashboard (deploy/grafana/udamon-pods.json) on real data, without a cluster: three
# pods' containers as cgroups named as the kubelet names them (systemd driver) under the cgroup2
# mount, real processes in them (hot, partly cold, cold), their runtime's state and memory
# limits under a --host-root, `udamon serve` scraped by a real Prometheus with
# deploy/prometheus/udamon-rules.yaml loaded, and every panel drawn from Prometheus's answers
# (deploy/grafana/render_panels.py) into docs/images/kubernetes-dashboard.png.
#
# usage: bench/kubernetes_dashboard.sh [SECONDS]   (default 150: how long Prometheus scrapes)
# Needs root, the release build (cargo build --release -p udamon), Debian's prometheus (installed
# with apt if missing) and matplotlib (installed from PyPI into target/plot-venv if missing).
# The memory limits are written under the --host-root: where the cgroup2 hierarchy has no memory
# controller (a hybrid one), that is the only place serve can find them.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-150}
udamon=target/release/udamon
[ -x "$udamon" ] || { echo "build the release udamon first: cargo build --release -p udamon" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "kubernetes_dashboard.sh: building cgroups needs root" >&2; exit 1; }
command -v prometheus >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null
venv=target/plot-venv
[ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import matplotlib' 2>/dev/null ||
    { python3 -m venv "$venv" && "$venv/bin/pip" install --quiet --disable-pip-version-check matplotlib; }
mount=$(awk '$0 ~ / - cgroup2 / { print $5; exit }' /proc/self/mountinfo)
[ -n "$mount" ] || { echo "kubernetes_dashboard.sh: no cgroup2 mount" >&2; exit 1; }

work=$(mktemp -d)
top="$mount/udamon-dashboard-$$"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    find "$top" -depth -type d -exec rmdir {} + 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

cc -O2 -o "$work/membound" bench/workloads/membound.c
host="$work/host"
# pod: namespace pod uid qos; then its containers: name id command...
container() { # NAMESPACE POD UID QOS CONTAINER ID LIMIT_MIB COMMAND...
    local ns=$1 pod=$2 uid=$3 qos=$4 name=$5 id=$6 limit=$7
    shift 7
    local u=${uid//-/_}
    local path="kubepods.slice/kubepods-$qos.slice/kubepods-$qos-pod$u.slice/cri-containerd-$id.scope"
    mkdir -p "$top/$path"
    nice -n 19 "$@" &
    pids+=($!)
    echo $! >"$top/$path/cgroup.procs"
    local rel
    rel=$(sed -n 's/^0:://p' "/proc/$!/cgroup")
    mkdir -p "$host/sys/fs/cgroup$rel" "$host/run/containerd/io.containerd.runtime.v2.task/k8s.io/$id"
    echo $((limit << 20)) >"$host/sys/fs/cgroup$rel/memory.max"
    printf '{"annotations":{"io.kubernetes.cri.sandbox-namespace":"%s","io.kubernetes.cri.sandbox-name":"%s","io.kubernetes.cri.container-name":"%s"}}' \
        "$ns" "$pod" "$name" >"$host/run/containerd/io.containerd.runtime.v2.task/k8s.io/$id/config.json"
}
hold='import sys, time; b = bytearray(b"x" * (int(sys.argv[1]) << 20)); time.sleep(100000)'
id() { printf '%064x' "$1"; }
container shop cart 11111111-1111-4111-8111-111111111111 burstable app "$(id 1)" 48 "$work/membound" 32 "$work/c1"
container shop cart 11111111-1111-4111-8111-111111111111 burstable cache "$(id 2)" 128 python3 -c "$hold" 64
container shop search 22222222-2222-4222-8222-222222222222 burstable index "$(id 3)" 96 "$work/membound" 16 "$work/c3"
container batch report 33333333-3333-4333-8333-333333333333 besteffort job "$(id 4)" 256 python3 -c "$hold" 96

port=$((20000 + RANDOM % 20000))
"$udamon" serve --cgroup "$top" --listen "127.0.0.1:$port" --control "$work/ctl.sock" \
    --access-source cpuclock --host-root "$host" 2>"$work/udamon.log" &
pids+=($!)
cat >"$work/prometheus.yml" <<YAML
global:
  scrape_interval: 5s
  evaluation_interval: 5s
rule_files: ["$(pwd)/deploy/prometheus/udamon-rules.yaml"]
scrape_configs:
  - job_name: udamon
    static_configs:
      - targets: ["127.0.0.1:$port"]
YAML
prom=$((port + 1))
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$prom" >"$work/prometheus.log" 2>&1 &
pids+=($!)
echo "kubernetes_dashboard.sh: Prometheus on 127.0.0.1:$prom scrapes udamon serve for ${seconds} s"
sleep "$seconds"
"$venv/bin/python" deploy/grafana/render_panels.py "http://127.0.0.1:$prom" \
    deploy/grafana/udamon-pods.json docs/images/kubernetes-dashboard.png "$(((seconds + 59) / 60))"
echo "kubernetes_dashboard.sh: wrote docs/images/kubernetes-dashboard.png"
