#!/usr/bin/env bash
# Float32 matmul, tensord (default settings, all cores) against numpy (bundled OpenBLAS, 2 threads)
# in one run: median (and best) of 7 after a warm-up, each shape run by both back to back, then a
# table with the ratios. Args: shapes as N or MxKxN, t after it for x @ w.T (default 256 512 1024 2048
# 256x784x128 256x784x128t). Needs `make` (BUILD=dir as for make) and bench/setup-peer.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
B="${BUILD:-build}"
SHAPES=("$@")
[ ${#SHAPES[@]} -gt 0 ] || SHAPES=(256 512 1024 2048 256x784x128 256x784x128t)
[ -x "$B/bin/bench_matmul" ] || make -s BUILD="$B" "$B/bin/bench_matmul"
[ -x bench/.venv/bin/python ] && bench/.venv/bin/python -c 'import threadpoolctl' 2>/dev/null || bench/setup-peer.sh
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores"
bench/.venv/bin/python bench/numpy_matmul.py | head -1
# "median M ms best B ms" -> "M B"
mb() { sed -E 's/.*median ([0-9.]+) ms best ([0-9.]+) ms.*/\1 \2/'; }
rows=""
for s in "${SHAPES[@]}"; do
	o=$("$B/bin/bench_matmul" "$s" 7 | mb)
	p=$(bench/.venv/bin/python bench/numpy_matmul.py "$s" | tail -1 | mb)
	rows+="$s $o $p"$'\n'
done
printf '%s' "$rows" | awk 'BEGIN {
		print "| shape (MxKxN) | tensord median ms | numpy median ms | tensord / numpy (median) | tensord best ms | numpy best ms | tensord / numpy (best) |"
		print "|---|---|---|---|---|---|---|" }
	{ printf "| %s | %.3f | %.3f | **%.2fx** | %.3f | %.3f | %.2fx |\n", $1, $2, $4, $2 / $4, $3, $5, $3 / $5 }'
