#!/usr/bin/env bash
# The OpenCL backend's code generation measured in one run on the first OpenCL device (PoCL here), each figure next
# to its peers: a 1024 matmul (vector types on and off, tinygrad's OpenCL backend, tensord's CPU backend) and
# BatchNorm-style channel sums, few long rows (work-group reductions on and off, tinygrad's OpenCL backend,
# tensord's CPU backend). Needs `make` and bench/setup-peer.sh; the Fashion-MNIST step on OpenCL is
# `DEV=CL bench/compare_fashion_mnist.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s build/bin/bench_matmul build/bin/bench_channel_sums build/bin/devices
[ -x bench/.venv/bin/python ] || bench/setup-peer.sh
build/bin/devices CL >/dev/null || { echo "compare_opencl: no OpenCL device: SKIPPED"; exit 0; }
med() { sed -E 's/.*median ([0-9.]+) ms.*/\1/' <<<"$1"; }
ratio() { awk -v a="$(med "$2")" -v b="$(med "$3")" -v w="$1" 'BEGIN { printf "  %s: %.2fx\n", w, a / b }'; }

echo "== matmul 1024 (median of 7; tinygrad of 5)"
vec=$(DEV=CL build/bin/bench_matmul 1024 7)
sca=$(DEV=CL TENSORD_CL_VECTOR_WIDTH=1 build/bin/bench_matmul 1024 7)
tg=$(DEV=CL bench/.venv/bin/python bench/tinygrad_matmul.py 1024)
cpu=$(DEV=CPU build/bin/bench_matmul 1024 7)
echo "CL, vector types:   $vec"
echo "CL, scalars only:   $sca"
echo "tinygrad CL:        $tg"
echo "tensord CPU:        $cpu"
ratio "scalars / vectors" "$sca" "$vec"
ratio "tinygrad CL / tensord CL" "$tg" "$vec"

echo "== channel sums 512x32x20x20 (median of 7)"
grp=$(DEV=CL build/bin/bench_channel_sums 32 7)
one=$(DEV=CL TENSORD_CL_REDUCE_GROUPS=0 build/bin/bench_channel_sums 32 7)
tg=$(DEV=CL bench/.venv/bin/python bench/tinygrad_channel_sums.py 32 7)
cpu=$(DEV=CPU build/bin/bench_channel_sums 32 7)
echo "CL, work-groups:    $grp"
echo "CL, one item/row:   $one"
echo "tinygrad CL:        $tg"
echo "tensord CPU:        $cpu"
ratio "one item per row / work-groups" "$one" "$grp"
ratio "tinygrad CL / tensord CL" "$tg" "$grp"
