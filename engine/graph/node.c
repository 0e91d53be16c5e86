/* node.c: interning (hash-consing) and reference counting of graph nodes.
 * Equal descriptions give the same node; a node is freed when its last reference goes. */
#include "node.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"

struct eng_graph {
	eng_node **buckets;
	size_t nbuckets;
	size_t count;
	uint32_t next_id;
};

eng_graph *eng_graph_create(void)
{
	eng_graph *g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	g->nbuckets = 1024;
	g->buckets = calloc(g->nbuckets, sizeof(*g->buckets));
	if (!g->buckets) {
		free(g);
		return NULL;
	}
	return g;
}

size_t eng_graph_destroy(eng_graph *g)
{
	if (!g)
		return 0;
	size_t leaked = g->count;
	free(g->buckets);
	free(g);
	return leaked;
}

size_t eng_graph_live_nodes(const eng_graph *g) { return g->count; }

void eng_graph_forget_values_on(eng_graph *g, const struct eng_device *dev)
{
	for (size_t i = 0; i < g->nbuckets; i++)
		for (eng_node *n = g->buckets[i]; n; n = n->next)
			if (n->op != ENG_OP_BUFFER && n->buf && n->buf->dev == dev) {
				eng_buffer_unref(n->buf);
				n->buf = NULL;
			}
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	h *= 0xff51afd7ed558ccdull;
	return h ^ (h >> 33);
}

/* Fill the arg union of a node from a description, zeroing unused bytes so that hashing and
 * comparison can treat it as raw memory. */
static void desc_to_node(const eng_node_desc *d, eng_node *n)
{
	memset(n, 0, sizeof(*n));
	n->op = d->op;
	n->dtype = d->dtype;
	n->ndim = (uint8_t)d->ndim;
	n->nsrc = (uint8_t)eng_op_nsrc(d->op);
	for (int i = 0; i < d->ndim; i++)
		n->shape[i] = d->shape[i];
	for (int i = 0; i < n->nsrc; i++)
		n->src[i] = d->src[i];
	switch (d->op) {
	case ENG_OP_CONST:
	case ENG_OP_BUFFER:
		n->arg.c = d->c;
		break;
	case ENG_OP_INDEX:
		n->arg.axis = d->axis;
		break;
	case ENG_OP_RSUM:
	case ENG_OP_RMAX:
	case ENG_OP_RPROD:
	case ENG_OP_FLIP:
		n->arg.axes = d->axes;
		break;
	case ENG_OP_PERMUTE:
		for (int i = 0; i < d->ndim; i++)
			n->arg.perm[i] = d->perm[i];
		break;
	case ENG_OP_PAD:
	case ENG_OP_SHRINK:
		for (int i = 0; i < d->ndim; i++) {
			n->arg.pairs[i][0] = d->pairs[i][0];
			n->arg.pairs[i][1] = d->pairs[i][1];
		}
		break;
	case ENG_OP_COPY:
		n->arg.dev = d->dev;
		break;
	default:
		break;
	}
	n->buf = d->op == ENG_OP_BUFFER ? d->buf : NULL;
}

static uint64_t node_hash(const eng_node *n)
{
	uint64_t h = mix(n->op, n->dtype);
	h = mix(h, n->ndim);
	for (int i = 0; i < n->ndim; i++)
		h = mix(h, (uint64_t)n->shape[i]);
	for (int i = 0; i < n->nsrc; i++)
		h = mix(h, n->src[i]->id);
	const uint64_t *a = (const uint64_t *)&n->arg;
	for (size_t i = 0; i < sizeof(n->arg) / 8; i++)
		h = mix(h, a[i]);
	if (n->op == ENG_OP_BUFFER)
		h = mix(h, n->buf->id);
	return h;
}

static bool node_equal(const eng_node *a, const eng_node *b)
{
	if (a->op != b->op || a->dtype != b->dtype || a->ndim != b->ndim)
		return false;
	if (memcmp(a->shape, b->shape, sizeof(int64_t) * a->ndim))
		return false;
	for (int i = 0; i < a->nsrc; i++)
		if (a->src[i] != b->src[i])
			return false;
	if (memcmp(&a->arg, &b->arg, sizeof(a->arg)))
		return false;
	return a->op != ENG_OP_BUFFER || a->buf == b->buf;
}

static void graph_grow(eng_graph *g)
{
	size_t nb = g->nbuckets * 2;
	eng_node **nbk = calloc(nb, sizeof(*nbk));
	if (!nbk)
		return; /* keep the old table: slower chains, still correct */
	for (size_t i = 0; i < g->nbuckets; i++) {
		eng_node *n = g->buckets[i];
		while (n) {
			eng_node *next = n->next;
			size_t b = n->hash & (nb - 1);
			n->next = nbk[b];
			nbk[b] = n;
			n = next;
		}
	}
	free(g->buckets);
	g->buckets = nbk;
	g->nbuckets = nb;
}

