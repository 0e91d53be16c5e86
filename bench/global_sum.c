/* global_sum: times the sum to a scalar of 2^k float32 values (default 2^24, uniform in [0, 1))
 * on the CPU with one thread and with all of them (or on another device), median and best of
 * several runs, and prints each result's error against a double-precision sum. Args: log2 of
 * the size (24), runs (9), device (CPU; e.g. CL: that device with its default settings), and
 * `square` for a 2^(k/2) x 2^(k/2) input (a 2-D sum) instead of a flat one. BENCH_DEBUG=n in the
 * environment sets the DEBUG level. */
#include <math.h>
#include <string.h>

#include "bench.h"

typedef struct job {
	eng_tensor *x; /* the realized input, shared by every run */
} job;

/* The input's shape: flat, or square-ish with `square` (2^(k/2) rows). */
static int shape_of(int64_t n, bool square, int64_t *shape)
{
	if (!square) {
		shape[0] = n;
		return 1;
	}
	int64_t r = 1;
	while (r * r * 4 <= n)
		r *= 2;
	shape[0] = r;
	shape[1] = n / r;
	return 2;
}

static eng_tensor *build(eng_ctx *ctx, void *arg)
{
	(void)ctx;
	return eng_sum(((job *)arg)->x, NULL, 0, false);
}

/* Time the sum on dev (the CPU: with `threads` threads, 0: all cores); prints one line. */
static int run(const float *v, int64_t n, bool square, double ref, const char *dev, int threads, int runs)
{
	char opts[64], err[256], what[96];
	snprintf(opts, sizeof(opts), "CPU.threads=%d", threads);
	snprintf(what, sizeof(what), "%s", dev);
	if (!strcmp(dev, "CPU"))
		snprintf(what, sizeof(what), "CPU, %s thread%s", threads ? "1" : "all", threads == 1 ? "" : "s");
	eng_ctx_opts o;
	eng_ctx_opts_default(&o);
	o.device = dev;
	o.backend_opts = strcmp(dev, "CPU") ? NULL : opts;
	o.debug = getenv("BENCH_DEBUG") ? atoi(getenv("BENCH_DEBUG")) : 0;
	eng_ctx *ctx = eng_ctx_create(&o, err, sizeof(err));
	if (!ctx) {
		fprintf(stderr, "bench_global_sum: %s\n", err);
		return 1;
	}
	int64_t shape[2];
	int nd = shape_of(n, square, shape);
	job j = {.x = eng_from_data(ctx, ENG_F32, nd, shape, v)};
	double *t = calloc((size_t)runs, sizeof(double));
	float s = 0;
	if (!j.x || !t || bench_realize_runs(ctx, "bench_global_sum", build, &j, sizeof(float), runs, t) ||
	    eng_tensor_read(eng_sum(j.x, NULL, 0, false), &s, sizeof(s))) {
		free(t);
		eng_ctx_destroy(ctx);
		return 1;
	}
	printf("tensord sum of %lld float32 (%s), %s: median %.3f ms best %.3f ms (%.1f GB/s) rel error %.2g\n",
	       (long long)n, nd == 1 ? "flat" : "square", what, t[runs / 2], t[0],
	       (double)n * 4 / 1e6 / t[0], fabs((double)s - ref) / ref);
	free(t);
	eng_ctx_destroy(ctx);
	return 0;
}

int main(int argc, char **argv)
{
	int k = argc > 1 ? atoi(argv[1]) : 24, runs = argc > 2 ? atoi(argv[2]) : 9;
	const char *dev = argc > 3 ? argv[3] : "CPU";
	bool square = argc > 4 && !strcmp(argv[4], "square");
	if (k < 10 || k > 28 || runs < 1 || runs > 1000) {
		fprintf(stderr, "usage: bench_global_sum [log2 size (10..28)] [runs]\n");
		return 2;
	}
	int64_t n = (int64_t)1 << k;
	float *v = malloc((size_t)n * sizeof(float));
	if (!v)
		return 1;
	uint64_t s = 1;
	double ref = 0;
	for (int64_t i = 0; i < n; i++) { /* the same values as bench/numpy_sum.py: (s >> 40) / 2^24 */
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		v[i] = (float)((double)(s >> 40) / 16777216.0);
		ref += v[i];
	}
	int rc = strcmp(dev, "CPU") ? run(v, n, square, ref, dev, 0, runs)
				    : run(v, n, square, ref, dev, 1, runs) || run(v, n, square, ref, dev, 0, runs);
	free(v);
	return rc;
}
