/* schedcache.c: the schedule cache of schedcache.h: canonical walks of graphs and a small
 * least-recently-used table of the kernel lists that realized them. */
#include "schedcache.h"

#include <stdlib.h>
#include <string.h>

static bool put(eng_schedcache_walk *w, int64_t v)
{
	if (w->nw == w->capw) {
		size_t nc = w->capw ? w->capw * 2 : 1024;
		int64_t *nwds = realloc(w->words, nc * sizeof(*nwds));
		if (!nwds)
			return false;
		w->words = nwds;
		w->capw = nc;
	}
	w->words[w->nw++] = v;
	return true;
}

/* The arguments of n that are not in its shape, dtype or sources. */
static bool put_args(eng_schedcache_walk *w, const eng_node *n)
{
	switch (n->op) {
	case ENG_OP_CONST:
		return put(w, n->arg.c.i);
	case ENG_OP_INDEX:
		return put(w, n->arg.axis);
	case ENG_OP_RSUM:
	case ENG_OP_RMAX:
	case ENG_OP_RPROD:
	case ENG_OP_FLIP:
		return put(w, n->arg.axes);
	case ENG_OP_PERMUTE: {
		int64_t v = 0;
		for (int d = 0; d < n->ndim; d++)
			v = v * ENG_MAX_DIMS + n->arg.perm[d];
		return put(w, v);
	}
	case ENG_OP_PAD:
	case ENG_OP_SHRINK:
		for (int d = 0; d < n->ndim; d++)
			if (!put(w, n->arg.pairs[d][0]) || !put(w, n->arg.pairs[d][1]))
				return false;
		return true;
	case ENG_OP_COPY:
		return put(w, n->arg.dev);
	default:
		return true;
	}
}

static bool describe(eng_schedcache_walk *w, const eng_node *n)
{
	bool leaf = n->buf != NULL;
	int nsrc = leaf ? 0 : n->nsrc;
	if (!put(w, (int64_t)leaf | (int64_t)n->op << 1 | (int64_t)n->dtype << 8 | (int64_t)n->ndim << 16 |
			    (int64_t)nsrc << 24))
		return false;
	for (int d = 0; d < n->ndim; d++)
		if (!put(w, n->shape[d]))
			return false;
	if (leaf)
		return true; /* which buffer it is comes after the walk */
	for (int i = 0; i < nsrc; i++)
		if (!put(w, eng_nodeset_index(&w->nodes, n->src[i])))
			return false;
	return put_args(w, n);
}

typedef struct leafref {
	const eng_buffer *buf;
	int num;
} leafref;

static int cmp_leaf(const void *a, const void *b)
{
	const leafref *x = a, *y = b;
	if (x->buf != y->buf)
		return (uintptr_t)x->buf < (uintptr_t)y->buf ? -1 : 1;
	return x->num - y->num;
}

/* Leaves sharing a buffer matter (an assign's target read elsewhere): record, per leaf, the
 * first leaf with the same buffer and the version difference. */
static bool describe_aliases(eng_schedcache_walk *w)
{
	size_t nl = 0;
	for (size_t i = 0; i < w->nodes.n; i++)
		nl += w->nodes.list[i]->buf != NULL;
	leafref *l = malloc((nl ? nl : 1) * sizeof(*l));
	int *first = malloc((w->nodes.n ? w->nodes.n : 1) * sizeof(int));
	if (!l || !first) {
		free(l);
		free(first);
		return false;
	}
	nl = 0;
	for (size_t i = 0; i < w->nodes.n; i++)
		if (w->nodes.list[i]->buf)
			l[nl++] = (leafref){w->nodes.list[i]->buf, (int)i};
	qsort(l, nl, sizeof(*l), cmp_leaf);
	for (size_t i = 0; i < nl; i++)
		first[l[i].num] = i && l[i - 1].buf == l[i].buf ? first[l[i - 1].num] : l[i].num;
	bool ok = true;
	for (size_t i = 0; i < w->nodes.n && ok; i++) {
		const eng_node *n = w->nodes.list[i];
		if (!n->buf)
			continue;
		const eng_node *f = w->nodes.list[first[i]];
		int64_t dv = n->op == ENG_OP_BUFFER && f->op == ENG_OP_BUFFER ? n->arg.c.i - f->arg.c.i : 0;
		ok = put(w, first[i]) && put(w, dv) && put(w, n->op == ENG_OP_BUFFER ? 0 : (int64_t)n->buf->numel) &&
		     put(w, n->buf->dev ? n->buf->dev->index : -1);
	}
	free(l);
	free(first);
	return ok;
}

bool eng_schedcache_walk_build(eng_schedcache_walk *w, eng_node *const *nodes, int n)
{
	typedef struct frame {
		const eng_node *n;
		int next;
	} frame;
	memset(w, 0, sizeof(*w));
	int cap = 256, sp = 0;
	frame *st = malloc(cap * sizeof(*st));
	bool ok = st != NULL;
	for (int r = 0; r < n && ok; r++) {
		if (eng_nodeset_has(&w->nodes, nodes[r]))
			continue;
		st[sp++] = (frame){nodes[r], 0};
		while (sp && ok) {
			frame *f = &st[sp - 1];
			const eng_node *x = f->n;
			if (!x->buf && f->next < x->nsrc) {
				const eng_node *s = x->src[f->next++];
				if (eng_nodeset_has(&w->nodes, s))
					continue;
				if (sp == cap) {
					frame *ns = realloc(st, 2 * cap * sizeof(*st));
					if (!ns) {
						ok = false;
						break;
					}
					st = ns;
					cap *= 2;
				}
				st[sp++] = (frame){s, 0};
				continue;
			}
			sp--;
			ok = eng_nodeset_add(&w->nodes, x) && describe(w, x);
		}
	}
	free(st);
	ok = ok && describe_aliases(w) && put(w, n);
	for (int r = 0; r < n && ok; r++)
		ok = put(w, eng_nodeset_index(&w->nodes, nodes[r]));
	if (!ok) {
		eng_schedcache_walk_free(w);
		return false;
	}
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < w->nw; i++) {
		h ^= (uint64_t)w->words[i];
		h *= 0x100000001b3ull;
		h ^= h >> 29;
	}
	w->hash = h;
	return true;
}

