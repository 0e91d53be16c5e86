#!/usr/bin/env bash
# Float32 matmul with the default heuristics against the kernel search (TENSORD_BEAM=$BEAM, default
# 2, budget $TENSORD_BEAM_BUDGET s per kernel, default 5): one run searches into a fresh cache
# directory (its wall time is the search's cost, paid once per machine), then each shape runs
# ROUNDS times (default 3) both ways back to back, median and best of 7 after a warm-up; the
# middle round's figure is kept; then PAIRS (default 15) pairs of calls in one process, one
# each way in alternating order (bench_matmul_beam), whose per-pair ratio cancels the host's speed
# changes, of the realize's time and of its kernels' alone. Args: shapes as N or MxKxN (default
# 256 512 1024 256x784x128).
# DEV=CL runs it on OpenCL. Needs `make` (BUILD=dir as for make).
set -euo pipefail
cd "$(dirname "$0")/.."
B="${BUILD:-build}"
ROUNDS="${ROUNDS:-3}"
PAIRS="${PAIRS:-15}"
BEAM="${BEAM:-2}"
SHAPES=("$@")
[ ${#SHAPES[@]} -gt 0 ] || SHAPES=(256 512 1024 256x784x128)
[ -x "$B/bin/bench_matmul" ] && [ -x "$B/bin/bench_matmul_beam" ] ||
	make -s BUILD="$B" "$B/bin/bench_matmul" "$B/bin/bench_matmul_beam"
CACHE="$(mktemp -d /tmp/tensord-beam-bench-XXXXXX)"
trap 'rm -rf "$CACHE"' EXIT
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores; device ${DEV:-CPU}; TENSORD_BEAM=$BEAM"
mb() { sed -E 's/.*median ([0-9.]+) ms best ([0-9.]+) ms.*/\1 \2/'; }
mid() { grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
rows=""
for s in "${SHAPES[@]}"; do
	t0=$(date +%s.%N)
	# the search's own line (DEBUG=2): "beam: NAME: N variants timed in T ms, CHOICE: H ms -> S ms (R)"
	line=$(TENSORD_CACHE_DIR="$CACHE" TENSORD_BEAM="$BEAM" DEBUG=2 "$B/bin/bench_matmul" "$s" 1 2>&1 >/dev/null |
		grep -m1 'variants timed' || true)
	search=$(echo "$(date +%s.%N) - $t0" | bc)
	chosen=$(sed -E 's/.* ms, (.*): ([0-9.]+) ms -> ([0-9.]+) ms.*/\1;\2;\3/' <<<"$line" | tr ' ' '_')
	[ -n "$chosen" ] || chosen="(no search);0;0"
	hm="" hb="" sm="" sb=""
	for ((r = 0; r < ROUNDS; r++)); do
		read -r m b < <(TENSORD_CACHE_DIR="$CACHE" TENSORD_BEAM=0 "$B/bin/bench_matmul" "$s" 7 | mb)
		hm+="$m"$'\n' hb+="$b"$'\n'
		read -r m b < <(TENSORD_CACHE_DIR="$CACHE" TENSORD_BEAM="$BEAM" "$B/bin/bench_matmul" "$s" 7 | mb)
		sm+="$m"$'\n' sb+="$b"$'\n'
	done
	paired=$(TENSORD_CACHE_DIR="$CACHE" TENSORD_BEAM="$BEAM" "$B/bin/bench_matmul_beam" "$s" "$PAIRS" |
		sed -E 's/.*per pair: median ([0-9.]+)x \(quartiles ([0-9.]+)\.\.([0-9.]+)\); kernel time only: median ([0-9.]+)x \(quartiles ([0-9.]+)\.\.([0-9.]+)\).*/\1;\2;\3;\4;\5;\6/')
	rows+="$s $(mid <<<"$hm") $(mid <<<"$hb") $(mid <<<"$sm") $(mid <<<"$sb") $search $chosen $paired"$'\n'
done
printf '%s' "$rows" | awk 'BEGIN {
		print "| shape (MxKxN) | heuristics median ms | searched median ms | heuristics / searched (median) | heuristics best ms | searched best ms | heuristics / searched, paired calls (quartiles) | the same, kernel time only | first run with the search (s) | choice (the search'"'"'s own kernel times, ms) |"
		print "|---|---|---|---|---|---|---|---|---|---|" }
	{ split($7, c, ";"); gsub("_", " ", c[1]); split($8, p, ";")
	  printf "| %s | %.3f | %.3f | **%.2fx** | %.3f | %.3f | **%.3fx** (%.3f-%.3f) | %.3fx (%.3f-%.3f) | %.1f | %s (%.3f -> %.3f) |\n", $1, $2, $4, $2 / $4, $3, $5, p[1], p[2], p[3], p[4], p[5], p[6], $6, c[1], c[2], c[3] }'
