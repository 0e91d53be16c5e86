/* engine.h: the public C API of tensord's lazy tensor engine.
 * Tensors are lazy handles into an op graph; eng_realize / eng_tensor_read compute them. */
#ifndef ENG_ENGINE_H
#define ENG_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "eng_dtype.h"

typedef enum eng_status {
#define ENG_ERR(name, msg) ENG_##name,
#include "errors.def"
#undef ENG_ERR
	ENG_STATUS_COUNT
} eng_status;

/* Static string for a status code. */
const char *eng_strerror(eng_status s);

typedef struct eng_ctx eng_ctx;
typedef struct eng_tensor eng_tensor;

/* ---- context ------------------------------------------------------------------------ */

typedef struct eng_ctx_opts {
	int debug;          /* DEBUG level 0..5; -1: read the DEBUG environment variable */
	const char *device; /* "CPU" (default); NULL: the DEV environment variable or CPU */
	/* Backend settings for the devices this context opens, "BACKEND.key=value" separated by
	 * commas or spaces (at most 1023 bytes), e.g. "CPU.cc=clang,CPU.threads=2,CL.vector_width=1".
	 * A key the backend does not take is an error naming the keys it does. Settings not given
	 * come from the environment: CPU.cc from $CC, CPU.threads from $TENSORD_CPU_THREADS,
	 * CL.vector_width from $TENSORD_CL_VECTOR_WIDTH, CL.reduce_groups from
	 * $TENSORD_CL_REDUCE_GROUPS (eng_devices_options lists them). NULL: the environment's only. */
	const char *backend_opts;
	bool no_schedule_cache; /* true: schedule every realize (no reuse of kernel lists by graph structure) */
	/* Compiled kernels are kept on disk across processes unless no_disk_cache is set or the
	 * environment has TENSORD_DISK_CACHE=0. The directory: cache_dir, else $TENSORD_CACHE_DIR,
	 * else $XDG_CACHE_HOME/tensord, else ~/.cache/tensord. An unusable one means compiling
	 * without it (one warning on stderr). */
	bool no_disk_cache;
	const char *cache_dir;
	uint64_t disk_cache_max; /* bytes; 0: 1 GiB. Least recently used entries go first */
	/* Device memory limit in bytes for all the context's devices together; 0: none. A buffer
	 * that would take the live total past it is not allocated: the call fails with ENG_ENOMEM
	 * naming the request and the limit, and the context stays usable (eng_clear_error).
	 * Freed buffers the allocator keeps for reuse count too, but are given back to make room. */
	uint64_t mem_limit;
	bool no_alloc_cache; /* true: freed buffers go straight back to the backend (for comparisons) */
	/* Compiled programs each device keeps in memory; 0: 1024. Past it, after a realize, the least
	 * recently used programs that no JIT capture uses are unloaded (with the schedule-cache
	 * entries that hold them, least recently used first), so the count stays within it unless
	 * JIT captures alone hold more. On the CPU an unloaded batch's shared object is dlclosed. */
	uint32_t prog_cache_max;
	/* The search over kernel options (tinygrad's BEAM; docs/ENGINE.md, "Kernel search"): each new kernel
	 * with a reduction is compiled and timed on the device in several variants (tiles, cache
	 * blocks, packing, work-groups) and the fastest kept, in memory and in the disk cache,
	 * keyed by kernel and machine, so a machine searches a kernel once. beam: the beam width;
	 * 0: $TENSORD_BEAM (unset or 0: off); < 0: off. beam_budget: seconds of searching per
	 * kernel; 0: $TENSORD_BEAM_BUDGET, else 5. */
	int beam;
	double beam_budget;
} eng_ctx_opts;

