/* matmul: times an N x N float32 matmul through the engine (default N = 1024), median and
 * best of several runs after a warm-up, for comparison with bench/tinygrad_matmul.py. */
#include "bench.h"

static eng_tensor *build(eng_ctx *ctx, void *arg)
{
	int64_t n = *(const int64_t *)arg, shape[2] = {n, n};
	eng_tensor *a = eng_contiguous(eng_rand(ctx, ENG_F32, 2, shape));
	eng_tensor *b = eng_contiguous(eng_rand(ctx, ENG_F32, 2, shape));
	eng_tensor *ab[2] = {a, b};
	return eng_realize(ab, 2) ? NULL : eng_matmul(a, b);
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
	double *t = calloc(runs, sizeof(double));
	if (!t || bench_realize_runs(ctx, "bench_matmul", build, &n, (size_t)(n * n) * sizeof(float), runs, t))
		return 1;
	printf("tensord matmul %lld: median %.1f ms best %.1f ms (%.1f GFLOPS)\n", (long long)n, t[runs / 2], t[0],
	       2.0 * n * n * n / (t[0] * 1e6));
	free(t);
	eng_ctx_destroy(ctx);
	return 0;
}
