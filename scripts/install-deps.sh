#!/usr/bin/env bash
# Installs tensord's build, test and runtime dependencies from Debian 12's apt (run as root).
# Idempotent: does nothing when every package is already installed; used by .ci/run and the README.
set -euo pipefail

PKGS=(
	build-essential pkg-config check libsubunit-dev zlib1g-dev python3 python3-venv
	# libclang-rt-dev: libFuzzer and clang's sanitizer runtimes for make fuzz (clang only recommends it)
	clang clang-format libasan8 libtsan2 libclang-rt-dev
	libuv1-dev libnng-dev libcjson-dev libsystemd-dev
	# the Open Inference Protocol's HTTP frontend: h2o built on libuv (the daemon's loop); wrk: HTTP load in make oip-check,
	# curl: its HTTP/2 check there
	libh2o-dev wrk curl
	# tensorctl bench --protocol http (an HTTP client as the tools a user has: libcurl)
	libcurl4-openssl-dev
	ocl-icd-opencl-dev opencl-headers pocl-opencl-icd
	dataset-fashion-mnist
	# python3-numpy: the Python client's numpy tests (make python-test); the client needs none
	python3-numpy
	# ONNX import: protoc-c generates the parser from libonnx-dev's onnx.proto at build time;
	# libonnx-testdata (6 MB download, 21 MB installed) holds ONNX's backend node tests (make onnx-check)
	protobuf-c-compiler libprotobuf-c-dev libonnx-dev libonnx-testdata
	# the Open Inference Protocol's gRPC frontend (daemon/oip_grpc.c): gRPC's C core
	libgrpc-dev
	# the failure test (make failover-check): replicas behind Debian's HAProxy
	haproxy
	# the ARM64 check (make check-aarch64): the cross compiler (also the kernels' compiler inside
	# the emulated process) and qemu-aarch64
	gcc-aarch64-linux-gnu qemu-user
)
# The arm64 builds of what the cross-built engine and run_tests link, from dpkg multiarch (arm64
# added only when one is missing); libc6:arm64's loader and libc are the ones qemu-aarch64 runs
# them with (tests/aarch64.sh says why not the cross toolchain's).
ARM64_PKGS=(libc6:arm64 check:arm64 libsubunit-dev:arm64 zlib1g-dev:arm64 libcjson-dev:arm64 libprotobuf-c-dev:arm64)

missing=()
for p in "${PKGS[@]}" "${ARM64_PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all $((${#PKGS[@]} + ${#ARM64_PKGS[@]})) packages present"
	exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if [[ " ${missing[*]}" == *:arm64* ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
	$SUDO dpkg --add-architecture arm64
fi
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