/* Fill opts with defaults (debug -1, device NULL, backend_opts NULL, caches on). */
void eng_ctx_opts_default(eng_ctx_opts *opts);
/* Create a context: owns devices, the node graph and every tensor made through it.
 * opts may be NULL. On failure returns NULL and, if err is non-NULL, writes a message there.
 *
 * Threads: a context, and everything made through it (tensors, JITs, named tensors), is used by
 * one thread at a time (the caller serialises; it may move between threads). Contexts on
 * different threads are fully independent: any number may be created, used and destroyed
 * concurrently, also on one disk cache directory and one file path. What they share is
 * synchronised inside the engine: the CPU backend's worker pool (one per process, started with
 * the first CPU device and joined when the last one goes) and the JSON parser of the
 * safetensors loader. The engine reads the environment (getenv) but never changes it: a
 * program that calls setenv or putenv while contexts are being created races with it. */
eng_ctx *eng_ctx_create(const eng_ctx_opts *opts, char *err, size_t errlen);
/* Free the context and everything it owns (all tensors, buffers, compiled kernels). */
void eng_ctx_destroy(eng_ctx *ctx);

/* Last error: code and message. Functions that fail return NULL or a non-OK status and set
 * these; functions given a NULL tensor return NULL without overwriting the first error, so
 * expressions can be nested and checked once at the end. */
eng_status eng_error(const eng_ctx *ctx);
const char *eng_errmsg(const eng_ctx *ctx);
void eng_clear_error(eng_ctx *ctx);

/* Counters since creation or the last reset. */
typedef struct eng_stats {
	uint64_t kernels;   /* kernel launches */
	uint64_t flops;     /* estimated arithmetic ops executed */
	uint64_t bytes;     /* bytes read and written by kernels */
	uint64_t kernel_ns; /* wall time inside kernel launches */
	uint64_t compiles;  /* compiler invocations */
	uint64_t disk_loads; /* kernels loaded from the disk cache instead of compiled */
	uint64_t schedules; /* realize calls that scheduled at least one kernel */
	uint64_t schedule_hits; /* realize calls answered by the schedule cache */
	uint64_t searches;      /* kernels whose options were searched on the device (eng_ctx_opts.beam) */
	uint64_t search_hits;   /* kernels that took a choice an earlier search recorded (memory or disk) */
	/* Device memory, all devices together (eng_get_device_stats has them per device). */
	uint64_t mem_live;   /* bytes in live buffers now (size-class rounded; not reset) */
	uint64_t mem_peak;   /* highest mem_live since creation or the last reset */
	uint64_t mem_cached; /* bytes of freed buffers kept for reuse now (not reset) */
	uint64_t allocs;     /* buffer allocations */
	uint64_t alloc_hits; /* of those, served by reusing a freed buffer */
} eng_stats;
void eng_get_stats(const eng_ctx *ctx, eng_stats *out);
/* Zero the counters; peaks restart from what is live now. */
void eng_reset_stats(eng_ctx *ctx);

/* One device's memory and programs, for an operator watching a long-lived server: what it
 * holds now, its high-water mark, and how well the caching allocator and program cache work. */
typedef struct eng_device_stats {
	uint64_t live_bytes;     /* bytes in live buffers (each rounded up to its size class) */
	uint64_t peak_bytes;     /* highest live_bytes since creation or eng_reset_stats */
	uint64_t cached_bytes;   /* freed buffers kept for reuse: held from the system, not live */
	uint64_t allocs;         /* buffer allocations asked for */
	uint64_t alloc_hits;     /* of those, served from the cache (no backend call) */
	uint64_t backend_allocs; /* blocks the backend allocated */
	uint64_t backend_frees;  /* blocks given back to the backend */
	uint64_t programs;       /* compiled programs loaded now */
	uint64_t program_evictions; /* programs unloaded by the bound or eng_trim */
} eng_device_stats;
/* Counters of device dev (0 .. eng_device_count-1); ENG_EINVAL for another index. Counts of
 * events restart at eng_reset_stats; live, cached and program figures are current. */
eng_status eng_get_device_stats(const eng_ctx *ctx, int dev, eng_device_stats *out);

