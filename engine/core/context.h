/* context.h: the engine context, the state every layer of the engine shares (devices, graph,
 * first error, counters, scopes), and the error helper they all report through. Engine-private. */
#ifndef ENG_CONTEXT_H
#define ENG_CONTEXT_H

#include <stdarg.h>
#include <stdatomic.h>

#include <tensord/engine.h>

struct eng_graph;
struct eng_device;
struct eng_capture;

#define ENG_MAX_SCOPES 64
#define ENG_MAX_DEVICES 8
#define ENG_MAX_RETIRED 16 /* devices replaced by eng_device_reopen, kept until the context ends */

struct eng_ctx {
	struct eng_graph *graph;
	eng_ctx_opts dopts; /* what new devices are made with (strings copied below) */
	char backend_opts[1024], cache_dir[512];
	struct eng_device *devs[ENG_MAX_DEVICES];
	int ndevs;
	struct eng_device *retired[ENG_MAX_RETIRED]; /* failed, replaced; their buffers are lost values */
	int nretired;
	int default_dev;
	int debug;
	int beam;           /* the kernel search's width (0: off) */
	double beam_budget; /* its seconds per kernel */
	eng_status err;
	char errmsg[4096];
	eng_stats stats;
	/* device memory of all devices (engine/device/alloc.c): the limit (0: none), bytes in live
	 * buffers, bytes in cached free blocks, the highest live figure */
	uint64_t mem_limit, mem_live, mem_cached, mem_peak;
	uint64_t seed, rng_counter;
	uint32_t next_buf_id;
	struct eng_capture *capture; /* the JIT's launch recorder while it captures, else NULL */
	eng_tensor **gradt;          /* tensors that require grad */
	int ngradt, capgradt;
	int nscopes;                        /* 1 = only the root scope */
	eng_tensor *scopes[ENG_MAX_SCOPES]; /* list heads */
	/* cancellation (cancel.c) */
	uint64_t deadline_ns;          /* CLOCK_MONOTONIC; 0: none */
	bool (*abort_hook)(void *arg); /* NULL: none */
	void *abort_arg;
	atomic_int cancel;  /* eng_cancel, from any thread */
	bool in_place_done; /* this call has launched an in-place update: it runs to its end */
	/* eng_realize_into: the node whose kernel writes into the caller's buffer */
	const struct eng_node *into_node;
	struct eng_buffer *into_buf;
	/* a second target kernels are also rendered for (realize/shadow.c; tests only); NULL: none */
	const struct bk_target *shadow_target;
	void (*shadow_fn)(void *arg, const char *name, const char *src, const char *error);
	void *shadow_arg;
	/* the log (log.c) */
	eng_log_fn log_fn; /* NULL: stderr */
	void *log_arg;
};

/* The base of the next rand call's counter-based stream (splitmix64's input for its element 0),
 * the stream then advanced by numel. Rand kernels read the base from a one-element buffer (not
 * a constant in their source), so every call runs the same kernel, and a JIT replay writes the
 * next base into the buffer it captured (eng_buffer.rng_numel; tensor/create.c, jit/jit.c). */
static inline uint64_t eng_rng_take(eng_ctx *ctx, int64_t numel)
{
	uint64_t base = (ctx->seed + 1) * 0x9e3779b97f4a7c15ull + ctx->rng_counter;
	ctx->rng_counter += (uint64_t)numel;
	return base;
}

/* Set the context error (only if none is set yet: the first error names the root cause) and
 * return code (status.c). */
eng_status eng_set_error(eng_ctx *ctx, eng_status code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* A computing call begins (cancel.c): a pending ECANCELED from the last call is cleared and the
 * in-place rule restarts. */
void eng_call_begin(eng_ctx *ctx);
/* A cancellation check before `what` plus `name` (e.g. "launching ", "r_64_..."; name may be
 * NULL): ENG_ECANCELED with the error set if the call must stop, else ENG_OK (always once this
 * call launched an in-place update). Cheap when nothing stops: the message is made only then. */
eng_status eng_cancel_point(eng_ctx *ctx, const char *what, const char *name);

/* Write msg at level (0: warning, 1..5: a DEBUG line, printed when ctx->debug >= level) through
 * the context's log callback (log.c). A trailing newline in the format is dropped. */
void eng_logmsg(eng_ctx *ctx, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Checked arithmetic for shape products (shape.c): false on a negative dim or when the product
 * of the non-zero dims passes 2^40, so no product of a valid shape's dims, in any order,
 * overflows int64; *out is the element count (0 if any dim is 0). */
bool eng_shape_numel(int ndim, const int64_t *shape, int64_t *out);

#endif
