/* bench.h: what the C benchmarks share: a monotonic clock, and timing one realize over several
 * runs (after a warm-up), each on fresh inputs, sorted so that median and best can be read. */
#ifndef TSD_BENCH_H
#define TSD_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <tensord/engine.h>

static inline double bench_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Sort n times ascending: t[0] is the best, t[n / 2] the median. */
static inline void bench_sort(double *t, int n) { qsort(t, n, sizeof(double), bench_cmp_double); }

/* Makes the tensor to time: inputs created and realized first (fresh each run, as equal nodes
 * would hit the graph's realized-value cache), the result left lazy. */
typedef eng_tensor *(*bench_build_fn)(eng_ctx *ctx, void *arg);

/* One eng_realize of build's result in its own scope: *ms its wall time, *kernel_ms (if not NULL)
 * the time inside its kernel launches (eng_stats.kernel_ns); the result read into out (outbytes)
 * after the clock stops. Returns 0, or 1 after printing the engine's error prefixed with `name`. */
static inline int bench_realize_once(eng_ctx *ctx, const char *name, bench_build_fn build, void *arg, void *out,
				     size_t outbytes, double *ms, double *kernel_ms)
{
	eng_stats a, b;
	eng_scope_begin(ctx);
	eng_tensor *res = build(ctx, arg);
	eng_get_stats(ctx, &a);
	double t0 = bench_now_ms();
	eng_status st = res ? eng_realize(&res, 1) : ENG_EINVAL;
	*ms = bench_now_ms() - t0;
	eng_get_stats(ctx, &b);
	if (kernel_ms)
		*kernel_ms = (double)(b.kernel_ns - a.kernel_ns) / 1e6;
	if (st || eng_tensor_read(res, out, outbytes)) {
		fprintf(stderr, "%s: %s\n", name, eng_errmsg(ctx));
		eng_scope_end(ctx);
		return 1;
	}
	eng_scope_end(ctx);
	return 0;
}

/* The warm-up before timed runs: one run at least, and more until this long has passed (first
 * touches of memory, the pool's threads waking, the caches), on both sides of a comparison: the
 * peer scripts warm up the same way (numpy_matmul.py, numpy_sum.py). */
#define BENCH_WARMUP_MS 250.0

/* Time eng_realize of build's result runs times after the warm-up, each in its own scope,
 * reading the result back (outbytes) after the clock stops; t[0..runs) gets the times sorted.
 * Returns 0, or 1 after printing the engine's error prefixed with `name`. */
static inline int bench_realize_runs(eng_ctx *ctx, const char *name, bench_build_fn build, void *arg,
				     size_t outbytes, int runs, double *t)
{
	void *out = malloc(outbytes ? outbytes : 1);
	double ms;
	if (!out) {
		fprintf(stderr, "%s: out of memory\n", name);
		return 1;
	}
	double t0 = bench_now_ms();
	do {
		if (bench_realize_once(ctx, name, build, arg, out, outbytes, &ms, NULL)) {
			free(out);
			return 1;
		}
	} while (bench_now_ms() - t0 < BENCH_WARMUP_MS);
	for (int r = 0; r < runs; r++)
		if (bench_realize_once(ctx, name, build, arg, out, outbytes, &t[r], NULL)) {
			free(out);
			return 1;
		}
	free(out);
	bench_sort(t, runs);
	return 0;
}

#endif
