/* backend.h: the interface every compute backend implements (CPU, OpenCL, CUDA).
 * A backend is a vtable plus a context pointer; optional methods may be NULL. */
#ifndef BK_BACKEND_H
#define BK_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include <tensord/engine.h>

#define BK_ABI_VERSION 1

typedef struct bk_program bk_program; /* backend-owned compiled kernel */
struct eng_kernel_ir;
struct eng_strbuf;

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
	/* Render a lowered kernel to this backend's source language (appends to out). */
	eng_status (*render)(void *dev, const struct eng_kernel_ir *ir, const char *name,
			     struct eng_strbuf *out, bk_err *err);
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
	/* Optional: how many parallel iterations a kernel should offer this device (a GPU wants
	 * thousands of work-items); NULL: the context's CPU thread count. */
	int (*parallelism)(void *dev);
	/* Optional: the threads of one work-group that can split a reduction, combining partial
	 * results in local memory (the renderer then writes such kernels for groups of this size and
	 * the launch runs one group per parallel iteration); NULL or 0: none. */
	int (*reduce_group)(void *dev);
	/* Optional: the float vector lanes (2..16) the renderer makes of a register tile that wide,
	 * so that tiles are planned in such widths where possible; NULL or < 2: none. */
	int (*vector_width)(void *dev);
} bk_device_ops;

typedef struct bk_device {
	const bk_device_ops *ops;
	void *ctx;
} bk_device;

/* Verify an ops table: version, size, the required methods, and that the disk-caching methods
 * are all present or all NULL. Returns ENG_OK or EINVAL. */
eng_status bk_device_check(const bk_device *d, bk_err *err);

/* The CPU backend: generated C compiled by cc into a shared object, run on a thread pool.
 * cc NULL means "cc"; nthreads 0 means one per online core. */
eng_status bk_cpu_create(const char *cc, int nthreads, int debug, bk_device *out, bk_err *err);

/* The OpenCL backend: OpenCL C from the same renderer, built by the driver. libOpenCL.so.1 (the
 * ICD loader) is opened with dlopen when a device is created or listed, so tensord runs where it
 * is absent: then, or with no device, these return ENG_ENOTFOUND and a message. Buffer handles
 * are cl_mem; a kernel takes its buffers as __global pointers in order, then (long start, long
 * end), and runs one work-item per iteration start..end-1 of its parallel loop. Devices are
 * numbered over all platforms in the loader's order: CL:1 is the second device found. */
/* One line per device ("CL:<i> <name> | CPU/GPU | vendor | platform | version | driver |
 * compute units | global memory | max work-group | fp16"), written to out (truncated to len,
 * NUL-terminated); *ndevices (may be NULL) gets the count. */
eng_status bk_cl_list(char *out, size_t len, int *ndevices, bk_err *err);
/* Device CL:index with its own context and in-order queue, used from one thread at a time;
 * debug >= 2 times each launch on the device (printed at synchronize). Freed with
 * out->ops->destroy. */
eng_status bk_cl_create(int index, int debug, bk_device *out, bk_err *err);

#endif
