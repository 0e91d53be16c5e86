/* exec_onnx.c: ONNX models on the executor: the file imported, its inputs made the model's
 * inputs (a symbolic dim becomes the batch axis), the graph built at every batch bucket and
 * proven row-independent (eng_rows_independent) before callers' rows may share a launch, and
 * each batch's graph built from the importer. The spec's fields are checked by spec_onnx.c. */
#include "executor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensord/onnx.h>

#define BAD(...) dmn_bad(err, errlen, TSD_BAD_REQUEST, __VA_ARGS__)

struct dmn_onnx {
	eng_ctx *ctx;
	eng_onnx_model *m;
	int nall;              /* the file's inputs */
	int port[PROTO_GRAPH_MAX_OUTPUTS]; /* file input i: model input port[i], or -1: constant */
	eng_tensor *konst[PROTO_GRAPH_MAX_OUTPUTS]; /* file input i's constant (root), or NULL */
	unsigned flags;        /* eng_onnx_build's */
};

void dmn_onnx_free(dmn_onnx *o)
{
	if (!o)
		return;
	for (int i = 0; i < o->nall; i++)
		eng_tensor_free(o->konst[i]);
	eng_onnx_free(o->m);
	free(o);
}

/* A "constants" entry as a root tensor of io's dtype and (static) shape. */
static tsd_status make_const(eng_ctx *ctx, const eng_onnx_io *io, const cJSON *val, eng_tensor **out, char *err,
			     size_t errlen)
{
	int64_t numel = 1;
	int n;
	for (int d = 0; d < io->ndim; d++)
		if (io->shape[d] < 0)
			return BAD("constants.%s: the input's dim %d is symbolic; a constant needs a static shape", io->name, d);
		else
			numel *= io->shape[d];
	if (io->ndim < 0 || !dmn_json_numbers(val, DMN_ONNX_CONST_MAX, &n) || n != numel)
		return BAD("constants.%s: %d value(s), the input has %lld", io->name, dmn_json_numbers(val, DMN_ONNX_CONST_MAX, &n) ? n : 0,
			   (long long)(io->ndim < 0 ? -1 : numel));
	bool fl = eng_dtype_is_float(io->dtype);
	void *buf = malloc((size_t)n * 8);
	if (!buf)
		return dmn_bad(err, errlen, TSD_OUT_OF_MEMORY, "out of memory");
	const cJSON *e = cJSON_IsArray(val) ? val->child : val;
	for (int i = 0; i < n; i++, e = e->next) {
		double x = e->valuedouble;
		if (fl) {
			((float *)buf)[i] = (float)x;
		} else if (x >= -9.2e18 && x <= 9.2e18 && x == (double)(int64_t)x) {
			((int64_t *)buf)[i] = (int64_t)x;
		} else {
			free(buf);
			return BAD("constants.%s[%d]: %g is no integer for an integer input", io->name, i, x);
		}
	}
	eng_scope_begin(ctx);
	eng_tensor *t = eng_from_data(ctx, fl ? ENG_F32 : ENG_I64, io->ndim, io->shape, buf);
	t = eng_keep_root(eng_contiguous(eng_cast(t, io->dtype)));
	eng_scope_end(ctx);
	free(buf);
	eng_status s = t ? eng_realize(&t, 1) : eng_error(ctx);
	if (s) {
		eng_tensor_free(t);
		return dmn_bad(err, errlen, tsd_status_from_eng(s), "constants.%s: %s", io->name, eng_errmsg(ctx));
	}
	*out = t;
	return TSD_OK;
}

/* Input io as a model port: its shape (from "shapes", which may override the file's dims, else
 * the file's, whose one symbolic dim is the batch axis) into node n and the port's axis. */
