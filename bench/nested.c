/* nested.c: nested reductions (one reduction's elementwise function reduced again over another
 * axis) fused into one kernel against the same chains with the inner result stored first
 * (eng_contiguous), median ms of each. Usage: bench_nested [runs] [size]. */
#include <string.h>

#include "bench.h"

typedef struct chain {
	const char *name;
	int kind; /* 0: x.sum(2).sum(1), 1: x.max(2).sum(1), 2: relu(a @ b).sum(1) */
	bool stored;
	int64_t n;
	uint64_t before; /* kernels launched when the last run's inputs were ready */
} chain;

/* The chain on fresh realized inputs; its inner result made contiguous (stored) if asked. */
static eng_tensor *build(eng_ctx *ctx, void *arg)
{
	chain *c = arg;
	int ax1 = 1, ax2 = 2;
	int64_t s3[3] = {64, c->n, c->n}, s2[2] = {c->n, c->n};
	eng_tensor *x, *in[2];
	if (c->kind >= 2) {
		in[0] = eng_rand(ctx, ENG_F32, 2, s2);
		in[1] = eng_rand(ctx, ENG_F32, 2, s2);
	} else {
		in[0] = in[1] = eng_rand(ctx, ENG_F32, 3, s3);
	}
	eng_stats st;
	if (eng_realize(in, 2))
		return NULL;
	eng_get_stats(ctx, &st);
	c->before = st.kernels;
	if (c->kind >= 2)
		x = eng_relu(eng_matmul(in[0], c->kind == 3 ? eng_transpose(in[1], 0, 1) : in[1]));
	else
		x = c->kind == 0 ? eng_sum(in[0], &ax2, 1, false) : eng_max(in[0], &ax2, 1, false);
	if (c->stored)
		x = eng_contiguous(x);
	return eng_sum(x, &ax1, 1, false);
}

int main(int argc, char **argv)
{
	int runs = argc > 1 ? atoi(argv[1]) : 10;
	int64_t n = argc > 2 ? atoll(argv[2]) : 512;
	if (runs < 1 || runs > 1000)
		runs = 10;
	if (n < 1 || n > 4096)
		n = 512;
	eng_ctx_opts o;
	char err[256];
	eng_ctx_opts_default(&o);
	eng_ctx *ctx = eng_ctx_create(&o, err, sizeof(err));
	double *t = calloc(runs, sizeof(double));
	if (!ctx || !t) {
		fprintf(stderr, "nested: %s\n", ctx ? "out of memory" : err);
		return 1;
	}
	static const char *names[4] = {"x.sum(2).sum(1)", "x.max(2).sum(1)", "relu(a @ b).sum(1)",
				       "relu(a @ b.T).sum(1)"};
	for (int k = 0; k < 4; k++) {
		double med[2];
		uint64_t kernels[2];
		for (int s = 0; s < 2; s++) {
			chain c = {.name = names[k], .kind = k, .stored = s, .n = n};
			eng_stats s1;
			int64_t outn = k >= 2 ? n : 64;
			if (bench_realize_runs(ctx, names[k], build, &c, (size_t)outn * sizeof(float), runs, t)) {
				eng_ctx_destroy(ctx);
				free(t);
				return 1;
			}
			eng_get_stats(ctx, &s1);
			med[s] = t[runs / 2];
			kernels[s] = s1.kernels - c.before;
		}
		printf("%-20s n=%lld: fused %.3f ms (%llu kernels), stored %.3f ms (%llu kernels): %.2fx\n", names[k],
		       (long long)n, med[0], (unsigned long long)kernels[0], med[1], (unsigned long long)kernels[1],
		       med[1] / med[0]);
	}
	eng_ctx_destroy(ctx);
	free(t);
	return 0;
}