/* What eng_trim gives back. */
#define ENG_TRIM_BUFFERS 1u   /* cached free device buffers, to the backend (the system) */
#define ENG_TRIM_SCHEDULES 2u /* schedule-cache entries (the next realize of a graph schedules again) */
#define ENG_TRIM_PROGRAMS 4u  /* compiled programs nothing uses any more (modules are unloaded) */
#define ENG_TRIM_ALL 7u
/* Give back what the context keeps only to be faster next time, on every device. Live tensors
 * and JIT captures are untouched and keep working: a capture holds its buffers and programs.
 * Programs used by a schedule-cache entry stay unless ENG_TRIM_SCHEDULES drops the entry too.
 * Returns the bytes of device memory given back. */
uint64_t eng_trim(eng_ctx *ctx, unsigned what);
int eng_debug_level(const eng_ctx *ctx);

/* ---- log --------------------------------------------------------------------------------
 * What the engine prints (warnings, and DEBUG lines: schedules, kernels, sources, timings)
 * goes to a log callback: level 0 for warnings and errors, 1..5 for a line that DEBUG=level
 * prints. msg is one line or block without a trailing newline, valid during the call only.
 * The callback runs on the thread using the context. The default (fn NULL) writes msg and a
 * newline to stderr, as before. */
typedef void (*eng_log_fn)(void *arg, int level, const char *msg);
void eng_set_log(eng_ctx *ctx, eng_log_fn fn, void *arg);

/* ---- cancellation and deadlines ----------------------------------------------------------
 * A call that computes (eng_realize and whatever realizes: eng_tensor_read, eng_item, JIT
 * calls) checks, before it starts, before each batch of compiles and between kernel launches:
 * eng_cancel requests, the context's deadline and its abort hook. When one says stop, the call
 * returns ENG_ECANCELED with a message naming why and where; the context stays usable and its
 * next computing call starts afresh (a pending ECANCELED does not block it, unlike other
 * errors). What a cancelled realize leaves behind: the kernels launched before the stop ran,
 * so some intermediate nodes may hold values (harmless: they are cached results), but no
 * in-place update (eng_assign: optimizer steps, running statistics) ran: once the first
 * kernel writing an assign target has been launched, the realize runs to its end and succeeds
 * (a training step is applied whole or not at all). A JIT replay follows the same rule. */
/* Now on CLOCK_MONOTONIC, in nanoseconds: the clock of deadlines. */
uint64_t eng_now_ns(void);
/* Calls stop once eng_now_ns() >= deadline_ns; 0: no deadline. A deadline in the past makes
 * every computing call return ENG_ECANCELED before computing anything. */
void eng_set_deadline(eng_ctx *ctx, uint64_t deadline_ns);
/* hook(arg) returning true stops the running call; called on the context's thread at each
 * check, so it should be cheap. NULL: none. */
void eng_set_abort_hook(eng_ctx *ctx, bool (*hook)(void *arg), void *arg);
/* Safe from any thread (the only such function besides those needing no context): the call
 * running on ctx, or else the next one, stops at its next check. */
void eng_cancel(eng_ctx *ctx);

/* ---- devices ------------------------------------------------------------------------
 * A context starts with one device: opts.device, else $DEV, else "CPU" ("CPU", "CPU:n", "CL"
 * or "CL:n" for the n-th OpenCL device, as tinygrad's DEV). More can be opened; new tensors
 * are made on the default device, operations run where their operands live (operands on two
 * devices are an error), and eng_to_device copies. Indices count from 0 in opening order. */
int eng_device_open(eng_ctx *ctx, const char *spec); /* index, or -1 with the error set */
int eng_device_count(const eng_ctx *ctx);
const char *eng_device_name(const eng_ctx *ctx, int dev); /* "CPU", "CL:0", ...; NULL if none */
eng_status eng_set_default_device(eng_ctx *ctx, int dev);
int eng_default_device(const eng_ctx *ctx);
int eng_tensor_device(const eng_tensor *t); /* where t lives (or will) */
eng_tensor *eng_to_device(const eng_tensor *t, int dev); /* lazy copy; t itself if already there */
/* Replace device dev, which failed (a lost GPU, or a backend error that marks the device
 * unusable), by a freshly opened one under the same index and name. Values computed on the
 * failed device are forgotten and computed again when needed; data that lived only there
 * (eng_from_data, parameters, assign targets) is lost: using or reading it is an ENG_EDEVICE
 * error saying so (load it again); JIT captures made on it must be dropped (eng_jit_drop) and
 * captured again.
 * The failed device's memory is given back when the context ends. ENG_ESTATE if dev has not
 * failed; at most 16 reopens per context. */
