/* load.c: a .onnx file -> eng_onnx_model: the protobuf (protoc-c's generated parser), opset
 * imports, initializers as engine tensors, graph inputs/outputs with their shapes, and the
 * nodes' topological order (a cycle or an undefined value is an error here, not at build). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/context.h"
#include "onnx_int.h"

static void *lfail(char *err, size_t errlen, const char *label, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void *lfail(char *err, size_t errlen, const char *label, const char *fmt, ...)
{
	if (err && errlen) {
		int k = snprintf(err, errlen, "onnx: %s: ", label ? label : "<memory>");
		if (k >= 0 && (size_t)k < errlen) {
			va_list ap;
			va_start(ap, fmt);
			vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
			va_end(ap);
		}
	}
	return NULL;
}

void eng_onnx_free(eng_onnx_model *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->n_init; i++)
		eng_tensor_free(m->init ? m->init[i] : NULL);
	free(m->init);
	onx_map_free(&m->init_map);
	for (int i = 0; i < m->n_folded; i++)
		eng_tensor_free(m->folded[i]);
	free(m->folded);
	onx_map_free(&m->fold_map);
	onx_map_free(&m->derived_map);
	free(m->in);
	free(m->out);
	free(m->in_graph_idx);
	free(m->in_static);
	free(m->order);
	free(m->dir);
	free(m->label);
	if (m->pb)
		onnx__model_proto__free_unpacked(m->pb, NULL);
	free(m);
}

/* A ValueInfoProto's type and shape into io. */
static bool value_info(eng_onnx_model *m, const Onnx__ValueInfoProto *v, eng_onnx_io *io, char *why, size_t wl)
{
	memset(io, 0, sizeof(*io));
	io->name = v->name ? v->name : "";
	io->ndim = -1;
	const Onnx__TypeProto *tp = v->type;
	if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) {
		snprintf(why, wl, "value '%.200s' is not a tensor (sequences, maps and optionals are not supported)", io->name);
		return false;
	}
	const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
	io->onnx_type = tt->has_elem_type ? tt->elem_type : 0;
	io->dtype_ok = onx_dtype(io->onnx_type, m->flags, &m->narrowed, &io->dtype);
	if (tt->shape) {
		if (tt->shape->n_dim > ENG_MAX_DIMS) {
			snprintf(why, wl, "value '%.200s' has %zu dims (at most %d)", io->name, tt->shape->n_dim, ENG_MAX_DIMS);
			return false;
		}
		io->ndim = (int)tt->shape->n_dim;
		for (int i = 0; i < io->ndim; i++) {
			const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
			io->shape[i] = -1;
			if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value >= 0)
				io->shape[i] = d->dim_value;
			else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
				io->dim_names[i] = d->dim_param;
		}
	}
	return true;
}

/* Producers (node indices, through prod) of the values the subgraphs of node n's attributes use
 * from the enclosing graph (an If branch sees the outer values without naming them as inputs),
 * appended to *deps (*nd of *cap, grown). Names a subgraph defines itself are not in prod. */
static bool implicit_deps(const Onnx__NodeProto *n, const onx_map *prod, int **deps, size_t *nd, size_t *cap, int depth)
{
	if (depth > ONX_MAX_NESTING)
		return false;
	for (size_t a = 0; a < n->n_attribute; a++) {
		const Onnx__AttributeProto *at = n->attribute[a];
		size_t ng = at->n_graphs + (at->g ? 1 : 0);
		for (size_t gi = 0; gi < ng; gi++) {
			const Onnx__GraphProto *g = gi < at->n_graphs ? at->graphs[gi] : at->g;
			for (size_t k = 0; k < g->n_node; k++) {
				const Onnx__NodeProto *s = g->node[k];
				for (size_t i = 0; i < s->n_input; i++) {
					int p = *s->input[i] ? onx_map_get(prod, s->input[i]) : -1;
					if (p < 0)
						continue;
					if (*nd == *cap) {
						size_t c = *cap ? *cap * 2 : 16;
						int *d = realloc(*deps, c * sizeof(int));
						if (!d)
							return false;
						*deps = d;
						*cap = c;
					}
					(*deps)[(*nd)++] = p;
				}
				if (!implicit_deps(s, prod, deps, nd, cap, depth + 1))
					return false;
			}
		}
	}
	return true;
}

