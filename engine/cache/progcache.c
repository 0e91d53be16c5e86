/* progcache.c: in-memory program cache (see progcache.h): entries chained in two hash tables,
 * by source text (lookups) and by program pointer (pins), with a use clock for eviction. */
#include "progcache.h"

#include "util/hash.h"

#include <stdlib.h>
#include <string.h>

typedef struct entry {
	struct entry *next, *pnext; /* chains: by source hash, by program pointer */
	uint64_t hash, last_use;
	char *src;
	bk_program *prog;
	uint32_t pins;
} entry;

#define TAB 1024 /* buckets in each table (a power of two) */

struct eng_progcache {
	entry *tab[TAB], *ptab[TAB];
	size_t count, pinned; /* entries, and those with pins */
	uint64_t clock, evictions;
};

static size_t pslot(const bk_program *p) { return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull >> 54) % TAB; }

eng_progcache *eng_progcache_create(void) { return calloc(1, sizeof(eng_progcache)); }

void eng_progcache_destroy(eng_progcache *c, bk_device *dev)
{
	if (!c)
		return;
	for (size_t i = 0; i < TAB; i++)
		for (entry *e = c->tab[i], *nx; e; e = nx) {
			nx = e->next;
			dev->ops->program_free(dev->ctx, e->prog);
			free(e->src);
			free(e);
		}
	free(c);
}

bk_program *eng_progcache_get(eng_progcache *c, const char *src)
{
	uint64_t h = eng_hash_str(src);
	for (entry *e = c->tab[h % TAB]; e; e = e->next)
		if (e->hash == h && !strcmp(e->src, src)) {
			e->last_use = ++c->clock;
			return e->prog;
		}
	return NULL;
}

bool eng_progcache_put(eng_progcache *c, const char *src, bk_program *prog)
{
	entry *e = calloc(1, sizeof(*e));
	if (!e)
		return false;
	e->src = strdup(src);
	if (!e->src) {
		free(e);
		return false;
	}
	e->hash = eng_hash_str(src);
	e->prog = prog;
	e->last_use = ++c->clock;
	e->next = c->tab[e->hash % TAB];
	c->tab[e->hash % TAB] = e;
	e->pnext = c->ptab[pslot(prog)];
	c->ptab[pslot(prog)] = e;
	c->count++;
	return true;
}

void eng_progcache_pin(eng_progcache *c, const bk_program *prog, int delta)
{
	for (entry *e = c->ptab[pslot(prog)]; e; e = e->pnext)
		if (e->prog == prog) {
			if (delta > 0 || e->pins > 0) {
				c->pinned += (delta > 0 && e->pins == 0) - (delta < 0 && e->pins == 1);
				e->pins += (uint32_t)delta;
			}
			e->last_use = ++c->clock;
			return;
		}
}

static void unlink_entry(eng_progcache *c, entry *e)
{
	entry **p = &c->tab[e->hash % TAB];
	while (*p != e)
		p = &(*p)->next;
	*p = e->next;
	p = &c->ptab[pslot(e->prog)];
	while (*p != e)
		p = &(*p)->pnext;
	*p = e->pnext;
	c->count--;
}

static int by_use(const void *a, const void *b)
{
	uint64_t x = (*(entry *const *)a)->last_use, y = (*(entry *const *)b)->last_use;
	return x < y ? -1 : x > y;
}

uint64_t eng_progcache_evict(eng_progcache *c, bk_device *dev, size_t keep)
{
	if (c->count <= keep)
		return 0;
	entry **cand = malloc(c->count * sizeof(*cand));
	size_t n = 0;
	if (!cand)
		return 0; /* out of memory: keep them, a later call tries again */
	for (size_t i = 0; i < TAB; i++)
		for (entry *e = c->tab[i]; e; e = e->next)
			if (!e->pins)
				cand[n++] = e;
	qsort(cand, n, sizeof(*cand), by_use);
	uint64_t gone = 0;
	for (size_t i = 0; i < n && c->count > keep; i++, gone++) {
		unlink_entry(c, cand[i]);
		dev->ops->program_free(dev->ctx, cand[i]->prog);
		free(cand[i]->src);
		free(cand[i]);
	}
	free(cand);
	c->evictions += gone;
	return gone;
}

size_t eng_progcache_count(const eng_progcache *c) { return c->count; }
size_t eng_progcache_pinned(const eng_progcache *c) { return c->pinned; }
uint64_t eng_progcache_evictions(const eng_progcache *c) { return c->evictions; }
void eng_progcache_reset_counts(eng_progcache *c) { c->evictions = 0; }
