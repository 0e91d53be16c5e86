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
#include <unistd.h>

#include "util.h"

struct dmn_shm_region {
	atomic_int refs;
	void *base;
	uint64_t size;
	bool writable;
	char name[65];
	/* a POSIX shm object's span (dmn_shm_register_key): not sealed, so read and written only
	 * through dmn_copy_guarded; the mapping starts at the page under its offset */
	bool unsealed;
	char key[DMN_SHM_KEY_MAX + 1];
	uint64_t key_offset;
	void *map;
	size_t map_len;
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

/* The checks every registration makes: name, not taken, room in lim for sz more bytes. */
static tsd_status room(const dmn_shm_set *set, const dmn_shm_limits *lim, const char *name, uint64_t sz, char *err,
		       size_t errlen)
{
	if (!name_ok(name))
		return dmn_bad(err, errlen, TSD_BAD_REQUEST, "name: 1..64 bytes of [A-Za-z0-9_.-]");
	if (dmn_shm_find(set, name))
		return dmn_bad(err, errlen, TSD_BAD_REQUEST, "name: region \"%s\" is registered already (unregister it first)",
			       name);
	if (set->n >= lim->regions_max)
		return dmn_bad(err, errlen, TSD_TOO_LARGE, "region \"%s\": %d regions are registered, at most %d (shm_regions_max)",
			       name, set->n, lim->regions_max);
	if (sz > lim->client_bytes_max - set->bytes || set->bytes > lim->client_bytes_max)
		return dmn_bad(err, errlen, TSD_TOO_LARGE,
			       "region \"%s\": %llu bytes; %llu are mapped, at most %llu together (shm_client_bytes_max)",
			       name, (unsigned long long)sz, (unsigned long long)set->bytes,
			       (unsigned long long)lim->client_bytes_max);
	return TSD_OK;
}

static void add(dmn_shm_set *set, dmn_shm_region *g)
{
	atomic_init(&g->refs, 1);
	g->next = set->head;
	set->head = g;
	set->n++;
	set->bytes += g->size;
}

tsd_status dmn_shm_register(dmn_shm_set *set, const dmn_shm_limits *lim, const char *name, int fd, bool writable,
			    uint64_t *size, char *err, size_t errlen)
{
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
	tsd_status s = room(set, lim, name, sz, err, errlen);
	if (s != TSD_OK)
		return s;
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
	g->base = p;
	g->size = sz;
	g->writable = writable;
	snprintf(g->name, sizeof(g->name), "%s", name);
	add(set, g);
	*size = sz;
	return TSD_OK;
}

tsd_status dmn_shm_register_key(dmn_shm_set *set, const dmn_shm_limits *lim, const char *name, const char *key,
				uint64_t offset, uint64_t size, uint32_t caller_uid, char *err, size_t errlen)
{
	size_t kl = strlen(key);
	if (kl < 2 || kl > DMN_SHM_KEY_MAX || key[0] != '/' || strchr(key + 1, '/'))
		return dmn_bad(err, errlen, TSD_BAD_REQUEST, "key: \"%.64s\" is not a POSIX shm name (\"/name\", at most %d bytes, no other '/')",
			       key, DMN_SHM_KEY_MAX);
	if (!size)
		return dmn_bad(err, errlen, TSD_BAD_REQUEST, "byte_size: at least 1");
	tsd_status s = room(set, lim, name, size, err, errlen);
	if (s != TSD_OK)
		return s;
	int fd = shm_open(key, O_RDWR, 0); /* glibc adds O_NOFOLLOW and O_CLOEXEC */
	if (fd < 0)
		return dmn_bad(err, errlen, TSD_BAD_REQUEST, "key \"%s\": %s", key, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return dmn_bad(err, errlen, TSD_BAD_REQUEST, "key \"%s\": not a shared memory object", key);
	}
	if (st.st_uid != caller_uid) {
		close(fd);
		return dmn_bad(err, errlen, TSD_UNAUTHORISED, "key \"%s\": owned by uid %u, not by the caller's uid %u", key,
			       (unsigned)st.st_uid, (unsigned)caller_uid);
	}
	if (offset > (uint64_t)st.st_size || size > (uint64_t)st.st_size - offset) {
		close(fd);
		return dmn_bad(err, errlen, TSD_BAD_REQUEST, "key \"%s\": [%llu, %llu + %llu) is past its %lld bytes", key,
			       (unsigned long long)offset, (unsigned long long)offset, (unsigned long long)size,
			       (long long)st.st_size);
	}
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), start = offset / page * page;
	size_t len = (size_t)(offset - start + size);
	dmn_shm_region *g = calloc(1, sizeof(*g));
	void *p = g ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)start) : MAP_FAILED;
	int e = errno;
	close(fd);
	if (p == MAP_FAILED) {
		free(g);
		return dmn_bad(err, errlen, TSD_OUT_OF_MEMORY, "key \"%s\": mmap: %s", key, g ? strerror(e) : "out of memory");
	}
	g->map = p;
	g->map_len = len;
	g->base = (uint8_t *)p + (offset - start);
	g->size = size;
	g->writable = true;
	g->unsealed = true;
	snprintf(g->name, sizeof(g->name), "%s", name);
	snprintf(g->key, sizeof(g->key), "%s", key);
	g->key_offset = offset;
	add(set, g);
	return TSD_OK;
}

int dmn_shm_set_list(const dmn_shm_set *set, const dmn_shm_region **out, int max)
{
	int n = 0;
	for (const dmn_shm_region *g = set ? set->head : NULL; g && n < max; g = g->next)
		out[n++] = g;
	return n;
}

bool dmn_shm_unsealed(const dmn_shm_region *g)
{
	return g->unsealed;
}

const char *dmn_shm_key(const dmn_shm_region *g, uint64_t *offset)
{
	*offset = g->key_offset;
	return g->key;
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
	return dmn_bad(err, errlen, TSD_BAD_REQUEST, "name: no region \"%.64s\" is registered", name);
}

void dmn_shm_ref(dmn_shm_region *g)
{
	atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
}

void dmn_shm_unref(dmn_shm_region *g)
{
	if (!g || atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) != 1)
		return;
	munmap(g->map ? g->map : g->base, g->map ? g->map_len : (size_t)g->size);
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
