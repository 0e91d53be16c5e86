/* backend.h: the interface every compute backend implements (CPU, OpenCL, CUDA): a device is a
 * vtable plus a context pointer (optional methods may be NULL), its target facts and dialect,
 * and the options it opens with. Backends include this, dialect.h and engine/util/ only. */
#ifndef BK_BACKEND_H
#define BK_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tensord/engine.h>

#include "dialect.h"

#define BK_ABI_VERSION 3

typedef struct bk_program bk_program; /* backend-owned compiled kernel */

/* Error reports: a status plus a message (compiler output, driver error) in a caller buffer. */
typedef struct bk_err {
	char msg[4096];
} bk_err;

/* One launch: nparallel independent iterations of the kernel's parallel loop. cost is an
 * estimate of the work (ops + bytes) so a backend can decide how widely to spread it. */
typedef struct bk_launch {
	int64_t nparallel;
	double cost;
} bk_launch;

/* How a device runs a kernel's parallel loop (bk_target.kind). */
typedef enum bk_kind {
	/* work-items (OpenCL, CUDA): one per parallel iteration, vectors only as the dialect's
	 * floatN values (vector_width) */
	BK_KIND_ITEMS = 0,
	/* a CPU's cores: each thread runs a chunk of the parallel loop as plain C whose inner loops
	 * the compiler vectorises for the instruction set below (vector_bytes, vector_regs); packed
	 * panels live on the stack, blocks are sized for cache_l1 and cache_l2 */
	BK_KIND_CPU = 1,
} bk_kind;

/* What the engine plans and renders kernels for, stated once by the device when it opens: the
 * one place for a target's facts (the planners, the search and the caches read them here). */
typedef struct bk_target {
	const bk_dialect *dialect; /* how kernels are written (required; static) */
	bk_kind kind;
	/* The instruction set kernels are compiled for, as the compiler reports it: its name
	 * ("x86-64-v3", "x86-64-v4", "armv8.2-a"; "" where the backend states none), and the
	 * option that chose it (CPU.march: "native", "x86-64-v3", ...). */
	char isa[32], march[64];
	/* Bytes of one SIMD register the kernels' vector code uses (16: SSE or NEON, 32: AVX2,
	 * 64: AVX-512) and how many there are (16 on x86-64 without AVX-512, 32 with it and on
	 * ARM64); register tiles are sized so that their accumulators, a panel's vectors and a
	 * broadcast fit. 0: not stated (a GPU). */
	int vector_bytes, vector_regs;
	/* Fused multiply-add; float16 <-> float32 conversion in hardware (F16C, ARM64); float16
	 * arithmetic (AVX512-FP16, ARMv8.2-A FP16). */
	bool fma, f16_convert, f16_arith;
	/* Parallel iterations a kernel should offer the device: a CPU its threads, a GPU thousands
	 * of work-items (>= 1). */
	int parallelism;
	/* Threads of a work-group that can split a reduction, combining partial results in local
	 * memory (kernels are then written for groups of this size and the launch runs one group per
	 * parallel iteration); 0: none. Needs the dialect's work-group fields. */
	int reduce_group;
	/* Float vector lanes (2..16) of a register tile rendered as vector values (the planner
	 * picks tiles of such widths where it can); 0 or 1: scalars only. */
	int vector_width;
	/* Data cache sizes in bytes of one core (L1, L2), for blocking reductions into cache-sized
	 * pieces (engine/codegen/plan.c); 0: unknown, reductions run unblocked. */
	int64_t cache_l1, cache_l2;
	/* Bytes of scratch the launch gives a split reduction (engine/codegen/kernel.h's
	 * eng_kernel_ir.split): its kernel `name` writes partial results of chunks of a long
	 * reduction (its nparallel iterations) into the scratch, and `name`_fin, which the same
	 * launch runs once every chunk is done (one thread; a kernel written for work-groups, one
	 * group of the size it declares), combines them and stores. In the C
	 * form the scratch is passed after the buffers (bufs[nbufs]), `name`_fin is called as
	 * (bufs, 0, 0), and `name`_scratch (const int64_t) is the bytes it needs; with buf_qual
	 * both kernels take it as a parameter after the buffers (`char *sc_`, before start and
	 * end), at most split_scratch bytes. A target with reduce_group splits only kernels that
	 * run as work-groups (one group per chunk). 0: none (reductions to few rows are never split
	 * over parallel iterations). */
	int64_t split_scratch;
} bk_target;

/* Backend settings, key=value pairs given when a device opens (the CPU's "cc", OpenCL's
 * "vector_width"); which keys a backend takes its registry entry states (bk_backend). */
#define BK_MAX_OPTS 16
typedef struct bk_opts {
	int n;
	const char *key[BK_MAX_OPTS], *value[BK_MAX_OPTS];
} bk_opts;

