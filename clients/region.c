/* region.c: shared-memory regions from the client's side (unix:// only; docs/PROTOCOL.md,
 * "Shared memory"): a memfd sealed against shrinking and growing, mapped here read-write and
 * registered with the daemon by passing it over the connection (read-only for an input region:
 * the daemon gets an O_RDONLY descriptor it cannot map for writing); the header fields that name
 * tensors in it; outputs the daemon wrote there read back as views. */
#include "client_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct tsd_region {
	tsd_client *c;
	char name[65];
	void *base;
	size_t size;
	int fd;        /* the memfd (read-write), kept to register again after a reconnect */
	bool writable; /* the daemon may write into it */
};

static bool name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if (n < 1 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-", s[i]))
			return false;
	return true;
}

tsd_status tsd_region_register(tsd_region *g)
{
	int fd = g->fd;
	if (!g->writable) { /* the daemon gets a descriptor it cannot write through */
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%d", g->fd);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			return tsd_client_fail(g->c, TSD_INTERNAL, "region \"%s\": a read-only descriptor: %s", g->name,
					       strerror(errno));
	}
	cJSON *h = cJSON_CreateObject();
	tsd_status st = TSD_OUT_OF_MEMORY;
	if (h && cJSON_AddStringToObject(h, "verb", "shm.register") && cJSON_AddStringToObject(h, "name", g->name) &&
	    cJSON_AddBoolToObject(h, "writable", g->writable)) {
		tsd_reply *r = NULL;
		st = tsd_call_run_fd(g->c, h, fd, &r);
		if (r && st != TSD_OK)
			tsd_client_fail(g->c, st, "shm.register: %s", tsd_reply_error(r));
		tsd_reply_free(r);
	} else {
		tsd_client_fail(g->c, st, "out of memory");
	}
	cJSON_Delete(h);
	if (fd != g->fd)
		close(fd);
	return st;
}

tsd_region *tsd_region_create(tsd_client *c, const char *name, size_t size, bool writable)
{
	if (!name_ok(name)) {
		tsd_client_fail(c, TSD_BAD_REQUEST, "region name: 1..64 bytes of [A-Za-z0-9_.-]");
		return NULL;
	}
	if (!size) {
		tsd_client_fail(c, TSD_BAD_REQUEST, "region \"%s\": size 0", name);
		return NULL;
	}
	tsd_region *g = calloc(1, sizeof(*g));
	if (!g) {
		tsd_client_fail(c, TSD_OUT_OF_MEMORY, "out of memory");
		return NULL;
	}
	g->c = c;
	g->size = size;
	g->writable = writable;
	g->base = MAP_FAILED;
	snprintf(g->name, sizeof(g->name), "%s", name);
	g->fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (g->fd < 0 || ftruncate(g->fd, (off_t)size) ||
	    fcntl(g->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) ||
	    (g->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, g->fd, 0)) == MAP_FAILED) {
		tsd_client_fail(c, errno == ENOMEM ? TSD_OUT_OF_MEMORY : TSD_INTERNAL, "region \"%s\" (%zu bytes): %s", name,
				size, strerror(errno));
		tsd_region_destroy(g);
		return NULL;
	}
	tsd_status st = tsd_region_register(g);
	if (st != TSD_OK) {
		char keep[512];
		snprintf(keep, sizeof(keep), "%s", tsd_client_error(c));
		munmap(g->base, g->size);
		close(g->fd);
		free(g);
		tsd_client_fail(c, st, "%s", keep);
		return NULL;
	}
	return g;
}

void *tsd_region_data(const tsd_region *g)
{
	return g->base;
}

size_t tsd_region_size(const tsd_region *g)
{
	return g->size;
}

const char *tsd_region_name(const tsd_region *g)
{
	return g->name;
}

void tsd_region_destroy(tsd_region *g)
{
	if (!g)
		return;
	if (g->base != MAP_FAILED) { /* registered: forgotten by the daemon (best effort; it also
				      * forgets every region of a connection that closes) */
		cJSON *h = cJSON_CreateObject();
		if (h && cJSON_AddStringToObject(h, "verb", "shm.unregister") && cJSON_AddStringToObject(h, "name", g->name)) {
			tsd_reply *r = NULL;
			tsd_client_call(g->c, h, NULL, 0, &r);
			tsd_reply_free(r);
		}
		cJSON_Delete(h);
		munmap(g->base, g->size);
	}
	if (g->fd >= 0)
		close(g->fd);
	free(g);
}

