#!/usr/bin/env bash
# Runs the 1024x1024 float32 matmul through tensord and tinygrad's CPU backend in one run and
# prints both lines plus the ratio. Needs `make` and bench/setup-peer.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-1024}"
[ -x build/bin/bench_matmul ] || make -s build/bin/bench_matmul
[ -x bench/.venv/bin/python ] || bench/setup-peer.sh
ours=$(build/bin/bench_matmul "$N" 7)
peer=$(bench/.venv/bin/python bench/tinygrad_matmul.py "$N")
echo "$ours"
echo "$peer"
o=$(sed -E 's/.*median ([0-9.]+) ms.*/\1/' <<<"$ours")
p=$(sed -E 's/.*median ([0-9.]+) ms.*/\1/' <<<"$peer")
awk -v o="$o" -v p="$p" 'BEGIN { printf "tinygrad / tensord median time: %.1fx\n", p / o }'
