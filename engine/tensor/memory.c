/* memory.c: the public counters (eng_get_stats, per device eng_get_device_stats) and eng_trim,
 * which gives back what the allocator and the program and schedule caches keep for speed. */
#include <string.h>

#include "tensor.h"

#include "cache/progcache.h"
#include "device/device.h"
#include "realize/realize.h"

void eng_get_stats(const eng_ctx *ctx, eng_stats *out)
{
	*out = ctx->stats;
	out->mem_live = ctx->mem_live;
	out->mem_peak = ctx->mem_peak;
	out->mem_cached = ctx->mem_cached;
}

void eng_reset_stats(eng_ctx *ctx)
{
	memset(&ctx->stats, 0, sizeof(ctx->stats));
	ctx->mem_peak = ctx->mem_live;
	for (int i = 0; i < ctx->ndevs; i++) {
		eng_device *d = ctx->devs[i];
		eng_alloc *a = &d->alloc;
		a->peak = a->live;
		a->allocs = a->hits = a->bk_allocs = a->bk_frees = 0;
		if (d->progs)
			eng_progcache_reset_counts(d->progs);
	}
}

eng_status eng_get_device_stats(const eng_ctx *ctx, int dev, eng_device_stats *out)
{
	if (!out || dev < 0 || dev >= ctx->ndevs)
		return ENG_EINVAL; /* const ctx: no error record to set; the status says it */
	const eng_device *d = ctx->devs[dev];
	const eng_alloc *a = &d->alloc;
	*out = (eng_device_stats){
		.live_bytes = a->live,
		.peak_bytes = a->peak,
		.cached_bytes = a->cached,
		.allocs = a->allocs,
		.alloc_hits = a->hits,
		.backend_allocs = a->bk_allocs,
		.backend_frees = a->bk_frees,
		.programs = d->progs ? eng_progcache_count(d->progs) : 0,
		.program_evictions = d->progs ? eng_progcache_evictions(d->progs) : 0,
	};
	return ENG_OK;
}

uint64_t eng_trim(eng_ctx *ctx, unsigned what)
{
	uint64_t freed = 0;
	for (int i = 0; i < ctx->ndevs; i++)
		freed += eng_device_caches_trim(ctx->devs[i], what);
	return freed;
}
