/* fuzz_onnx.c: libFuzzer target for the ONNX loader (eng_onnx_load_mem, no external data): any
 * bytes must load into a consistent model or fail with a message; small loaded graphs are also
 * built for zero inputs of their declared shapes (make fuzz). */
#include <tensord/onnx.h>
#include "fuzz_util.h"

/* Zero tensors for every input when all are small with static dims; false otherwise. */
static bool zero_inputs(eng_ctx *ctx, eng_onnx_model *m, eng_tensor **in)
{
	int n = eng_onnx_input_count(m);
	if (n > 8)
		return false;
	for (int i = 0; i < n; i++) {
		eng_onnx_io io;
		if (eng_onnx_input(m, i, &io) || !io.dtype_ok || io.ndim < 0)
			return false;
		int64_t numel = 1;
		for (int d = 0; d < io.ndim; d++) {
			if (io.shape[d] < 0 || io.shape[d] > 64)
				return false;
			numel *= io.shape[d];
		}
		if (numel > 4096)
			return false;
		in[i] = eng_zeros(ctx, io.dtype, io.ndim, io.shape);
	}
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	eng_ctx *ctx = fuzz_ctx();
	size_t nodes = eng_graph_live_nodes(ctx->graph);
	eng_scope_begin(ctx);
	char err[512] = "";
	eng_onnx_model *m = eng_onnx_load_mem(ctx, data, size, NULL, 0, err, sizeof(err));
	if (!m && strncmp(err, "onnx: ", 6)) {
		fprintf(stderr, "fuzz: a failed load without an 'onnx: ' message: '%s'\n", err);
		abort();
	}
	if (m) {
		for (int i = 0; i < eng_onnx_output_count(m); i++) {
			eng_onnx_io io;
			if (eng_onnx_output(m, i, &io) || !io.name || io.ndim > ENG_MAX_DIMS) {
				fprintf(stderr, "fuzz: output %d inconsistent\n", i);
				abort();
			}
		}
		eng_tensor *in[8] = {0}, *out[64] = {0};
		if (eng_onnx_output_count(m) <= 64 && zero_inputs(ctx, m, in)) {
			eng_status s = eng_onnx_build(m, in, out, 0);
			if (s && !*eng_errmsg(ctx)) {
				fprintf(stderr, "fuzz: a failed build without a message\n");
				abort();
			}
			eng_clear_error(ctx);
		}
		eng_onnx_free(m);
	}
	eng_scope_end(ctx);
	fuzz_check_nodes(ctx, nodes);
	return 0;
}
