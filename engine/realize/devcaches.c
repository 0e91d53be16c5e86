/* devcaches.c: the caches a realize consults for each device (compiled programs in memory and
 * on disk, kernel lists by graph structure), attached when a device opens, freed when it goes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/diskcache.h"
#include "cache/progcache.h"
#include "beamcache.h"
#include "realize.h"
#include "schedule/schedcache.h"

/* The schedule cache's pin hook: its entries keep their programs loaded. */
static void pin_program(void *arg, const bk_program *prog, int delta)
{
	eng_device *d = arg;
	eng_progcache_pin(d->progs, prog, delta);
}

eng_status eng_device_caches_open(eng_device *d)
{
	const eng_ctx_opts *o = &d->ctx->dopts;
	const char *env = getenv("TENSORD_DISK_CACHE"), *dir = o->cache_dir ? o->cache_dir : getenv("TENSORD_CACHE_DIR");
	d->disk_enabled = !o->no_disk_cache && !(env && !strcmp(env, "0"));
	snprintf(d->disk_dir, sizeof(d->disk_dir), "%s", dir ? dir : "");
	d->disk_max = o->disk_cache_max;
	d->progs = eng_progcache_create();
	d->scache = o->no_schedule_cache ? NULL : eng_schedcache_create(0, pin_program, d);
	d->beams = eng_beamcache_create();
	if (!d->progs || (!o->no_schedule_cache && !d->scache) || !d->beams) {
		eng_device_caches_close(d);
		return eng_set_error(d->ctx, ENG_ENOMEM, "%s: out of memory for its caches", d->name);
	}
	return ENG_OK;
}

void eng_device_caches_close(eng_device *d)
{
	eng_schedcache_destroy(d->scache);
	d->scache = NULL;
	eng_beamcache_destroy(d->beams);
	d->beams = NULL;
	eng_diskcache_close(d->disk);
	d->disk = NULL;
	if (d->progs)
		eng_progcache_destroy(d->progs, &d->bk);
	d->progs = NULL;
}

/* Past the bound, programs that no schedule-cache entry or JIT capture pins go, least recently
 * used first. Schedule-cache entries pin their programs, so while the pinned ones alone pass the
 * bound the least recently used entries go first (a later realize of their graph schedules it
 * again): the bound holds whatever the graphs, unless JIT captures alone pin more. */
void eng_device_caches_bound(eng_device *d)
{
	uint32_t max = d->ctx->dopts.prog_cache_max ? d->ctx->dopts.prog_cache_max : ENG_PROGCACHE_DEFAULT_MAX;
	if (!d->progs || eng_progcache_count(d->progs) <= max)
		return;
	int dropped = 0;
	while (d->scache && eng_progcache_pinned(d->progs) > max && eng_schedcache_evict_lru(d->scache))
		dropped++;
	uint64_t gone = eng_progcache_evict(d->progs, &d->bk, max);
	if (gone || dropped)
		eng_logmsg(d->ctx, 2, "%s: unloaded %llu least recently used programs, %d schedule-cache entries (bound %u)",
			   d->name, (unsigned long long)gone, dropped, max);
}

uint64_t eng_device_caches_trim(eng_device *d, unsigned what)
{
	if (what & ENG_TRIM_SCHEDULES && d->scache)
		eng_schedcache_clear(d->scache);
	if (what & ENG_TRIM_PROGRAMS && d->progs)
		eng_progcache_evict(d->progs, &d->bk, 0);
	return what & ENG_TRIM_BUFFERS ? eng_alloc_trim(d) : 0;
}
