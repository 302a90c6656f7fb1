#!/usr/bin/env bash
# bench/rejudge_all.sh: judges every program kept under DIR/run* again with this build's
# estimator (`judge --rejudge`), and prints each run's honest-error rows: how an estimator
# change moves "truth in interval" and "settled and within ±25 %" on every record kept so far,
# in seconds, without running the programs again.
#
# Usage: bench/rejudge_all.sh [DIR]   (default: /work/judge-keep; each run* under it comes from
# `judge --keep DIR/runN PROGRAM...`)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p udamon-bench --bin judge
keep=${1:-/work/judge-keep}
for run in "$keep"/run*/; do
    programs=$(find "$run" -maxdepth 1 -name '*-truth.json' -printf '%f\n' | sed 's/-truth\.json$//' | sort)
    [ -n "$programs" ] || continue
    echo "## $run: $(echo $programs)"
    # shellcheck disable=SC2086 # one argument per program
    target/release/judge --rejudge "$run" $programs 2> /dev/null |
        sed -n '/^## Honest error/,$p' | grep '^| ' | grep -v '^| program\|^|---'
done
