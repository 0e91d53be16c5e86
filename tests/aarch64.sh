#!/usr/bin/env bash
# aarch64.sh: the ARM64 check (make check-aarch64): the engine's suites and examples, cross-built
# for aarch64 into $BUILD (default build-aarch64) by `make aarch64`, run under qemu-user.
#
# The emulated process builds its kernels as on an ARM64 machine: the CPU backend runs
# $CC (aarch64-linux-gnu-gcc; qemu-user hands the execve of that x86-64 program to the host's
# kernel) and dlopens the shared objects it writes, inside the emulated process.
# TENSORD_CPU_MARCH must be stated (default armv8.2-a): a cross compiler has no -march=native
# (it says "unknown value 'native' for '-march'"; this script shows the refusal). The disk cache
# stays on (the jit and cancel suites check it) in a fresh temporary directory.
#
# Runs: a target refused where the emulated CPU lacks its feature (and opened where it has it),
# the op-level suites of tests/conformance.sh on the CPU (its SUITES, all of them) and f16
# (the kernel prelude's float16 conversions, compiled by the cross compiler and run under
# emulation, against the reference for every half), the examples fusion and xor, and a matmul
# whose DEBUG=3 line must show NEON's register tile (8 columns, two 4-float vectors, by 12 rows).
# Seconds per suite on a 2-core x86-64 host (qemu 7.2, gcc 12): ops 19, api 6, nn 3, random 7,
# errors 1, kernels 145-170 (test_row_packed_matmul alone ~100 s: its float64 reference, emulated),
# nnlayers 4, optim 2, grad 8, jit 4, devices 2, cancel 3, zerocopy 1, f16 10; 3.5-4 minutes.
# Per-test limits are stretched (CK_TIMEOUT_MULTIPLIER=4) for that.
# Left out: the serving suites (not built, TESTS=engine: they start tensord and client processes,
# and the host's kernel cannot execute an aarch64 program without binfmt_misc, which qemu-user
# does not register); Fashion-MNIST's smoke run (over 2.5 minutes emulated); OpenCL and CUDA
# (no devices under qemu-user). The run-time libraries are dpkg multiarch's arm64 ones, loaded
# through their own /lib/ld-linux-aarch64.so.1: qemu's `-L /usr/aarch64-linux-gnu` would pair the
# cross toolchain's ld.so (glibc 2.36-8cross1) with multiarch's libc.so.6 (found through qemu's
# fallback to host paths, another build), and pthread_create then loops forever.
# Usage: [BUILD=dir] [CC=cross-cc] [QEMU=qemu-aarch64] [SUITES=...] tests/aarch64.sh
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build-aarch64}"
QEMU="${QEMU:-qemu-aarch64}"
export CC="${CC:-aarch64-linux-gnu-gcc}"
export TENSORD_CPU_MARCH="${TENSORD_CPU_MARCH:-armv8.2-a}"
SUITES="${SUITES:-ops api nn random errors kernels nnlayers optim grad jit devices cancel zerocopy f16}"
for tool in "$QEMU" "$CC"; do
	command -v "$tool" >/dev/null || { echo "aarch64: $tool not found (scripts/install-deps.sh installs it)"; exit 1; }
done
cache=$(mktemp -d /tmp/tensord-aarch64-XXXXXX) || exit 1
trap 'rm -rf "$cache"' EXIT
export TENSORD_CACHE_DIR="$cache" DEV=CPU CK_FORK=yes CK_TIMEOUT_MULTIPLIER="${CK_TIMEOUT_MULTIPLIER:-4}"
unset TENSORD_DISK_CACHE

echo "aarch64: march=native with $CC: $(TENSORD_CPU_MARCH=native "$QEMU" "$BUILD/bin/devices" CPU 2>&1)"
if ! probe=$("$QEMU" "$BUILD/bin/devices" CPU 2>&1); then
	echo "aarch64: CPU (march=$TENSORD_CPU_MARCH) FAILED: $probe"
	exit 1
fi
echo "aarch64: $probe (march=$TENSORD_CPU_MARCH, kernels by $CC)"
# A target the CPU cannot run is refused at open, naming the feature (the kernel's hardware
# capabilities): on an emulated Cortex-A53 (ARMv8.0-A, a Raspberry Pi 3's core) ARMv8.2-A's
# kernels (LSE atomics, mandatory since 8.1) and armv8-a+fp16's (half-precision arithmetic, an
# option the A53 lacks); both open on qemu's default CPU ("max").
for want in "armv8.2-a:atomics" "armv8-a+fp16:fphp"; do
	march=${want%%:*} feature=${want#*:}
	if refused=$(QEMU_CPU=cortex-a53 TENSORD_CPU_MARCH=$march "$QEMU" "$BUILD/bin/devices" CPU 2>&1) ||
		! grep -q "need $feature.*which this CPU lacks" <<<"$refused"; then
		echo "aarch64: march=$march on a Cortex-A53 FAILED: want a refusal naming $feature, got: $refused"
		exit 1
	fi
	if ! opened=$(TENSORD_CPU_MARCH=$march "$QEMU" "$BUILD/bin/devices" CPU 2>&1); then
		echo "aarch64: march=$march on qemu's max CPU FAILED: $opened"
		exit 1
	fi
	echo "aarch64: march=$march on a Cortex-A53: refused (${refused##*need }); on qemu's max CPU: $opened"
done
fail=0
for s in $SUITES; do
	start=$(date +%s)
	out=$(CK_RUN_SUITE="$s" timeout -k 10 600 "$QEMU" "$BUILD/tests/run_tests" 2>&1)
	rc=$?
	line=$(grep -E '^[0-9]+%: Checks' <<<"$out" | tail -1)
	echo "aarch64: suite $s: ${line:-no result} ($(($(date +%s) - start)) s)"
	if [ $rc -ne 0 ]; then
		grep -E ':[FE]:' <<<"$out" | head -20
		[ -n "$line" ] || tail -5 <<<"$out"
		fail=1
	fi
done
"$QEMU" "$BUILD/bin/fusion" 64 | grep -q "same answer: True" || { echo "aarch64: fusion FAILED"; fail=1; }
"$QEMU" "$BUILD/bin/xor" | grep -q "predictions: \[0, 1, 1, 0\]" || { echo "aarch64: xor FAILED"; fail=1; }
tile=$(DEBUG=3 "$QEMU" "$BUILD/bin/matmul_demo" 256 2>&1 | grep -o 'opts: UPCAST dim 1 by [0-9]*, UPCAST dim 0 by [0-9]*')
case "$tile" in
*"by 8, UPCAST dim 0 by 12") echo "aarch64: examples done; matmul tile from NEON's facts: ${tile#opts: }" ;;
*) echo "aarch64: matmul tile FAILED: want UPCAST dim 1 by 8, UPCAST dim 0 by 12, got '${tile:-none}'"; fail=1 ;;
esac
exit $fail
