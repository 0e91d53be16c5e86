#!/usr/bin/env bash
# Real-world ONNX models from PyPI (bench/onnx_models.h: PaddleOCR's direction classifier from
# rapidocr-onnxruntime, silero-vad's opset-18 model) at batch 1 and 64: tensord in-process (eng_jit
# replay) and onnxruntime (CPU, 2 intra-op threads) in one run, on the same inputs, tensord's
# outputs checked against onnxruntime's; a table with the ratios. Needs bench/setup-onnx-peer.sh.
# Usage: bench/compare_onnx.sh [CALLS] [MODEL ...]   (BUILD=build directory, default build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
CALLS="${1:-100}"
shift || true
[ -x bench/.venv-onnx/bin/python ] || bench/setup-onnx-peer.sh
make -s BUILD="$BUILD" "$BUILD/bin/bench_onnx_models"
SITE=$(bench/.venv-onnx/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /CPU: /'
echo "tensord CPU threads: ${TENSORD_CPU_THREADS:-0 (one per online core: $(nproc))}"
"$BUILD/bin/bench_onnx_models" -n "$CALLS" -o "$DIR" "$SITE" "$@" | tee "$DIR/tensord.txt"
rc=0
bench/.venv-onnx/bin/python bench/ort_models.py "$SITE" "$DIR" "$CALLS" | tee "$DIR/ort.txt" || rc=$?
echo
echo "| model | batch | tensord ms/call | onnxruntime ms/call | ort / tensord | outputs (max abs diff) |"
echo "|---|---:|---:|---:|---:|---|"
awk '$1 == "result" && $2 == "tensord" { t[$3 " " $4] = $5 }
     $1 == "result" && $2 == "onnxruntime" && (($3 " " $4) in t) {
	printf "| %s | %d | %.3f | %.3f | %.2fx | %s (%s) |\n", $3, $4, t[$3 " " $4], $5, $5 / t[$3 " " $4], $6, $7 }' \
	"$DIR/tensord.txt" "$DIR/ort.txt"
echo "(ort / tensord above 1: tensord is faster; medians of $CALLS calls, each with input upload and output read-back)"
exit $rc
