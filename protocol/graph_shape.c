/* graph_shape.c: dtype and shape inference of graph nodes (proto_graph.h), with the batch dimension
 * as a symbol (PROTO_BATCH) that matches only itself or 1; every mismatch names the node. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <tensord/eng_dtype.h>

#include "proto_graph.h"

#define B PROTO_BATCH

static tsd_status fail(proto_err *err, tsd_status s, const proto_graph *g, int i, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static tsd_status fail(proto_err *err, tsd_status s, const proto_graph *g, int i, const char *fmt, ...)
{
	char msg[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return proto_fail(err, s, "nodes[%d] (%s): %s: %s", i, g->nodes[i].id,
			  proto_gop_name(g->nodes[i].op), msg);
}
#define SHAPE(...) fail(err, TSD_SHAPE_MISMATCH, g, i, __VA_ARGS__)
#define ATTR(...) fail(err, TSD_BAD_REQUEST, g, i, __VA_ARGS__)

/* "[2,-1,3]" into buf (a batch dimension shows as -1). */
static const char *fmt_shape(char *buf, size_t len, int nd, const int64_t *s)
{
	size_t at = (size_t)snprintf(buf, len, "[");
	for (int d = 0; d < nd && at < len; d++)
		at += (size_t)snprintf(buf + at, len - at, "%s%lld", d ? "," : "", (long long)s[d]);
	if (at < len)
		snprintf(buf + at, len - at, "]");
	return buf;
}

/* Right-aligned broadcast of a and b into n (ndim, shape); false on a mismatch. */
static bool broadcast(const proto_gnode *a, const proto_gnode *b, proto_gnode *n)
{
	int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
	for (int d = 0; d < nd; d++) {
		int da = d - (nd - a->ndim), db = d - (nd - b->ndim);
		int64_t x = da >= 0 ? a->shape[da] : 1, y = db >= 0 ? b->shape[db] : 1;
		if (x != y && x != 1 && y != 1)
			return false;
		n->shape[d] = x == 1 ? y : x;
	}
	n->ndim = nd;
	return true;
}

/* Axis ax of a rank-nd tensor, negatives from the end; -1 if out of range. */
static int norm_axis(int ax, int nd)
{
	if (ax < 0)
		ax += nd;
	return ax >= 0 && ax < nd ? ax : -1;
}

static tsd_status infer_matmul(proto_graph *g, int i, proto_err *err)
{
	proto_gnode *n = &g->nodes[i];
	const proto_gnode *a = &g->nodes[n->in[0]], *b = &g->nodes[n->in[1]];
	char s1[96], s2[96];
	if (!a->ndim || !b->ndim)
		return SHAPE("operands must have at least one dimension");
	/* numpy rules: a 1-d operand gains a dim (then dropped), batch dims broadcast */
	int64_t k1 = a->shape[a->ndim - 1], k2 = b->ndim > 1 ? b->shape[b->ndim - 2] : b->shape[0];
	if (k1 != k2)
		return SHAPE("shapes %s and %s do not match", fmt_shape(s1, 96, a->ndim, a->shape),
			     fmt_shape(s2, 96, b->ndim, b->shape));
	proto_gnode ba = {.ndim = a->ndim > 2 ? a->ndim - 2 : 0}, bb = {.ndim = b->ndim > 2 ? b->ndim - 2 : 0};
	memcpy(ba.shape, a->shape, sizeof(int64_t) * (size_t)ba.ndim);
	memcpy(bb.shape, b->shape, sizeof(int64_t) * (size_t)bb.ndim);
	if (!broadcast(&ba, &bb, n))
		return SHAPE("batch dims of %s and %s do not broadcast", fmt_shape(s1, 96, a->ndim, a->shape),
			     fmt_shape(s2, 96, b->ndim, b->shape));
	if (a->ndim > 1)
		n->shape[n->ndim++] = a->shape[a->ndim - 2];
	if (b->ndim > 1)
		n->shape[n->ndim++] = b->shape[b->ndim - 1];
	n->dtype = eng_dtype_promote(a->dtype, b->dtype);
	return TSD_OK;
}

