/* graph.c: parsing the graph format (proto_graph.h): node ids, ops, references and attributes are
 * checked here, shapes in graph_shape.c; nothing reaches the engine until all of it passed. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensord/eng_dtype.h>

#include "proto_graph.h"
#include "message.h"

typedef enum pg_attr { PG_ATTR_NONE, PG_ATTR_LEAF, PG_ATTR_CONST, PG_ATTR_AXIS, PG_ATTR_AXES,
	PG_ATTR_SHAPE, PG_ATTR_PERM, PG_ATTR_DIMS, PG_ATTR_DTYPE, PG_ATTR_CONV, PG_ATTR_ARGMAX,
	PG_ATTR_CLASSES, PG_ATTR_SLICE } pg_attr;

static const struct pg_opinfo {
	const char *name;
	int lo, hi;
	pg_attr attr;
} ops[PROTO_G_COUNT] = {
#define PG_OP(e, n, l, h, a) [PROTO_G_##e] = {#n, l, h, PG_ATTR_##a},
#include "graph_ops.def"
#undef PG_OP
};

/* The fields each attribute kind allows besides id, op and in (NULL-terminated). */
static const char *const attr_keys[][5] = {
	[PG_ATTR_NONE] = {NULL}, [PG_ATTR_LEAF] = {"dtype", "shape", NULL},
	[PG_ATTR_CONST] = {"value", "dtype", NULL}, [PG_ATTR_AXIS] = {"axis", NULL},
	[PG_ATTR_AXES] = {"axes", "keepdim", NULL}, [PG_ATTR_SHAPE] = {"shape", NULL},
	[PG_ATTR_PERM] = {"perm", NULL}, [PG_ATTR_DIMS] = {"dims", NULL},
	[PG_ATTR_DTYPE] = {"dtype", NULL}, [PG_ATTR_CONV] = {"stride", "padding", NULL},
	[PG_ATTR_ARGMAX] = {"axis", "keepdim", NULL}, [PG_ATTR_CLASSES] = {"num_classes", NULL},
	[PG_ATTR_SLICE] = {"axis", "start", "stop", "step", NULL},
};

#define HASH_SLOTS 8192 /* a power of two, at least twice PROTO_GRAPH_MAX_NODES */

static uint32_t hash_id(const char *s)
{
	uint32_t h = 2166136261u;
	while (*s)
		h = (h ^ (uint8_t)*s++) * 16777619u;
	return h;
}

/* Slot of id in the table of node indices + 1 (0: empty); the empty slot if absent. */
static uint32_t slot_of(const int *tab, const proto_graph *g, const char *id)
{
	uint32_t h = hash_id(id) & (HASH_SLOTS - 1);
	while (tab[h] && strcmp(g->nodes[tab[h] - 1].id, id))
		h = (h + 1) & (HASH_SLOTS - 1);
	return h;
}

#define NBAD(...) node_fail(err, TSD_BAD_REQUEST, i, n->id, __VA_ARGS__)
static tsd_status node_fail(proto_err *err, tsd_status s, int i, const char *id, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static tsd_status node_fail(proto_err *err, tsd_status s, int i, const char *id, const char *fmt, ...)
{
	char msg[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return proto_fail(err, s, "nodes[%d] (%s): %s", i, id, msg);
}

/* An int array of at most ENG_MAX_DIMS entries in [lo, hi]; a lone integer when one_ok. */
static bool int_list(const cJSON *a, int64_t lo, int64_t hi, bool one_ok, int64_t *out, int *n)
{
	if (one_ok && cJSON_IsNumber(a)) {
		*n = 1;
		return proto_json_int(a, lo, hi, out);
	}
	if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > ENG_MAX_DIMS)
		return false;
	*n = 0;
	for (const cJSON *e = a->child; e; e = e->next)
		if (!proto_json_int(e, lo, hi, &out[(*n)++]))
			return false;
	return true;
}

static bool get_dtype(const cJSON *o, const char *key, eng_dtype *dt)
{
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(d) && eng_dtype_parse(d->valuestring, dt);
}

/* axis (default -1) and keepdim (default false) of argmax. */
static tsd_status parse_argmax(const cJSON *o, proto_gnode *n, int i, proto_err *err)
{
	int64_t v;
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "axis");
	n->naxes = 1;
	n->axes[0] = -1;
	if (a && !proto_json_int(a, -ENG_MAX_DIMS, ENG_MAX_DIMS - 1, &v))
		return NBAD("argmax: axis: not an integer in [-8, 7]");
	if (a)
		n->axes[0] = (int)v;
	a = cJSON_GetObjectItemCaseSensitive(o, "keepdim");
	if (a && !cJSON_IsBool(a))
		return NBAD("argmax: keepdim: not a boolean");
	n->keepdim = cJSON_IsTrue(a);
	return TSD_OK;
}