static tsd_status make_port(const eng_onnx_io *io, const cJSON *shape, proto_gnode *n, int *axis, char *err,
			    size_t errlen)
{
	if (strlen(io->name) > PROTO_MAX_ID)
		return BAD("input \"%.64s...\": names of more than %d bytes are not served", io->name, PROTO_MAX_ID);
	if (!io->dtype_ok)
		return BAD("input \"%s\": ONNX element type %d, which tensord does not have", io->name, io->onnx_type);
	snprintf(n->id, sizeof(n->id), "%s", io->name);
	n->op = PROTO_G_INPUT;
	n->dtype = io->dtype;
	*axis = -1;
	if (shape) {
		n->ndim = cJSON_GetArraySize(shape);
		if (io->ndim >= 0 && n->ndim != io->ndim)
			return BAD("shapes.%s: rank %d, the file says %d", io->name, n->ndim, io->ndim);
		int d = 0;
		for (const cJSON *e = shape->child; e; e = e->next, d++) {
			/* over the file's dims too: exporters often fix a batch of 1 */
			n->shape[d] = e->valueint < 0 ? PROTO_BATCH : e->valueint;
			if (e->valueint < 0)
				*axis = d;
		}
		return TSD_OK;
	}
	if (io->ndim < 0)
		return BAD("input \"%s\": the file gives no rank; give its shape in \"shapes\"", io->name);
	n->ndim = io->ndim;
	for (int d = 0; d < io->ndim; d++) {
		n->shape[d] = io->shape[d];
		if (io->shape[d] >= 0)
			continue;
		if (*axis >= 0)
			return BAD("input \"%s\": dims %d and %d are both symbolic (%s, %s); give its shape in \"shapes\" "
				   "(-1 for the batch axis)",
				   io->name, *axis, d, io->dim_names[*axis] ? io->dim_names[*axis] : "?",
				   io->dim_names[d] ? io->dim_names[d] : "?");
		*axis = d;
		n->shape[d] = PROTO_BATCH;
	}
	return TSD_OK;
}

eng_status dmn_onnx_build(dmn_onnx *o, eng_tensor *const *in, eng_tensor **out, tsd_status *st, char *err,
			  size_t errlen)
{
	eng_tensor *all[PROTO_GRAPH_MAX_OUTPUTS];
	for (int i = 0; i < o->nall; i++)
		all[i] = o->port[i] >= 0 ? in[o->port[i]] : o->konst[i];
	eng_status s = eng_onnx_build(o->m, all, out, o->flags);
	for (int i = 0; !s && i < o->nall; i++) {
		eng_onnx_io io;
		if (o->port[i] < 0 || !eng_onnx_input_static(o->m, i) || eng_onnx_input(o->m, i, &io))
			continue;
		for (int k = 0; k < eng_onnx_output_count(o->m); k++)
			eng_tensor_free(out[k]);
		*st = BAD("input \"%s\": the graph depends on its values; give them in \"constants\"", io.name);
		s = ENG_ENOTSUP;
	}
	return s;
}

/* Zero inputs for every port at rows (buffers, as requests' inputs are). */
static eng_status zero_inputs(eng_ctx *ctx, const dmn_mver *v, int64_t rows, eng_tensor **in, int *axis)
{
	for (int q = 0; q < v->nin; q++) {
		const proto_gnode *n = &v->g.nodes[v->in[q].node];
		int64_t shape[ENG_MAX_DIMS];
		size_t numel = 1;
		for (int d = 0; d < n->ndim; d++)
			numel *= (size_t)(shape[d] = n->shape[d] == PROTO_BATCH ? rows : n->shape[d]);
		void *buf = calloc(numel + 1, eng_dtype_size(n->dtype));
		in[q] = buf ? eng_from_data(ctx, n->dtype, n->ndim, shape, buf) : NULL;
		free(buf);
		if (!in[q])
			return buf ? eng_error(ctx) : ENG_ENOMEM;
		axis[q] = v->in[q].axis;
	}
	return ENG_OK;
}

/* Output k as the model's output port: the first probe fixes its node (dtype, shape with the
 * batch axis), later ones must agree with it at their row count. */