/* Kahn's algorithm over the nodes: m->order, or an error naming a node on a cycle or a value
 * nothing defines. */
static bool topo_order(eng_onnx_model *m, char *err, size_t errlen)
{
	const Onnx__GraphProto *g = m->g;
	int nn = (int)g->n_node;
	onx_map prod = {0}, avail = {0};
	int *pending = calloc((size_t)nn + 1, sizeof(int)), *queue = malloc(((size_t)nn + 1) * sizeof(int));
	m->order = malloc(((size_t)nn + 1) * sizeof(int));
	bool ok = pending && queue && m->order;
	if (!ok)
		lfail(err, errlen, m->label, "out of memory");
	for (size_t i = 0; ok && i < g->n_initializer; i++)
		ok = onx_map_put(&avail, g->initializer[i]->name ? g->initializer[i]->name : "", 1);
	for (size_t i = 0; ok && i < g->n_input; i++)
		ok = onx_map_put(&avail, g->input[i]->name ? g->input[i]->name : "", 1);
	for (int i = 0; ok && i < nn; i++) {
		const Onnx__NodeProto *n = g->node[i];
		if (n->n_input > ONX_MAX_IO || n->n_output > ONX_MAX_IO) {
			lfail(err, errlen, m->label, "node %d ('%.200s') has too many inputs or outputs", i, n->name ? n->name : "");
			ok = false;
		}
		for (size_t k = 0; ok && k < n->n_output; k++) {
			const char *o = n->output[k];
			if (!*o)
				continue;
			if (onx_map_get(&avail, o) >= 0 || onx_map_get(&prod, o) >= 0) {
				lfail(err, errlen, m->label, "value '%.200s' is defined twice (node %d, '%.200s')", o, i, n->name ? n->name : "");
				ok = false;
			} else if (!onx_map_put(&prod, o, i))
				ok = false;
		}
	}
	int head = 0, tail = 0;
	int *imp = NULL;
	size_t impcap = 0, nimplicit = 0;
	for (int i = 0; ok && i < nn; i++) {
		const Onnx__NodeProto *n = g->node[i];
		for (size_t k = 0; ok && k < n->n_input; k++) {
			const char *v = n->input[k];
			if (!*v || onx_map_get(&avail, v) >= 0)
				continue;
			if (onx_map_get(&prod, v) < 0) {
				lfail(err, errlen, m->label, "node %d ('%.200s', %.100s) uses value '%.200s' that nothing defines", i, n->name ? n->name : "", n->op_type ? n->op_type : "", v);
				ok = false;
			} else
				pending[i]++;
		}
		size_t nimp = 0;
		if (ok && n->n_attribute && !implicit_deps(n, &prod, &imp, &nimp, &impcap, 0)) {
			lfail(err, errlen, m->label, "out of memory or subgraphs nested too deep (node %d)", i);
			ok = false;
		}
		pending[i] += (int)nimp;
		nimplicit += nimp;
		if (ok && !pending[i])
			queue[tail++] = i;
	}
	int norder = 0;
	/* Build an edge list: for each node input produced by node p, an edge p -> i. */
	size_t nedges = nimplicit;
	for (int i = 0; ok && i < nn; i++)
		nedges += g->node[i]->n_input;
	int *efirst = ok ? malloc(((size_t)nn + 1) * sizeof(int)) : NULL, *enext = ok ? malloc((nedges + 1) * sizeof(int)) : NULL,
	    *eto = ok ? malloc((nedges + 1) * sizeof(int)) : NULL;
	if (ok && (!efirst || !enext || !eto)) {
		lfail(err, errlen, m->label, "out of memory");
		ok = false;
	}
	size_t ne = 0;
	for (int i = 0; ok && i < nn; i++)
		efirst[i] = -1;
	for (int i = 0; ok && i < nn; i++) {
		const Onnx__NodeProto *n = g->node[i];
		for (size_t k = 0; k < n->n_input; k++) {
			const char *v = n->input[k];
			if (!*v || onx_map_get(&avail, v) >= 0)
				continue;
			int p = onx_map_get(&prod, v);
			eto[ne] = i;
			enext[ne] = efirst[p];
			efirst[p] = (int)ne++;
		}
		size_t nimp = 0;
		if (n->n_attribute && !implicit_deps(n, &prod, &imp, &nimp, &impcap, 0)) {
			lfail(err, errlen, m->label, "out of memory (node %d)", i);
			ok = false;
			break;
		}
		for (size_t k = 0; k < nimp && ne < nedges; k++) {
			int p = imp[k];
			eto[ne] = i;
			enext[ne] = efirst[p];
			efirst[p] = (int)ne++;
		}
	}
	while (ok && head < tail) {
		int i = queue[head++];
		m->order[norder++] = i;
		for (int e = efirst[i]; e >= 0; e = enext[e])
			if (--pending[eto[e]] == 0)
				queue[tail++] = eto[e];
	}
	if (ok && norder != nn) {
		for (int i = 0; i < nn; i++)
			if (pending[i]) {
				lfail(err, errlen, m->label, "the graph has a cycle through node %d ('%.200s', %.100s)", i, g->node[i]->name ? g->node[i]->name : "", g->node[i]->op_type ? g->node[i]->op_type : "");
				break;
			}
		ok = false;
	}
	free(imp);
	free(efirst);
	free(enext);
	free(eto);
	free(pending);
	free(queue);
	onx_map_free(&prod);
	onx_map_free(&avail);
	return ok;
}

