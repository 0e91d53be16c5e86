#!/usr/bin/env bash
# Float32 matmul, tensord (default settings, all cores) against numpy (bundled OpenBLAS, 2 threads)
# at each x86-64 level the host runs (bench/cpu_levels.sh: tensord's kernels built for the level,
# TENSORD_CPU_MARCH, against OpenBLAS's kernel of the same instruction set) in one run: median (and best) of 7 after a warm-up (0.25 s at least: bench.h), each shape run by both back to back ROUNDS
# times (default 3; the middle round's figure is kept), then a table with the ratios. Args: shapes as N or MxKxN, t after it for x @ w.T (default 256 512 1024 2048 4096
# 256x784x128 256x784x128t). Needs `make` (BUILD=dir as for make) and bench/setup-peer.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
B="${BUILD:-build}"
ROUNDS="${ROUNDS:-3}"
SHAPES=("$@")
[ ${#SHAPES[@]} -gt 0 ] || SHAPES=(256 512 1024 2048 4096 256x784x128 256x784x128t)
[ -x "$B/bin/bench_matmul" ] || make -s BUILD="$B" "$B/bin/bench_matmul"
[ -x bench/.venv/bin/python ] && bench/.venv/bin/python -c 'import threadpoolctl' 2>/dev/null || bench/setup-peer.sh
. bench/cpu_levels.sh
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores; levels: $LEVELS"
# "median M ms best B ms" -> "M B"
mb() { sed -E 's/.*median ([0-9.]+) ms best ([0-9.]+) ms.*/\1 \2/'; }
# the middle of ROUNDS values (the machine's other load disturbs single rounds)
mid() { sort -g | awk 'NF { v[++n] = $1 } END { print v[int((n + 1) / 2)] }'; }
for L in $LEVELS; do
echo
echo "level $L: $(with_blas_core "$L" bench/.venv/bin/python bench/numpy_matmul.py | head -1)"
rows=""
for s in "${SHAPES[@]}"; do
	om="" ob="" pm="" pb=""
	for ((r = 0; r < ROUNDS; r++)); do
		read -r m b < <(TENSORD_CPU_MARCH="$L" "$B/bin/bench_matmul" "$s" 7 | mb)
		om+="$m"$'\n' ob+="$b"$'\n'
		read -r m b < <(with_blas_core "$L" bench/.venv/bin/python bench/numpy_matmul.py "$s" | tail -1 | mb)
		pm+="$m"$'\n' pb+="$b"$'\n'
	done
	rows+="$s $(mid <<<"$om") $(mid <<<"$ob") $(mid <<<"$pm") $(mid <<<"$pb")"$'\n'
done
printf '%s' "$rows" | awk -v level="$L" 'BEGIN {
		print "| level | shape (MxKxN) | tensord median ms | numpy median ms | tensord / numpy (median) | tensord best ms | numpy best ms | tensord / numpy (best) |"
		print "|---|---|---|---|---|---|---|---|" }
	{ printf "| %s | %s | %.3f | %.3f | **%.2fx** | %.3f | %.3f | %.2fx |\n", level, $1, $2, $4, $2 / $4, $3, $5, $3 / $5 }'
done
