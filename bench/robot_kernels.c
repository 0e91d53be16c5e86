/* robot_kernels: the robot brain's serving graph (examples/robot/spec.c) built in-process with the
 * Tensor API and realized at one batch size, to see its kernels (DEBUG=2: each kernel and its time).
 * Usage: bench_robot_kernels [batch (4096)] [runs (20)] [bag,eqmax]; prints the median and best
 * realize. As in spec.c, the context is the sum over tokens of one_hot(word) @ emb and the next
 * step's word comes in as one_hot(argmax) @ prev_emb; `bag` computes the context as the bag of
 * words (the one-hots summed first) @ emb, `eqmax` feeds back contiguous(logits == max(logits))
 * (the formulation before the engine learned gather sums). */
#include <stdbool.h>
#include <string.h>

#include "bench.h"

enum { V = 96, H = 64, P = 16, L = 8, T = 5, START = 1 };

typedef struct brain {
	int64_t batch;
	bool bag; /* the bag of words times emb; else each word's one-hot times emb, summed */
	bool eqmax; /* the fed-back word as contiguous(logits == max); else one_hot(argmax) */
	eng_tensor *emb, *b1, *prev_emb, *pos, *w_out, *b_out;
	int32_t *ids;
} brain;

static eng_tensor *param(eng_ctx *ctx, int ndim, int64_t a, int64_t b)
{
	int64_t s[2] = {a, b};
	eng_tensor *t = eng_contiguous(eng_mul_s(eng_randn(ctx, ENG_F32, ndim, s), 0.5));
	return eng_keep_root(t);
}

/* The decode of spec.c's rb_spec_serve, op for op. */
static eng_tensor *build(eng_ctx *ctx, void *arg)
{
	brain *br = arg;
	for (int64_t i = 0; i < br->batch * L; i++)
		br->ids[i] = (int32_t)((br->ids[i] * 1103515245u + 12345u) % 88u);
	int64_t is[2] = {br->batch, L};
	eng_tensor *ids = eng_from_data(ctx, ENG_I32, 2, is, br->ids);
	eng_tensor *words = eng_one_hot(eng_sub(ids, eng_scalar(ctx, ENG_I32, 1)), V);
	int ax = 1, last = -1;
	eng_tensor *bagemb = br->bag ? eng_matmul(eng_sum(words, &ax, 1, false), br->emb)
				     : eng_sum(eng_matmul(words, br->emb), &ax, 1, false);
	eng_tensor *ctxv = eng_add(bagemb, br->b1);
	eng_tensor *ys[T], *hot = NULL;
	for (int t = 0; t < T; t++) {
		eng_tensor *pe = t ? eng_matmul(hot, br->prev_emb) : eng_slice(br->prev_emb, 0, START, START + 1, 1);
		eng_tensor *h = eng_relu(eng_add(eng_add(ctxv, pe), eng_slice(br->pos, 0, t, t + 1, 1)));
		eng_tensor *z = eng_add(eng_matmul(h, br->w_out), br->b_out);
		ys[t] = eng_argmax(z, -1, false);
		if (t + 1 < T)
			hot = br->eqmax ? eng_contiguous(eng_cast(eng_eq(z, eng_max(z, &last, 1, true)), ENG_F32))
					: eng_one_hot(ys[t], P);
	}
	return eng_stack(ys, T, 1);
}

int main(int argc, char **argv)
{
	int64_t batch = argc > 1 ? atoll(argv[1]) : 4096;
	int runs = argc > 2 ? atoi(argv[2]) : 20;
	bool bag = argc > 3 && strstr(argv[3], "bag"), eqmax = argc > 3 && strstr(argv[3], "eqmax");
	char err[256];
	if (batch < 1 || batch > (1 << 20) || runs < 1 || runs > 10000) {
		fprintf(stderr, "usage: bench_robot_kernels [batch] [runs]\n");
		return 2;
	}
	eng_ctx *ctx = eng_ctx_create(NULL, err, sizeof(err));
	if (!ctx) {
		fprintf(stderr, "bench_robot_kernels: %s\n", err);
		return 1;
	}
	brain br = {.batch = batch, .bag = bag, .eqmax = eqmax, .ids = calloc((size_t)(batch * L), sizeof(int32_t))};
	br.emb = param(ctx, 2, V, H);
	br.b1 = param(ctx, 1, H, 0);
	br.prev_emb = param(ctx, 2, P, H);
	br.pos = param(ctx, 2, T, H);
	br.w_out = param(ctx, 2, H, P);
	br.b_out = param(ctx, 1, P, 0);
	eng_tensor *ps[] = {br.emb, br.b1, br.prev_emb, br.pos, br.w_out, br.b_out};
	double *t = calloc(runs, sizeof(double));
	if (!br.ids || !t || eng_realize(ps, 6)) {
		fprintf(stderr, "bench_robot_kernels: %s\n", eng_errmsg(ctx));
		return 1;
	}
	for (int64_t i = 0; i < batch * L; i++)
		br.ids[i] = (int32_t)(i * 7 + 3);
	if (bench_realize_runs(ctx, "bench_robot_kernels", build, &br, (size_t)(batch * T) * sizeof(int32_t), runs, t))
		return 1;
	printf("robot brain batch %lld: median %.3f ms best %.3f ms\n", (long long)batch, t[runs / 2], t[0]);
	free(t);
	free(br.ids);
	eng_ctx_destroy(ctx);
	return 0;
}