/* The value of key in o, or NULL (o may be NULL). */
const char *bk_opts_get(const bk_opts *o, const char *key);
/* key as an integer in [lo, hi] into *out (unchanged when absent); ENG_EINVAL with a message
 * naming the key otherwise. */
eng_status bk_opts_int(const bk_opts *o, const char *key, long lo, long hi, int *out, bk_err *err);

typedef struct bk_device_ops {
	uint32_t abi_version; /* BK_ABI_VERSION */
	size_t struct_size;   /* sizeof(bk_device_ops) as compiled into the backend */
	const char *name;     /* "CPU", "CL", "CUDA" */
	/* Memory. handles are opaque to the engine. */
	eng_status (*alloc)(void *dev, size_t nbytes, void **handle, bk_err *err);
	void (*free)(void *dev, void *handle);
	eng_status (*copy_in)(void *dev, void *handle, size_t off, const void *src, size_t n,
			      bk_err *err);
	eng_status (*copy_out)(void *dev, void *handle, size_t off, void *dst, size_t n, bk_err *err);
	/* Compile nkern kernels (srcs[i] defines a kernel named names[i]; the backend adds its
	 * prelude) as one batch, in as few compiler runs as it likes; on success fills progs[i].
	 * On failure no program is returned and err holds the compiler's message. */
	eng_status (*compile)(void *dev, const char *const *srcs, int nkern, const char *const *names,
			      bk_program **progs, bk_err *err);
	void (*program_free)(void *dev, bk_program *p);
	eng_status (*launch)(void *dev, bk_program *p, void *const *bufs, int nbufs,
			     const bk_launch *launch, bk_err *err);
	eng_status (*synchronize)(void *dev, bk_err *err); /* optional */
	void (*destroy)(void *dev);
	/* Disk caching (all three NULL: programs of this backend are never cached on disk). */
	/* Everything besides the kernel source that decides the compiled code: compiler identity and
	 * version, flags, target. Stable for the device's lifetime; owned by the backend. An empty
	 * string (the identity could not be made, e.g. out of memory) means: do not use the disk. */
	const char *(*cache_id)(void *dev);
	/* The serialised module (e.g. shared object bytes) that program p was compiled into, and p's
	 * symbol in it. The bytes stay owned by the backend and valid while p lives. */
	eng_status (*program_blob)(void *dev, bk_program *p, const void **bytes, size_t *n,
				   const char **symbol, bk_err *err);
	/* Load a module from bytes (as program_blob gave them) and look up nkern kernels by name.
	 * On success fills progs[0..nkern) (freed with program_free; bytes stay the caller's); on
	 * failure returns no program and err says why. */
	eng_status (*load)(void *dev, const void *bytes, size_t n, const char *const *names, int nkern,
			   bk_program **progs, bk_err *err);
	/* The device's target facts (required). */
	void (*target)(void *dev, bk_target *out);
	/* Optional: a buffer handle over n bytes of host memory at ptr that kernels use in place
	 * (no copy). The handle is never passed to free; the memory stays the caller's. NULL: the
	 * device cannot use host memory (the engine uploads a copy instead). */
	eng_status (*wrap_host)(void *dev, void *ptr, size_t n, void **handle, bk_err *err);
} bk_device_ops;

typedef struct bk_device {
	const bk_device_ops *ops;
	void *ctx;
} bk_device;

/* ---- a backend's registry entry: each backend defines one (bk_cpu_backend, ...), the registry
 * (registry.c) lists them ---- */
/* One option a backend takes: its key, the environment variable that sets it when the context
 * does not (NULL: none), and a line of help. */
typedef struct bk_option_spec {
	const char *key, *env, *help;
} bk_option_spec;

typedef struct bk_backend {
	const char *name; /* the device name: "CPU", "CL" */
	bool bare_zero;   /* device 0 is called NAME (the host CPU), not NAME:0 */
	/* Open device number ordinal with opts (keys from options only); debug >= 2 times
	 * launches. On success *out is a device freed with out->ops->destroy. ENG_ENOTFOUND: no
	 * such device (or the driver is absent), with a message. */
	eng_status (*open)(int ordinal, const bk_opts *opts, int debug, bk_device *out, bk_err *err);
	/* One line per device, "NAME[:i] description", into out (truncated to len, NUL-terminated);
	 * *ndevices (may be NULL) gets the count. ENG_ENOTFOUND when there is none. */
	eng_status (*list)(char *out, size_t len, int *ndevices, bk_err *err);
	const bk_option_spec *options; /* terminated by a NULL key */
} bk_backend;

/* Verify a device: the ops table's version, size, the required methods, that the disk-caching
 * methods are all present or all NULL, and its target (a dialect, parallelism >= 1, reduction
 * groups only where the dialect has work-groups). Fills *t with the target. ENG_OK or EINVAL. */
eng_status bk_device_check(const bk_device *d, bk_target *t, bk_err *err);

#endif
