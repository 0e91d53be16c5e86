#!/usr/bin/env bash
# A global float32 sum, tensord (the CPU on one thread and on all cores; and OpenCL when a device
# opens) against numpy's a.sum() in one run, on the same 2^K values (default K=24, uniform in
# [0, 1)): median and best of RUNS (default 15), each with its error against a float64 sum.
# Needs `make` (BUILD=dir as for make) and bench/setup-peer.sh. Args: K, then `square` for a
# 2^(K/2) x 2^(K/2) input (tensord's 2-D sum; numpy's is the same flat sum).
set -euo pipefail
cd "$(dirname "$0")/.."
B="${BUILD:-build}"
K="${1:-24}"
SHAPE="${2:-flat}"
RUNS="${RUNS:-15}"
[ -x "$B/bin/bench_global_sum" ] || make -s BUILD="$B" "$B/bin/bench_global_sum"
[ -x bench/.venv/bin/python ] || bench/setup-peer.sh
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores; load average $(cut -d' ' -f1 /proc/loadavg)"
out=$("$B/bin/bench_global_sum" "$K" "$RUNS" CPU "$SHAPE")
echo "$out"
"$B/bin/devices" CL >/dev/null 2>&1 && "$B/bin/bench_global_sum" "$K" "$RUNS" CL "$SHAPE"
np=$(bench/.venv/bin/python bench/numpy_sum.py "$K" "$RUNS")
echo "$np"
# "median M ms" of the all-cores line, the 1-thread line and numpy's -> ratios
med() { sed -E 's/.*median ([0-9.]+) ms.*/\1/'; }
one=$(grep '1 thread' <<<"$out" | med)
all=$(grep 'all threads' <<<"$out" | med)
npm=$(med <<<"$np")
awk -v o="$one" -v a="$all" -v n="$npm" 'BEGIN { printf "medians: 1 thread / all cores %.2fx; tensord all cores / numpy %.2fx\n", o / a, a / n }'