static eng_onnx_model *load_pb(eng_ctx *ctx, const uint8_t *data, size_t len, const char *dir,
			       unsigned flags, const char *label, char *err, size_t errlen)
{
	if (!ctx)
		return lfail(err, errlen, label, "no context");
	eng_onnx_model *m = calloc(1, sizeof(*m));
	if (!m)
		return lfail(err, errlen, label, "out of memory");
	m->ctx = ctx;
	m->flags = flags;
	m->label = strdup(label ? label : "<memory>");
	if (dir) {
		char real[PATH_MAX];
		if (!realpath(dir, real)) {
			lfail(err, errlen, label, "model directory '%.200s': %s", dir, strerror(errno));
			goto fail;
		}
		m->dir = strdup(real);
	}
	if (!onx_pb_depth_ok(&onnx__model_proto__descriptor, data, len, ONX_MAX_NESTING)) {
		lfail(err, errlen, label, "messages nested more than %d deep", ONX_MAX_NESTING);
		goto fail;
	}
	m->pb = onnx__model_proto__unpack(NULL, len, data);
	if (!m->pb) {
		lfail(err, errlen, label, "not a valid ONNX ModelProto (protobuf parse failed on %zu bytes: truncated or wrong field types)", len);
		goto fail;
	}
	m->g = m->pb->graph;
	if (!m->g) {
		lfail(err, errlen, label, "the model has no graph");
		goto fail;
	}
	for (size_t i = 0; i < m->pb->n_opset_import; i++) {
		const Onnx__OperatorSetIdProto *o = m->pb->opset_import[i];
		const char *d = o->domain ? o->domain : "";
		if ((!*d || !strcmp(d, "ai.onnx")) && o->has_version)
			m->opset = o->version;
	}
	/* No default-domain opset (a model of other domains only): opset 0, and every node is
	 * refused at build as unsupported. */
	if (!m->pb->n_opset_import) {
		lfail(err, errlen, label, "the model imports no opset");
		goto fail;
	}
	const Onnx__GraphProto *g = m->g;
	if (g->n_node > ONX_MAX_NODES || g->n_input > ONX_MAX_IO || g->n_output > ONX_MAX_IO) {
		lfail(err, errlen, label, "the graph is too large (%zu nodes, %zu inputs, %zu outputs)", g->n_node, g->n_input, g->n_output);
		goto fail;
	}
	if (g->n_sparse_initializer) {
		lfail(err, errlen, label, "sparse initializers are not supported");
		goto fail;
	}
	/* initializers */
	m->init = calloc(g->n_initializer + 1, sizeof(*m->init));
	if (!m->init)
		goto oom;
	char why[512];
	for (size_t i = 0; i < g->n_initializer; i++) {
		const Onnx__TensorProto *tp = g->initializer[i];
		if (!tp->name || !*tp->name) {
			lfail(err, errlen, label, "initializer %zu has no name", i);
			goto fail;
		}
		if (onx_map_get(&m->init_map, tp->name) >= 0) {
			lfail(err, errlen, label, "initializer '%.200s' is defined twice", tp->name);
			goto fail;
		}
		eng_tensor *t;
		if (onx_tensor_decode(ctx, tp, m->dir, m->flags, &m->narrowed, &t, why, sizeof(why))) {
			lfail(err, errlen, label, "initializer %s", why);
			goto fail;
		}
		m->init[m->n_init++] = eng_keep_root(t);
		if (!onx_map_put(&m->init_map, tp->name, (int)i))
			goto oom;
	}
	/* inputs (not initializers) and outputs */
	m->in = calloc(g->n_input + 1, sizeof(*m->in));
	m->in_graph_idx = calloc(g->n_input + 1, sizeof(int));
	m->in_static = calloc(g->n_input + 1, sizeof(bool));
	m->out = calloc(g->n_output + 1, sizeof(*m->out));
	if (!m->in || !m->in_graph_idx || !m->in_static || !m->out)
		goto oom;
	for (size_t i = 0; i < g->n_input; i++) {
		if (!g->input[i]->name || onx_map_get(&m->init_map, g->input[i]->name) >= 0)
			continue;
		if (!value_info(m, g->input[i], &m->in[m->n_in], why, sizeof(why))) {
			lfail(err, errlen, label, "graph input %zu: %s", i, why);
			goto fail;
		}
		m->in_graph_idx[m->n_in++] = (int)i;
	}
	for (size_t i = 0; i < g->n_output; i++)
		if (!value_info(m, g->output[i], &m->out[m->n_out++], why, sizeof(why))) {
			lfail(err, errlen, label, "graph output %zu: %s", i, why);
			goto fail;
		}
	if (!topo_order(m, err, errlen))
		goto fail;
	return m;
oom:
	lfail(err, errlen, label, "out of memory");
fail:
	eng_onnx_free(m);
	return NULL;
}

