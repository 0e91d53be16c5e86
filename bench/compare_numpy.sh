#!/usr/bin/env bash
# Float32 matmul, tensord (default settings, all cores) against numpy (bundled OpenBLAS, 2 threads)
# in one run: median (and best) of 7 after a warm-up (0.25 s at least: bench.h), each shape run by both back to back ROUNDS
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
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores"
bench/.venv/bin/python bench/numpy_matmul.py | head -1
# "median M ms best B ms" -> "M B"
mb() { sed -E 's/.*median ([0-9.]+) ms best ([0-9.]+) ms.*/\1 \2/'; }
# the middle of ROUNDS values (the machine's other load disturbs single rounds)
mid() { sort -g | awk 'NF { v[++n] = $1 } END { print v[int((n + 1) / 2)] }'; }
rows=""
for s in "${SHAPES[@]}"; do
	om="" ob="" pm="" pb=""
	for ((r = 0; r < ROUNDS; r++)); do
		read -r m b < <("$B/bin/bench_matmul" "$s" 7 | mb)
		om+="$m"$'\n' ob+="$b"$'\n'
		read -r m b < <(bench/.venv/bin/python bench/numpy_matmul.py "$s" | tail -1 | mb)
		pm+="$m"$'\n' pb+="$b"$'\n'
	done
	rows+="$s $(mid <<<"$om") $(mid <<<"$ob") $(mid <<<"$pm") $(mid <<<"$pb")"$'\n'
done
printf '%s' "$rows" | awk 'BEGIN {
		print "| shape (MxKxN) | tensord median ms | numpy median ms | tensord / numpy (median) | tensord best ms | numpy best ms | tensord / numpy (best) |"
		print "|---|---|---|---|---|---|---|" }
	{ printf "| %s | %.3f | %.3f | **%.2fx** | %.3f | %.3f | %.2fx |\n", $1, $2, $4, $2 / $4, $3, $5, $3 / $5 }'
