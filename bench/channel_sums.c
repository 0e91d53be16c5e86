/* channel_sums: times BatchNorm-style statistics, the sum over (N, H, W) of an N x C x H x W
 * float32 tensor per channel (few long rows: what grouped reductions are for), median and best
 * of several runs on the context's device. Args: C (32) runs (7); N, H, W are 512, 20, 20. */
#include "bench.h"

static eng_tensor *build(eng_ctx *ctx, void *arg)
{
	int64_t shape[4] = {512, *(const int64_t *)arg, 20, 20};
	int axes[3] = {0, 2, 3};
	eng_tensor *x = eng_contiguous(eng_rand(ctx, ENG_F32, 4, shape));
	return eng_realize(&x, 1) ? NULL : eng_sum(x, axes, 3, false);
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
	double *t = calloc(runs, sizeof(double));
	if (!t || bench_realize_runs(ctx, "bench_channel_sums", build, &c, (size_t)c * sizeof(float), runs, t))
		return 1;
	double gb = 512.0 * (double)c * 400 * 4 / 1e9;
	printf("tensord channel sums 512x%lldx20x20: median %.2f ms best %.2f ms (%.1f GB/s) [%s]\n", (long long)c,
	       t[runs / 2], t[0], gb / (t[0] / 1e3), eng_device_name(ctx, eng_default_device(ctx)));
	free(t);
	eng_ctx_destroy(ctx);
	return 0;
}
