/* matmul: times a float32 matmul through the engine, N x N (default N = 1024) or M x K @ K x N
 * given as MxKxN (a trailing t: the right side stored N x K and transposed, as a linear layer's
 * x @ w.T), median and best of several runs after a warm-up (bench/compare_*.sh). */
#include <stdbool.h>

#include "bench.h"

typedef struct mm_shape {
	int64_t m, k, n;
	bool wt; /* right side stored transposed */
} mm_shape;

static eng_tensor *build(eng_ctx *ctx, void *arg)
{
	const mm_shape *s = arg;
	int64_t sa[2] = {s->m, s->k}, sb[2] = {s->k, s->n}, sbt[2] = {s->n, s->k};
	eng_tensor *a = eng_contiguous(eng_rand(ctx, ENG_F32, 2, sa));
	eng_tensor *b = eng_contiguous(eng_rand(ctx, ENG_F32, 2, s->wt ? sbt : sb));
	eng_tensor *ab[2] = {a, b};
	return eng_realize(ab, 2) ? NULL : eng_matmul(a, s->wt ? eng_transpose(b, 0, 1) : b);
}

int main(int argc, char **argv)
{
	const char *arg = argc > 1 ? argv[1] : "1024";
	mm_shape s;
	long long m = 0, k = 0, n = 0;
	char tr = 0;
	int got = sscanf(arg, "%lldx%lldx%lld%c", &m, &k, &n, &tr);
	s = got >= 3 ? (mm_shape){m, k, n, tr == 't'} : (mm_shape){m, m, m, false};
	int runs = argc > 2 ? atoi(argv[2]) : 7;
	char err[256];
	if ((got != 1 && got != 3 && !(got == 4 && tr == 't')) || s.m < 1 || s.k < 1 || s.n < 1 || s.m > 8192 || s.k > 8192 || s.n > 8192 ||
	    runs < 1 || runs > 1000) {
		fprintf(stderr, "usage: bench_matmul [N | MxKxN] [runs]\n");
		return 2;
	}
	eng_ctx *ctx = eng_ctx_create(NULL, err, sizeof(err));
	if (!ctx) {
		fprintf(stderr, "bench_matmul: %s\n", err);
		return 1;
	}
	double *t = calloc(runs, sizeof(double));
	if (!t || bench_realize_runs(ctx, "bench_matmul", build, &s, (size_t)(s.m * s.n) * sizeof(float), runs, t))
		return 1;
	printf("tensord matmul %s: median %.3f ms best %.3f ms (%.1f GFLOPS)\n", arg, t[runs / 2], t[0],
	       2.0 * s.m * s.k * s.n / (t[0] * 1e6));
	free(t);
	eng_ctx_destroy(ctx);
	return 0;
}
