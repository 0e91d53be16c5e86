#!/usr/bin/env bash
# Installs tensord's build, test and runtime dependencies from Debian 12's apt (run as root).
# Idempotent: does nothing when every package is already installed; used by .ci/run and the README.
set -euo pipefail

PKGS=(
	build-essential pkg-config check libsubunit-dev zlib1g-dev python3 python3-venv
	# libclang-rt-dev: libFuzzer and clang's sanitizer runtimes for make fuzz (clang only recommends it)
	clang clang-format libasan8 libtsan2 libclang-rt-dev
	libuv1-dev libnng-dev libcjson-dev libsystemd-dev
	ocl-icd-opencl-dev opencl-headers pocl-opencl-icd
	dataset-fashion-mnist
	# python3-numpy: the Python client's numpy tests (make python-test); the client needs none
	python3-numpy
	# ONNX import: protoc-c generates the parser from libonnx-dev's onnx.proto at build time;
	# libonnx-testdata (6 MB download, 21 MB installed) holds ONNX's backend node tests (make onnx-check)
	protobuf-c-compiler libprotobuf-c-dev libonnx-dev libonnx-testdata
)

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all ${#PKGS[@]} packages present"
	exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
