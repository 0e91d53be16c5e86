/* shm.c: a client's shared-memory regions: sealed memfds mapped once, refcounted so that a
 * request naming a region keeps it mapped until the request is freed, and spans checked
 * against the region's size before they are used. */
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "util.h"

struct dmn_shm_region {
	atomic_int refs;
	void *base;
	uint64_t size;
	bool writable;
	char name[65];
	struct dmn_shm_region *next; /* in its set */
};

struct dmn_shm_set {
	dmn_shm_region *head;
	int n;
	uint64_t bytes;
};

dmn_shm_set *dmn_shm_set_new(void)
{
	return calloc(1, sizeof(dmn_shm_set));
}

void dmn_shm_set_free(dmn_shm_set *set)
{
	if (!set)
		return;
	for (dmn_shm_region *g = set->head, *nx; g; g = nx) {
		nx = g->next;
		dmn_shm_unref(g);
	}
	free(set);
}

int dmn_shm_set_count(const dmn_shm_set *set)
{
	return set ? set->n : 0;
}

uint64_t dmn_shm_set_bytes(const dmn_shm_set *set)
{
	return set ? set->bytes : 0;
}

static bool name_ok(const char *s)
{
	return dmn_name_valid(s, strlen(s));
}

dmn_shm_region *dmn_shm_find(const dmn_shm_set *set, const char *name)
{
	for (dmn_shm_region *g = set ? set->head : NULL; g; g = g->next)
		if (!strcmp(g->name, name))
			return g;
	return NULL;
}

tsd_status dmn_shm_register(dmn_shm_set *set, const dmn_shm_limits *lim, const char *name, int fd, bool writable,
			    uint64_t *size, char *err, size_t errlen)
{
	if (!name_ok(name))
		return dmn_bad(err, errlen, TSD_BAD_REQUEST, "name: 1..64 bytes of [A-Za-z0-9_.-]");
	if (dmn_shm_find(set, name))
		return dmn_bad(err, errlen, TSD_BAD_REQUEST, "name: region \"%s\" is registered already (shm.unregister it first)",
			       name);
	if (set->n >= lim->regions_max)
		return dmn_bad(err, errlen, TSD_TOO_LARGE, "region \"%s\": this client has %d regions, at most %d (shm_regions_max)",
			       name, set->n, lim->regions_max);
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0)
		return dmn_bad(err, errlen, TSD_BAD_REQUEST, "region \"%s\": not a memfd (memfd_create with MFD_ALLOW_SEALING)",
			       name);
	if (!(seals & F_SEAL_SHRINK))
		return dmn_bad(err, errlen, TSD_BAD_REQUEST,
			       "region \"%s\": the memfd must be sealed against shrinking (fcntl F_ADD_SEALS, F_SEAL_SHRINK)", name);
	struct stat st;
	if (fstat(fd, &st) || st.st_size <= 0)
		return dmn_bad(err, errlen, TSD_BAD_REQUEST, "region \"%s\": empty (ftruncate the memfd to its size first)", name);
	uint64_t sz = (uint64_t)st.st_size;
	if (sz > lim->client_bytes_max - set->bytes || set->bytes > lim->client_bytes_max)
		return dmn_bad(err, errlen, TSD_TOO_LARGE,
			       "region \"%s\": %llu bytes; this client maps %llu, at most %llu together (shm_client_bytes_max)",
			       name, (unsigned long long)sz, (unsigned long long)set->bytes,
			       (unsigned long long)lim->client_bytes_max);
	if (writable && (fcntl(fd, F_GETFL) & O_ACCMODE) != O_RDWR)
		return dmn_bad(err, errlen, TSD_BAD_REQUEST, "region \"%s\": writable, but the fd was not opened read-write",
			       name);
	dmn_shm_region *g = calloc(1, sizeof(*g));
	if (!g)
		return dmn_bad(err, errlen, TSD_OUT_OF_MEMORY, "out of memory registering a region");
	void *p = mmap(NULL, (size_t)sz, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		int e = errno;
		free(g);
		return dmn_bad(err, errlen, e == ENOMEM ? TSD_OUT_OF_MEMORY : TSD_BAD_REQUEST, "region \"%s\": mmap: %s", name,
			       strerror(e));
	}
	atomic_init(&g->refs, 1);
	g->base = p;
	g->size = sz;
	g->writable = writable;
	snprintf(g->name, sizeof(g->name), "%s", name);
	g->next = set->head;
	set->head = g;
	set->n++;
	set->bytes += sz;
	*size = sz;
	return TSD_OK;
}

tsd_status dmn_shm_unregister(dmn_shm_set *set, const char *name, char *err, size_t errlen)
{
	for (dmn_shm_region **p = set ? &set->head : NULL; p && *p; p = &(*p)->next)
		if (!strcmp((*p)->name, name)) {
			dmn_shm_region *g = *p;
			*p = g->next;
			set->n--;
			set->bytes -= g->size;
			dmn_shm_unref(g);
			return TSD_OK;
		}
	return dmn_bad(err, errlen, TSD_BAD_REQUEST, "name: no region \"%.64s\" registered on this connection", name);
}

void dmn_shm_ref(dmn_shm_region *g)
{
	atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
}

void dmn_shm_unref(dmn_shm_region *g)
{
	if (!g || atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) != 1)
		return;
	munmap(g->base, (size_t)g->size);
	free(g);
}

const char *dmn_shm_name(const dmn_shm_region *g)
{
	return g->name;
}

uint64_t dmn_shm_size(const dmn_shm_region *g)
{
	return g->size;
}

const void *dmn_shm_base(const dmn_shm_region *g)
{
	return g->base;
}

bool dmn_shm_writable(const dmn_shm_region *g)
{
	return g->writable;
}

void *dmn_shm_span(const dmn_shm_region *g, uint64_t offset, uint64_t nbytes, size_t align, const char *what,
		   char *err, size_t errlen)
{
	if (align > 1 && offset % align) {
		dmn_bad(err, errlen, TSD_BAD_REQUEST, "%s: offset %llu is not a multiple of %zu", what,
			(unsigned long long)offset, align);
		return NULL;
	}
	if (offset > g->size || nbytes > g->size - offset) {
		dmn_bad(err, errlen, TSD_BAD_REQUEST, "%s: bytes [%llu, %llu + %llu) are outside region \"%s\" (%llu bytes)",
			what, (unsigned long long)offset, (unsigned long long)offset, (unsigned long long)nbytes, g->name,
			(unsigned long long)g->size);
		return NULL;
	}
	return (uint8_t *)g->base + offset;
}
