/* graph_build.c: a validated graph (proto_graph.h) made into engine tensors through the public API
 * only; inputs and params are checked against the declared shapes, and each built node's shape
 * against the inferred one, so validation and engine can never silently disagree. */
#include <stdlib.h>
#include <string.h>

#include "graph_build.h"

/* Check t against leaf node n; the batch size seen so far in *batch (-1: none yet). */
static tsd_status check_leaf(const proto_graph *g, int i, const eng_tensor *t, int64_t *batch,
			     proto_err *err)
{
	const proto_gnode *n = &g->nodes[i];
	const char *kind = proto_gop_name(n->op);
	if (!t)
		return proto_fail(err, TSD_BAD_REQUEST, "nodes[%d] (%s): %s: no tensor given", i, n->id, kind);
	if (eng_tensor_dtype(t) != n->dtype)
		return proto_fail(err, TSD_BAD_REQUEST, "nodes[%d] (%s): %s: dtype %s, declared %s", i,
				  n->id, kind, eng_dtype_name(eng_tensor_dtype(t)), eng_dtype_name(n->dtype));
	bool ok = eng_ndim(t) == n->ndim;
	for (int d = 0; ok && d < n->ndim; d++) {
		int64_t s = eng_shape(t)[d];
		if (n->shape[d] == PROTO_BATCH) {
			ok = *batch < 0 || *batch == s;
			*batch = s;
		} else {
			ok = s == n->shape[d];
		}
	}
	if (!ok)
		return proto_fail(err, TSD_SHAPE_MISMATCH, "nodes[%d] (%s): %s: the tensor's shape does not "
				  "match the declared one%s", i, n->id, kind,
				  *batch >= 0 ? " (or the batch size differs between inputs)" : "");
	return TSD_OK;
}

static eng_tensor *build_op(const proto_gnode *n, eng_ctx *ctx, eng_tensor *const *t)
{
	eng_tensor *a = n->nin ? t[n->in[0]] : NULL, *b = n->nin > 1 ? t[n->in[1]] : NULL;
	eng_tensor *c = n->nin > 2 ? t[n->in[2]] : NULL;
	switch (n->op) {
	case PROTO_G_CONST: return eng_scalar(ctx, n->dtype, n->value);
	case PROTO_G_ADD: return eng_add(a, b);
	case PROTO_G_SUB: return eng_sub(a, b);
	case PROTO_G_MUL: return eng_mul(a, b);
	case PROTO_G_DIV: return eng_div(a, b);
	case PROTO_G_NEG: return eng_neg(a);
	case PROTO_G_EXP: return eng_exp(a);
	case PROTO_G_LOG: return eng_log(a);
	case PROTO_G_SQRT: return eng_sqrt(a);
	case PROTO_G_RELU: return eng_relu(a);
	case PROTO_G_SIGMOID: return eng_sigmoid(a);
	case PROTO_G_TANH: return eng_tanh(a);
	case PROTO_G_MATMUL: return eng_matmul(a, b);
	case PROTO_G_LINEAR: return eng_linear(a, b, c);
	case PROTO_G_SOFTMAX: return eng_softmax(a, n->axes[0]);
	case PROTO_G_LOG_SOFTMAX: return eng_log_softmax(a, n->axes[0]);
	case PROTO_G_SUM: return eng_sum(a, n->axes, n->naxes, n->keepdim);
	case PROTO_G_MEAN: return eng_mean(a, n->axes, n->naxes, n->keepdim);
	case PROTO_G_MAX: return eng_max(a, n->axes, n->naxes, n->keepdim);
	case PROTO_G_RESHAPE: return eng_reshape(a, n->rank, n->target);
	case PROTO_G_PERMUTE: return eng_permute(a, n->axes);
	case PROTO_G_TRANSPOSE: return eng_transpose(a, n->axes[0], n->axes[1]);
	case PROTO_G_CAST: return eng_cast(a, n->to);
	case PROTO_G_CONV2D: return eng_conv2d(a, b, c, n->stride, n->padding, NULL, 1);
	case PROTO_G_ARGMAX: return eng_argmax(a, n->axes[0], n->keepdim);
	case PROTO_G_ONE_HOT: return eng_one_hot(a, n->classes);
	case PROTO_G_EQ: return eng_eq(a, b);
	case PROTO_G_LT: return eng_lt(a, b);
	case PROTO_G_WHERE: return eng_where(a, b, c);
	case PROTO_G_CONTIGUOUS: return eng_contiguous(a);
	case PROTO_G_SLICE: return eng_slice(a, n->axes[0], n->start, n->stop, n->step);
	case PROTO_G_CAT: case PROTO_G_STACK: {
		eng_tensor *ts[PROTO_GRAPH_MAX_IN];
		for (int k = 0; k < n->nin; k++)
			ts[k] = t[n->in[k]];
		return n->op == PROTO_G_CAT ? eng_cat(ts, n->nin, n->axes[0]) : eng_stack(ts, n->nin, n->axes[0]);
	}
	default: return NULL; /* leaves are never built here */
	}
}

