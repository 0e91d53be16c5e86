/* channel_sums: times BatchNorm-style statistics, the sum over (N, H, W) of an N x C x H x W
 * float32 tensor per channel (few long rows: what grouped reductions are for), median and best
 * of several runs on the context's device. Args: C (32) runs (7); N, H, W are 512, 20, 20. */
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
	int64_t c = argc > 1 ? atoll(argv[1]) : 32;
	int runs = argc > 2 ? atoi(argv[2]) : 7;
	char err[256];
	if (c < 1 || c > 1024 || runs < 1 || runs > 1000) {
		fprintf(stderr, "usage: bench_channel_sums [C (1..1024)] [runs]\n");
		return 2;
	}
	eng_ctx *ctx = eng_ctx_create(NULL, err, sizeof(err));
	if (!ctx) {
		fprintf(stderr, "bench_channel_sums: %s\n", err);
		return 1;
	}
	int64_t shape[4] = {512, c, 20, 20};
	int axes[3] = {0, 2, 3};
	double *t = calloc(runs, sizeof(double));
	float *out = malloc((size_t)c * sizeof(float));
	for (int r = -1; r < runs; r++) {
		eng_scope_begin(ctx);
		/* a fresh input each run: equal nodes would hit the graph's realized-value cache */
		eng_tensor *x = eng_contiguous(eng_rand(ctx, ENG_F32, 4, shape));
		eng_realize(&x, 1);
		eng_tensor *s = eng_sum(x, axes, 3, false);
		double t0 = now_ms();
		eng_status st = eng_realize(&s, 1);
		double ms = now_ms() - t0;
		if (st || eng_tensor_read(s, out, (size_t)c * sizeof(float))) {
			fprintf(stderr, "bench_channel_sums: %s\n", eng_errmsg(ctx));
			return 1;
		}
		if (r >= 0)
			t[r] = ms;
		eng_scope_end(ctx);
	}
	qsort(t, runs, sizeof(double), cmp);
	double gb = 512.0 * (double)c * 400 * 4 / 1e9;
	printf("tensord channel sums 512x%lldx20x20: median %.2f ms best %.2f ms (%.1f GB/s) [%s]\n", (long long)c,
	       t[runs / 2], t[0], gb / (t[0] / 1e3), eng_device_name(ctx, eng_default_device(ctx)));
	free(t);
	free(out);
	eng_ctx_destroy(ctx);
	return 0;
}
