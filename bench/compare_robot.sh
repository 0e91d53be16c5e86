#!/usr/bin/env bash
# The robot brain's table (seed section 4): per-call time at batch 1, 8, 16, 32, 64, 512, 4096
# and one decision's p50/p95, through tensord (bench_robot_table) next to the same model on the
# same weights in-process in tinygrad with TinyJit (bench/tinygrad_robot.py, bench/.venv from
# bench/setup-peer.sh), in one run. WEIGHTS: the trained brain (make robot-demo writes
# BUILD/robot/brain.safetensors; default that when present, else a seeded random init).
# Usage: bench/compare_robot.sh [calls (200)] [WEIGHTS]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
CALLS="${1:-200}"
W="${2:-}"
[ -z "$W" ] && [ -f "$BUILD/robot/brain.safetensors" ] && W="$BUILD/robot/brain.safetensors"
make -s BUILD="$BUILD" "$BUILD/bin/tensord" "$BUILD/bin/bench_robot_table"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(--check "$tmp/check.json" --calls "$CALLS")
[ -n "$W" ] && args+=(--weights "$W")
"$BUILD/bin/bench_robot_table" "${args[@]}" | tee "$tmp/tsd"
W="${W:-/tmp/robot_bench_weights.safetensors}"
if [ -x bench/.venv/bin/python ]; then
	bench/.venv/bin/python bench/tinygrad_robot.py "$W" "$tmp/check.json" "$CALLS" | tee "$tmp/tg"
else
	echo "(no bench/.venv: run bench/setup-peer.sh for the tinygrad column)"
	: >"$tmp/tg"
fi
val() { awk -v b="$2" '$1 == "RESULT" && $3 == "batch" && $4 == b { print $6 }' "$1"; }
dec() { awk -v k="$2" '$1 == "RESULT" && $3 == "decision" { for (i = 4; i < NF; i++) if ($i == k) print $(i + 1) }' "$1"; }
echo
echo "robot brain, ms per call (median; tinygrad with TinyJit, in-process, upload and read-back included)"
echo "$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-14s %14s %14s\n' "batch" "tensord" "tinygrad+JIT"
for b in 1 8 16 32 64 512 4096; do
	printf '%-14s %14s %14s\n' "$b" "$(val "$tmp/tsd" "$b")" "$(val "$tmp/tg" "$b")"
done
printf '%-14s %14s %14s\n' "decision p50" "$(dec "$tmp/tsd" p50)" "$(dec "$tmp/tg" p50)"
printf '%-14s %14s %14s\n' "decision p95" "$(dec "$tmp/tsd" p95)" "$(dec "$tmp/tg" p95)"