/* The built tensor agrees with the inference (a batch dimension with the batch size). */
static bool same_shape(const proto_gnode *n, const eng_tensor *t, int64_t batch)
{
	if (eng_ndim(t) != n->ndim)
		return false;
	for (int d = 0; d < n->ndim; d++)
		if (eng_shape(t)[d] != (n->shape[d] == PROTO_BATCH ? batch : n->shape[d]))
			return false;
	return true;
}

static bool is_leaf(const proto_gnode *n)
{
	return n->op == PROTO_G_INPUT || n->op == PROTO_G_PARAM;
}

tsd_status proto_graph_build(const proto_graph *g, eng_ctx *ctx, eng_tensor *const *inputs,
			     eng_tensor *const *params, eng_tensor **outputs, proto_err *err)
{
	eng_tensor **t = calloc((size_t)g->nnodes, sizeof(*t));
	if (!t)
		return proto_fail(err, TSD_OUT_OF_MEMORY, "graph: no memory");
	int64_t batch = -1;
	int ki = 0, kp = 0, i = 0;
	tsd_status s = TSD_OK;
	for (i = 0; i < g->nnodes && !s; i++) {
		const proto_gnode *n = &g->nodes[i];
		if (is_leaf(n)) {
			t[i] = n->op == PROTO_G_INPUT ? inputs[ki++] : params[kp++];
			s = check_leaf(g, i, t[i], &batch, err);
			continue;
		}
		t[i] = build_op(n, ctx, t);
		if (!t[i] || eng_error(ctx)) {
			s = tsd_status_from_eng(eng_error(ctx));
			proto_fail(err, s ? s : TSD_INTERNAL, "nodes[%d] (%s): %s: %s", i, n->id,
				   proto_gop_name(n->op), eng_errmsg(ctx));
			s = s ? s : TSD_INTERNAL;
		} else if (!same_shape(n, t[i], batch)) {
			s = proto_fail(err, TSD_INTERNAL, "nodes[%d] (%s): %s: the engine's shape disagrees "
				       "with the validated one", i, n->id, proto_gop_name(n->op));
		}
	}
	eng_clear_error(ctx);
	for (int k = 0; k < g->noutputs; k++)
		outputs[k] = s ? NULL : t[g->outputs[k]];
	/* free what we made that is not an output (outputs are distinct nodes) */
	for (int k = 0; k < g->nnodes; k++) {
		bool keep = is_leaf(&g->nodes[k]);
		for (int o = 0; !s && o < g->noutputs && !keep; o++)
			keep = g->outputs[o] == k;
		if (!keep)
			eng_tensor_free(t[k]);
	}
	free(t);
	return s;
}

tsd_status tsd_status_from_eng(eng_status s)
{
	switch (s) {
	case ENG_OK: return TSD_OK;
	case ENG_EINVAL: case ENG_EAXIS: case ENG_EDTYPE: return TSD_BAD_REQUEST;
	case ENG_ESHAPE: return TSD_SHAPE_MISMATCH;
	case ENG_ERANGE: return TSD_TOO_LARGE;
	case ENG_ENOMEM: return TSD_OUT_OF_MEMORY;
	case ENG_ECOMPILE: return TSD_COMPILE_FAILED;
	case ENG_EDEVICE: return TSD_DEVICE_ERROR;
	case ENG_ECANCELED: return TSD_CANCELLED;
	case ENG_ENOTSUP: return TSD_BAD_REQUEST;
	/* EIO, ESTATE, ENOTFOUND: the daemon's own files or state, not the client's input */
	default: return TSD_INTERNAL;
	}
}