eng_status eng_device_reopen(eng_ctx *ctx, int dev);
/* Every device this machine offers, one line each with its properties (needs no context). */
eng_status eng_devices_list(char *out, size_t len);
/* The settings each backend takes (for eng_ctx_opts.backend_opts), one line each:
 * "BACKEND.key ($ENV): help". */
eng_status eng_devices_options(char *out, size_t len);

/* Seed for rand/randn; each call consumes counters so results are reproducible per seed. */
void eng_manual_seed(eng_ctx *ctx, uint64_t seed);

/* ---- ownership: scopes ---------------------------------------------------------------
 * Every tensor belongs to the scope that was innermost when it was created (the context's
 * root scope if none is open). eng_scope_end frees the tensors of the innermost scope;
 * eng_keep moves one to the enclosing scope first. eng_tensor_free frees one at once.
 * Freeing a tensor never invalidates others: the graph nodes are reference-counted. */
void eng_scope_begin(eng_ctx *ctx);
void eng_scope_end(eng_ctx *ctx);
eng_tensor *eng_keep(eng_tensor *t); /* returns t */
/* Move t to the root scope: it then lives until eng_tensor_free or eng_ctx_destroy, whatever
 * scopes are open (used for parameters). Returns t; NULL stays NULL. */
eng_tensor *eng_keep_root(eng_tensor *t);
void eng_tensor_free(eng_tensor *t); /* NULL is allowed */

/* ---- inspection --------------------------------------------------------------------- */
eng_ctx *eng_tensor_ctx(const eng_tensor *t);
int eng_ndim(const eng_tensor *t);
const int64_t *eng_shape(const eng_tensor *t); /* ndim entries, valid while t lives */
eng_dtype eng_tensor_dtype(const eng_tensor *t);
int64_t eng_numel(const eng_tensor *t);
/* Print the tensor's op graph (for debugging) to stderr. */
void eng_tensor_dump_graph(const eng_tensor *t);
/* Whether callers' rows can share one launch: inputs[i] holds a batch of rows along axis
 * in_axis[i] (the same number, >= 2, in each). ENG_OK when element i of every output depends only
 * on the inputs' row i[out_axis[q]] and not on where in the batch that row sits (so rows of
 * different callers, and zero rows padding a batch, cannot change each other's results);
 * out_axis[q] receives output q's batch axis. Otherwise ENG_EINVAL with the context error saying
 * where rows meet (a reduction over the batch axis, a reshape splitting it, a value that changes
 * along it, ...). A proof over the lazy graph, conservative: nothing is computed. */
eng_status eng_rows_independent(eng_tensor *const *inputs, const int *in_axis, int nin, eng_tensor *const *outputs,
				int nout, int *out_axis);

/* ---- computation -------------------------------------------------------------------- */
/* Compute the given tensors together: one schedule, kernels fused across all of them. While an
 * earlier error is pending (eng_error) nothing is computed and that error is returned: the
 * graph may be incomplete. eng_clear_error resumes. */
eng_status eng_realize(eng_tensor *const *ts, int n);
/* Realize t and copy its elements, row-major, into dst (nbytes must equal numel*itemsize). */
eng_status eng_tensor_read(eng_tensor *t, void *dst, size_t nbytes);
/* Compute t straight into dst (nbytes = numel * dtype size): on the CPU, when t is not yet
 * computed and is a kernel's output, that kernel writes dst itself (no buffer, no copy), and
 * t stays uncomputed afterwards (reading it again recomputes it); otherwise as eng_tensor_read
 * (one copy). Nothing keeps dst after the call. */
