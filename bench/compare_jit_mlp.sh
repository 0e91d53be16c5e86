#!/usr/bin/env bash
# Replay per-call time of the MLP 784-128-10 at batch 1 and 256: tensord (plain and JIT) and
# tinygrad (plain and TinyJit) in one run. Needs `make` and bench/setup-peer.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."
CALLS="${1:-200}"
[ -x build/bin/bench_jit_mlp ] || make -s build/bin/bench_jit_mlp
[ -x bench/.venv/bin/python ] || bench/setup-peer.sh
build/bin/bench_jit_mlp "$CALLS"
bench/.venv/bin/python bench/tinygrad_jit_mlp.py "$CALLS"
