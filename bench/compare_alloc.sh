#!/usr/bin/env bash
# Runs bench_alloc_triad (c = a + 3*b, 2^24 float32, a fresh output each call) and a STREAM
# triad peer (OpenMP, 2 threads) in one run, interleaved over ROUNDS rounds (the machine is
# shared and noisy), and prints every line plus the ratio of the best rounds. Usage: [iters] [BUILD] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
ITERS="${1:-20}"
BUILD="${2:-build}"
ROUNDS="${3:-3}"
make -s BUILD="$BUILD" "$BUILD/bin/bench_alloc_triad"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/triad.c" <<'C'
/* STREAM triad peer: a[i] = b[i] + 3*c[i] over 2^24 float32, arrays first touched in parallel. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#define N (1L << 24)
static int cmp(const void *x, const void *y) { double a = *(const double *)x, b = *(const double *)y; return a < b ? -1 : a > b; }
int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 20;
	float *a = aligned_alloc(64, N * 4), *b = aligned_alloc(64, N * 4), *c = aligned_alloc(64, N * 4);
	double *t = calloc(iters, sizeof(double));
#pragma omp parallel for
	for (long i = 0; i < N; i++)
		a[i] = 0, b[i] = (float)(i & 1023), c[i] = 1.0f;
	for (int r = -2; r < iters; r++) {
		double t0 = omp_get_wtime();
#pragma omp parallel for
		for (long i = 0; i < N; i++)
			a[i] = b[i] + 3.0f * c[i];
		double ms = (omp_get_wtime() - t0) * 1e3;
		if (r >= 0)
			t[r] = ms;
	}
	qsort(t, iters, sizeof(double), cmp);
	double gb = 3.0 * 4.0 * N / 1e9;
	printf("STREAM triad peer (OpenMP, %d threads): best %.2f ms %.2f GB/s, median %.2f ms %.2f GB/s (check %g)\n",
	       omp_get_max_threads(), t[0], gb / t[0] * 1e3, t[iters / 2], gb / t[iters / 2] * 1e3, (double)a[N - 1]);
	return 0;
}
C
gcc -O3 -march=native -fopenmp "$tmp/triad.c" -o "$tmp/triad"
ours="" peer=""
for r in $(seq "$ROUNDS"); do
	ours+="$("$BUILD/bin/bench_alloc_triad" "$ITERS")"$'\n'
	peer+="$(OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}" "$tmp/triad" "$ITERS")"$'\n'
done
printf '%s' "$ours" "$peer"
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
# the best round of each: highest best-call and highest median GB/s
gbs() { sed -E "s/.*$1 [0-9.]+ ms ([0-9.]+) GB\/s.*/\1/" | sort -g | tail -1; }
on=$(grep 'cache on' <<<"$ours")
off=$(grep 'cache off' <<<"$ours")
awk -v ob="$(gbs best <<<"$on")" -v om="$(gbs median <<<"$on")" -v pb="$(gbs best <<<"$peer")" \
	-v pm="$(gbs median <<<"$peer")" -v fb="$(gbs best <<<"$off")" -v fm="$(gbs median <<<"$off")" \
	'BEGIN { printf "best of %d rounds, GB/s: fresh output cache on %.2f (median %.2f), cache off %.2f (median %.2f), triad %.2f (median %.2f)\n", '"$ROUNDS"', ob, om, fb, fm, pb, pm
		printf "fresh output / triad: cache on best %.0f%%, median %.0f%%; cache off best %.0f%%, median %.0f%% (goal >= 80%% with the cache)\n", 100 * ob / pb, 100 * om / pm, 100 * fb / pb, 100 * fm / pm }'