static tsd_status out_port(dmn_onnx *o, dmn_mver *v, int k, const eng_tensor *t, int axis, int64_t rows, bool first,
			   char *err, size_t errlen)
{
	eng_onnx_io io;
	eng_onnx_output(o->m, k, &io);
	proto_gnode *n = &v->g.nodes[v->nin + k];
	const int64_t *sh = eng_shape(t);
	if (first) {
		if (strlen(io.name) > PROTO_MAX_ID)
			return BAD("output \"%.64s...\": names of more than %d bytes are not served", io.name, PROTO_MAX_ID);
		snprintf(n->id, sizeof(n->id), "%s", io.name);
		n->op = PROTO_G_CONST; /* a stand-in: only an output's id, dtype and shape are read */
		n->dtype = eng_tensor_dtype(t);
		n->ndim = eng_ndim(t);
		for (int d = 0; d < n->ndim; d++)
			n->shape[d] = d == axis ? PROTO_BATCH : sh[d];
		v->out[k] = (dmn_port){.name = n->id, .node = v->nin + k, .axis = axis};
		return TSD_OK;
	}
	bool same = eng_tensor_dtype(t) == n->dtype && eng_ndim(t) == n->ndim && (rows < 2 || axis == v->out[k].axis);
	for (int d = 0; same && d < n->ndim; d++)
		same = sh[d] == (n->shape[d] == PROTO_BATCH ? rows : n->shape[d]);
	if (!same)
		return BAD("output \"%s\": its shape at a batch of %lld does not follow the batch axis found at %d rows",
			   n->id, (long long)rows, v->buckets[v->nbuckets - 1] > 1 ? v->buckets[v->nbuckets - 1] : 2);
	return TSD_OK;
}

/* Build the graph at rows (lazily: nothing runs but build-time values), prove its rows apart
 * when batched, and fix or check the output ports. */
static tsd_status probe(dmn_onnx *o, dmn_mver *v, int64_t rows, bool first, char *err, size_t errlen)
{
	eng_ctx *ctx = o->ctx;
	eng_tensor *in[PROTO_GRAPH_MAX_OUTPUTS], *out[PROTO_GRAPH_MAX_OUTPUTS];
	int in_axis[PROTO_GRAPH_MAX_OUTPUTS], out_axis[PROTO_GRAPH_MAX_OUTPUTS];
	int nout = eng_onnx_output_count(o->m);
	for (int k = 0; k < nout; k++)
		out_axis[k] = -1;
	tsd_status st = TSD_OK;
	eng_scope_begin(ctx);
	eng_status s = zero_inputs(ctx, v, rows, in, in_axis);
	if (!s)
		s = dmn_onnx_build(o, in, out, &st, err, errlen);
	if (st) {
		/* the message is set */
	} else if (s) {
		st = dmn_bad(err, errlen, tsd_status_from_eng(s), "building the graph for %lld row(s): %s", (long long)rows,
			 eng_errmsg(ctx));
	} else if (v->batched && rows >= 2 && eng_rows_independent(in, in_axis, v->nin, out, nout, out_axis)) {
		st = BAD("cannot batch callers' rows: %s (to serve it one request a launch, fix every input's shape "
			 "in \"shapes\")",
			 eng_errmsg(ctx));
	}
	for (int k = 0; k < nout && !st; k++)
		st = out_port(o, v, k, out[k], v->batched ? out_axis[k] : -1, rows, first, err, errlen);
	eng_scope_end(ctx);
	return st;
}

/* Every key of obj names a file input. */
static tsd_status names_inputs(const eng_onnx_model *m, const cJSON *obj, const char *what, char *err, size_t errlen)
{
	for (const cJSON *e = obj ? obj->child : NULL; e; e = e->next) {
		bool found = false;
		eng_onnx_io io;
		for (int i = 0; i < eng_onnx_input_count(m) && !found; i++)
			found = !eng_onnx_input(m, i, &io) && !strcmp(io.name, e->string);
		if (!found)
			return BAD("%s.%.64s: not an input of the model", what, e->string);
	}
	return TSD_OK;
}

