#!/usr/bin/env bash
# Quantized ONNX models against onnxruntime's integer runs and tensord's own float run: PaddleOCR's
# direction classifier as made by bench/quantize_models.py with onnxruntime.quantization (a static
# QDQ model: uint8 activations, int8 weights per channel; a dynamic one: DynamicQuantizeLinear and
# ConvInteger/MatMulInteger) beside the float32 model they come from, at batch 1 and 64, tensord
# in-process (eng_jit replay) and onnxruntime (CPU, 2 intra-op threads) on the same inputs, in
# ROUNDS interleaved rounds. tensord's quantized outputs are checked within the quantization's own
# error of onnxruntime running the quantized graph as written (bench/ort_models.py). Needs
# bench/setup-onnx-peer.sh; the quantized files are made once into site-packages/tensord_quant.
# Usage: bench/compare_quant.sh [CALLS]   (env: BUILD=build directory, ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
ROUNDS="${ROUNDS:-3}"
CALLS="${1:-30}"
MODELS=(ppocr-cls ppocr-qdq ppocr-dyn)
[ -x bench/.venv-onnx/bin/python ] || bench/setup-onnx-peer.sh
make -s BUILD="$BUILD" "$BUILD/bin/bench_onnx_models"
SITE=$(bench/.venv-onnx/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ ! -f "$SITE/tensord_quant/ppocr-cls-qdq.onnx" ] || [ ! -f "$SITE/tensord_quant/ppocr-cls-dyn.onnx" ]; then
	mkdir -p "$SITE/tensord_quant"
	bench/.venv-onnx/bin/python bench/quantize_models.py "$SITE" "$SITE/tensord_quant"
fi
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /CPU: /'
echo "vector ISA: $(grep -o -m1 -w 'avx512f\|avx2' /proc/cpuinfo | head -1), dot products: $(grep -o -m1 -w 'avx512_vnni\|avx_vnni' /proc/cpuinfo | head -1 || true)"
echo "tensord CPU threads: ${TENSORD_CPU_THREADS:-0 (one per online core: $(nproc))}, march: ${TENSORD_CPU_MARCH:-native}"
rc=0
for r in $(seq "$ROUNDS"); do
	echo "== round $r of $ROUNDS"
	"$BUILD/bin/bench_onnx_models" -n "$CALLS" -o "$DIR" "$SITE" "${MODELS[@]}" | tee -a "$DIR/results.txt" | grep -v '^result'
	bench/.venv-onnx/bin/python bench/ort_models.py "$SITE" "$DIR" "$CALLS" | tee -a "$DIR/results.txt" |
		grep -v '^result' || rc=1
done
echo
echo "| model | batch | tensord ms/call median (best) | onnxruntime | onnxruntime / tensord, medians (bests) | tensord float32 / this, medians | outputs (max abs diff vs onnxruntime) |"
echo "|---|---:|---:|---:|---:|---:|---|"
awk -f bench/median.awk -f /dev/stdin "$DIR/results.txt" <<'AWK'
function min_(a, b) { return a == "" || b + 0 < a + 0 ? b : a }
$1 == "result" { k = $3 " " $4; if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
	if ($2 == "tensord") { t[k] = t[k] " " $5; tb[k] = min_(tb[k], $6) }
	else { o[k] = o[k] " " $5; ob[k] = min_(ob[k], $6); if (!(k in chk) || $7 != "ok") chk[k] = $7
		if ($8 + 0 > d[k] + 0) d[k] = $8 } }
END { for (i = 1; i <= nk; i++) { k = order[i]; split(k, kb, " "); tm = med(t[k]); om = med(o[k])
	fk = "ppocr-cls " kb[2]; fm = med(t[fk])
	printf "| %s | %d | %.3f (%.3f) | %.3f (%.3f) | %.2fx (%.2fx) | %.2fx | %s (%s) |\n", kb[1], kb[2],
		tm, tb[k], om, ob[k], om / tm, ob[k] / tb[k], fm / tm, chk[k], d[k] } }
AWK
echo "(per call, with input upload and output read-back: the median over $ROUNDS rounds of each round's median of"
echo " $CALLS calls, and in brackets the best call of all rounds; a ratio above 1: this tensord run is faster)"
exit $rc
