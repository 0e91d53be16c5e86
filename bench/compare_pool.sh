#!/usr/bin/env bash
# The CPU backend's worker pool (backends/cpu/pool.c) before and after a change, in one run:
# bench_onnx_models at batch 1 (ppocr-cls, silero-vad: bench/onnx_models.h) built from two
# revisions with the same flags, on 1 and 2 threads (TENSORD_CPU_THREADS): calls back to back on
# a quiet machine ("quiet") and beside one busy process ("busy": a shell loop standing for the
# daemon's loop thread or a local client on the same cores), and lone calls 5 ms apart ("lone":
# an idle daemon's requests, where the process's CPU time per call shows the workers' polling);
# ROUNDS interleaved rounds, then the medians over the rounds of each run's p50 and p99 per call
# (ms, inputs uploaded and outputs read back) and CPU time per call (ms, every thread's).
# Usage: bench/compare_pool.sh OLD [NEW] [CALLS]
#   OLD, NEW: a bench_onnx_models binary, or a git revision built here (git archive, make -j2);
#   NEW defaults to $BUILD/bin/bench_onnx_models. env: BUILD=build, ROUNDS=3, SITE=site-packages
#   with the models (default: bench/.venv-onnx's, made by bench/setup-onnx-peer.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
ROUNDS="${ROUNDS:-3}"
OLD="${1:?usage: bench/compare_pool.sh OLD [NEW] [CALLS]}"
NEW="${2:-$BUILD/bin/bench_onnx_models}"
CALLS="${3:-500}"
if [ -z "${SITE:-}" ]; then
	[ -x bench/.venv-onnx/bin/python ] || bench/setup-onnx-peer.sh
	SITE=$(bench/.venv-onnx/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
fi
DIR=$(mktemp -d)
HOG=
cleanup() {
	[ -z "$HOG" ] || kill "$HOG" 2>/dev/null || true
	rm -rf "$DIR"
}
trap cleanup EXIT
# A revision's bench_onnx_models, built in a copy of its tree with this checkout's flags.
binary() {
	if [ -x "$1" ]; then
		echo "$1"
		return
	fi
	local src="$DIR/src-$2"
	mkdir -p "$src"
	git archive "$1" | tar -x -C "$src"
	make -s -C "$src" -j2 build/bin/bench_onnx_models >&2
	echo "$src/build/bin/bench_onnx_models"
}
[ -x "$NEW" ] || [ "$NEW" != "$BUILD/bin/bench_onnx_models" ] || make -s -j2 BUILD="$BUILD" "$NEW"
OLD_BIN=$(binary "$OLD" old)
NEW_BIN=$(binary "$NEW" new)
grep -m1 'model name' /proc/cpuinfo | sed 's/.*: /CPU: /'
echo "cores: $(nproc); load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
LONE_CALLS=$((CALLS < 200 ? CALLS : 200))
for r in $(seq "$ROUNDS"); do
	for load in quiet busy lone; do
		if [ "$load" = busy ]; then
			sh -c 'while :; do :; done' &
			HOG=$!
		fi
		args=(-n "$CALLS")
		[ "$load" != lone ] || args=(-n "$LONE_CALLS" -p 5000)
		for t in 1 2; do
			for which in old new; do
				bin=$OLD_BIN
				[ "$which" = old ] || bin=$NEW_BIN
				TENSORD_CPU_THREADS=$t "$bin" "${args[@]}" -b 1 "$SITE" ppocr-cls silero-vad |
					awk -v w="$which" -v l="$load" -v t="$t" '$1 == "result" { print w, l, t, $3, $5, $7, $8 }' >>"$DIR/results.txt"
			done
		done
		if [ -n "$HOG" ]; then
			kill "$HOG"
			wait "$HOG" 2>/dev/null || true
			HOG=
		fi
	done
	echo "round $r of $ROUNDS done, load average $(cut -d' ' -f1 /proc/loadavg)"
done
echo
echo "| calls | threads | model | old p50 | old p99 | old CPU | new p50 | new p99 | new CPU |"
echo "|---|---:|---|---:|---:|---:|---:|---:|---:|"
awk -f bench/median.awk -f /dev/stdin "$DIR/results.txt" <<'AWK'
{ k = $2 " " $3 " " $4; if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
	p50[$1 " " k] = p50[$1 " " k] " " $5; p99[$1 " " k] = p99[$1 " " k] " " $6; cpu[$1 " " k] = cpu[$1 " " k] " " $7 }
END { for (i = 1; i <= nk; i++) { k = order[i]; split(k, f, " ")
	printf "| %s | %s | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f |\n", f[1], f[2], f[3], med(p50["old " k]),
		med(p99["old " k]), med(cpu["old " k]), med(p50["new " k]), med(p99["new " k]), med(cpu["new " k]) } }
AWK
echo "(ms per call at batch 1, inputs uploaded and outputs read back, and the process's CPU ms per call: the median"
echo " over $ROUNDS rounds of each run's p50, p99 and mean of $CALLS calls ($LONE_CALLS lone ones, 5 ms apart); busy: one"
echo " shell loop running beside the benchmark)"
