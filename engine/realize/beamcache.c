/* beamcache.c: the kernel search's choices per device (beamcache.h): a small memory table keyed
 * like the disk entries, over the device's disk cache (cache/progdisk.c opens it). */
#include "beamcache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/diskcache.h"
#include "cache/progdisk.h"
#include "util/hash.h"

typedef struct bentry {
	char key[33];
	eng_kernel_choice c;
} bentry;

struct eng_beamcache {
	bentry *e;
	int n, cap;
};

eng_beamcache *eng_beamcache_create(void)
{
	return calloc(1, sizeof(eng_beamcache));
}

void eng_beamcache_destroy(eng_beamcache *bc)
{
	if (bc)
		free(bc->e);
	free(bc);
}

void eng_beamcache_machine(eng_device *dev, char *out, size_t len)
{
	const bk_device_ops *ops = dev->bk.ops;
	const char *id = ops->cache_id ? ops->cache_id(dev->bk.ctx) : "";
	const bk_target *t = &dev->target;
	snprintf(out, len,
		 "beam%d backend=%s device=%s isa=%s march=%s vbytes=%d vregs=%d par=%d group=%d vector=%d l1=%lld l2=%lld id=%s",
		 ENG_BEAM_FORMAT, ops->name, dev->name, t->isa, t->march, t->vector_bytes, t->vector_regs, t->parallelism,
		 t->reduce_group, t->vector_width, (long long)t->cache_l1, (long long)t->cache_l2, id ? id : "");
}

/* The key of src on dev (memory and disk alike) and the two hashes of its record. */
static void key_of(eng_device *dev, const char *src, char key[33], uint64_t *mh, uint64_t *kh)
{
	char machine[4096];
	eng_beamcache_machine(dev, machine, sizeof(machine));
	const void *parts[3] = {"beam", machine, src};
	size_t lens[3] = {4, strlen(machine), strlen(src)};
	eng_diskcache_key(parts, lens, 3, key);
	*mh = eng_hash_str(machine);
	*kh = eng_hash_str(src);
}

static void put_u32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

static uint64_t get_u64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

void eng_beam_encode(uint64_t mh, uint64_t kh, const eng_kernel_choice *c,
		     unsigned char out[ENG_BEAM_RECORD_SIZE])
{
	memcpy(out, "TSDB", 4);
	put_u32(out + 4, ENG_BEAM_FORMAT);
	put_u64(out + 8, mh);
	put_u64(out + 16, kh);
	put_u32(out + 24, (uint32_t)c->tiledim[0]);
	put_u32(out + 28, (uint32_t)c->tiledim[1]);
	put_u64(out + 32, (uint64_t)c->tile[0]);
	put_u64(out + 40, (uint64_t)c->tile[1]);
	put_u64(out + 48, (uint64_t)c->kblock);
	put_u64(out + 56, (uint64_t)c->mblock);
	put_u32(out + 64, (uint32_t)c->pack);
	put_u32(out + 68, (uint32_t)c->group);
	put_u64(out + 72, (uint64_t)c->mrows);
	put_u32(out + 80, (uint32_t)c->rpack);
	put_u32(out + 84, 0);
}

bool eng_beam_decode(const void *bytes, size_t n, uint64_t mh, uint64_t kh, eng_kernel_choice *c)
{
	const unsigned char *p = bytes;
	if (n != ENG_BEAM_RECORD_SIZE || memcmp(p, "TSDB", 4) ||
	    get_u32(p + 4) != ENG_BEAM_FORMAT || get_u64(p + 8) != mh || get_u64(p + 16) != kh)
		return false;
	c->tiledim[0] = (int32_t)get_u32(p + 24);
	c->tiledim[1] = (int32_t)get_u32(p + 28);
	c->tile[0] = (int64_t)get_u64(p + 32);
	c->tile[1] = (int64_t)get_u64(p + 40);
	c->kblock = (int64_t)get_u64(p + 48);
	c->mblock = (int64_t)get_u64(p + 56);
	c->pack = (int32_t)get_u32(p + 64);
	c->group = (int32_t)get_u32(p + 68);
	c->mrows = (int64_t)get_u64(p + 72);
	c->rpack = (int32_t)get_u32(p + 80);
	return true; /* the values are checked when the choice is applied (eng_choice_apply) */
}

static bentry *find(eng_beamcache *bc, const char key[33])
{
	for (int i = 0; bc && i < bc->n; i++)
		if (!memcmp(bc->e[i].key, key, 33))
			return &bc->e[i];
	return NULL;
}

static void remember(eng_beamcache *bc, const char key[33], const eng_kernel_choice *c)
{
	bentry *e = find(bc, key);
	if (!e && bc && bc->n == bc->cap) {
		int nc = bc->cap ? bc->cap * 2 : 16;
		bentry *ne = realloc(bc->e, (size_t)nc * sizeof(*ne));
		if (!ne)
			return; /* out of memory: not remembered, searched again */
		bc->e = ne;
		bc->cap = nc;
	}
	if (!e && bc) {
		e = &bc->e[bc->n++];
		memcpy(e->key, key, 33);
	}
	if (e)
		e->c = *c;
}

bool eng_beamcache_get(eng_device *dev, const char *src, eng_kernel_choice *out)
{
	char key[33];
	uint64_t mh, kh;
	key_of(dev, src, key, &mh, &kh);
	const bentry *e = find(dev->beams, key);
	if (e) {
		*out = e->c;
		return true;
	}
	eng_diskcache *dc = eng_progdisk_cache(dev);
	void *bytes;
	size_t n;
	if (!dc || eng_diskcache_get(dc, key, &bytes, &n))
		return false;
	bool ok = eng_beam_decode(bytes, n, mh, kh, out);
	free(bytes);
	if (!ok)
		eng_logmsg(dev->ctx, 1,
			   "beam: %s: a stale or foreign search record on disk, ignored", key);
	else
		remember(dev->beams, key, out);
	return ok;
}

void eng_beamcache_put(eng_device *dev, const char *src, const eng_kernel_choice *c)
{
	char key[33];
	uint64_t mh, kh;
	key_of(dev, src, key, &mh, &kh);
	remember(dev->beams, key, c);
	eng_diskcache *dc = eng_progdisk_cache(dev);
	unsigned char rec[ENG_BEAM_RECORD_SIZE];
	eng_beam_encode(mh, kh, c, rec);
	if (dc && eng_diskcache_put(dc, key, rec, sizeof(rec)))
		eng_logmsg(dev->ctx, 1, "beam: not recorded on disk: %s", eng_diskcache_errmsg(dc));
}

void eng_beamcache_forget(eng_device *dev, const char *src)
{
	char key[33];
	uint64_t mh, kh;
	key_of(dev, src, key, &mh, &kh);
	eng_beamcache *bc = dev->beams;
	bentry *e = find(bc, key);
	if (e)
		*e = bc->e[--bc->n];
}
