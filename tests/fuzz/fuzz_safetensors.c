/* fuzz_safetensors.c: libFuzzer target for eng_safetensors_load: any bytes as a file must give
 * tensors that read back whole, or an error with a message, and leak nothing (make fuzz). */
#include <tensord/io.h>
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	eng_ctx *ctx = fuzz_ctx();
	const char *path = fuzz_file(data, size);
	size_t nodes = eng_graph_live_nodes(ctx->graph);
	eng_scope_begin(ctx);
	eng_named *ts = NULL;
	int n = -1;
	eng_status st = eng_safetensors_load(ctx, path, &ts, &n);
	fuzz_check_status(ctx, st == ENG_OK);
	if (st != ENG_OK && (ts || n)) {
		fprintf(stderr, "fuzz: a failed load returned %d tensors\n", n);
		abort();
	}
	for (int i = 0; i < n; i++) {
		if (!ts[i].name[0]) {
			fprintf(stderr, "fuzz: tensor %d has an empty name\n", i);
			abort();
		}
		fuzz_read_back(ts[i].t);
	}
	eng_named_free(ts, n);
	eng_scope_end(ctx); /* frees the tensors */
	fuzz_check_nodes(ctx, nodes);
	return 0;
}
