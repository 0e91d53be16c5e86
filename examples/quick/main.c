/* quick: the README example of the seeds: x = eye(3), y = [[2, 0, -2]], z = (y @ x).sum(),
 * z.backward(); prints x.grad and y.grad (computed lazily, realized when read). */
#include <stdio.h>

#include <tensord/engine.h>

/* Print t and compare it with want (the values the seed's PyTorch/tinygrad run printed). */
static int print_matrix(const char *name, eng_tensor *t, const float *want)
{
	float v[9];
	int64_t rows = eng_shape(t)[0], cols = eng_shape(t)[1];
	if (eng_tensor_read(t, v, (size_t)(rows * cols) * sizeof(float)))
		return 1;
	printf("%s = [", name);
	for (int64_t i = 0; i < rows; i++) {
		printf("%s[", i ? ", " : "");
		for (int64_t j = 0; j < cols; j++)
			printf("%s%.1f", j ? ", " : "", v[i * cols + j]);
		printf("]");
	}
	printf("]\n");
	for (int64_t i = 0; i < rows * cols; i++)
		if (v[i] != want[i]) {
			fprintf(stderr, "quick: %s[%lld] is %g, expected %g\n", name, (long long)i, v[i], want[i]);
			return 1;
		}
	return 0;
}

int main(void)
{
	char err[256];
	eng_ctx *ctx = eng_ctx_create(NULL, err, sizeof(err));
	if (!ctx) {
		fprintf(stderr, "quick: %s\n", err);
		return 1;
	}
	const float yv[3] = {2, 0, -2};
	int64_t ys[2] = {1, 3};
	eng_tensor *x = eng_contiguous(eng_eye(ctx, ENG_F32, 3));
	eng_tensor *y = eng_from_data(ctx, ENG_F32, 2, ys, yv);
	eng_realize(&x, 1);
	eng_set_requires_grad(x, true);
	eng_set_requires_grad(y, true);
	eng_tensor *z = eng_sum(eng_matmul(y, x), NULL, 0, false);
	static const float xg[9] = {2, 2, 2, 0, 0, 0, -2, -2, -2}, yg[3] = {1, 1, 1};
	int rc = eng_backward(z) || print_matrix("x.grad", eng_grad(x), xg) || print_matrix("y.grad", eng_grad(y), yg);
	if (rc)
		fprintf(stderr, "quick: %s\n", eng_errmsg(ctx));
	eng_ctx_destroy(ctx);
	return rc;
}
