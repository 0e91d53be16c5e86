/* graph.c: the graph builder (include/tensord/graph.h): nodes appended to a JSON array as they
 * are made, ids checked unique, the first failure kept; typed functions from graph_ops.def. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensord/graph.h>

#include "proto_graph.h" /* protocol/: the op enum and the limits */
#include "graph_builder.h"

struct tsd_graph {
	cJSON *nodes;        /* the "nodes" array */
	cJSON **node;        /* node[h]: the object of handle h (owned by nodes) */
	int n, cap;
	int outputs[PROTO_GRAPH_MAX_OUTPUTS];
	int noutputs;
	tsd_status status;
	char err[256];
};

/* The ops this library knows: name and input counts (graph_ops.def). */
static const struct {
	const char *name;
	int lo, hi;
} known[] = {
#define PG_OP(e, n, l, h, a) {#n, l, h},
#include "graph_ops.def"
#undef PG_OP
};

tsd_graph *tsd_graph_create(void)
{
	tsd_graph *g = calloc(1, sizeof(*g));
	if (g && !(g->nodes = cJSON_CreateArray())) {
		free(g);
		return NULL;
	}
	return g;
}

void tsd_graph_free(tsd_graph *g)
{
	if (!g)
		return;
	cJSON_Delete(g->nodes);
	free(g->node);
	free(g);
}

tsd_status tsd_graph_status(const tsd_graph *g)
{
	return g->status;
}

const char *tsd_graph_error(const tsd_graph *g)
{
	return g->err;
}

int tsd_gb_fail(tsd_graph *g, tsd_status s, const char *fmt, ...)
{
	if (g->status == TSD_OK) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(g->err, sizeof(g->err), fmt, ap);
		va_end(ap);
		g->status = s;
	}
	return -1;
}

static bool id_taken(const tsd_graph *g, const char *id)
{
	for (int i = 0; i < g->n; i++) {
		const cJSON *j = cJSON_GetObjectItemCaseSensitive(g->node[i], "id");
		if (!strcmp(j->valuestring, id))
			return true;
	}
	return false;
}

static bool id_ok(tsd_graph *g, const char *what, const char *id)
{
	if (!id || !id[0] || strlen(id) > PROTO_MAX_ID)
		return tsd_gb_fail(g, TSD_BAD_REQUEST, "%s: id: missing or over %d bytes", what,
			       PROTO_MAX_ID), false;
	if (id_taken(g, id))
		return tsd_gb_fail(g, TSD_BAD_REQUEST, "%s: id '%s' is taken", what, id), false;
	return true;
}

cJSON *tsd_gb_node(tsd_graph *g, const char *op, const char *id, const int *in, int nin)
{
	if (g->status != TSD_OK)
		return NULL;
	if (g->n >= PROTO_GRAPH_MAX_NODES)
		return tsd_gb_fail(g, TSD_TOO_LARGE, "%s: more than %d nodes", op, PROTO_GRAPH_MAX_NODES),
		       NULL;
	for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++)
		if (!strcmp(known[k].name, op) && (nin < known[k].lo || nin > known[k].hi))
			return tsd_gb_fail(g, TSD_BAD_REQUEST, "%s: %d inputs, wants %d to %d", op, nin,
				       known[k].lo, known[k].hi), NULL;
	for (int k = 0; k < nin; k++)
		if (in[k] < 0 || in[k] >= g->n)
			return tsd_gb_fail(g, TSD_BAD_REQUEST, "%s: input %d: %d is not a node of this graph",
				       op, k, in[k]), NULL;
	char auto_id[PROTO_MAX_ID + 1];
	if (!id) { /* the op and its handle, skipping ids the caller took */
		for (int k = 0; !id || id_taken(g, auto_id); k++) {
			snprintf(auto_id, sizeof(auto_id), k ? "%.40s%d_%d" : "%.40s%d", op, g->n, k);
			id = auto_id;
		}
	} else if (!id_ok(g, op, id)) {
		return NULL;
	}
	if (g->n == g->cap) {
		int cap = g->cap ? 2 * g->cap : 16;
		cJSON **p = realloc(g->node, (size_t)cap * sizeof(*p));
		if (!p)
			return tsd_gb_fail(g, TSD_OUT_OF_MEMORY, "out of memory"), NULL;
		g->node = p;
		g->cap = cap;
	}
	cJSON *o = cJSON_CreateObject(), *ins = NULL;
	bool ok = o && cJSON_AddStringToObject(o, "id", id) && cJSON_AddStringToObject(o, "op", op);
	if (ok && nin) {
		ok = (ins = cJSON_AddArrayToObject(o, "in")) != NULL;
		for (int k = 0; ok && k < nin; k++) {
			const cJSON *src = cJSON_GetObjectItemCaseSensitive(g->node[in[k]], "id");
			cJSON *s = cJSON_CreateString(src->valuestring);
			ok = s && cJSON_AddItemToArray(ins, s);
		}
	}
	if (!ok || !cJSON_AddItemToArray(g->nodes, o)) {
		cJSON_Delete(o);
		return tsd_gb_fail(g, TSD_OUT_OF_MEMORY, "out of memory"), NULL;
	}
	g->node[g->n++] = o;
	return o;
}