eng_node *eng_node_get(eng_graph *g, const eng_node_desc *d)
{
	eng_node key;
	desc_to_node(d, &key);
	uint64_t h = node_hash(&key);
	for (eng_node *n = g->buckets[h & (g->nbuckets - 1)]; n; n = n->next)
		if (n->hash == h && node_equal(n, &key))
			return eng_node_ref(n);
	eng_node *n = malloc(sizeof(*n));
	if (!n)
		return NULL;
	*n = key;
	n->hash = h;
	n->refs = 1;
	n->id = ++g->next_id;
	n->dev = -1; /* derived from the sources, so equal nodes agree */
	if (n->op == ENG_OP_BUFFER)
		n->dev = (int8_t)n->buf->dev_index;
	else if (n->op == ENG_OP_COPY)
		n->dev = (int8_t)n->arg.dev;
	else
		for (int i = 0; i < n->nsrc && n->dev < 0; i++)
			n->dev = n->src[i]->dev;
	n->graph = g;
	for (int i = 0; i < n->nsrc; i++)
		eng_node_ref(n->src[i]);
	if (n->buf)
		eng_buffer_ref(n->buf);
	if (g->count + 1 > g->nbuckets)
		graph_grow(g);
	size_t b = h & (g->nbuckets - 1);
	n->next = g->buckets[b];
	g->buckets[b] = n;
	g->count++;
	return n;
}

eng_node *eng_node_ref(eng_node *n)
{
	if (n)
		n->refs++;
	return n;
}

static void node_free_one(eng_node *x)
{
	eng_graph *g = x->graph;
	eng_node **pp = &g->buckets[x->hash & (g->nbuckets - 1)];
	while (*pp != x)
		pp = &(*pp)->next;
	*pp = x->next;
	g->count--;
	if (x->buf)
		eng_buffer_unref(x->buf);
}

/* Iterative release with an explicit stack: a long chain must not recurse deeply. */
void eng_node_unref(eng_node *n)
{
	if (!n || --n->refs)
		return;
	eng_node *local[256], **stack = local;
	size_t sp = 0, cap = 256;
	stack[sp++] = n;
	while (sp) {
		eng_node *x = stack[--sp];
		node_free_one(x);
		eng_node *srcs[3 + ENG_VJP_MAX_IN];
		int ns = 0;
		for (int i = 0; i < x->nsrc; i++)
			srcs[ns++] = x->src[i];
		if (x->vjp) {
			for (int i = 0; i < x->vjp->nin; i++)
				srcs[ns++] = x->vjp->in[i];
			free(x->vjp);
		}
		for (int i = 0; i < ns; i++) {
			eng_node *s = srcs[i];
			if (--s->refs)
				continue;
			if (sp == cap) {
				eng_node **ns = malloc(2 * cap * sizeof(*ns));
				if (!ns) { /* out of memory: fall back to recursion for this one */
					s->refs = 1;
					eng_node_unref(s);
					continue;
				}
				memcpy(ns, stack, sp * sizeof(*ns));
				if (stack != local)
					free(stack);
				stack = ns;
				cap *= 2;
			}
			stack[sp++] = s;
		}
		free(x);
	}
	if (stack != local)
		free(stack);
}

bool eng_node_set_vjp(eng_node *n, const eng_vjp *v)
{
	if (n->vjp)
		return true;
	eng_vjp *c = malloc(sizeof(*c));
	if (!c)
		return false;
	*c = *v;
	for (int i = 0; i < c->nin; i++)
		eng_node_ref(c->in[i]);
	n->vjp = c;
	return true;
}

int64_t eng_node_numel(const eng_node *n)
{
	int64_t p = 1;
	for (int i = 0; i < n->ndim; i++)
		p *= n->shape[i];
	return p;
}

void eng_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides)
{
	int64_t s = 1;
	for (int i = ndim - 1; i >= 0; i--) {
		strides[i] = s;
		s *= shape[i] > 0 ? shape[i] : 1;
	}
}

static void dump_rec(const eng_node *n, FILE *f, int depth)
{
	fprintf(f, "%*s%%%u %s %s (", depth * 2, "", n->id, eng_op_name(n->op),
		eng_dtype_name(n->dtype));
	for (int i = 0; i < n->ndim; i++)
		fprintf(f, "%s%lld", i ? "," : "", (long long)n->shape[i]);
	fprintf(f, ")");
	if (n->op == ENG_OP_CONST) {
		if (eng_dtype_is_float(n->dtype))
			fprintf(f, " %g", n->arg.c.f);
		else
			fprintf(f, " %lld", (long long)n->arg.c.i);
	}
	if (n->buf)
		fprintf(f, " buf#%u", n->buf->id);
	fprintf(f, "\n");
	if (n->op != ENG_OP_BUFFER && n->buf)
		return; /* realized: its sources are not needed */
	for (int i = 0; i < n->nsrc; i++)
		dump_rec(n->src[i], f, depth + 1);
}

void eng_node_dump(const eng_node *n, void *file) { dump_rec(n, file ? file : stderr, 0); }