static tsd_status infer_linear(proto_graph *g, int i, proto_err *err)
{
	proto_gnode *n = &g->nodes[i];
	const proto_gnode *x = &g->nodes[n->in[0]], *w = &g->nodes[n->in[1]];
	char s1[96], s2[96];
	if (!x->ndim || w->ndim != 2 || x->shape[x->ndim - 1] != w->shape[1])
		return SHAPE("input %s and weight %s (out, in) do not match",
			     fmt_shape(s1, 96, x->ndim, x->shape), fmt_shape(s2, 96, w->ndim, w->shape));
	if (n->nin == 3) {
		const proto_gnode *bias = &g->nodes[n->in[2]];
		if (bias->ndim != 1 || bias->shape[0] != w->shape[0])
			return SHAPE("bias %s does not match weight %s",
				     fmt_shape(s1, 96, bias->ndim, bias->shape), fmt_shape(s2, 96, 2, w->shape));
	}
	n->ndim = x->ndim;
	memcpy(n->shape, x->shape, sizeof(n->shape));
	n->shape[n->ndim - 1] = w->shape[0];
	n->dtype = eng_dtype_promote(x->dtype, w->dtype);
	return TSD_OK;
}

static tsd_status infer_reduce(proto_graph *g, int i, proto_err *err)
{
	proto_gnode *n = &g->nodes[i];
	const proto_gnode *a = &g->nodes[n->in[0]];
	bool red[ENG_MAX_DIMS] = {0};
	for (int k = 0; k < n->naxes; k++) {
		int ax = norm_axis(n->axes[k], a->ndim);
		if (ax < 0 || red[ax])
			return ATTR("axes[%d]: %d %s", k, n->axes[k], ax < 0 ? "out of range" : "repeated");
		red[ax] = true;
	}
	int nd = 0;
	for (int d = 0; d < a->ndim; d++) {
		bool r = red[d] || !n->naxes;
		if (!r || n->keepdim)
			n->shape[nd++] = r ? 1 : a->shape[d];
	}
	n->ndim = nd;
	n->dtype = n->op != PROTO_G_MEAN ? a->dtype : a->dtype == ENG_F16 ? ENG_F16 : ENG_F32;
	return TSD_OK;
}

/* Reshape: a batch dimension in the input becomes the target's -1, the only one it may have. */
static tsd_status infer_reshape(proto_graph *g, int i, proto_err *err)
{
	proto_gnode *n = &g->nodes[i];
	const proto_gnode *a = &g->nodes[n->in[0]];
	char s1[96], s2[96];
	int64_t known = 1, want = 1;
	int batch = 0, infer = -1;
	for (int d = 0; d < a->ndim; d++) {
		if (a->shape[d] == B)
			batch++;
		else
			known *= a->shape[d]; /* inferred shapes stay under 2^40 elements */
	}
	for (int d = 0; d < n->rank; d++) {
		if (n->target[d] == -1) {
			if (infer >= 0)
				return ATTR("shape: more than one -1");
			infer = d;
		} else if (__builtin_mul_overflow(want, n->target[d], &want) || want > PROTO_GRAPH_MAX_NUMEL) {
			return SHAPE("shape %s is too large", fmt_shape(s1, 96, n->rank, n->target));
		}
	}
	if (batch > 1 || (batch && infer < 0))
		return SHAPE("%s has a batch dimension: the target needs one -1 for it (has %s)",
			     fmt_shape(s1, 96, a->ndim, a->shape), fmt_shape(s2, 96, n->rank, n->target));
	/* without a batch dimension, -1 takes what is left (a 0 elsewhere leaves it ambiguous) */
	bool ok = infer < 0 || batch ? want == known : want != 0 && known % want == 0;
	if (!ok)
		return SHAPE("cannot reshape %s to %s", fmt_shape(s1, 96, a->ndim, a->shape),
			     fmt_shape(s2, 96, n->rank, n->target));
	n->ndim = n->rank;
	memcpy(n->shape, n->target, sizeof(n->shape));
	if (infer >= 0)
		n->shape[infer] = batch ? B : known / want;
	n->dtype = a->dtype;
	return TSD_OK;
}

