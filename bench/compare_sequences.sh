#!/usr/bin/env bash
# Issue 28's goals in one run (bench/sequence_streams.c; docs/BENCHMARKS.md, "Sequences"):
# silero-vad's 64 streams of 512-sample chunks with the LSTM state held in the daemon against the
# same streams sending their state with every request (alternating round by round), against
# onnxruntime running the 64 streams one after another in one process (bench/ort_streams.py),
# one stream's sequence steps against stateless requests of the same model and batch, and the
# daemon's RSS over CHURN sequences started and ended. Needs bench/setup-onnx-peer.sh (run when
# bench/.venv-onnx is missing).
# Usage: bench/compare_sequences.sh [STREAMS] [ROUNDS]   (env: BUILD, CHURN=100000, SINGLE=500)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
S="${1:-64}"
R="${2:-40}"
[ -x bench/.venv-onnx/bin/python ] || bench/setup-onnx-peer.sh
make -s BUILD="$BUILD" "$BUILD/bin/bench_sequence_streams"
SITE=$(bench/.venv-onnx/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /CPU: /'
echo "vector ISA: $(grep -o -m1 'avx512f' /proc/cpuinfo || grep -o -m1 'avx2' /proc/cpuinfo || uname -m); $(nproc) CPUs"
"$BUILD/bin/bench_sequence_streams" -s "$S" -r "$R" -n "${SINGLE:-500}" -c "${CHURN:-100000}" "$SITE" | tee "$OUT" | grep -v '^result'
bench/.venv-onnx/bin/python bench/ort_streams.py "$SITE" "$S" "$R" 2>/dev/null | tee -a "$OUT" | grep -v '^result'
held=$(awk '$1=="result" && $2=="held_sps" {print $3}' "$OUT")
ort=$(awk '$1=="result" && $2=="ort_sps" {print $3}' "$OUT")
awk -v h="$held" -v o="$ort" 'BEGIN { printf "state held in the daemon vs onnxruntime one stream after another: %.2fx (goal >= 3x)\n", h / o }'