/* slice: axis (required), start (default 0), stop (default: the end), step (default 1, not 0),
 * each an integer of at most 2^40 in magnitude; negative bounds count from the end. */
static tsd_status parse_slice(const cJSON *o, proto_gnode *n, int i, proto_err *err)
{
	static const char *const keys[] = {"start", "stop", "step"};
	int64_t *dst[] = {&n->start, &n->stop, &n->step}, v;
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "axis");
	if (!a || !proto_json_int(a, -ENG_MAX_DIMS, ENG_MAX_DIMS - 1, &v))
		return NBAD("slice: axis: missing or not an integer in [-8, 7]");
	n->naxes = 1;
	n->axes[0] = (int)v;
	n->step = 1;
	bool given[3];
	for (int k = 2; k >= 0; k--) {
		a = cJSON_GetObjectItemCaseSensitive(o, keys[k]);
		given[k] = a != NULL;
		if (a && !proto_json_int(a, -PROTO_MAX_DIM, PROTO_MAX_DIM, dst[k]))
			return NBAD("slice: %s: not an integer in [-2^40, 2^40]", keys[k]);
	}
	if (n->step == 0)
		return NBAD("slice: step: must not be 0");
	/* an open end is the whole way in the step's direction, as in Python */
	if (!given[0])
		n->start = n->step > 0 ? 0 : INT64_MAX;
	if (!given[1])
		n->stop = n->step > 0 ? INT64_MAX : INT64_MIN;
	return TSD_OK;
}