static tsd_status infer_conv(proto_graph *g, int i, proto_err *err)
{
	proto_gnode *n = &g->nodes[i];
	const proto_gnode *x = &g->nodes[n->in[0]], *w = &g->nodes[n->in[1]];
	char s1[96], s2[96];
	if (x->ndim != 4 || w->ndim != 4 || x->shape[1] != w->shape[1] || x->shape[1] == B ||
	    x->shape[2] == B || x->shape[3] == B)
		return SHAPE("input %s (N, C, H, W) and weight %s (O, C, KH, KW) do not match",
			     fmt_shape(s1, 96, x->ndim, x->shape), fmt_shape(s2, 96, w->ndim, w->shape));
	for (int d = 0; d < 4; d++)
		if (w->shape[d] == B)
			return SHAPE("the weight cannot have a batch dimension");
	if (n->nin == 3 && (g->nodes[n->in[2]].ndim != 1 || g->nodes[n->in[2]].shape[0] != w->shape[0]))
		return SHAPE("bias does not match %lld output channels", (long long)w->shape[0]);
	n->ndim = 4;
	n->shape[0] = x->shape[0];
	n->shape[1] = w->shape[0];
	for (int k = 0; k < 2; k++) {
		int64_t span = x->shape[2 + k] + 2 * n->padding[k];
		if (span < w->shape[2 + k] || w->shape[2 + k] == 0)
			return SHAPE("kernel %s larger than the padded input %s",
				     fmt_shape(s1, 96, 4, w->shape), fmt_shape(s2, 96, 4, x->shape));
		n->shape[2 + k] = (span - w->shape[2 + k]) / n->stride[k] + 1;
	}
	n->dtype = eng_dtype_promote(x->dtype, w->dtype);
	return TSD_OK;
}

/* Python's slice length of [start, stop) by step over len elements. */
static int64_t slice_len(int64_t len, int64_t start, int64_t stop, int64_t step)
{
	int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? len : len - 1;
	int64_t *b[2] = {&start, &stop};
	for (int k = 0; k < 2; k++) {
		if (*b[k] < 0 && *b[k] != INT64_MIN)
			*b[k] += len;
		*b[k] = *b[k] < lo ? lo : *b[k] > hi ? hi : *b[k];
	}
	int64_t span = step > 0 ? stop - start : start - stop, st = step > 0 ? step : -step;
	return span > 0 ? (span + st - 1) / st : 0;
}

/* argmax, one_hot, slice: one input, an axis or a new one. */
static tsd_status infer_index_op(proto_graph *g, int i, proto_err *err)
{
	proto_gnode *n = &g->nodes[i];
	const proto_gnode *a = &g->nodes[n->in[0]];
	int ax = norm_axis(n->axes[0], a->ndim);
	if (n->op == PROTO_G_ONE_HOT) {
		if (!eng_dtype_is_int(a->dtype))
			return ATTR("labels must be an integer dtype, got %s", eng_dtype_name(a->dtype));
		if (a->ndim >= ENG_MAX_DIMS)
			return SHAPE("labels already have %d dims", a->ndim);
		n->ndim = a->ndim + 1;
		memcpy(n->shape, a->shape, sizeof(n->shape[0]) * (size_t)a->ndim);
		n->shape[a->ndim] = n->classes;
		n->dtype = ENG_F32;
		return TSD_OK;
	}
	if (ax < 0)
		return ATTR("axis %d out of range for rank %d", n->axes[0], a->ndim);
	n->ndim = a->ndim;
	memcpy(n->shape, a->shape, sizeof(n->shape));
	if (n->op == PROTO_G_SLICE) {
		if (a->shape[ax] == B)
			return SHAPE("cannot slice the batch dimension (axis %d)", ax);
		n->shape[ax] = slice_len(a->shape[ax], n->start, n->stop, n->step);
		n->dtype = a->dtype;
		return TSD_OK;
	}
	/* argmax */
	if (a->shape[ax] == 0)
		return SHAPE("axis %d is empty", ax);
	if (n->keepdim)
		n->shape[ax] = 1;
	else
		memmove(&n->shape[ax], &n->shape[ax + 1], sizeof(n->shape[0]) * (size_t)(a->ndim - ax - 1));
	n->ndim -= !n->keepdim;
	n->dtype = ENG_I32;
	return TSD_OK;
}

