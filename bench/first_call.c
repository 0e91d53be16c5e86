/* first_call: time to the first result in a new process, for bench/compare_first_call.sh.
 * Builds the MLP 784-128-10 or the Fashion-MNIST conv net (examples/fashion_mnist/model.h)
 * with random weights, realizes them ("weights ready"), runs one forward pass at batch 1 and
 * reads the logits ("first result"). Prints both moments as CLOCK_REALTIME nanoseconds, so the
 * caller can measure from before the process started; the disk cache directory comes from
 * TENSORD_CACHE_DIR. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tensord/engine.h>
#include "../examples/fashion_mnist/model.h"

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static eng_tensor *param(eng_ctx *ctx, int ndim, const int64_t *shape, double scale)
{
	return eng_keep_root(eng_contiguous(eng_mul_s(eng_randn(ctx, ENG_F32, ndim, shape), scale)));
}

int main(int argc, char **argv)
{
	const char *which = argc > 1 ? argv[1] : "mlp";
	bool conv = !strcmp(which, "fmnist");
	if (!conv && strcmp(which, "mlp")) {
		fprintf(stderr, "usage: bench_first_call mlp|fmnist\n");
		return 2;
	}
	char err[256];
	eng_ctx *ctx = eng_ctx_create(NULL, err, sizeof(err));
	if (!ctx) {
		fprintf(stderr, "bench_first_call: %s\n", err);
		return 1;
	}
	eng_manual_seed(ctx, 1);
	model m;
	eng_tensor *w[4] = {0};
	float x[784], y[10];
	for (int i = 0; i < 784; i++)
		x[i] = (float)(i % 255);
	eng_status s;
	if (conv) {
		s = model_init(ctx, &m);
		int np;
		eng_tensor **ps = s ? NULL : eng_params_trainable(&m.params, &np);
		s = ps ? eng_realize(ps, np) : ENG_ENOMEM;
		free(ps);
		set_training(&m, false);
	} else {
		w[0] = param(ctx, 2, (int64_t[]){784, 128}, 0.05);
		w[1] = param(ctx, 1, (int64_t[]){128}, 0.01);
		w[2] = param(ctx, 2, (int64_t[]){128, 10}, 0.1);
		w[3] = param(ctx, 1, (int64_t[]){10}, 0.01);
		s = eng_realize(w, 4);
	}
	long long ready = now_ns();
	if (!s) {
		int64_t shape[4] = {1, 1, 28, 28}, flat[2] = {1, 784};
		eng_tensor *in = conv ? eng_from_data(ctx, ENG_F32, 4, shape, x) : eng_from_data(ctx, ENG_F32, 2, flat, x);
		eng_tensor *out = conv ? forward(&m, in)
				       : eng_add(eng_matmul(eng_relu(eng_add(eng_matmul(in, w[0]), w[1])), w[2]), w[3]);
		s = eng_tensor_read(out, y, sizeof(y));
	}
	long long first = now_ns();
	if (s) {
		fprintf(stderr, "bench_first_call: %s\n", eng_errmsg(ctx));
		return 1;
	}
	eng_stats st;
	eng_get_stats(ctx, &st);
	printf("ready_ns %lld first_ns %lld compiles %llu disk_loads %llu\n", ready, first,
	       (unsigned long long)st.compiles, (unsigned long long)st.disk_loads);
	if (conv)
		model_free(&m);
	eng_ctx_destroy(ctx);
	return 0;
}
