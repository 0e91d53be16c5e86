/* make_weights: writes the weights of the example model (examples/models/mlp.json) to a
 * safetensors file, from a fixed seed: `make_weights OUT.safetensors`. make run uses it. */
#include <math.h>
#include <stdio.h>

#include <tensord/engine.h>
#include <tensord/io.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: make_weights OUT.safetensors\n");
		return 2;
	}
	char err[512];
	eng_ctx *ctx = eng_ctx_create(NULL, err, sizeof(err));
	if (!ctx) {
		fprintf(stderr, "make_weights: %s\n", err);
		return 1;
	}
	eng_manual_seed(ctx, 42);
	/* Kaiming-style scale for the two linear layers: 16 -> 32 -> 4 */
	eng_named w[4] = {
		{"w1", eng_mul_s(eng_randn(ctx, ENG_F32, 2, (int64_t[]){32, 16}), sqrt(2.0 / 16))},
		{"b1", eng_zeros(ctx, ENG_F32, 1, (int64_t[]){32})},
		{"w2", eng_mul_s(eng_randn(ctx, ENG_F32, 2, (int64_t[]){4, 32}), sqrt(2.0 / 32))},
		{"b2", eng_zeros(ctx, ENG_F32, 1, (int64_t[]){4})},
	};
	eng_status s = eng_safetensors_save(ctx, argv[1], w, 4);
	if (s)
		fprintf(stderr, "make_weights: %s\n", eng_errmsg(ctx));
	eng_ctx_destroy(ctx);
	return s ? 1 : 0;
}