/* cat (along an existing axis, other sizes equal) and stack (along a new one, shapes equal). */
static tsd_status infer_join(proto_graph *g, int i, proto_err *err)
{
	proto_gnode *n = &g->nodes[i];
	const proto_gnode *a = &g->nodes[n->in[0]];
	char s1[96], s2[96];
	bool cat = n->op == PROTO_G_CAT;
	int ax = cat ? norm_axis(n->axes[0], a->ndim) : n->axes[0] < 0 ? n->axes[0] + a->ndim + 1 : n->axes[0];
	if (ax < 0 || ax > a->ndim - cat)
		return ATTR("axis %d out of range for rank %d", n->axes[0], a->ndim + !cat);
	if (!cat && a->ndim >= ENG_MAX_DIMS)
		return SHAPE("inputs already have %d dims", a->ndim);
	int64_t total = 0;
	n->dtype = a->dtype;
	for (int k = 0; k < n->nin; k++) {
		const proto_gnode *b = &g->nodes[n->in[k]];
		bool ok = b->ndim == a->ndim;
		for (int d = 0; ok && d < a->ndim; d++)
			ok = b->shape[d] == a->shape[d] || (cat && d == ax);
		if (!ok)
			return SHAPE("in[%d] %s does not match in[0] %s", k, fmt_shape(s1, 96, b->ndim, b->shape),
				     fmt_shape(s2, 96, a->ndim, a->shape));
		if (cat && b->shape[ax] == B)
			return SHAPE("cannot join along the batch dimension (axis %d)", ax);
		total += cat ? b->shape[ax] : 1; /* at most 16 terms under 2^40 */
		n->dtype = eng_dtype_promote(n->dtype, b->dtype);
	}
	n->ndim = a->ndim + !cat;
	for (int d = 0; d < n->ndim; d++)
		n->shape[d] = d < ax || cat ? a->shape[d] : d > ax ? a->shape[d - 1] : 0;
	n->shape[ax] = total;
	return TSD_OK;
}

