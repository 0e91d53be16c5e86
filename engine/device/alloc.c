/* alloc.c: the caching allocator of alloc.h (tinygrad's LRU allocator, PyTorch's caching
 * allocator): a freed buffer's block waits in its size class for the next request of that class,
 * so a step that allocates the same sizes each call touches fresh pages only on the first. */
#include "alloc.h"

#include <stdio.h>
#include <stdlib.h>

#include "device.h"

struct eng_free_blk {
	void *handle;
	size_t size;
	int cls;
	eng_free_blk *cnext;         /* same class, older */
	eng_free_blk *lprev, *lnext; /* all classes: newer, older */
};

size_t eng_alloc_class(size_t nbytes, int *cls)
{
	if (nbytes <= 64) {
		*cls = 0;
		return 64;
	}
	int k = 63 - __builtin_clzll((unsigned long long)nbytes); /* 2^k <= nbytes < 2^(k+1) */
	size_t q = (size_t)1 << (k - 2), base = (size_t)1 << k;
	size_t sub = (nbytes - base + q - 1) / q; /* 0..4 quarters above 2^k */
	if (sub == 4)
		k++, sub = 0, base <<= 1;
	if (k > 63 - 2) { /* beyond any real allocation: its own size, never cached */
		*cls = -1;
		return nbytes;
	}
	*cls = (k - 6) * 4 + (int)sub;
	return base + sub * ((size_t)1 << (k - 2));
}

static void lru_unlink(eng_alloc *a, eng_free_blk *f)
{
	if (f->lprev)
		f->lprev->lnext = f->lnext;
	else
		a->newest = f->lnext;
	if (f->lnext)
		f->lnext->lprev = f->lprev;
	else
		a->oldest = f->lprev;
}

/* Return the oldest cached block of dev to its backend; false if none is cached. */
static bool release_oldest(eng_device *dev)
{
	eng_alloc *a = &dev->alloc;
	eng_free_blk *f = a->oldest;
	if (!f)
		return false;
	lru_unlink(a, f);
	eng_free_blk **p = &a->cls[f->cls];
	while (*p != f)
		p = &(*p)->cnext;
	*p = f->cnext;
	a->cached -= f->size;
	dev->ctx->mem_cached -= f->size;
	a->bk_frees++;
	dev->bk.ops->free(dev->bk.ctx, f->handle);
	free(f);
	return true;
}

uint64_t eng_alloc_trim(eng_device *dev)
{
	uint64_t freed = dev->alloc.cached;
	while (release_oldest(dev))
		;
	return freed;
}

/* Make room for size more bytes under the context's limit by returning cached blocks, this
 * device's first, then the others'. */
static void make_room(eng_device *dev, size_t size)
{
	eng_ctx *ctx = dev->ctx;
	if (!ctx->mem_limit)
		return;
	while (ctx->mem_live + ctx->mem_cached + size > ctx->mem_limit && release_oldest(dev))
		;
	for (int i = 0; i < ctx->ndevs; i++)
		while (ctx->mem_live + ctx->mem_cached + size > ctx->mem_limit && release_oldest(ctx->devs[i]))
			;
}

static void count_live(eng_device *dev, size_t size)
{
	eng_alloc *a = &dev->alloc;
	eng_ctx *ctx = dev->ctx;
	a->live += size;
	if (a->live > a->peak)
		a->peak = a->live;
	ctx->mem_live += size;
	if (ctx->mem_live > ctx->mem_peak)
		ctx->mem_peak = ctx->mem_live;
}

eng_status eng_alloc_get(eng_device *dev, size_t nbytes, void **handle, size_t *size)
{
	eng_alloc *a = &dev->alloc;
	eng_ctx *ctx = dev->ctx;
	int cls;
	size_t sz = eng_alloc_class(nbytes, &cls);
	a->allocs++;
	ctx->stats.allocs++;
	if (cls >= 0 && a->cls[cls]) {
		eng_free_blk *f = a->cls[cls];
		a->cls[cls] = f->cnext;
		lru_unlink(a, f);
		a->cached -= f->size;
		ctx->mem_cached -= f->size;
		*handle = f->handle;
		*size = f->size;
		free(f);
		a->hits++;
		ctx->stats.alloc_hits++;
		count_live(dev, *size);
		return ENG_OK;
	}
	if (ctx->mem_limit && (sz > ctx->mem_limit || ctx->mem_live > ctx->mem_limit - sz))
		return eng_set_error(ctx, ENG_ENOMEM,
				     "%s: allocating %zu bytes (%zu requested) would exceed the context's memory limit "
				     "of %llu bytes (%llu bytes live)",
				     dev->name, sz, nbytes, (unsigned long long)ctx->mem_limit,
				     (unsigned long long)ctx->mem_live);
	make_room(dev, sz);
	bk_err berr;
	eng_status s = dev->bk.ops->alloc(dev->bk.ctx, sz, handle, &berr);
	if (s) { /* the system may be short of what the cache holds: give it all back, try once more */
		for (int i = 0; i < ctx->ndevs; i++)
			eng_alloc_trim(ctx->devs[i]);
		s = dev->bk.ops->alloc(dev->bk.ctx, sz, handle, &berr);
	}
	if (s)
		return eng_set_error(ctx, ENG_ENOMEM, "%s: cannot allocate %zu bytes: %s", dev->name, sz, berr.msg);
	a->bk_allocs++;
	*size = sz;
	count_live(dev, sz);
	return ENG_OK;
}

void eng_alloc_put(eng_device *dev, void *handle, size_t size)
{
	eng_alloc *a = &dev->alloc;
	eng_ctx *ctx = dev->ctx;
	int cls;
	a->live -= size;
	ctx->mem_live -= size;
	eng_alloc_class(size, &cls);
	bool keep = cls >= 0 && !dev->failed && !ctx->dopts.no_alloc_cache;
	eng_free_blk *f = keep ? malloc(sizeof(*f)) : NULL;
	if (!f || (ctx->mem_limit && ctx->mem_live + ctx->mem_cached + size > ctx->mem_limit)) {
		free(f); /* not worth keeping: over the limit, uncached size, or a failed device */
		a->bk_frees++;
		dev->bk.ops->free(dev->bk.ctx, handle);
		return;
	}
	*f = (eng_free_blk){.handle = handle, .size = size, .cls = cls, .cnext = a->cls[cls], .lnext = a->newest};
	a->cls[cls] = f;
	if (a->newest)
		a->newest->lprev = f;
	else
		a->oldest = f;
	a->newest = f;
	a->cached += size;
	ctx->mem_cached += size;
}