eng_status eng_realize_into(eng_tensor *t, void *dst, size_t nbytes);
/* Realize a one-element tensor and return it as double (NaN and error set on failure). */
double eng_item(eng_tensor *t);

/* ---- creation (shape: ndim entries, each >= 0; ndim 0 is a scalar) --------------------- */
eng_tensor *eng_from_data(eng_ctx *ctx, eng_dtype dt, int ndim, const int64_t *shape,
			  const void *data); /* copies numel*itemsize bytes from data */
/* Zero-copy input: a tensor over the caller's memory data (nbytes = numel * dtype size,
 * row-major). On a device that can use host memory (the CPU) nothing is copied: kernels read
 * data where it is, so it must stay valid and unchanged until the engine calls
 * release(release_arg, data), which it does once no tensor, graph node or JIT capture refers
 * to it any more (during eng_tensor_free, eng_scope_end, a realize or eng_ctx_destroy, on the
 * context's thread). Freeing or changing data before that is the caller's bug (reads of freed
 * memory, wrong results). On other devices data is uploaded once and release is called before
 * this returns. release may be NULL (then data must outlive the context). NULL with the error
 * set on a bad shape, dtype or size (release is then not called). */
eng_tensor *eng_from_host(eng_ctx *ctx, eng_dtype dt, int ndim, const int64_t *shape, void *data, size_t nbytes,
			  void (*release)(void *release_arg, void *data), void *release_arg);
eng_tensor *eng_empty(eng_ctx *ctx, eng_dtype dt, int ndim, const int64_t *shape);
eng_tensor *eng_full(eng_ctx *ctx, eng_dtype dt, int ndim, const int64_t *shape, double value);
eng_tensor *eng_zeros(eng_ctx *ctx, eng_dtype dt, int ndim, const int64_t *shape);
eng_tensor *eng_ones(eng_ctx *ctx, eng_dtype dt, int ndim, const int64_t *shape);
eng_tensor *eng_scalar(eng_ctx *ctx, eng_dtype dt, double value);
eng_tensor *eng_full_like(const eng_tensor *t, double value);
/* start, start+step, ... while < stop (> stop for negative step). */
eng_tensor *eng_arange(eng_ctx *ctx, eng_dtype dt, double start, double stop, double step);
eng_tensor *eng_eye(eng_ctx *ctx, eng_dtype dt, int64_t n);
/* Uniform [0,1) and standard normal, from a counter-based hash of (seed, element index). */
eng_tensor *eng_rand(eng_ctx *ctx, eng_dtype dt, int ndim, const int64_t *shape);
eng_tensor *eng_randn(eng_ctx *ctx, eng_dtype dt, int ndim, const int64_t *shape);
/* Index along one axis of the given shape (the INDEX leaf), as dtype dt. */
eng_tensor *eng_index(eng_ctx *ctx, eng_dtype dt, int ndim, const int64_t *shape, int axis);

