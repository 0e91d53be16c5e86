/* matmul: times an N x N float32 matmul through the engine (default N = 1024), median and
 * best of several runs after a warm-up, for comparison with bench/tinygrad_matmul.py. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../engine/engine.h"

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int64_t n = argc > 1 ? atoll(argv[1]) : 1024;
	int runs = argc > 2 ? atoi(argv[2]) : 7;
	char err[256];
	if (n < 1 || n > 8192 || runs < 1 || runs > 1000) {
		fprintf(stderr, "usage: bench_matmul [N] [runs]\n");
		return 2;
	}
	eng_ctx *ctx = eng_ctx_create(NULL, err, sizeof(err));
	if (!ctx) {
		fprintf(stderr, "bench_matmul: %s\n", err);
		return 1;
	}
	int64_t shape[2] = {n, n};
	double *t = calloc(runs, sizeof(double));
	float *out = malloc((size_t)(n * n) * sizeof(float));
	for (int r = -1; r < runs; r++) {
		eng_scope_begin(ctx);
		/* fresh buffers each run: equal nodes would hit the graph's realized-value cache */
		eng_tensor *a = eng_contiguous(eng_rand(ctx, ENG_F32, 2, shape));
		eng_tensor *b = eng_contiguous(eng_rand(ctx, ENG_F32, 2, shape));
		eng_tensor *ab[2] = {a, b};
		eng_realize(ab, 2);
		eng_tensor *c = eng_matmul(a, b);
		double t0 = now_ms();
		eng_status s = eng_realize(&c, 1);
		double ms = now_ms() - t0;
		if (s || eng_tensor_read(c, out, (size_t)(n * n) * sizeof(float))) {
			fprintf(stderr, "bench_matmul: %s\n", eng_errmsg(ctx));
			return 1;
		}
		if (r >= 0)
			t[r] = ms;
		eng_scope_end(ctx);
	}
	qsort(t, runs, sizeof(double), cmp);
	printf("tensord matmul %lld: median %.1f ms best %.1f ms (%.1f GFLOPS)\n", (long long)n, t[runs / 2], t[0],
	       2.0 * n * n * n / (t[0] * 1e6));
	free(t);
	free(out);
	eng_ctx_destroy(ctx);
	return 0;
}
