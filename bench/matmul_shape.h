/* matmul_shape.h: the matmul benchmarks' shape argument (N, or MxKxN with a trailing t for a right
 * side stored N x K and transposed, as a linear layer's x @ w.T) and the matmul they time. */
#ifndef TSD_BENCH_MATMUL_SHAPE_H
#define TSD_BENCH_MATMUL_SHAPE_H

#include <stdbool.h>
#include <stdio.h>

#include <tensord/engine.h>

typedef struct mm_shape {
	int64_t m, k, n;
	bool wt; /* right side stored transposed */
} mm_shape;

/* Parse arg into *s; false if it is no shape of sides 1..8192. */
static inline bool mm_shape_parse(const char *arg, mm_shape *s)
{
	long long m = 0, k = 0, n = 0;
	char tr = 0;
	int got = sscanf(arg, "%lldx%lldx%lld%c", &m, &k, &n, &tr);
	*s = got >= 3 ? (mm_shape){m, k, n, tr == 't'} : (mm_shape){m, m, m, false};
	return (got == 1 || got == 3 || (got == 4 && tr == 't')) && s->m >= 1 && s->k >= 1 && s->n >= 1 &&
	       s->m <= 8192 && s->k <= 8192 && s->n <= 8192;
}

/* The matmul of fresh random inputs of shape s (inputs realized, the product lazy); NULL on error. */
static inline eng_tensor *mm_shape_build(eng_ctx *ctx, void *arg)
{
	const mm_shape *s = arg;
	int64_t sa[2] = {s->m, s->k}, sb[2] = {s->k, s->n}, sbt[2] = {s->n, s->k};
	eng_tensor *a = eng_contiguous(eng_rand(ctx, ENG_F32, 2, sa));
	eng_tensor *b = eng_contiguous(eng_rand(ctx, ENG_F32, 2, s->wt ? sbt : sb));
	eng_tensor *ab[2] = {a, b};
	return eng_realize(ab, 2) ? NULL : eng_matmul(a, s->wt ? eng_transpose(b, 0, 1) : b);
}

#endif
