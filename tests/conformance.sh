#!/usr/bin/env bash
# conformance.sh: the backend conformance run, in the manner of ggml's test-backend-ops. On every
# backend this machine has (CPU, and OpenCL or CUDA when a device opens), the op-level check suites run
# with that backend as the context's device: every op and Tensor-API function, the gradient
# checks, nn layers, losses, optimizers, the JIT, random graphs and bad input, each result
# compared with the float64 reference evaluator (tests/ref_eval.c) under per-dtype tolerances.
# Then the examples run there: fusion, XOR, and a Fashion-MNIST training smoke run. A backend
# that is absent is reported as SKIPPED, never as passed. Usage: [BUILD=dir] tests/conformance.sh [BACKEND...]
# (BUILD: the build directory to test, default build; `make BUILD=build-clang CC=clang conformance`.)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
BIN="$BUILD/bin"
SUITES="${SUITES:-ops api nn random errors kernels nnlayers optim grad jit devices cancel zerocopy}"
backends=("$@")
[ ${#backends[@]} -eq 0 ] && backends=(CPU CL CUDA)
fail=0
for dev in "${backends[@]}"; do
	if ! probe=$("$BIN/devices" "$dev" 2>&1); then
		echo "conformance $dev: SKIPPED ($probe)"
		continue
	fi
	echo "conformance $dev: $probe"
	for s in $SUITES; do
		out=$(DEV="$dev" CK_RUN_SUITE="$s" CK_FORK=yes "$BUILD/tests/run_tests" 2>&1)
		rc=$?
		line=$(grep -E '^[0-9]+%: Checks' <<<"$out" | tail -1)
		echo "conformance $dev: suite $s: ${line:-no result}"
		if [ $rc -ne 0 ]; then
			grep -E ':[FE]:' <<<"$out" | head -20
			fail=1
		fi
	done
	DEV="$dev" "$BIN/fusion" 64 | grep -q "same answer: True" || { echo "conformance $dev: fusion FAILED"; fail=1; }
	DEV="$dev" "$BIN/xor" | grep -q "predictions: \[0, 1, 1, 0\]" || { echo "conformance $dev: xor FAILED"; fail=1; }
	DEV="$dev" "$BIN/fashion_mnist" --steps 8 --batch 128 --min-accuracy 0.25 >/dev/null 2>&1 ||
		{ echo "conformance $dev: fashion_mnist smoke run FAILED"; fail=1; }
	echo "conformance $dev: examples done"
done
exit $fail
