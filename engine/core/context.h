/* internal.h: engine-private structures shared by the engine's files: the context, tensor
 * handles, devices and error helpers. Not part of the public API. */
#ifndef ENG_INTERNAL_H
#define ENG_INTERNAL_H

#include <stdarg.h>

#include "backends/backend.h"
#include <tensord/engine.h>
#include "graph/node.h"

typedef struct eng_progcache eng_progcache;
typedef struct eng_schedcache eng_schedcache;
struct eng_capture;

/* Engine-side view of one backend device. */
typedef struct eng_device {
	bk_device bk;
	char name[32];
	int index;
	eng_ctx *ctx;
	eng_progcache *progs; /* compiled kernels keyed by source */
	eng_schedcache *scache; /* kernel lists keyed by graph structure (NULL: off) */
	/* the compiled-program disk cache (progdisk.c), opened on first use */
	struct eng_dc *disk;
	int disk_state; /* 0: not tried yet, 1: open, -1: off or unusable */
	bool disk_enabled, disk_warned;
	bool failed; /* a device-level error (lost, out of resources): every later use fails */
	char failmsg[256];
	char disk_dir[512]; /* empty: the default directory */
	uint64_t disk_max;
} eng_device;

struct eng_tensor {
	eng_ctx *ctx;
	eng_node *node; /* owned reference */
	int scope;      /* depth of the owning scope; -1: owned by another tensor (a gradient) */
	eng_tensor *prev, *next; /* the owning scope's list */
	bool requires_grad;
	eng_tensor *grad; /* owned, or NULL */
};

#define ENG_MAX_SCOPES 64
#define ENG_MAX_DEVICES 8

struct eng_ctx {
	eng_graph *graph;
	eng_ctx_opts dopts;      /* what new devices are made with (strings copied below) */
	char cc[256], cache_dir[512];
	eng_device *devs[ENG_MAX_DEVICES];
	int ndevs;
	int default_dev;
	int debug;
	int nthreads; /* CPU worker threads, for choosing parallel loops */
	eng_status err;
	char errmsg[4096];
	eng_stats stats;
	uint64_t seed, rng_counter;
	uint32_t next_buf_id;
	struct eng_capture *capture; /* the JIT's launch recorder while it captures, else NULL */
	eng_tensor **gradt; /* tensors that require grad */
	int ngradt, capgradt;
	int nscopes; /* 1 = only the root scope */
	eng_tensor *scopes[ENG_MAX_SCOPES]; /* list heads */
};

/* Set the context error (only if none is set yet, unless force) and return code. */
eng_status eng_set_error(eng_ctx *ctx, eng_status code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Wrap a node in a new tensor in the innermost scope; takes ownership of the node reference.
 * node NULL (allocation failure) sets ENOMEM and returns NULL. */
eng_tensor *eng_tensor_wrap(eng_ctx *ctx, eng_node *node);
static inline eng_node *eng_tensor_node(const eng_tensor *t) { return t->node; }

/* Take t out of its scope: it is then owned by whoever holds it (freed with eng_tensor_free). */
void eng_tensor_unscope(eng_tensor *t);
/* After a realize: a tensor whose node is a realized assign becomes a plain buffer node of the
 * target's new version, so the graph that computed it can be freed. */
void eng_tensor_settle(eng_tensor *t);

/* Devices (device.c). Open the device named by spec ("CPU", "CPU:1", "CL", "CL:1") and add
 * it to ctx; returns its index, or -1 with a message in err. */
int eng_device_add(eng_ctx *ctx, const char *spec, char *err, size_t errlen);
void eng_device_destroy(eng_device *d);
/* Wait for d's queued work (asynchronous backends); a device-level error marks it failed. */
eng_status eng_device_sync(eng_device *d);
/* Mark d unusable after a device-level error (status s) and set the context error. */
eng_status eng_device_fail(eng_device *d, eng_status s, const char *msg);

/* Buffers on a device. */
eng_buffer *eng_buffer_alloc(eng_device *dev, eng_dtype dt, int64_t numel);
eng_status eng_buffer_write(eng_buffer *b, const void *src, size_t nbytes);
eng_status eng_buffer_read(eng_buffer *b, void *dst, size_t nbytes);

/* Checked arithmetic for shape products: false on overflow past INT64_MAX/ 2^40 elements. */
bool eng_shape_numel(int ndim, const int64_t *shape, int64_t *out);

/* Realize nodes (schedule.c / realize.c). */
eng_status eng_realize_nodes(eng_ctx *ctx, eng_node *const *nodes, int n);

#endif