static tsd_status ports(dmn_onnx *o, dmn_mver *v, char *err, size_t errlen)
{
	const cJSON *shapes = cJSON_GetObjectItemCaseSensitive(v->onnx_opts, "shapes");
	const cJSON *consts = cJSON_GetObjectItemCaseSensitive(v->onnx_opts, "constants");
	tsd_status st;
	if ((st = names_inputs(o->m, shapes, "shapes", err, errlen)) ||
	    (st = names_inputs(o->m, consts, "constants", err, errlen)))
		return st;
	if (shapes)
		o->flags |= ENG_ONNX_FREE_DIMS;
	int batched = 0;
	for (int i = 0; i < o->nall; i++) {
		eng_onnx_io io;
		eng_onnx_input(o->m, i, &io);
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(consts, io.name);
		o->port[i] = -1;
		if (c) {
			if (!io.dtype_ok)
				return BAD("constants.%s: ONNX element type %d, which tensord does not have", io.name, io.onnx_type);
			if ((st = make_const(o->ctx, &io, c, &o->konst[i], err, errlen)))
				return st;
			o->flags |= ENG_ONNX_SPECIALIZE;
			continue;
		}
		int q = o->port[i] = v->nin++;
		if ((st = make_port(&io, cJSON_GetObjectItemCaseSensitive(shapes, io.name), &v->g.nodes[q], &v->in[q].axis,
				    err, errlen)))
			return st;
		v->in[q].name = v->g.nodes[q].id;
		v->in[q].node = v->in_order[q] = q;
		batched += v->in[q].axis >= 0;
	}
	if (!v->nin)
		return BAD("constants: every input is a constant; at least one must come with the requests");
	for (int q = 0; batched && q < v->nin; q++)
		if (v->in[q].axis < 0)
			return BAD("input \"%s\" has no batch axis while others have one: give it in \"constants\", or its "
				   "shape with a -1 in \"shapes\"",
				   v->in[q].name);
	v->batched = batched > 0;
	return TSD_OK;
}

tsd_status dmn_onnx_open(eng_ctx *ctx, dmn_mver *v, const proto_msg *pm, dmn_onnx **out, char *err, size_t errlen)
{
	dmn_onnx *o = calloc(1, sizeof(*o));
	char e2[1024];
	tsd_status st = TSD_OK;
	if (!o)
		return dmn_bad(err, errlen, TSD_OUT_OF_MEMORY, "out of memory");
	o->ctx = ctx;
	if (v->onnx_path[0]) {
		o->m = eng_onnx_load(ctx, v->onnx_path, v->onnx_flags, e2, sizeof(e2));
	} else {
		const proto_tensor *t = proto_msg_tensor(pm, "onnx");
		o->m = eng_onnx_load_mem(ctx, t->data, t->nbytes, NULL, v->onnx_flags, e2, sizeof(e2));
	}
	if (!o->m) {
		st = dmn_bad(err, errlen, eng_error(ctx) == ENG_ENOMEM ? TSD_OUT_OF_MEMORY : TSD_BAD_REQUEST, "%s", e2);
		goto fail;
	}
	o->nall = eng_onnx_input_count(o->m);
	int nout = eng_onnx_output_count(o->m);
	if (o->nall > PROTO_GRAPH_MAX_OUTPUTS || nout > PROTO_GRAPH_MAX_OUTPUTS || nout < 1) {
		st = BAD("onnx: %d inputs and %d outputs; a served model has at most %d of each (and an output)", o->nall,
			 nout, PROTO_GRAPH_MAX_OUTPUTS);
		goto fail;
	}
	v->g.nnodes = o->nall + nout;
	if (!(v->g.nodes = calloc((size_t)v->g.nnodes, sizeof(*v->g.nodes)))) {
		st = dmn_bad(err, errlen, TSD_OUT_OF_MEMORY, "out of memory");
		goto fail;
	}
	if ((st = ports(o, v, err, errlen)))
		goto fail;
	/* the ports' nodes first, then the outputs' */
	v->g.nnodes = v->nin + nout;
	v->g.ninputs = v->nin;
	v->g.noutputs = v->nout = nout;
	v->g.batched = v->batched;
	for (int k = 0; k < nout; k++)
		v->g.outputs[k] = v->nin + k;
	if (!v->batched) {
		dmn_mver_unbatched(v);
		st = probe(o, v, 1, true, err, errlen);
	} else {
		/* first at the largest bucket (at least 2 rows, where the proof means something) */
		int top = v->buckets[v->nbuckets - 1];
		st = probe(o, v, top > 1 ? top : 2, true, err, errlen);
		for (int b = 0; b < v->nbuckets && !st; b++)
			if (v->buckets[b] != top || top < 2)
				st = probe(o, v, v->buckets[b], false, err, errlen);
	}
	if (st)
		goto fail;
	*out = o;
	return TSD_OK;
fail:
	dmn_onnx_free(o);
	return st;
}
