#!/usr/bin/env bash
# The OpenCL backend's code generation measured in one run on the first OpenCL device (PoCL here), each figure next
# to its peers: a 1024 matmul (vector types on and off, tinygrad's OpenCL backend, tensord's CPU backend) and
# BatchNorm-style channel sums, few long rows (work-group reductions on and off, tinygrad's OpenCL backend,
# tensord's CPU backend). The variants run interleaved, ROUNDS times (default 3); each line is the median of the
# rounds' medians. Needs `make` and bench/setup-peer.sh; the Fashion-MNIST step on OpenCL is
# `DEV=CL bench/compare_fashion_mnist.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-3}"
make -s build/bin/bench_matmul build/bin/bench_channel_sums build/bin/devices
[ -x bench/.venv/bin/python ] || bench/setup-peer.sh
build/bin/devices CL >/dev/null || { echo "compare_opencl: no OpenCL device: SKIPPED"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run NAME COMMAND...: one round of a variant; its median (ms) is appended to $tmp/NAME
run() {
	local name=$1
	shift
	local line
	line=$("$@" 2>/dev/null | grep -E 'median [0-9.]+ ms' | tail -1)
	echo "$line" >"$tmp/$name.line"
	sed -E 's/.*median ([0-9.]+) ms.*/\1/' <<<"$line" >>"$tmp/$name"
}
med() { sort -g "$tmp/$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
show() { printf "%-22s median %7.2f ms   (last round: %s)\n" "$1:" "$(med "$2")" "$(cat "$tmp/$2.line")"; }
ratio() { awk -v a="$(med "$2")" -v b="$(med "$3")" -v w="$1" 'BEGIN { printf "  %s: %.2fx\n", w, a / b }'; }

for ((r = 1; r <= ROUNDS; r++)); do
	run mm_vec env DEV=CL build/bin/bench_matmul 1024 7
	run mm_sca env DEV=CL TENSORD_CL_VECTOR_WIDTH=1 build/bin/bench_matmul 1024 7
	run mm_tg env DEV=CL bench/.venv/bin/python bench/tinygrad_matmul.py 1024
	run mm_cpu env DEV=CPU build/bin/bench_matmul 1024 7
	run cs_grp env DEV=CL build/bin/bench_channel_sums 32 7
	run cs_one env DEV=CL TENSORD_CL_REDUCE_GROUPS=0 build/bin/bench_channel_sums 32 7
	run cs_tg env DEV=CL bench/.venv/bin/python bench/tinygrad_channel_sums.py 32 7
	run cs_cpu env DEV=CPU build/bin/bench_channel_sums 32 7
done
echo "== matmul 1024, $ROUNDS rounds"
show "CL, vector types" mm_vec
show "CL, scalars only" mm_sca
show "tinygrad CL" mm_tg
show "tensord CPU backend" mm_cpu
ratio "scalars / vector types" mm_sca mm_vec
ratio "tinygrad CL / tensord CL" mm_tg mm_vec
echo "== channel sums 512x32x20x20, $ROUNDS rounds"
show "CL, work-groups" cs_grp
show "CL, one item per row" cs_one
show "tinygrad CL" cs_tg
show "tensord CPU backend" cs_cpu
ratio "one item per row / work-groups" cs_one cs_grp
ratio "tinygrad CL / tensord CL" cs_tg cs_grp
