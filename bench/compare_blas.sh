#!/usr/bin/env bash
# Float32 matmul, tensord (default settings, all cores) against numpy's bundled OpenBLAS (2
# threads) called directly, call by call in one process (bench_matmul_blas): the median over PAIRS
# pairs (default 15) of the ratio of the two times in a pair, so the host's speed changes cancel;
# at each x86-64 level the host runs (bench/cpu_levels.sh: TENSORD_CPU_MARCH against OpenBLAS's
# kernel of the same instruction set). Args: shapes, N or MxKxN[t] (default 1024 2048 4096; below
# ~1024 OpenBLAS's thread wake-ups, see the bench, would count). Needs `make` (BUILD=dir as for make) and bench/setup-peer.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
B="${BUILD:-build}"
PAIRS="${PAIRS:-15}"
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(1024 2048 4096)
[ -x "$B/bin/bench_matmul_blas" ] || make -s BUILD="$B" "$B/bin/bench_matmul_blas"
[ -x bench/.venv/bin/python ] && bench/.venv/bin/python -c 'import threadpoolctl' 2>/dev/null || bench/setup-peer.sh
LIB=$(ls bench/.venv/lib/python3*/site-packages/numpy.libs/libscipy_openblas*.so | head -1)
. bench/cpu_levels.sh
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores; levels: $LEVELS"
for L in $LEVELS; do
	echo
	echo "level $L: $(with_blas_core "$L" bench/.venv/bin/python bench/numpy_matmul.py | head -1)"
	echo "| level | shape | pairs | tensord median ms | OpenBLAS median ms | tensord / OpenBLAS, median of pairs | quartiles |"
	echo "|---|---|---|---|---|---|---|"
	for n in "${SIZES[@]}"; do
		TENSORD_CPU_MARCH="$L" OPENBLAS_THREAD_TIMEOUT=4 with_blas_core "$L" "$B/bin/bench_matmul_blas" "$LIB" "$n" "$PAIRS" 2 |
			sed -E "s/matmul ([0-9xt]+), ([0-9]+) pairs: tensord median ([0-9.]+) ms, OpenBLAS median ([0-9.]+) ms; .*median ([0-9.]+)x \\(quartiles ([0-9.]+)\\.\\.([0-9.]+)\\)/| $L | \\1 | \\2 | \\3 | \\4 | **\\5x** | \\6-\\7 |/"
	done
done
