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