static tsd_status parse_attrs(const cJSON *o, proto_graph *g, int i, proto_err *err)
{
	proto_gnode *n = &g->nodes[i];
	const char *what = NULL;
	int64_t v[ENG_MAX_DIMS];
	int cnt = 0;
	const cJSON *a;
	switch (ops[n->op].attr) {
	case PG_ATTR_NONE:
		break;
	case PG_ATTR_LEAF: {
		bool in = n->op == PROTO_G_INPUT;
		if (!get_dtype(o, "dtype", &n->dtype))
			return NBAD("%s: dtype: missing or unknown", ops[n->op].name);
		/* only inputs may leave the batch dimension open, and once */
		if (!int_list(cJSON_GetObjectItemCaseSensitive(o, "shape"), in ? -1 : 0, PROTO_MAX_DIM,
			      false, n->shape, &n->ndim))
			return NBAD("%s: shape: missing, rank above 8, or a dimension not an integer in "
				    "[%d, 2^40]", ops[n->op].name, in ? -1 : 0);
		for (int d = 0; d < n->ndim; d++)
			cnt += n->shape[d] == PROTO_BATCH;
		if (cnt > 1)
			return NBAD("input: shape: more than one batch dimension (-1)");
		g->batched |= cnt > 0;
		break;
	}
	case PG_ATTR_CONST:
		a = cJSON_GetObjectItemCaseSensitive(o, "value");
		if (!cJSON_IsNumber(a) || !isfinite(a->valuedouble))
			return NBAD("const: value: missing or not a finite number");
		n->value = a->valuedouble;
		n->dtype = ENG_F32;
		if (cJSON_GetObjectItemCaseSensitive(o, "dtype") && !get_dtype(o, "dtype", &n->dtype))
			return NBAD("const: dtype: unknown");
		break;
	case PG_ATTR_AXIS:
		a = cJSON_GetObjectItemCaseSensitive(o, "axis");
		n->naxes = 1;
		n->axes[0] = -1;
		if (a && !proto_json_int(a, -ENG_MAX_DIMS, ENG_MAX_DIMS - 1, v))
			return NBAD("%s: axis: not an integer in [-8, 7]", ops[n->op].name);
		if (a)
			n->axes[0] = (int)v[0];
		break;
	case PG_ATTR_AXES:
		a = cJSON_GetObjectItemCaseSensitive(o, "axes");
		if (a && !int_list(a, -ENG_MAX_DIMS, ENG_MAX_DIMS - 1, true, v, &n->naxes))
			return NBAD("%s: axes: not an integer or a list of at most 8 in [-8, 7]", ops[n->op].name);
		for (int k = 0; k < n->naxes; k++)
			n->axes[k] = (int)v[k];
		a = cJSON_GetObjectItemCaseSensitive(o, "keepdim");
		if (a && !cJSON_IsBool(a))
			return NBAD("%s: keepdim: not a boolean", ops[n->op].name);
		n->keepdim = cJSON_IsTrue(a);
		break;
	case PG_ATTR_SHAPE:
		if (!int_list(cJSON_GetObjectItemCaseSensitive(o, "shape"), -1, PROTO_MAX_DIM, false,
			      n->target, &n->rank))
			return NBAD("reshape: shape: missing, rank above 8, or a dimension not in [-1, 2^40]");
		break;
	case PG_ATTR_PERM:
		if (!int_list(cJSON_GetObjectItemCaseSensitive(o, "perm"), 0, ENG_MAX_DIMS - 1, false, v, &cnt))
			return NBAD("permute: perm: missing or not a list of at most 8 in [0, 7]");
		n->naxes = cnt;
		for (int k = 0; k < cnt; k++)
			n->axes[k] = (int)v[k];
		break;
	case PG_ATTR_DIMS:
		if (!int_list(cJSON_GetObjectItemCaseSensitive(o, "dims"), -ENG_MAX_DIMS, ENG_MAX_DIMS - 1,
			      false, v, &cnt) || cnt != 2)
			return NBAD("transpose: dims: missing or not two integers in [-8, 7]");
		n->naxes = 2;
		n->axes[0] = (int)v[0];
		n->axes[1] = (int)v[1];
		break;
	case PG_ATTR_DTYPE:
		if (!get_dtype(o, "dtype", &n->to))
			return NBAD("cast: dtype: missing or unknown");
		break;
	case PG_ATTR_ARGMAX: {
		tsd_status s = parse_argmax(o, n, i, err);
		if (s)
			return s;
		break;
	}
	case PG_ATTR_CLASSES:
		if (!proto_json_int(cJSON_GetObjectItemCaseSensitive(o, "num_classes"), 1, PROTO_GRAPH_MAX_CLASSES,
				    &n->classes))
			return NBAD("one_hot: num_classes: missing or not an integer in [1, %d]",
				    PROTO_GRAPH_MAX_CLASSES);
		break;
	case PG_ATTR_SLICE: {
		tsd_status s = parse_slice(o, n, i, err);
		if (s)
			return s;
		break;
	}
	case PG_ATTR_CONV:
		for (int k = 0; k < 2; k++) {
			const char *key = k ? "padding" : "stride";
			int *dst = k ? n->padding : n->stride;
			dst[0] = dst[1] = !k;
			a = cJSON_GetObjectItemCaseSensitive(o, key);
			if (!a)
				continue;
			if (!int_list(a, !k, 64, true, v, &cnt) || cnt > 2 || cnt < 1)
				return NBAD("conv2d: %s: not an integer or two in [%d, 64]", key, !k);
			dst[0] = (int)v[0];
			dst[1] = (int)v[cnt - 1];
		}
		break;
	}
	/* an unknown field is a typo the client should hear about, not a silent default */
	for (const cJSON *f = o->child; f && !what; f = f->next) {
		if (!strcmp(f->string, "id") || !strcmp(f->string, "op") || !strcmp(f->string, "in"))
			continue;
		what = f->string;
		for (const char *const *k = attr_keys[ops[n->op].attr]; *k && what; k++)
			if (!strcmp(*k, f->string))
				what = NULL;
	}
	if (what)
		return NBAD("%s: unknown field '%.40s'", ops[n->op].name, what);
	return TSD_OK;
}

