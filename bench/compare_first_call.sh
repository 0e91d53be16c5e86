#!/usr/bin/env bash
# Time to first result in a new process, with an empty and with a warm kernel disk cache, for
# the MLP 784-128-10 and the Fashion-MNIST net: tensord and tinygrad (CPU) in one run. Prints
# "weights ready" and "first result", both measured from just before the process starts
# (median of RUNS warm runs; the empty-cache run is a single cold start each time).
# Needs `make` and bench/setup-peer.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-5}"
[ -x build/bin/bench_first_call ] || make -s build/bin/bench_first_call
[ -x bench/.venv/bin/python ] || bench/setup-peer.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run NAME CMD...: one timed process; prints "ready_ms first_ms"
run() {
	local t0 out
	t0=$(date +%s%N)
	out=$("$@")
	awk -v t0="$t0" '{ for (i = 1; i < NF; i++) { if ($i == "ready_ns") r = $(i+1); if ($i == "first_ns") f = $(i+1) } }
		END { printf "%.1f %.1f\n", (r - t0) / 1e6, (f - t0) / 1e6 }' <<<"$out"
}

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

for model in mlp fmnist; do
	for who in tensord tinygrad; do
		if [ "$who" = tensord ]; then
			cmd=(env TENSORD_CACHE_DIR="$tmp/tsd-$model" build/bin/bench_first_call "$model")
		else
			cmd=(env CACHEDB="$tmp/tg-$model.db" bench/.venv/bin/python bench/tinygrad_first_call.py "$model")
		fi
		cold=$(run "${cmd[@]}")
		: >"$tmp/warm"
		for _ in $(seq "$RUNS"); do run "${cmd[@]}" >>"$tmp/warm"; done
		wr=$(awk '{ print $1 }' "$tmp/warm" | median)
		wf=$(awk '{ print $2 }' "$tmp/warm" | median)
		printf "%-8s %-6s empty cache: weights ready %7.1f ms, first result %7.1f ms | warm cache: weights ready %7.1f ms, first result %7.1f ms\n" \
			"$who" "$model" $cold "$wr" "$wf"
	done
done
