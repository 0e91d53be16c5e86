/* context.h: the engine context, the state every layer of the engine shares (devices, graph,
 * first error, counters, scopes), and the error helper they all report through. Engine-private. */
#ifndef ENG_CONTEXT_H
#define ENG_CONTEXT_H

#include <stdarg.h>

#include <tensord/engine.h>

struct eng_graph;
struct eng_device;
struct eng_capture;

#define ENG_MAX_SCOPES 64
#define ENG_MAX_DEVICES 8

struct eng_ctx {
	struct eng_graph *graph;
	eng_ctx_opts dopts; /* what new devices are made with (strings copied below) */
	char backend_opts[1024], cache_dir[512];
	struct eng_device *devs[ENG_MAX_DEVICES];
	int ndevs;
	int default_dev;
	int debug;
	eng_status err;
	char errmsg[4096];
	eng_stats stats;
	uint64_t seed, rng_counter;
	uint32_t next_buf_id;
	struct eng_capture *capture; /* the JIT's launch recorder while it captures, else NULL */
	eng_tensor **gradt;          /* tensors that require grad */
	int ngradt, capgradt;
	int nscopes;                        /* 1 = only the root scope */
	eng_tensor *scopes[ENG_MAX_SCOPES]; /* list heads */
};

/* Set the context error (only if none is set yet: the first error names the root cause) and
 * return code (status.c). */
eng_status eng_set_error(eng_ctx *ctx, eng_status code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Checked arithmetic for shape products (shape.c): false on a negative dim or when the product
 * of the non-zero dims passes 2^40, so no product of a valid shape's dims, in any order,
 * overflows int64; *out is the element count (0 if any dim is 0). */
bool eng_shape_numel(int ndim, const int64_t *shape, int64_t *out);

#endif
