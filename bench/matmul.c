/* matmul: times a float32 matmul through the engine, N x N (default N = 1024) or M x K @ K x N
 * given as MxKxN (a trailing t: the right side stored N x K and transposed, as a linear layer's
 * x @ w.T), median and best of several runs after a warm-up (bench/compare_*.sh). */
#include "bench.h"
#include "matmul_shape.h"

int main(int argc, char **argv)
{
	const char *arg = argc > 1 ? argv[1] : "1024";
	mm_shape s;
	int runs = argc > 2 ? atoi(argv[2]) : 7;
	char err[256];
	if (!mm_shape_parse(arg, &s) || runs < 1 || runs > 1000) {
		fprintf(stderr, "usage: bench_matmul [N | MxKxN] [runs]\n");
		return 2;
	}
	eng_ctx *ctx = eng_ctx_create(NULL, err, sizeof(err));
	if (!ctx) {
		fprintf(stderr, "bench_matmul: %s\n", err);
		return 1;
	}
	double *t = calloc(runs, sizeof(double));
	if (!t || bench_realize_runs(ctx, "bench_matmul", mm_shape_build, &s, (size_t)(s.m * s.n) * sizeof(float), runs, t))
		return 1;
	printf("tensord matmul %s: median %.3f ms best %.3f ms (%.1f GFLOPS)\n", arg, t[runs / 2], t[0],
	       2.0 * s.m * s.k * s.n / (t[0] * 1e6));
	free(t);
	eng_ctx_destroy(ctx);
	return 0;
}
