#!/usr/bin/env bash
# Real-world ONNX models from PyPI (bench/onnx_models.h: PaddleOCR's direction classifier from
# rapidocr-onnxruntime, silero-vad's opset-18 model) at batch 1 and 64: tensord in-process (eng_jit
# replay), tensord through the daemon (bench_onnx_daemon: a client of a tensord serving the files
# with "format": "onnx"; also 64 callers of one row each, merged by the batcher) and onnxruntime
# (CPU, 2 intra-op threads) in one run, on the same inputs, tensord's outputs checked against
# onnxruntime's (the daemon's against the in-process ones); ROUNDS interleaved rounds (the load of
# a shared machine drifts), and a table of the medians over the rounds with the ratios. Needs
# bench/setup-onnx-peer.sh (run when bench/.venv-onnx is missing).
# Usage: bench/compare_onnx.sh [CALLS] [MODEL ...]   (env: BUILD=build directory, ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
ROUNDS="${ROUNDS:-3}"
CALLS="${1:-50}"
shift || true
[ -x bench/.venv-onnx/bin/python ] || bench/setup-onnx-peer.sh
make -s BUILD="$BUILD" "$BUILD/bin/bench_onnx_models" "$BUILD/bin/bench_onnx_daemon"
SITE=$(bench/.venv-onnx/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /CPU: /'
echo "tensord CPU threads: ${TENSORD_CPU_THREADS:-0 (one per online core: $(nproc))}"
rc=0
for r in $(seq "$ROUNDS"); do
	echo "== round $r of $ROUNDS"
	"$BUILD/bin/bench_onnx_models" -n "$CALLS" -o "$DIR" "$SITE" "$@" | tee -a "$DIR/results.txt" | grep -v '^result'
	bench/.venv-onnx/bin/python bench/ort_models.py "$SITE" "$DIR" "$CALLS" | tee -a "$DIR/results.txt" |
		grep -v '^result' || rc=1
	"$BUILD/bin/bench_onnx_daemon" -n "$CALLS" -o "$DIR" "$SITE" "$@" | tee -a "$DIR/results.txt" |
		grep -v '^result' || rc=1
done
echo
echo "| model | batch | tensord in-process ms/call median (best) | through the daemon | onnxruntime | onnxruntime / in-process, medians (bests) | onnxruntime / daemon | outputs (max abs diff vs onnxruntime) |"
echo "|---|---:|---:|---:|---:|---:|---:|---|"
awk -f bench/median.awk -f /dev/stdin "$DIR/results.txt" <<'AWK'
function min_(a, b) { return a == "" || b + 0 < a + 0 ? b : a }
$1 == "result" { k = $3 " " $4; if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
	if ($2 == "tensord") { t[k] = t[k] " " $5; tb[k] = min_(tb[k], $6) }
	else if ($2 == "daemon") { dm[k] = dm[k] " " $5; dbest[k] = min_(dbest[k], $6); if ($7 != "ok") dchk[k] = $7 }
	else if ($2 == "daemon64x1") { f[k] = f[k] " " $5; fl[k] = fl[k] " " $8; if ($7 != "ok") dchk[k] = $7 }
	else { o[k] = o[k] " " $5; ob[k] = min_(ob[k], $6); if (!(k in chk) || $7 != "ok") chk[k] = $7
		if ($8 + 0 > d[k] + 0) d[k] = $8 } }
END { for (i = 1; i <= nk; i++) { k = order[i]; split(k, kb, " "); tm = med(t[k]); om = med(o[k]); dmm = med(dm[k])
	printf "| %s | %d | %.3f (%.3f) | %.3f (%.3f) | %.3f (%.3f) | %.2fx (%.2fx) | %.2fx (%.2fx) | %s (%s)%s |\n", kb[1], kb[2],
		tm, tb[k], dmm, dbest[k], om, ob[k], om / tm, ob[k] / tb[k], om / dmm, ob[k] / dbest[k], chk[k], d[k],
		k in dchk ? ", daemon: " dchk[k] : "" }
	print ""
	for (i = 1; i <= nk; i++) { k = order[i]; if (!(k in f)) continue; split(k, kb, " ")
		printf "%s through the daemon from 64 callers of one row each: %.3f ms per 64 rows (median of the rounds), %.1f rows per launch\n",
			kb[1], med(f[k]), med(fl[k]) } }
AWK
echo "(per call, with input upload and output read-back: the median over $ROUNDS rounds of each round's median of"
echo " $CALLS calls, and in brackets the best call of all rounds; onnxruntime / tensord above 1: tensord is faster)"
exit $rc
