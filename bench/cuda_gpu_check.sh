#!/usr/bin/env bash
# cuda_gpu_check.sh: the one run a session with an NVIDIA GPU makes of the CUDA backend.
# UNTESTED ON A GPU: written in a session without one (everything here that needs no GPU was
# checked there: the build, and NVRTC compiling every conformance kernel, suite cudacompile).
# Builds, then: the conformance suite with DEV=CUDA (tests/conformance.sh CUDA: every op,
# gradients, JIT, the examples), a float32 matmul at 4096 through tensord and through cuBLAS's
# sgemm on the same GPU, the Fashion-MNIST training step, and the MLP JIT replay per call.
# Usage: [BUILD=dir] [JOBS=n] bench/cuda_gpu_check.sh   (exit status: the conformance run's)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build-gpu}"
JOBS="${JOBS:-$(nproc)}"
BIN="$BUILD/bin"
echo "== build ($BUILD)"
mkdir -p "$BUILD"
make BUILD="$BUILD" -j"$JOBS" all >"$BUILD/build.log" 2>&1 || { tail -30 "$BUILD/build.log"; echo "build FAILED"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
"$BIN/devices" CUDA || { echo "no usable CUDA device: nothing more to run"; exit 1; }
echo "== conformance with DEV=CUDA"
BUILD="$BUILD" tests/conformance.sh CUDA
rc=$?
echo "== NVRTC compile check (suite cudacompile)"
CK_RUN_SUITE=cudacompile CK_FORK=yes "$BUILD/tests/run_tests" | grep -E "cudacompile|Checks"
echo "== matmul 4096 float32: tensord (DEV=CUDA) and cuBLAS sgemm"
DEV=CUDA timeout 300 "$BIN/bench_matmul" 4096 10
timeout 120 "$BIN/bench_cublas_sgemm" 4096 20
echo "== Fashion-MNIST training step (DEV=CUDA, batch 512)"
DEV=CUDA timeout 600 "$BIN/fashion_mnist" --steps 40 --batch 512 | tail -2
echo "== MLP JIT replay per call (DEV=CUDA)"
DEV=CUDA timeout 300 "$BIN/bench_jit_mlp"
echo "== DEBUG=2 device times of one matmul 1024 (CUDA events)"
DEV=CUDA DEBUG=2 timeout 120 "$BIN/bench_matmul" 1024 1 2>&1 | grep -E "CUDA .* us on the device" | tail -3
echo "cuda_gpu_check: conformance exit status $rc"
exit $rc
