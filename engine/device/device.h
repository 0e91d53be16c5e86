/* device.h: the engine's view of a backend device (opened through the backend registry, marked
 * failed after a device-level error) and the reference-counted buffers that live on it. */
#ifndef ENG_DEVICE_H
#define ENG_DEVICE_H

#include "alloc.h"
#include "backends/backend.h"
#include "core/context.h"

struct eng_progcache;
struct eng_schedcache;
struct eng_diskcache;
struct eng_beamcache;

typedef struct eng_device {
	bk_device bk;
	bk_target target; /* as the backend stated it at open */
	char name[32];
	int index;
	eng_ctx *ctx;
	/* the caches of the realize layer, attached after open (realize/devcaches.c) */
	struct eng_progcache *progs;   /* compiled kernels keyed by source */
	struct eng_schedcache *scache; /* kernel lists keyed by graph structure (NULL: off) */
	struct eng_diskcache *disk;           /* the compiled-program disk cache, opened on first use */
	struct eng_beamcache *beams;   /* the kernel search's choices (realize/beamcache.c) */
	int disk_state;                /* 0: not tried yet, 1: open, -1: off or unusable */
	bool disk_enabled, disk_warned;
	bool failed; /* a device-level error (lost, out of resources): every later use fails */
	char failmsg[256];
	char disk_dir[512]; /* empty: the default directory */
	uint64_t disk_max;
	eng_alloc alloc; /* cached free blocks and memory counters (alloc.c) */
} eng_device;

/* Device storage, reference-counted. numel elements of dtype, contiguous row-major. */
struct eng_buffer {
	eng_device *dev;  /* owning device */
	void *handle;     /* backend handle; for the CPU backend a host pointer */
	size_t nbytes;    /* what was asked for */
	size_t cap;       /* the block's size class: what it counts against the memory limit */
	eng_dtype dtype;
	int64_t numel;
	uint32_t refs;
	uint32_t id;
	uint32_t version; /* bumped each time an assign writes the buffer */
	/* A rand call's stream base (one int64; eng_rng_take): the numel its stream covers (at least
	 * 1), which a JIT replay takes afresh before its launches; 0: not one */
	int64_t rng_numel;
	int dev_index;    /* the context's index of dev */
	/* Caller memory the buffer uses in place (eng_buffer_wrap): never freed through the
	 * backend; release(release_arg, host) is called when the last reference goes. */
	bool wrapped;
	void *host;
	void (*release)(void *arg, void *data);
	void *release_arg;
};
typedef struct eng_buffer eng_buffer;

/* Open the device named by spec ("CPU", "CPU:1", "CL", "CL:1": a registered backend's name,
 * optionally with an ordinal) with the context's backend options and add it to ctx; returns
 * its index (an existing one if already open), or -1 with a message in err. The device has
 * no caches yet (eng_device_caches_open). */
int eng_device_add(eng_ctx *ctx, const char *spec, char *err, size_t errlen);
/* A new device for spec with the context's options and target, not yet one of ctx's devices
 * (index -1, no caches); NULL with a message in err. */
eng_device *eng_device_create(eng_ctx *ctx, const char *spec, char *err, size_t errlen);
/* The device a context opens when none is named: the first registered backend's ("CPU"). */
const char *eng_device_default_spec(void);
/* Free d and its backend device (its caches must be closed already). */
void eng_device_destroy(eng_device *d);
/* Wait for d's queued work (asynchronous backends); a device-level error marks it failed. */
eng_status eng_device_sync(eng_device *d);
/* Mark d unusable after a device-level error (status s) and set the context error. */
eng_status eng_device_fail(eng_device *d, eng_status s, const char *msg);

/* The caching allocator (alloc.c). eng_alloc_get serves nbytes from a cached block of its size
 * class or from the backend, after checking the context's memory limit (ENG_ENOMEM with a
 * message, nothing allocated); *size is the block's size. eng_alloc_put takes a block back
 * (the caller must hold no other use of it) and keeps it for reuse. eng_alloc_trim returns
 * every cached block of dev to its backend and says how many bytes went. */
eng_status eng_alloc_get(eng_device *dev, size_t nbytes, void **handle, size_t *size);
void eng_alloc_put(eng_device *dev, void *handle, size_t size);
uint64_t eng_alloc_trim(eng_device *dev);

/* Buffers on a device (buffer.c): a new buffer holds one reference; NULL sets the context error. */
eng_buffer *eng_buffer_alloc(eng_device *dev, eng_dtype dt, int64_t numel);
/* A buffer over caller memory data (nbytes) that kernels use in place, where the device can
 * (bk_device_ops.wrap_host); release (may be NULL) is called with (arg, data) when the last
 * reference goes. NULL without setting an error when the device cannot use host memory; NULL
 * with the error set on ENOMEM. */
eng_buffer *eng_buffer_wrap(eng_device *dev, eng_dtype dt, int64_t numel, void *data,
			    void (*release)(void *arg, void *data), void *arg);
eng_buffer *eng_buffer_ref(eng_buffer *b);
void eng_buffer_unref(eng_buffer *b);
eng_status eng_buffer_write(eng_buffer *b, const void *src, size_t nbytes);
/* Copy n bytes from host memory to byte offset off of b (off + n <= b->nbytes): lets a loader
 * fill a buffer piece by piece as data arrives, with no host copy of the whole. */
eng_status eng_buffer_write_at(eng_buffer *b, size_t off, const void *src, size_t n);
eng_status eng_buffer_read(eng_buffer *b, void *dst, size_t nbytes);

#endif