/* ---- low-level ops (one graph node each; binary ops broadcast and promote) -------------- */
eng_tensor *eng_exp2(const eng_tensor *a);
eng_tensor *eng_log2(const eng_tensor *a);
eng_tensor *eng_sin(const eng_tensor *a);
eng_tensor *eng_sqrt(const eng_tensor *a);
eng_tensor *eng_recip(const eng_tensor *a);
eng_tensor *eng_neg(const eng_tensor *a);
eng_tensor *eng_trunc(const eng_tensor *a);
eng_tensor *eng_cast(const eng_tensor *a, eng_dtype dt);
eng_tensor *eng_bitcast(const eng_tensor *a, eng_dtype dt);
eng_tensor *eng_add(const eng_tensor *a, const eng_tensor *b);
eng_tensor *eng_sub(const eng_tensor *a, const eng_tensor *b);
eng_tensor *eng_mul(const eng_tensor *a, const eng_tensor *b);
/* True division a*recip(b); integer operands are promoted to float32 first (use eng_idiv). */
eng_tensor *eng_div(const eng_tensor *a, const eng_tensor *b);
eng_tensor *eng_idiv(const eng_tensor *a, const eng_tensor *b);
eng_tensor *eng_mod(const eng_tensor *a, const eng_tensor *b);
eng_tensor *eng_maximum(const eng_tensor *a, const eng_tensor *b);
eng_tensor *eng_minimum(const eng_tensor *a, const eng_tensor *b);
eng_tensor *eng_lt(const eng_tensor *a, const eng_tensor *b);
eng_tensor *eng_gt(const eng_tensor *a, const eng_tensor *b);
eng_tensor *eng_le(const eng_tensor *a, const eng_tensor *b);
eng_tensor *eng_ge(const eng_tensor *a, const eng_tensor *b);
eng_tensor *eng_eq(const eng_tensor *a, const eng_tensor *b);
eng_tensor *eng_ne(const eng_tensor *a, const eng_tensor *b);
eng_tensor *eng_and(const eng_tensor *a, const eng_tensor *b);
eng_tensor *eng_or(const eng_tensor *a, const eng_tensor *b);
eng_tensor *eng_xor(const eng_tensor *a, const eng_tensor *b);
eng_tensor *eng_shl(const eng_tensor *a, const eng_tensor *b);
eng_tensor *eng_shr(const eng_tensor *a, const eng_tensor *b);
eng_tensor *eng_where(const eng_tensor *cond, const eng_tensor *a, const eng_tensor *b);
/* Scalar right-hand sides (the scalar takes a's dtype, or float32 for an int a and a
 * non-integral value). */
eng_tensor *eng_add_s(const eng_tensor *a, double s);
eng_tensor *eng_sub_s(const eng_tensor *a, double s);
eng_tensor *eng_mul_s(const eng_tensor *a, double s);
eng_tensor *eng_div_s(const eng_tensor *a, double s);
eng_tensor *eng_rsub_s(double s, const eng_tensor *a); /* s - a */

/* Reductions: axes (negatives count from the end) or naxes == 0 for all axes. */
eng_tensor *eng_sum(const eng_tensor *a, const int *axes, int naxes, bool keepdim);
eng_tensor *eng_max(const eng_tensor *a, const int *axes, int naxes, bool keepdim);
eng_tensor *eng_prod(const eng_tensor *a, const int *axes, int naxes, bool keepdim);

/* Movement (no copies). */
eng_tensor *eng_reshape(const eng_tensor *a, int ndim, const int64_t *shape); /* one -1 allowed */
eng_tensor *eng_permute(const eng_tensor *a, const int *perm);
eng_tensor *eng_expand(const eng_tensor *a, int ndim, const int64_t *shape); /* -1 keeps a dim */
eng_tensor *eng_pad(const eng_tensor *a, const int64_t (*pads)[2]); /* ndim (before, after) >= 0 */
eng_tensor *eng_shrink(const eng_tensor *a, const int64_t (*ranges)[2]); /* ndim [begin, end) */
eng_tensor *eng_flip(const eng_tensor *a, const int *axes, int naxes);
eng_tensor *eng_contiguous(const eng_tensor *a);
/* Write value (broadcast to target's shape, same dtype) into target's storage; target becomes
 * the written value. Returns target. */
eng_tensor *eng_assign(eng_tensor *target, const eng_tensor *value);

/* ---- composite functions (built only from the ops above) ------------------------------ */
/* elementwise math */
eng_tensor *eng_exp(const eng_tensor *a);
eng_tensor *eng_log(const eng_tensor *a);
eng_tensor *eng_cos(const eng_tensor *a);
eng_tensor *eng_tan(const eng_tensor *a);
eng_tensor *eng_abs(const eng_tensor *a);
eng_tensor *eng_sign(const eng_tensor *a);
eng_tensor *eng_square(const eng_tensor *a);
eng_tensor *eng_rsqrt(const eng_tensor *a);
/* a^b in the promoted dtype: NaN for a < 0 with a non-integer b, 1 where b == 0 or a == 1.
 * Integer results are computed in float32 and rounded (exact while |a^b| < 2^24). */
