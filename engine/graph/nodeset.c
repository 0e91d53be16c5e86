/* nodeset.c: the insertion-ordered node set of nodeset.h. */
#include "nodeset.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static size_t ptr_hash(const void *p) { return (size_t)(((uintptr_t)p >> 4) * 0x9e3779b97f4a7c15ull); }

int eng_nodeset_index(const eng_nodeset *s, const eng_node *x)
{
	if (!s->cap)
		return -1;
	for (size_t i = ptr_hash(x) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
		if (!s->tab[i])
			return -1;
		if (s->list[s->tab[i] - 1] == x)
			return s->tab[i] - 1;
	}
}

bool eng_nodeset_has(const eng_nodeset *s, const eng_node *x) { return eng_nodeset_index(s, x) >= 0; }

static void place(int *tab, size_t cap, const eng_node *x, int v)
{
	for (size_t i = ptr_hash(x) & (cap - 1);; i = (i + 1) & (cap - 1))
		if (!tab[i]) {
			tab[i] = v;
			return;
		}
}

bool eng_nodeset_add(eng_nodeset *s, const eng_node *x)
{
	if (eng_nodeset_has(s, x))
		return true;
	if ((s->n + 1) * 2 > s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 64;
		int *nt = calloc(nc, sizeof(*nt));
		const eng_node **nl = realloc(s->list, nc * sizeof(*nl));
		if (!nt || !nl) {
			free(nt);
			if (nl)
				s->list = nl;
			return false;
		}
		s->list = nl;
		for (size_t i = 0; i < s->n; i++)
			place(nt, nc, s->list[i], (int)i + 1);
		free(s->tab);
		s->tab = nt;
		s->cap = nc;
	}
	s->list[s->n] = x;
	place(s->tab, s->cap, x, (int)s->n + 1);
	s->n++;
	return true;
}

void eng_nodeset_free(eng_nodeset *s)
{
	free(s->tab);
	free(s->list);
	memset(s, 0, sizeof(*s));
}
