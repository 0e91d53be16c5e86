/* capture.c: the launch recorder of capture.h. */
#include "capture.h"

#include "cache/progcache.h"

#include <stdlib.h>
#include <string.h>

bool eng_capture_add(eng_capture *c, eng_device *dev, const eng_schedcache_kernel *k, eng_node *const *nodes,
		     eng_buffer *const *outs)
{
	if (c->n == c->cap) {
		int nc = c->cap ? c->cap * 2 : 16;
		eng_cap_launch *nl = realloc(c->l, nc * sizeof(*nl));
		if (!nl)
			return false;
		c->l = nl;
		c->cap = nc;
	}
	eng_cap_launch *l = &c->l[c->n++];
	memset(l, 0, sizeof(*l));
	l->k = *k;
	l->dev = dev;
	eng_progcache_pin(dev->progs, k->prog, +1);
	for (int i = 0; i < k->nbufs; i++) {
		l->buf[i] = eng_buffer_ref(outs[i] ? outs[i] : nodes[i]->buf);
		if (outs[i] && nodes[i]->op == ENG_OP_ASSIGN)
			l->assign |= (uint64_t)1 << i;
	}
	return true;
}

void eng_capture_free(eng_capture *c)
{
	for (int i = 0; i < c->n; i++) {
		for (int j = 0; j < c->l[i].k.nbufs; j++)
			eng_buffer_unref(c->l[i].buf[j]);
		eng_progcache_pin(c->l[i].dev->progs, c->l[i].k.prog, -1);
	}
	free(c->l);
	memset(c, 0, sizeof(*c));
}