eng_tensor *eng_pow(const eng_tensor *a, const eng_tensor *b);
/* a^p; an integer a keeps its dtype for integer p >= 0 and becomes float32 otherwise. */
eng_tensor *eng_pow_s(const eng_tensor *a, double p);
/* minimum(maximum(a, lo), hi): lo > hi gives hi; infinite bounds are no-ops, NaN bounds are
 * EINVAL; an integer a with a non-integral bound becomes float32. */
eng_tensor *eng_clamp(const eng_tensor *a, double lo, double hi);
eng_tensor *eng_floor(const eng_tensor *a);
eng_tensor *eng_ceil(const eng_tensor *a);
eng_tensor *eng_round(const eng_tensor *a); /* half to even */
eng_tensor *eng_logical_not(const eng_tensor *a);
/* activations */
eng_tensor *eng_relu(const eng_tensor *a);
eng_tensor *eng_leaky_relu(const eng_tensor *a, double slope);
eng_tensor *eng_sigmoid(const eng_tensor *a);
eng_tensor *eng_tanh(const eng_tensor *a);
eng_tensor *eng_gelu(const eng_tensor *a); /* tanh approximation */
eng_tensor *eng_silu(const eng_tensor *a);
eng_tensor *eng_softplus(const eng_tensor *a);
eng_tensor *eng_elu(const eng_tensor *a, double alpha);
/* reductions (axes as for eng_sum). mean, var and std accumulate in float32 and return float16
 * for float16 input, float32 otherwise (integers included); an empty reduction gives NaN. var
 * divides by max(n - correction, 0) (1: sample variance, 0: population). */
eng_tensor *eng_min(const eng_tensor *a, const int *axes, int naxes, bool keepdim);
eng_tensor *eng_mean(const eng_tensor *a, const int *axes, int naxes, bool keepdim);
eng_tensor *eng_var(const eng_tensor *a, const int *axes, int naxes, bool keepdim, int correction);
eng_tensor *eng_std(const eng_tensor *a, const int *axes, int naxes, bool keepdim, int correction);
/* A row of -inf gives -inf and a row holding +inf gives +inf (not NaN). */
eng_tensor *eng_logsumexp(const eng_tensor *a, int axis, bool keepdim);
eng_tensor *eng_softmax(const eng_tensor *a, int axis);
eng_tensor *eng_log_softmax(const eng_tensor *a, int axis);
/* int32, first maximum (a NaN counts as a maximum); an empty axis is ESHAPE. */
eng_tensor *eng_argmax(const eng_tensor *a, int axis, bool keepdim);
eng_tensor *eng_argmin(const eng_tensor *a, int axis, bool keepdim);
/* movement */
eng_tensor *eng_transpose(const eng_tensor *a, int dim0, int dim1);
eng_tensor *eng_flatten(const eng_tensor *a, int start_dim, int end_dim);
/* Remove axis if its size is 1; any other size returns a unchanged (as PyTorch does). */
eng_tensor *eng_squeeze(const eng_tensor *a, int axis);
/* New size-1 axis at position axis, in [-(ndim+1), ndim]. */
eng_tensor *eng_unsqueeze(const eng_tensor *a, int axis);
/* Slice along one axis: [start, stop) with step (step != 0; negative indices count from the end,
 * out-of-range bounds are clipped as in Python, so INT64_MAX / INT64_MIN stand for an omitted
 * bound, e.g. (INT64_MAX, INT64_MIN, -1) reverses the axis). */
eng_tensor *eng_slice(const eng_tensor *a, int axis, int64_t start, int64_t stop, int64_t step);
/* Join n >= 1 tensors (dtypes promoted) along an existing axis (cat: other sizes equal) or a new
 * one (stack: equal shapes). n < 1 is EINVAL, reported in ts[0]'s context when ts and ts[0] are
 * non-NULL (else NULL without an error: there is no context to report in). */
