/* alloc_triad.c: c = a + 3*b over 2^24 float32 with a fresh output tensor every call (a new
 * expression realized each iteration, so each call needs a new 64 MiB buffer), in GB/s. */
#include <stdint.h>
#include <string.h>

#include "bench.h"

#define N ((int64_t)1 << 24)

/* Time `iters` fresh-output realizes in ctx; t gets each call's ms (sorted), kns the kernel ns. */
static int run(eng_ctx *ctx, int iters, double *t, uint64_t *kns)
{
	int64_t shape[1] = {N};
	eng_tensor *a = eng_rand(ctx, ENG_F32, 1, shape), *b = eng_rand(ctx, ENG_F32, 1, shape);
	eng_tensor *ab[2] = {a, b};
	if (eng_realize(ab, 2)) {
		fprintf(stderr, "alloc_triad: %s\n", eng_errmsg(ctx));
		return 1;
	}
	eng_stats s0, s1;
	for (int r = -2; r < iters; r++) { /* two warm-ups: compile, then the cache's first block */
		if (r == 0)
			eng_get_stats(ctx, &s0);
		eng_scope_begin(ctx);
		eng_tensor *c = eng_add(a, eng_mul_s(b, 3.0)); /* a new node: the last one was freed */
		double t0 = bench_now_ms();
		eng_status st = c ? eng_realize(&c, 1) : ENG_EINVAL;
		double ms = bench_now_ms() - t0;
		eng_scope_end(ctx); /* frees c: its buffer goes back to the allocator */
		if (st) {
			fprintf(stderr, "alloc_triad: %s\n", eng_errmsg(ctx));
			return 1;
		}
		if (r >= 0)
			t[r] = ms;
	}
	eng_get_stats(ctx, &s1);
	if (s1.kernels - s0.kernels != (uint64_t)iters) {
		fprintf(stderr, "alloc_triad: %llu kernels for %d calls (a value was reused, not recomputed)\n",
			(unsigned long long)(s1.kernels - s0.kernels), iters);
		return 1;
	}
	*kns = s1.kernel_ns - s0.kernel_ns;
	bench_sort(t, iters);
	return 0;
}

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 20;
	if (iters < 1 || iters > 10000)
		iters = 20;
	double *t = calloc(iters, sizeof(double));
	const double gb = 3.0 * 4.0 * (double)N / 1e9;
	for (int cached = 1; cached >= 0 && t; cached--) {
		eng_ctx_opts o;
		eng_ctx_opts_default(&o);
		o.no_alloc_cache = !cached;
		char err[256];
		eng_ctx *ctx = eng_ctx_create(&o, err, sizeof(err));
		uint64_t kns = 0;
		if (!ctx) {
			fprintf(stderr, "alloc_triad: %s\n", err);
			return 1;
		}
		if (run(ctx, iters, t, &kns)) {
			eng_ctx_destroy(ctx);
			return 1;
		}
		eng_stats s;
		eng_get_stats(ctx, &s);
		printf("tensord fresh output, allocator cache %s: best %.2f ms %.2f GB/s, median %.2f ms %.2f GB/s "
		       "(kernel alone %.2f GB/s; %llu of %llu allocations reused)\n",
		       cached ? "on " : "off", t[0], gb / t[0] * 1e3, t[iters / 2], gb / t[iters / 2] * 1e3,
		       gb * iters / (kns / 1e9), (unsigned long long)s.alloc_hits, (unsigned long long)s.allocs);
		eng_ctx_destroy(ctx);
	}
	free(t);
	return 0;
}
