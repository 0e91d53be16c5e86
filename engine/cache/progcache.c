/* progcache.c: in-memory program cache (see progcache.h): chained hash table of
 * (source text, program). */
#include "progcache.h"

#include "util/hash.h"

#include <stdlib.h>
#include <string.h>

typedef struct entry {
	struct entry *next;
	uint64_t hash;
	char *src;
	bk_program *prog;
} entry;

struct eng_progcache {
	entry **tab;
	size_t n, count;
};

eng_progcache *eng_progcache_create(void)
{
	eng_progcache *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->n = 256;
	c->tab = calloc(c->n, sizeof(*c->tab));
	if (!c->tab) {
		free(c);
		return NULL;
	}
	return c;
}

void eng_progcache_destroy(eng_progcache *c, bk_device *dev)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		for (entry *e = c->tab[i], *nx; e; e = nx) {
			nx = e->next;
			dev->ops->program_free(dev->ctx, e->prog);
			free(e->src);
			free(e);
		}
	free(c->tab);
	free(c);
}

bk_program *eng_progcache_get(eng_progcache *c, const char *src)
{
	uint64_t h = eng_hash_str(src);
	for (entry *e = c->tab[h % c->n]; e; e = e->next)
		if (e->hash == h && !strcmp(e->src, src))
			return e->prog;
	return NULL;
}

bool eng_progcache_put(eng_progcache *c, const char *src, bk_program *prog)
{
	entry *e = malloc(sizeof(*e));
	if (!e)
		return false;
	e->src = strdup(src);
	if (!e->src) {
		free(e);
		return false;
	}
	e->hash = eng_hash_str(src);
	e->prog = prog;
	e->next = c->tab[e->hash % c->n];
	c->tab[e->hash % c->n] = e;
	c->count++;
	return true;
}