static tsd_status infer_op(proto_graph *g, int i, proto_err *err)
{
	proto_gnode *n = &g->nodes[i];
	const proto_gnode *a = n->nin ? &g->nodes[n->in[0]] : NULL;
	char s1[96], s2[96];
	switch (n->op) {
	case PROTO_G_INPUT: case PROTO_G_PARAM: case PROTO_G_CONST:
		return TSD_OK; /* parse_attrs set dtype and shape (a const is a scalar) */
	case PROTO_G_ADD: case PROTO_G_SUB: case PROTO_G_MUL: case PROTO_G_DIV:
		if (!broadcast(a, &g->nodes[n->in[1]], n))
			return SHAPE("shapes %s and %s do not broadcast", fmt_shape(s1, 96, a->ndim, a->shape),
				     fmt_shape(s2, 96, g->nodes[n->in[1]].ndim, g->nodes[n->in[1]].shape));
		n->dtype = eng_dtype_promote(a->dtype, g->nodes[n->in[1]].dtype);
		if (n->op == PROTO_G_DIV && !eng_dtype_is_float(n->dtype))
			n->dtype = ENG_F32;
		return TSD_OK;
	case PROTO_G_MATMUL:
		return infer_matmul(g, i, err);
	case PROTO_G_LINEAR:
		return infer_linear(g, i, err);
	case PROTO_G_SUM: case PROTO_G_MEAN: case PROTO_G_MAX:
		return infer_reduce(g, i, err);
	case PROTO_G_RESHAPE:
		return infer_reshape(g, i, err);
	case PROTO_G_CONV2D:
		return infer_conv(g, i, err);
	case PROTO_G_ARGMAX: case PROTO_G_ONE_HOT: case PROTO_G_SLICE:
		return infer_index_op(g, i, err);
	case PROTO_G_CAT: case PROTO_G_STACK:
		return infer_join(g, i, err);
	case PROTO_G_EQ: case PROTO_G_LT:
		if (!broadcast(a, &g->nodes[n->in[1]], n))
			return SHAPE("shapes %s and %s do not broadcast", fmt_shape(s1, 96, a->ndim, a->shape),
				     fmt_shape(s2, 96, g->nodes[n->in[1]].ndim, g->nodes[n->in[1]].shape));
		n->dtype = ENG_BOOL;
		return TSD_OK;
	case PROTO_G_WHERE: {
		const proto_gnode *x = &g->nodes[n->in[1]], *y = &g->nodes[n->in[2]];
		proto_gnode xy = {0};
		char s3[96];
		if (!broadcast(x, y, &xy) || !broadcast(a, &xy, n))
			return SHAPE("condition %s and values %s, %s do not broadcast",
				     fmt_shape(s1, 96, a->ndim, a->shape), fmt_shape(s2, 96, x->ndim, x->shape),
				     fmt_shape(s3, 96, y->ndim, y->shape));
		n->dtype = eng_dtype_promote(x->dtype, y->dtype);
		return TSD_OK;
	}
	default:
		break;
	}
	/* the ops that keep their input's shape, or permute it */
	n->ndim = a->ndim;
	memcpy(n->shape, a->shape, sizeof(n->shape));
	n->dtype = a->dtype;
	switch (n->op) {
	case PROTO_G_EXP: case PROTO_G_LOG: case PROTO_G_SQRT: case PROTO_G_SIGMOID: case PROTO_G_TANH:
		n->dtype = eng_dtype_float_of(a->dtype);
		break;
	case PROTO_G_SOFTMAX: case PROTO_G_LOG_SOFTMAX:
		if (norm_axis(n->axes[0], a->ndim) < 0)
			return ATTR("axis %d out of range for rank %d", n->axes[0], a->ndim);
		n->dtype = eng_dtype_float_of(a->dtype);
		break;
	case PROTO_G_PERMUTE: {
		bool seen[ENG_MAX_DIMS] = {0};
		if (n->naxes != a->ndim)
			return ATTR("perm has %d entries for rank %d", n->naxes, a->ndim);
		for (int d = 0; d < n->naxes; d++) {
			if (n->axes[d] >= a->ndim || seen[n->axes[d]])
				return ATTR("perm[%d]: %d %s", d, n->axes[d], seen[n->axes[d]] ? "repeated" : "out of range");
			seen[n->axes[d]] = true;
			n->shape[d] = a->shape[n->axes[d]];
		}
		break;
	}
	case PROTO_G_TRANSPOSE: {
		int d0 = norm_axis(n->axes[0], a->ndim), d1 = norm_axis(n->axes[1], a->ndim);
		if (d0 < 0 || d1 < 0)
			return ATTR("dims [%d,%d] out of range for rank %d", n->axes[0], n->axes[1], a->ndim);
		n->shape[d0] = a->shape[d1];
		n->shape[d1] = a->shape[d0];
		break;
	}
	case PROTO_G_CAST:
		n->dtype = n->to;
		break;
	default:
		break;
	}
	return TSD_OK;
}

tsd_status proto_graph_infer(proto_graph *g, int i, proto_err *err)
{
	tsd_status s = infer_op(g, i, err);
	if (s)
		return s;
	/* every node stays under the engine's element limit (a batch dimension counts as 1) */
	const proto_gnode *n = &g->nodes[i];
	int64_t numel = 1;
	for (int d = 0; d < n->ndim; d++)
		if (n->shape[d] != B && (__builtin_mul_overflow(numel, n->shape[d], &numel) ||
					 numel > PROTO_GRAPH_MAX_NUMEL))
			return fail(err, TSD_TOO_LARGE, g, i, "more than 2^40 elements");
	return TSD_OK;
}