/* First pass: ids (unique, into the table) and ops. */
static tsd_status parse_ids(const cJSON *nodes, proto_graph *g, int *tab, proto_err *err)
{
	int i = 0;
	for (const cJSON *o = nodes->child; o; o = o->next, i++) {
		proto_gnode *n = &g->nodes[i];
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
		if (!cJSON_IsObject(o))
			return proto_fail(err, TSD_BAD_REQUEST, "nodes[%d]: not an object", i);
		if (!cJSON_IsString(id) || !id->valuestring[0] || strlen(id->valuestring) > PROTO_MAX_ID)
			return proto_fail(err, TSD_BAD_REQUEST, "nodes[%d].id: missing, empty, not a string "
					  "or longer than %d bytes", i, PROTO_MAX_ID);
		strcpy(n->id, id->valuestring);
		uint32_t s = slot_of(tab, g, n->id);
		if (tab[s])
			return NBAD("duplicate id (also nodes[%d])", tab[s] - 1);
		tab[s] = i + 1;
		const cJSON *op = cJSON_GetObjectItemCaseSensitive(o, "op");
		if (!cJSON_IsString(op))
			return NBAD("op: missing or not a string");
		n->op = PROTO_G_COUNT;
		for (int k = 0; k < PROTO_G_COUNT; k++)
			if (!strcmp(ops[k].name, op->valuestring))
				n->op = (proto_gop)k;
		if (n->op == PROTO_G_COUNT)
			return NBAD("unknown op '%.40s'", op->valuestring);
	}
	return TSD_OK;
}

/* Second pass: inputs (defined earlier: no cycles by construction), attributes, shapes. */
static tsd_status parse_nodes(const cJSON *nodes, proto_graph *g, const int *tab,
			      uint64_t max_param_bytes, proto_err *err)
{
	int i = 0;
	tsd_status s;
	for (const cJSON *o = nodes->child; o; o = o->next, i++) {
		proto_gnode *n = &g->nodes[i];
		const struct pg_opinfo *op = &ops[n->op];
		const cJSON *in = cJSON_GetObjectItemCaseSensitive(o, "in");
		if (in && !cJSON_IsArray(in))
			return NBAD("%s: in: not an array", op->name);
		int cnt = in ? cJSON_GetArraySize(in) : 0;
		if (cnt < op->lo || cnt > op->hi)
			return op->lo == op->hi ? NBAD("%s: takes %d inputs, got %d", op->name, op->lo, cnt) :
				NBAD("%s: takes %d to %d inputs, got %d", op->name, op->lo, op->hi, cnt);
		n->nin = cnt;
		int k = 0;
		for (const cJSON *e = in ? in->child : NULL; e; e = e->next, k++) {
			if (!cJSON_IsString(e))
				return NBAD("%s: in[%d]: not a string", op->name, k);
			int at = tab[slot_of(tab, g, e->valuestring)] - 1;
			if (at == i)
				return NBAD("%s: in[%d]: refers to the node itself", op->name, k);
			if (at > i)
				return NBAD("%s: in[%d]: '%.64s' is defined later, at nodes[%d] (a forward "
					    "reference or a cycle)", op->name, k, e->valuestring, at);
			if (at < 0)
				return NBAD("%s: in[%d]: unknown id '%.64s'", op->name, k, e->valuestring);
			n->in[k] = at;
		}
		if ((s = parse_attrs(o, g, i, err)) || (s = proto_graph_infer(g, i, err)))
			return s;
		g->ninputs += n->op == PROTO_G_INPUT;
		if (n->op == PROTO_G_PARAM) {
			uint64_t b = eng_dtype_size(n->dtype);
			for (int d = 0; d < n->ndim; d++)
				b *= (uint64_t)n->shape[d]; /* infer capped numel at 2^40: no overflow */
			g->nparams++;
			g->param_bytes += b;
			if (g->param_bytes > max_param_bytes)
				return node_fail(err, TSD_TOO_LARGE, i, n->id, "param: params reach %llu bytes, "
						 "at most %llu", (unsigned long long)g->param_bytes,
						 (unsigned long long)max_param_bytes);
		}
	}
	return TSD_OK;
}

