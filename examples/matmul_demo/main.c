/* matmul_demo: the seed's DEBUG=3 one-liner: (a.reshape(N,1,N) * b.T.reshape(1,N,N)).sum(2)
 * on two uninitialised N x N tensors; run with DEBUG=3 to see one scheduled kernel. */
#include <stdio.h>
#include <stdlib.h>

#include <tensord/engine.h>

int main(int argc, char **argv)
{
	int64_t n = argc > 1 ? atoll(argv[1]) : 1024;
	char err[256];
	if (n < 1 || n > 8192) {
		fprintf(stderr, "usage: matmul_demo [N (1..8192)]\n");
		return 2;
	}
	eng_ctx *ctx = eng_ctx_create(NULL, err, sizeof(err));
	if (!ctx) {
		fprintf(stderr, "matmul_demo: %s\n", err);
		return 1;
	}
	int64_t s[2] = {n, n}, s1[3] = {n, 1, n}, s2[3] = {1, n, n};
	int axis = 2;
	eng_tensor *a = eng_empty(ctx, ENG_F32, 2, s), *b = eng_empty(ctx, ENG_F32, 2, s);
	eng_tensor *c = eng_sum(eng_mul(eng_reshape(a, 3, s1), eng_reshape(eng_transpose(b, 0, 1), 3, s2)), &axis, 1, false);
	int rc = eng_realize(&c, 1) == ENG_OK ? 0 : 1;
	if (rc)
		fprintf(stderr, "matmul_demo: %s\n", eng_errmsg(ctx));
	eng_stats st;
	eng_get_stats(ctx, &st);
	printf("kernels %llu, %.2f GFLOP in %.2f ms\n", (unsigned long long)st.kernels, st.flops / 1e9, st.kernel_ns / 1e6);
	eng_ctx_destroy(ctx);
	return rc;
}
