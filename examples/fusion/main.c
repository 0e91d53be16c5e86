/* fusion: the seed's lazy-versus-forced matmul. The lazy expression becomes one kernel that
 * never stores the N*N*N products; forcing the product first costs two kernels and a temp. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <tensord/engine.h>

static eng_tensor *product(eng_tensor *a, eng_tensor *b, int64_t n)
{
	int64_t s1[3] = {n, 1, n}, s2[3] = {1, n, n};
	return eng_mul(eng_reshape(a, 3, s1), eng_reshape(eng_transpose(b, 0, 1), 3, s2));
}

int main(int argc, char **argv)
{
	int64_t n = argc > 1 ? atoll(argv[1]) : 256;
	char err[256];
	if (n < 1 || n > 4096) {
		fprintf(stderr, "usage: fusion [N (1..4096)]\n");
		return 2;
	}
	eng_ctx *ctx = eng_ctx_create(NULL, err, sizeof(err));
	if (!ctx) {
		fprintf(stderr, "fusion: %s\n", err);
		return 1;
	}
	eng_manual_seed(ctx, 42);
	int64_t shape[2] = {n, n};
	size_t bytes = (size_t)(n * n) * sizeof(float);
	float *x = malloc(bytes), *y = malloc(bytes);
	if (!x || !y)
		goto fail;
	/* Two copies of the same inputs: the graph is hash-consed and caches realized values,
	 * so the forced run must not find the lazy run's results under the same nodes. */
	eng_tensor *ra = eng_rand(ctx, ENG_F32, 2, shape), *rb = eng_rand(ctx, ENG_F32, 2, shape);
	if (eng_tensor_read(ra, x, bytes) || eng_tensor_read(rb, y, bytes))
		goto fail;
	eng_tensor *a = eng_from_data(ctx, ENG_F32, 2, shape, x), *b = eng_from_data(ctx, ENG_F32, 2, shape, y);
	eng_tensor *a2 = eng_from_data(ctx, ENG_F32, 2, shape, x), *b2 = eng_from_data(ctx, ENG_F32, 2, shape, y);
	int axis = 2;
	eng_stats st;

	/* lazy: one plan, then run */
	eng_reset_stats(ctx);
	eng_tensor *c = eng_sum(product(a, b, n), &axis, 1, false);
	printf("device: %s\n", eng_device_name(ctx, eng_tensor_device(c)));
	printf("before realize, c is just a plan: %d-d %s tensor, nothing computed\n", eng_ndim(c),
	       eng_dtype_name(eng_tensor_dtype(c)));
	if (eng_realize(&c, 1))
		goto fail;
	eng_get_stats(ctx, &st);
	printf("lazy (fused):  kernels=%llu\n", (unsigned long long)st.kernels);

	/* forced: store the product, then sum */
	eng_reset_stats(ctx);
	eng_tensor *p = product(a2, b2, n);
	if (eng_realize(&p, 1))
		goto fail;
	eng_tensor *d = eng_sum(p, &axis, 1, false);
	if (eng_realize(&d, 1))
		goto fail;
	eng_get_stats(ctx, &st);
	printf("forced eager:  kernels=%llu intermediate=%lld floats (%.0f MB)\n", (unsigned long long)st.kernels,
	       (long long)eng_numel(p), eng_numel(p) * 4.0 / 1e6);

	if (eng_tensor_read(c, x, bytes) || eng_tensor_read(d, y, bytes))
		goto fail;
	double maxdiff = 0;
	for (int64_t i = 0; i < n * n; i++)
		maxdiff = fmax(maxdiff, fabs(x[i] - y[i]) / (1.0 + fabs(y[i])));
	printf("same answer: %s (max relative difference %.2g)\n", maxdiff < 1e-4 ? "True" : "False", maxdiff);
	free(x);
	free(y);
	eng_ctx_destroy(ctx);
	return maxdiff < 1e-4 ? 0 : 1;
fail:
	fprintf(stderr, "fusion: %s\n", eng_errmsg(ctx));
	eng_ctx_destroy(ctx);
	return 1;
}
