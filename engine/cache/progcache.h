/* progcache.h: compiled kernels of one device, keyed by their rendered source, so the same
 * kernel from any graph compiles once per process; bounded, least recently used first. */
#ifndef ENG_PROGCACHE_H
#define ENG_PROGCACHE_H

#include <stdint.h>

#include "backends/backend.h"

typedef struct eng_progcache eng_progcache;

eng_progcache *eng_progcache_create(void);
/* Frees every program through dev's program_free, pinned or not. */
void eng_progcache_destroy(eng_progcache *c, bk_device *dev);
/* The program compiled from src (marked as just used), or NULL. The pointer stays valid until
 * an eng_progcache_evict that finds it unpinned. */
bk_program *eng_progcache_get(eng_progcache *c, const char *src);
/* Store prog for src (copies src; the cache owns prog). Returns false on ENOMEM. Never evicts,
 * so programs fetched earlier in the same realize stay valid. */
bool eng_progcache_put(eng_progcache *c, const char *src, bk_program *prog);
/* Add delta (+1 or -1) to the pins of prog: a pinned program is never evicted. Schedule-cache
 * entries and JIT captures pin the programs they hold. A prog not in c is ignored. */
void eng_progcache_pin(eng_progcache *c, const bk_program *prog, int delta);
/* Unload the least recently used unpinned programs (through dev) until at most keep remain;
 * returns how many went. */
uint64_t eng_progcache_evict(eng_progcache *c, bk_device *dev, size_t keep);
/* Programs held now, and programs evicted since the last eng_progcache_reset_counts. */
size_t eng_progcache_count(const eng_progcache *c);
size_t eng_progcache_pinned(const eng_progcache *c); /* programs with at least one pin */
uint64_t eng_progcache_evictions(const eng_progcache *c);
void eng_progcache_reset_counts(eng_progcache *c);

#endif