void eng_schedcache_walk_free(eng_schedcache_walk *w)
{
	eng_nodeset_free(&w->nodes);
	free(w->words);
	memset(w, 0, sizeof(*w));
}

/* ---- the table ---- */

struct eng_schedcache_entry {
	uint64_t hash, last_use;
	int64_t *words;
	size_t nw;
	eng_schedcache_kernel *ks;
	int nk;
	int *empty;
	int nempty;
	size_t bytes;
};

struct eng_schedcache {
	eng_schedcache_entry **e;
	int n, cap;
	size_t bytes, max_bytes;
	uint64_t clock;
	eng_schedcache_pin_fn pin;
	void *pin_arg;
};

eng_schedcache *eng_schedcache_create(size_t max_bytes, eng_schedcache_pin_fn pin, void *arg)
{
	eng_schedcache *c = calloc(1, sizeof(*c));
	if (c) {
		c->max_bytes = max_bytes ? max_bytes : (size_t)64 << 20;
		c->pin = pin;
		c->pin_arg = arg;
	}
	return c;
}

/* Tell the programs' owner that an entry's kernels are kept (+1) or gone (-1). */
static void pin_kernels(eng_schedcache *c, const eng_schedcache_entry *e, int delta)
{
	for (int i = 0; c->pin && i < e->nk; i++)
		c->pin(c->pin_arg, e->ks[i].prog, delta);
}

static void entry_free(eng_schedcache_entry *e)
{
	if (!e)
		return;
	free(e->words);
	free(e->ks);
	free(e->empty);
	free(e);
}

void eng_schedcache_destroy(eng_schedcache *c)
{
	if (!c)
		return;
	eng_schedcache_clear(c);
	free(c->e);
	free(c);
}

int eng_schedcache_clear(eng_schedcache *c)
{
	int n = c->n;
	for (int i = 0; i < c->n; i++) {
		pin_kernels(c, c->e[i], -1);
		entry_free(c->e[i]);
	}
	c->n = 0;
	c->bytes = 0;
	return n;
}

const eng_schedcache_entry *eng_schedcache_lookup(eng_schedcache *c, const eng_schedcache_walk *w)
{
	for (int i = 0; i < c->n; i++) {
		eng_schedcache_entry *e = c->e[i];
		if (e->hash == w->hash && e->nw == w->nw && !memcmp(e->words, w->words, w->nw * sizeof(*w->words))) {
			e->last_use = ++c->clock;
			return e;
		}
	}
	return NULL;
}

const eng_schedcache_kernel *eng_schedcache_kernels(const eng_schedcache_entry *e, int *n)
{
	*n = e->nk;
	return e->ks;
}

const int *eng_schedcache_empty(const eng_schedcache_entry *e, int *n)
{
	*n = e->nempty;
	return e->empty;
}

static void evict_one(eng_schedcache *c)
{
	int old = 0;
	for (int i = 1; i < c->n; i++)
		if (c->e[i]->last_use < c->e[old]->last_use)
			old = i;
	c->bytes -= c->e[old]->bytes;
	pin_kernels(c, c->e[old], -1);
	entry_free(c->e[old]);
	c->e[old] = c->e[--c->n];
}

bool eng_schedcache_evict_lru(eng_schedcache *c)
{
	if (!c->n)
		return false;
	evict_one(c);
	return true;
}

bool eng_schedcache_insert(eng_schedcache *c, const eng_schedcache_walk *w, const eng_schedcache_kernel *ks, int nk, const int *empty,
		   int nempty)
{
	eng_schedcache_entry *e = calloc(1, sizeof(*e));
	if (!e)
		return false;
	e->hash = w->hash;
	e->nw = w->nw;
	e->nk = nk;
	e->nempty = nempty;
	e->words = malloc(w->nw * sizeof(*e->words));
	e->ks = malloc((nk ? nk : 1) * sizeof(*e->ks));
	e->empty = malloc((nempty ? nempty : 1) * sizeof(int));
	if (!e->words || !e->ks || !e->empty) {
		entry_free(e);
		return false;
	}
	memcpy(e->words, w->words, w->nw * sizeof(*e->words));
	memcpy(e->ks, ks, nk * sizeof(*ks));
	memcpy(e->empty, empty, nempty * sizeof(int));
	e->bytes = sizeof(*e) + w->nw * sizeof(*e->words) + nk * sizeof(*ks) + nempty * sizeof(int);
	if (e->bytes > c->max_bytes) {
		entry_free(e);
		return true; /* too big to keep: not an error */
	}
	while (c->n && c->bytes + e->bytes > c->max_bytes)
		evict_one(c);
	if (c->n == c->cap) {
		int nc = c->cap ? c->cap * 2 : 16;
		eng_schedcache_entry **ne = realloc(c->e, nc * sizeof(*ne));
		if (!ne) {
			entry_free(e);
			return false;
		}
		c->e = ne;
		c->cap = nc;
	}
	e->last_use = ++c->clock;
	pin_kernels(c, e, +1);
	c->e[c->n++] = e;
	c->bytes += e->bytes;
	return true;
}
