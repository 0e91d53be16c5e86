/* fuzz_idx.c: libFuzzer target for eng_idx_load: any bytes as a file, raw, or (when the input
 * starts with 'z') the rest gzip-compressed here so the mutations reach past zlib's CRC, must
 * give a uint8 tensor that reads back whole, or an error naming the file (make fuzz). */
#include <zlib.h>

#include <tensord/io.h>
#include "fuzz_util.h"

/* data as one gzip member into a malloc'd buffer (*n bytes). */
static uint8_t *gzip_bytes(const uint8_t *data, size_t size, size_t *n)
{
	z_stream z = {0};
	if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		abort();
	size_t cap = deflateBound(&z, (uLong)size) + 32;
	uint8_t *out = malloc(cap);
	if (!out)
		abort();
	z.next_in = (Bytef *)data;
	z.avail_in = (uInt)size;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	if (deflate(&z, Z_FINISH) != Z_STREAM_END)
		abort();
	*n = cap - z.avail_out;
	deflateEnd(&z);
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	eng_ctx *ctx = fuzz_ctx();
	uint8_t *gz = NULL;
	size_t n = size;
	if (size && data[0] == 'z')
		gz = gzip_bytes(data + 1, size - 1, &n);
	const char *path = fuzz_file(gz ? gz : data, n);
	free(gz);
	size_t nodes = eng_graph_live_nodes(ctx->graph);
	eng_scope_begin(ctx);
	eng_tensor *t = eng_idx_load(ctx, path);
	fuzz_check_status(ctx, t != NULL);
	if (!t && (strncmp(eng_errmsg(ctx), "idx: ", 5) || !strstr(eng_errmsg(ctx), path))) {
		fprintf(stderr, "fuzz: the message lacks 'idx: ' and the path: %s\n", eng_errmsg(ctx));
		abort();
	}
	if (t) {
		if (eng_tensor_dtype(t) != ENG_U8) {
			fprintf(stderr, "fuzz: dtype %s\n", eng_dtype_name(eng_tensor_dtype(t)));
			abort();
		}
		fuzz_read_back(t);
	}
	eng_scope_end(ctx);
	fuzz_check_nodes(ctx, nodes);
	return 0;
}
