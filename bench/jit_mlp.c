/* jit_mlp: per-call time of the MLP 784-128-10 (relu) at batch 1 and 256, plain (graph built
 * and realized each call; the schedule cache skips scheduling) and with the JIT (replay). Two
 * figures each, as bench/tinygrad_jit_mlp.py measures them: a call with the input's upload and
 * the logits' read-back, and the call alone, split into the kernels' time and the overhead
 * beyond it. Medians of the calls. */
#include <tensord/jit.h>
#include "bench.h"

static double now_us(void) { return bench_now_ms() * 1e3; }

typedef struct mlp {
	eng_tensor *w1, *b1, *w2, *b2;
} mlp;

static eng_tensor *forward(const mlp *m, const eng_tensor *x)
{
	return eng_add(eng_matmul(eng_relu(eng_add(eng_matmul(x, m->w1), m->b1)), m->w2), m->b2);
}

static eng_status step(eng_ctx *ctx, eng_tensor *const *in, int nin, eng_tensor **out, int nout, void *user)
{
	(void)ctx, (void)nin, (void)nout;
	out[0] = forward(user, in[0]);
	return ENG_OK;
}

/* One call: upload x, compute (jitted or not), read the logits back. Returns wall us and adds
 * the kernels' time to *kern_us. */
static double call(eng_ctx *ctx, mlp *m, eng_jit *j, int64_t bs, const float *x, float *y, double *kern_us)
{
	eng_stats a, b;
	int64_t shape[2] = {bs, 784};
	eng_get_stats(ctx, &a);
	double t0 = now_us();
	eng_scope_begin(ctx);
	eng_tensor *in = eng_from_data(ctx, ENG_F32, 2, shape, x), *out = NULL;
	eng_status s = j ? eng_jit_call(j, &in, &out) : ((out = forward(m, in)) ? ENG_OK : ENG_EINVAL);
	if (!s)
		s = eng_tensor_read(out, y, (size_t)bs * 10 * sizeof(float));
	eng_scope_end(ctx);
	double us = now_us() - t0;
	eng_get_stats(ctx, &b);
	if (s) {
		fprintf(stderr, "bench_jit_mlp: %s\n", eng_errmsg(ctx));
		exit(1);
	}
	*kern_us = (b.kernel_ns - a.kernel_ns) / 1e3;
	return us;
}

int main(int argc, char **argv)
{
	int calls = argc > 1 ? atoi(argv[1]) : 200;
	if (calls < 5 || calls > 100000) {
		fprintf(stderr, "usage: bench_jit_mlp [calls]\n");
		return 2;
	}
	char err[256];
	eng_ctx *ctx = eng_ctx_create(NULL, err, sizeof(err));
	if (!ctx) {
		fprintf(stderr, "bench_jit_mlp: %s\n", err);
		return 1;
	}
	eng_manual_seed(ctx, 1);
	mlp m = {
		eng_keep_root(eng_contiguous(eng_mul_s(eng_randn(ctx, ENG_F32, 2, (int64_t[]){784, 128}), 0.05))),
		eng_keep_root(eng_contiguous(eng_mul_s(eng_randn(ctx, ENG_F32, 1, (int64_t[]){128}), 0.01))),
		eng_keep_root(eng_contiguous(eng_mul_s(eng_randn(ctx, ENG_F32, 2, (int64_t[]){128, 10}), 0.1))),
		eng_keep_root(eng_contiguous(eng_mul_s(eng_randn(ctx, ENG_F32, 1, (int64_t[]){10}), 0.01))),
	};
	if (eng_realize((eng_tensor *[]){m.w1, m.b1, m.w2, m.b2}, 4)) {
		fprintf(stderr, "bench_jit_mlp: %s\n", eng_errmsg(ctx));
		return 1;
	}
	int64_t sizes[2] = {1, 256};
	float *x = malloc(256 * 784 * sizeof(float)), *y = malloc(256 * 10 * sizeof(float));
	double *t = malloc(calls * sizeof(double)), *k = malloc(calls * sizeof(double));
	for (int i = 0; i < 256 * 784; i++)
		x[i] = (float)((i * 7919 % 1000) / 1000.0);
	for (int si = 0; si < 2; si++)
		for (int mode = 0; mode < 2; mode++) {
			int64_t bs = sizes[si];
			eng_jit *j = mode ? eng_jit_create(ctx, step, &m, 1, 1, NULL) : NULL;
			double ku;
			for (int w = 0; w < 3; w++) /* warm-up: compile, (capture) */
				call(ctx, &m, j, bs, x, y, &ku);
			for (int c = 0; c < calls; c++) {
				x[c % (bs * 784)] += 1e-3f; /* new data each call */
				t[c] = call(ctx, &m, j, bs, x, y, &k[c]);
			}
			bench_sort(t, calls);
			bench_sort(k, calls);
			double med = t[calls / 2];
			/* the call alone: input made beforehand, output not read */
			int64_t shape[2] = {bs, 784};
			for (int c = 0; c < calls; c++) {
				eng_scope_begin(ctx);
				eng_tensor *in = eng_from_data(ctx, ENG_F32, 2, shape, x), *out = NULL;
				eng_stats a, b;
				eng_get_stats(ctx, &a);
				double t0 = now_us();
				eng_status s = j ? eng_jit_call(j, &in, &out) : eng_realize((eng_tensor *[]){out = forward(&m, in)}, 1);
				t[c] = now_us() - t0;
				eng_get_stats(ctx, &b);
				k[c] = (b.kernel_ns - a.kernel_ns) / 1e3;
				eng_scope_end(ctx);
				if (s) {
					fprintf(stderr, "bench_jit_mlp: %s\n", eng_errmsg(ctx));
					return 1;
				}
			}
			bench_sort(t, calls);
			bench_sort(k, calls);
			printf("tensord mlp batch %3lld %-6s: median %8.1f us per call with upload and read-back, %8.1f us the "
			       "call alone (kernels %6.1f us, overhead %6.1f us)\n",
			       (long long)bs, mode ? "jit" : "plain", med, t[calls / 2], k[calls / 2], t[calls / 2] - k[calls / 2]);
			eng_jit_destroy(j);
		}
	free(x);
	free(y);
	free(t);
	free(k);
	eng_ctx_destroy(ctx);
	return 0;
}
