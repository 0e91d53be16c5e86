/* shm.h: shared-memory regions of a client (a sealed memfd it passed over unix://, mapped once
 * per client), and tensor references into them checked against the region before any use
 * (docs/PROTOCOL.md, "Shared memory"). A bottom-layer module: it knows no server. */
#ifndef DMN_SHM_H
#define DMN_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tensord/protocol.h>

/* One mapped region. Refcounted: the client's set holds one reference, each request that names
 * it another; unmapped when the last goes (any thread). */
typedef struct dmn_shm_region dmn_shm_region;
/* A client's regions by name (loop thread only). */
typedef struct dmn_shm_set dmn_shm_set;

typedef struct dmn_shm_limits {
	int regions_max;           /* regions per client */
	uint64_t client_bytes_max; /* bytes mapped per client, all its regions together */
} dmn_shm_limits;

/* NULL when out of memory. */
dmn_shm_set *dmn_shm_set_new(void);
/* Drops the set's references (requests in flight keep theirs). NULL allowed. */
void dmn_shm_set_free(dmn_shm_set *set);
int dmn_shm_set_count(const dmn_shm_set *set);
uint64_t dmn_shm_set_bytes(const dmn_shm_set *set);

/* Map fd (not taken: the caller closes it) as region name (1..64 of [A-Za-z0-9_.-]): a memfd
 * sealed against shrinking (F_SEAL_SHRINK, so that its owner cannot truncate it under the
 * mapping), size > 0, within lim; writable maps it read-write (the fd must be open O_RDWR),
 * else read-only. The size into *size. TSD_BAD_REQUEST, TSD_TOO_LARGE or TSD_OUT_OF_MEMORY
 * with err naming what was wrong. */
tsd_status dmn_shm_register(dmn_shm_set *set, const dmn_shm_limits *lim, const char *name, int fd, bool writable,
			    uint64_t *size, char *err, size_t errlen);
/* Triton's system shared memory: map [offset, offset + size) of the POSIX shm object key
 * ("/name", shm_open) read-write as region name, when the object belongs to caller_uid (the
 * daemon maps only what its caller could), within lim. Such an object cannot be sealed: its owner
 * may shrink it at any time, so its bytes are touched only through dmn_copy_guarded. Statuses
 * as dmn_shm_register (TSD_UNAUTHORISED: another uid's object). */
#define DMN_SHM_KEY_MAX 255
tsd_status dmn_shm_register_key(dmn_shm_set *set, const dmn_shm_limits *lim, const char *name, const char *key,
				uint64_t offset, uint64_t size, uint32_t caller_uid, char *err, size_t errlen);
/* Up to max of set's regions into out (newest first); their count. */
int dmn_shm_set_list(const dmn_shm_set *set, const dmn_shm_region **out, int max);
bool dmn_shm_unsealed(const dmn_shm_region *g);   /* a POSIX shm object's: copies guarded */
const char *dmn_shm_key(const dmn_shm_region *g, uint64_t *offset); /* its key and offset ("" for a memfd) */
/* Copy n bytes from src to dst where one of them may lie in an unsealed region: false (the copy
 * partial) when the region was shrunk under it (SIGBUS, caught on this thread only). Any thread. */
bool dmn_copy_guarded(void *dst, const void *src, size_t n);

/* Forget name (requests in flight that named it keep their mapping). */
tsd_status dmn_shm_unregister(dmn_shm_set *set, const char *name, char *err, size_t errlen);
/* The region called name (not referenced for the caller), or NULL. */
dmn_shm_region *dmn_shm_find(const dmn_shm_set *set, const char *name);

void dmn_shm_ref(dmn_shm_region *g);
void dmn_shm_unref(dmn_shm_region *g); /* NULL allowed */
const char *dmn_shm_name(const dmn_shm_region *g);
uint64_t dmn_shm_size(const dmn_shm_region *g);
/* Where g is mapped (its size bytes). */
const void *dmn_shm_base(const dmn_shm_region *g);
bool dmn_shm_writable(const dmn_shm_region *g);
/* [offset, offset + nbytes) of g, when it lies inside g and offset is a multiple of align:
 * its address; else NULL with err naming the reference (what). */
void *dmn_shm_span(const dmn_shm_region *g, uint64_t offset, uint64_t nbytes, size_t align, const char *what,
		   char *err, size_t errlen);

#endif