eng_onnx_model *eng_onnx_load_mem(eng_ctx *ctx, const void *data, size_t len, const char *dir,
				  unsigned flags, char *err, size_t errlen)
{
	if (!data && len)
		return lfail(err, errlen, NULL, "no data");
	return load_pb(ctx, data, len, dir, flags, NULL, err, errlen);
}

eng_onnx_model *eng_onnx_load(eng_ctx *ctx, const char *path, unsigned flags, char *err, size_t errlen)
{
	size_t len;
	uint8_t *buf = onx_read_file(path, &len, err, errlen);
	if (!buf)
		return NULL;
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash)
		slash == dir ? (void)(dir[1] = 0) : (void)(*slash = 0);
	else
		snprintf(dir, sizeof(dir), ".");
	eng_onnx_model *m = load_pb(ctx, buf, len, dir, flags, path, err, errlen);
	free(buf);
	return m;
}

int eng_onnx_input_count(const eng_onnx_model *m) { return m ? m->n_in : 0; }
int eng_onnx_output_count(const eng_onnx_model *m) { return m ? m->n_out : 0; }

eng_status eng_onnx_input(const eng_onnx_model *m, int i, eng_onnx_io *out)
{
	if (!m || !out || i < 0 || i >= m->n_in)
		return ENG_EINVAL;
	*out = m->in[i];
	return ENG_OK;
}

eng_status eng_onnx_output(const eng_onnx_model *m, int i, eng_onnx_io *out)
{
	if (!m || !out || i < 0 || i >= m->n_out)
		return ENG_EINVAL;
	*out = m->out[i];
	return ENG_OK;
}

int64_t eng_onnx_opset(const eng_onnx_model *m, const char *domain)
{
	if (!m)
		return 0;
	const char *want = domain && strcmp(domain, "ai.onnx") ? domain : "";
	for (size_t i = 0; i < m->pb->n_opset_import; i++) {
		const Onnx__OperatorSetIdProto *o = m->pb->opset_import[i];
		const char *d = o->domain && strcmp(o->domain, "ai.onnx") ? o->domain : "";
		if (!strcmp(d, want))
			return o->version;
	}
	return 0;
}

bool eng_onnx_input_static(const eng_onnx_model *m, int i)
{
	return m && i >= 0 && i < m->n_in && m->in_static[i];
}

bool eng_onnx_narrowed(const eng_onnx_model *m) { return m && m->narrowed; }
