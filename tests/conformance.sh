#!/usr/bin/env bash
# conformance.sh: the backend conformance run, in the manner of ggml's test-backend-ops. On every
# backend this machine has (CPU, and OpenCL or CUDA when a device opens), the op-level check suites run
# with that backend as the context's device: every op and Tensor-API function, the gradient
# checks, nn layers, losses, optimizers, the JIT, random graphs and bad input, each result
# compared with the float64 reference evaluator (tests/ref_eval.c) under per-dtype tolerances.
# Then the examples run there: fusion, XOR, and a Fashion-MNIST training smoke run. A backend
# that is absent is reported as SKIPPED, never as passed. Usage: [BUILD=dir] tests/conformance.sh [BACKEND...]
# (BUILD: the build directory to test, default build; `make BUILD=build-clang CC=clang conformance`.)
# The CPU runs once per x86-64 level the host can execute (scripts/cpu_levels.sh: x86-64-v2, whose
# float16 kernels convert by bit arithmetic, x86-64-v3 with F16C, and x86-64-v4 where the host has
# AVX-512; CPU_LEVELS overrides), its kernels built for that level (TENSORD_CPU_MARCH), so the
# register tiles of every level's target are checked on one machine. OpenCL runs at the device's
# preferred vector width with every suite, then with widths 1, 4, 8 and 16 forced
# (TENSORD_CL_VECTOR_WIDTH; CL_WIDTHS overrides) with the suites whose kernels the width changes
# (VECTOR_SUITES: every op, random graphs, the fusion cases; the others' results do not depend on
# how a tile is rendered, and a full run per width would take ~5 min each). The backends run
# two at a time (CONFORMANCE_JOBS), each one's output printed whole when it is done.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
BIN="$BUILD/bin"
SUITES="${SUITES:-ops api nn random errors kernels nnlayers optim grad jit devices cancel zerocopy}"
VECTOR_SUITES="${VECTOR_SUITES:-ops random kernels}"
CPU_LEVELS="${CPU_LEVELS:-$(scripts/cpu_levels.sh)}"
CL_WIDTHS="${CL_WIDTHS:-1 4 8 16}"
backends=("$@")
[ ${#backends[@]} -eq 0 ] && backends=(CPU CL CUDA)
# run_pass NAME SUITES [VAR=VALUE...]: the suites and the examples on DEV=$dev with the settings
run_pass() {
	local name=$1 suites=$2 s out rc line
	shift 2
	for s in $suites; do
		out=$(env "$@" DEV="$dev" CK_RUN_SUITE="$s" CK_FORK=yes "$BUILD/tests/run_tests" 2>&1)
		rc=$?
		line=$(grep -E '^[0-9]+%: Checks' <<<"$out" | tail -1)
		echo "conformance $name: suite $s: ${line:-no result}"
		if [ $rc -ne 0 ]; then
			grep -E ':[FE]:' <<<"$out" | head -20
			fail=1
		fi
	done
	env "$@" DEV="$dev" "$BIN/fusion" 64 | grep -q "same answer: True" || { echo "conformance $name: fusion FAILED"; fail=1; }
	env "$@" DEV="$dev" "$BIN/xor" | grep -q "predictions: \[0, 1, 1, 0\]" || { echo "conformance $name: xor FAILED"; fail=1; }
	env "$@" DEV="$dev" "$BIN/fashion_mnist" --steps 8 --batch 128 --min-accuracy 0.25 >/dev/null 2>&1 ||
		{ echo "conformance $name: fashion_mnist smoke run FAILED"; fail=1; }
	echo "conformance $name: examples done"
}
# run_backend DEV: every pass of one backend (its output on stdout); exit 1 when one failed
run_backend() {
	local dev=$1 probe level w
	fail=0
	if ! probe=$("$BIN/devices" "$dev" 2>&1); then
		echo "conformance $dev: SKIPPED ($probe)"
		return 0
	fi
	echo "conformance $dev: $probe"
	case "$dev" in
	CPU*)
		for level in $CPU_LEVELS; do
			run_pass "$dev@$level" "$SUITES" TENSORD_CPU_MARCH="$level"
		done
		;;
	CL*)
		run_pass "$dev" "$SUITES"
		for w in $CL_WIDTHS; do
			run_pass "$dev@vector_width=$w" "$VECTOR_SUITES" TENSORD_CL_VECTOR_WIDTH="$w"
		done
		;;
	*) run_pass "$dev" "$SUITES" ;;
	esac
	return $fail
}
# The backends run CONFORMANCE_JOBS at a time (default 2: on a 2-core machine much of a pass is
# one compiler or one test process at a time, so two backends overlap well); each one's output
# is printed whole, in order, when it is done.
JOBS="${CONFORMANCE_JOBS:-2}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
for ((k = 0; k < ${#backends[@]}; k += JOBS)); do
	pids=()
	for ((j = k; j < k + JOBS && j < ${#backends[@]}; j++)); do
		run_backend "${backends[$j]}" >"$out/$j" 2>&1 &
		pids+=($!)
	done
	for ((j = k; j < k + JOBS && j < ${#backends[@]}; j++)); do
		wait "${pids[$((j - k))]}" || status=1
		cat "$out/$j"
	done
done
exit $status