static tsd_status parse_outputs(const cJSON *outs, proto_graph *g, const int *tab, proto_err *err)
{
	int n = cJSON_IsArray(outs) ? cJSON_GetArraySize(outs) : 0;
	if (n < 1 || n > PROTO_GRAPH_MAX_OUTPUTS)
		return proto_fail(err, TSD_BAD_REQUEST, "outputs: %s", !outs ? "missing" :
				  !cJSON_IsArray(outs) ? "not an array" : "1 to 64 ids expected");
	int k = 0;
	for (const cJSON *e = outs->child; e; e = e->next, k++) {
		int at = cJSON_IsString(e) ? tab[slot_of(tab, g, e->valuestring)] - 1 : -1;
		if (at < 0)
			return proto_fail(err, TSD_BAD_REQUEST, "outputs[%d]: %s", k, cJSON_IsString(e) ?
					  "unknown id" : "not a string");
		for (int j = 0; j < k; j++)
			if (g->outputs[j] == at)
				return proto_fail(err, TSD_BAD_REQUEST, "outputs[%d]: '%s' is also outputs[%d]",
						  k, g->nodes[at].id, j);
		g->outputs[k] = at;
	}
	g->noutputs = n;
	return TSD_OK;
}

tsd_status proto_graph_parse(const cJSON *j, uint64_t max_param_bytes, proto_graph *g, proto_err *err)
{
	memset(g, 0, sizeof(*g));
	if (!cJSON_IsObject(j))
		return proto_fail(err, TSD_BAD_REQUEST, "graph: not an object");
	for (const cJSON *f = j->child; f; f = f->next)
		if (strcmp(f->string, "nodes") && strcmp(f->string, "outputs"))
			return proto_fail(err, TSD_BAD_REQUEST, "graph: unknown field '%.40s'", f->string);
	const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(j, "nodes");
	if (!cJSON_IsArray(nodes))
		return proto_fail(err, TSD_BAD_REQUEST, "nodes: %s", nodes ? "not an array" : "missing");
	int nn = cJSON_GetArraySize(nodes);
	if (nn > PROTO_GRAPH_MAX_NODES)
		return proto_fail(err, TSD_TOO_LARGE, "nodes: %d, at most %d", nn, PROTO_GRAPH_MAX_NODES);
	if (nn == 0)
		return proto_fail(err, TSD_BAD_REQUEST, "nodes: empty");
	g->nodes = calloc((size_t)nn, sizeof(*g->nodes));
	int *tab = calloc(HASH_SLOTS, sizeof(int));
	tsd_status s = !g->nodes || !tab ? proto_fail(err, TSD_OUT_OF_MEMORY, "graph: no memory") : TSD_OK;
	g->nnodes = nn;
	if (!s && !(s = parse_ids(nodes, g, tab, err)) &&
	    !(s = parse_nodes(nodes, g, tab, max_param_bytes, err)))
		s = parse_outputs(cJSON_GetObjectItemCaseSensitive(j, "outputs"), g, tab, err);
	free(tab);
	if (s)
		proto_graph_free(g);
	return s;
}

void proto_graph_free(proto_graph *g)
{
	free(g->nodes);
	memset(g, 0, sizeof(*g));
}

int proto_graph_find(const proto_graph *g, const char *id)
{
	for (int i = 0; i < g->nnodes; i++)
		if (!strcmp(g->nodes[i].id, id))
			return i;
	return -1;
}