int tsd_gb_done(tsd_graph *g, cJSON *o, bool attrs_ok)
{
	if (!o)
		return -1;
	if (!attrs_ok)
		return tsd_gb_fail(g, TSD_OUT_OF_MEMORY, "out of memory");
	return g->n - 1;
}

bool tsd_gb_ints(cJSON *o, const char *key, const int64_t *v, int n)
{
	cJSON *a = cJSON_AddArrayToObject(o, key);
	for (int k = 0; a && k < n; k++) {
		cJSON *e = cJSON_CreateNumber((double)v[k]);
		if (!e || !cJSON_AddItemToArray(a, e))
			return false;
	}
	return a != NULL;
}

int tsd_g_op(tsd_graph *g, const char *op, const int *in, int nin, const cJSON *attrs)
{
	if (!op || !op[0] || nin < 0 || (nin && !in))
		return tsd_gb_fail(g, TSD_BAD_REQUEST, "op: no name, or a bad input list");
	if (attrs && !cJSON_IsObject(attrs))
		return tsd_gb_fail(g, TSD_BAD_REQUEST, "%s: attrs: not an object", op);
	cJSON *o = tsd_gb_node(g, op, NULL, in, nin);
	bool ok = true;
	for (const cJSON *f = attrs ? attrs->child : NULL; o && ok && f; f = f->next) {
		cJSON *d = cJSON_Duplicate(f, true);
		ok = d && cJSON_AddItemToObject(o, f->string, d);
	}
	return tsd_gb_done(g, o, ok);
}

int tsd_graph_name(tsd_graph *g, int node, const char *id)
{
	if (g->status != TSD_OK)
		return -1;
	if (node < 0 || node >= g->n)
		return tsd_gb_fail(g, TSD_BAD_REQUEST, "name: %d is not a node of this graph", node);
	cJSON *cur = cJSON_GetObjectItemCaseSensitive(g->node[node], "id");
	if (!id || !strcmp(id, cur->valuestring))
		return node;
	if (!id_ok(g, "name", id))
		return -1;
	/* later nodes name this one in their "in" lists */
	char old[PROTO_MAX_ID + 1];
	snprintf(old, sizeof(old), "%s", cur->valuestring);
	for (int i = node + 1; i < g->n; i++) {
		cJSON *ins = cJSON_GetObjectItemCaseSensitive(g->node[i], "in");
		for (cJSON *e = ins ? ins->child : NULL; e; e = e->next)
			if (!strcmp(e->valuestring, old) && !cJSON_SetValuestring(e, id))
				return tsd_gb_fail(g, TSD_OUT_OF_MEMORY, "out of memory");
	}
	if (!cJSON_SetValuestring(cur, id))
		return tsd_gb_fail(g, TSD_OUT_OF_MEMORY, "out of memory");
	return node;
}

int tsd_graph_output(tsd_graph *g, int node, const char *id)
{
	if (g->status != TSD_OK)
		return -1;
	if (node < 0 || node >= g->n)
		return tsd_gb_fail(g, TSD_BAD_REQUEST, "output: %d is not a node of this graph", node);
	for (int k = 0; k < g->noutputs; k++)
		if (g->outputs[k] == node)
			return tsd_gb_fail(g, TSD_BAD_REQUEST, "output: node %d is an output already", node);
	if (g->noutputs == PROTO_GRAPH_MAX_OUTPUTS)
		return tsd_gb_fail(g, TSD_TOO_LARGE, "output: more than %d", PROTO_GRAPH_MAX_OUTPUTS);
	if (tsd_graph_name(g, node, id) < 0)
		return -1;
	g->outputs[g->noutputs++] = node;
	return node;
}

cJSON *tsd_graph_json(tsd_graph *g)
{
	if (g->status != TSD_OK)
		return NULL;
	if (!g->noutputs) {
		tsd_gb_fail(g, TSD_BAD_REQUEST, "no output marked (tsd_graph_output)");
		return NULL;
	}
	cJSON *j = cJSON_CreateObject(), *outs = NULL;
	cJSON *nodes = cJSON_Duplicate(g->nodes, true);
	bool ok = j && nodes && cJSON_AddItemToObject(j, "nodes", nodes);
	if (!ok)
		cJSON_Delete(nodes);
	ok = ok && (outs = cJSON_AddArrayToObject(j, "outputs"));
	for (int k = 0; ok && k < g->noutputs; k++) {
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(g->node[g->outputs[k]], "id");
		cJSON *s = cJSON_CreateString(id->valuestring);
		ok = s && cJSON_AddItemToArray(outs, s);
	}
	if (!ok) {
		cJSON_Delete(j);
		return NULL;
	}
	return j;
}

char *tsd_graph_text(tsd_graph *g)
{
	cJSON *j = tsd_graph_json(g);
	char *s = j ? cJSON_PrintUnformatted(j) : NULL;
	cJSON_Delete(j);
	return s;
}