/* header["shm"][list], made on demand. */
static cJSON *shm_list(cJSON *header, const char *list)
{
	cJSON *s = cJSON_GetObjectItemCaseSensitive(header, "shm");
	if (!s && !(s = cJSON_AddObjectToObject(header, "shm")))
		return NULL;
	cJSON *a = cJSON_GetObjectItemCaseSensitive(s, list);
	return a ? a : cJSON_AddArrayToObject(s, list);
}

bool tsd_shm_input(cJSON *header, const char *name, tsd_dtype dtype, int ndim, const int64_t *shape,
		   const tsd_region *g, size_t offset)
{
	cJSON *a = shm_list(header, "inputs"), *e = cJSON_CreateObject(), *sh = cJSON_CreateArray();
	bool ok = a && e && sh && cJSON_AddStringToObject(e, "name", name) &&
		  cJSON_AddStringToObject(e, "dtype", tsd_dtype_name(dtype)) && cJSON_AddItemToObject(e, "shape", sh);
	if (!ok) {
		cJSON_Delete(sh);
		cJSON_Delete(e);
		return false;
	}
	for (int d = 0; d < ndim; d++)
		cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)shape[d]));
	cJSON_AddStringToObject(e, "region", g->name);
	cJSON_AddNumberToObject(e, "offset", (double)offset);
	return cJSON_AddItemToArray(a, e);
}

bool tsd_shm_output(cJSON *header, const char *name, const tsd_region *g, size_t offset)
{
	cJSON *a = shm_list(header, "outputs"), *e = cJSON_CreateObject();
	if (!a || !e || !cJSON_AddStringToObject(e, "name", name) || !cJSON_AddStringToObject(e, "region", g->name) ||
	    !cJSON_AddNumberToObject(e, "offset", (double)offset)) {
		cJSON_Delete(e);
		return false;
	}
	return cJSON_AddItemToArray(a, e);
}

bool tsd_reply_shm_output(const tsd_reply *r, const tsd_region *g, const char *name, tsd_tensor *out)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(tsd_reply_json(r), "shm_outputs"), *e;
	cJSON_ArrayForEach(e, a)
	{
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name"), *rg = cJSON_GetObjectItemCaseSensitive(e, "region");
		if (!cJSON_IsString(n) || strcmp(n->valuestring, name) || !cJSON_IsString(rg) ||
		    strcmp(rg->valuestring, g->name))
			continue;
		const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "offset"),
			    *nb = cJSON_GetObjectItemCaseSensitive(e, "nbytes"),
			    *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype"),
			    *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
		memset(out, 0, sizeof(*out));
		if (!cJSON_IsNumber(off) || !cJSON_IsNumber(nb) || !cJSON_IsString(dt) ||
		    !tsd_dtype_parse(dt->valuestring, &out->dtype) || !cJSON_IsArray(sh) ||
		    cJSON_GetArraySize(sh) > TSD_MAX_DIMS || off->valuedouble < 0 || nb->valuedouble < 0 ||
		    off->valuedouble > (double)g->size || nb->valuedouble > (double)g->size - off->valuedouble)
			return false;
		size_t numel = 1;
		out->ndim = cJSON_GetArraySize(sh);
		for (int d = 0; d < out->ndim; d++) {
			double v = cJSON_GetArrayItem(sh, d)->valuedouble;
			if (!(v >= 0) || v > 1e12)
				return false;
			out->shape[d] = (int64_t)v;
			numel *= (size_t)v;
		}
		out->nbytes = (size_t)nb->valuedouble;
		if (numel * tsd_dtype_size(out->dtype) != out->nbytes)
			return false;
		out->name = n->valuestring;
		out->data = (const uint8_t *)g->base + (size_t)off->valuedouble;
		return true;
	}
	return false;
}