eng_tensor *eng_cat(eng_tensor *const *ts, int n, int axis);
eng_tensor *eng_stack(eng_tensor *const *ts, int n, int axis);
eng_tensor *eng_repeat(const eng_tensor *a, const int64_t *repeats); /* ndim repeats */
/* processing */
/* matmul with numpy semantics: 1-d operands are promoted, batch dims broadcast; the result has
 * the promoted dtype (float16 accumulates in float32). */
eng_tensor *eng_matmul(const eng_tensor *a, const eng_tensor *b);
/* x @ w.T + bias; w is (out, in), bias (out) or NULL. */
eng_tensor *eng_linear(const eng_tensor *x, const eng_tensor *w, const eng_tensor *bias);
/* x (N, Cin, H, W), w (Cout, Cin/groups, KH, KW), bias (Cout) or NULL; stride, padding and
 * dilation NULL mean 1, 0 and 1. */
eng_tensor *eng_conv2d(const eng_tensor *x, const eng_tensor *w, const eng_tensor *bias,
		       const int stride[2], const int padding[2], const int dilation[2], int groups);
/* Pooling over the last two axes; stride NULL means stride = kernel; padding may be NULL and
 * must be at most half the kernel. Max pooling ignores padding; average pooling counts it as
 * zeros (PyTorch's count_include_pad) and returns float. */
eng_tensor *eng_max_pool2d(const eng_tensor *x, const int kernel[2], const int stride[2],
			   const int padding[2]);
eng_tensor *eng_avg_pool2d(const eng_tensor *x, const int kernel[2], const int stride[2],
			   const int padding[2]);
/* Integer labels (any int dtype) -> float32 one-hot with a new last axis of num_classes.
 * Out-of-range labels give all-zero rows (as do out-of-range indices of gather/embedding). */
eng_tensor *eng_one_hot(const eng_tensor *labels, int64_t num_classes);
/* out[..., i, ...] = a[..., idx[..., i, ...], ...] along axis; idx has a's ndim. */
eng_tensor *eng_gather(const eng_tensor *a, int axis, const eng_tensor *idx);
/* Rows of table (V, D) selected by integer idx of any shape: result idx.shape + (D). */
eng_tensor *eng_embedding(const eng_tensor *table, const eng_tensor *idx);
/* Layer normalisation over the last axis (no affine); eps >= 0. */
eng_tensor *eng_layernorm(const eng_tensor *x, double eps);
/* Mean over the batch of -log_softmax(logits)[i, labels[i]]; logits (N, C), labels (N) of an
 * integer dtype; float32 result (float16 for float16 logits); an empty batch gives 0. Every
 * label must be in [0, C). Realized labels (eng_from_data, or computed and realized) are read
 * back and checked here: an out-of-range one is EINVAL naming its row, and NULL is returned.
 * Lazy labels cannot be checked without computing them, so an out-of-range one makes the loss
 * NaN when it is realized (as does new data in a jit replay); its row gets no gradient.
 * eng_loss_sparse_cross_entropy (nn.h) is the same loss with label smoothing and an ignore
 * index. */
eng_tensor *eng_sparse_cross_entropy(const eng_tensor *logits, const eng_tensor *labels);

/* ---- autograd ----------------------------------------------------------------------
 * A tensor that requires grad is a leaf the backward pass differentiates into: its gradient
 * accumulates in a tensor owned by it (eng_grad). Gradients are lazy graphs like everything
 * else, so forward, backward and the optimizer update schedule (and fuse) together. */
eng_status eng_set_requires_grad(eng_tensor *t, bool on);
bool eng_requires_grad(const eng_tensor *t);
/* Differentiate scalar loss with respect to every tensor that requires grad, adding into
 * their gradients. Float losses only. */
eng_status eng_backward(eng_tensor *loss);
/* The accumulated gradient (owned by t; NULL if none yet). Valid until eng_zero_grad(t) or
 * t is freed. */
eng_tensor *eng_grad(const eng_tensor *t);
void eng_zero_grad(eng_tensor *t);
/* The same value with no gradient flowing back through it. */
eng_tensor *eng_detach(const eng_tensor *t);

#endif
