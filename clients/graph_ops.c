/* graph_ops.c: one typed builder function per op of graph_ops.def, generated from its attribute
 * kind (and input counts): a new op of a known kind needs only its line in graph_ops.def (and its
 * prototype in graph.h); an op of a kind not listed here gets no typed function from the table:
 * those with a signature of their own (cat, stack, argmax, one_hot, slice) are written out below
 * the macros, any other is reached through tsd_g_op. */
#include <tensord/graph.h>

#include "graph_builder.h"
#include "proto_graph.h" /* PROTO_GRAPH_MAX_IN, which graph_ops.def names */

/* KNOWN(GB_HAS_x) is 1 when GB_HAS_x is defined as GB_YES, else 0 (the usual probe: a defined
 * one expands to two arguments, moving the 1 into the second place). */
#define GB_YES ~, 1
#define GB_SECOND(a, b, ...) b
#define GB_KNOWN_(...) GB_SECOND(__VA_ARGS__, 0, ~)
#define GB_KNOWN(x) GB_KNOWN_(x)
#define GB_IF_0(then, skip) skip
#define GB_IF_1(then, skip) then
#define GB_IF_(c) GB_IF_##c
#define GB_IF(c) GB_IF_(c)
#define GB_SKIP(n, lo, hi)

/* NONE: only inputs; the signature follows the input counts. */
#define GB_HAS_NONE_1_1 GB_YES
#define GB_NONE_1_1(n) \
	int tsd_g_##n(tsd_graph *g, int x) { return tsd_gb_done(g, tsd_gb_node(g, #n, NULL, &x, 1), true); }
#define GB_HAS_NONE_2_2 GB_YES
#define GB_NONE_2_2(n)                                                                     \
	int tsd_g_##n(tsd_graph *g, int a, int b)                                           \
	{                                                                                   \
		return tsd_gb_done(g, tsd_gb_node(g, #n, NULL, (const int[]){a, b}, 2), true);       \
	}
#define GB_HAS_NONE_3_3 GB_YES
#define GB_NONE_3_3(n)                                                                     \
	int tsd_g_##n(tsd_graph *g, int a, int b, int c)                                    \
	{                                                                                   \
		return tsd_gb_done(g, tsd_gb_node(g, #n, NULL, (const int[]){a, b, c}, 3), true);    \
	}
/* an optional third input (linear's bias): -1 for none */
#define GB_HAS_NONE_2_3 GB_YES
#define GB_NONE_2_3(n)                                                                     \
	int tsd_g_##n(tsd_graph *g, int a, int b, int c)                                    \
	{                                                                                   \
		return tsd_gb_done(g, tsd_gb_node(g, #n, NULL, (const int[]){a, b, c}, c < 0 ? 2 : 3), \
			       true);                                                       \
	}
#define GB_HAS_NONE GB_YES
#define GB_NONE(n, lo, hi) GB_IF(GB_KNOWN(GB_HAS_NONE_##lo##_##hi))(GB_NONE_##lo##_##hi, GB_SKIP1)(n)
#define GB_SKIP1(n)

#define GB_HAS_LEAF GB_YES
#define GB_LEAF(n, lo, hi)                                                                     \
	int tsd_g_##n(tsd_graph *g, const char *id, tsd_dtype dtype, int ndim, const int64_t *shape) \
	{                                                                                       \
		if (ndim < 0 || ndim > TSD_MAX_DIMS || (ndim && !shape) || !tsd_dtype_valid(dtype)) \
			return tsd_gb_fail(g, TSD_BAD_REQUEST, #n " %s: bad dtype or shape", id ? id : ""); \
		cJSON *o = tsd_gb_node(g, #n, id ? id : "", NULL, 0);                               \
		return tsd_gb_done(g, o, o && cJSON_AddStringToObject(o, "dtype", tsd_dtype_name(dtype)) && \
					     tsd_gb_ints(o, "shape", shape, ndim));                     \
	}

#define GB_HAS_CONST GB_YES
#define GB_CONST(n, lo, hi)                                                                     \
	int tsd_g_##n(tsd_graph *g, double value, tsd_dtype dtype)                              \
	{                                                                                       \
		if (!tsd_dtype_valid(dtype))                                                    \
			return tsd_gb_fail(g, TSD_BAD_REQUEST, #n ": bad dtype");                   \
		cJSON *o = tsd_gb_node(g, #n, NULL, NULL, 0);                                       \
		return tsd_gb_done(g, o, o && cJSON_AddNumberToObject(o, "value", value) &&        \
					     cJSON_AddStringToObject(o, "dtype", tsd_dtype_name(dtype))); \
	}

/* AXIS: one input (softmax) gets (x, axis); the variadic ones (cat, stack) are below. */
#define GB_HAS_AXIS GB_YES
#define GB_AXIS(n, lo, hi) GB_IF(GB_KNOWN(GB_HAS_AXIS_##hi))(GB_AXIS_1, GB_SKIP1)(n)
#define GB_HAS_AXIS_1 GB_YES
#define GB_AXIS_1(n)                                                                       \
	int tsd_g_##n(tsd_graph *g, int x, int axis)                                        \
	{                                                                                   \
		cJSON *o = tsd_gb_node(g, #n, NULL, &x, 1);                                     \
		return tsd_gb_done(g, o, o && cJSON_AddNumberToObject(o, "axis", axis));        \
	}

#define GB_HAS_AXES GB_YES
#define GB_AXES(n, lo, hi)                                                                 \
	int tsd_g_##n(tsd_graph *g, int x, const int *axes, int naxes, bool keepdim)        \
	{                                                                                   \
		return gb_reduce(g, #n, x, axes, naxes, keepdim);                           \
	}

#define GB_HAS_SHAPE GB_YES
#define GB_SHAPE(n, lo, hi)                                                                \
	int tsd_g_##n(tsd_graph *g, int x, int ndim, const int64_t *shape)                  \
	{                                                                                   \
		if (ndim < 0 || ndim > TSD_MAX_DIMS || (ndim && !shape))                    \
			return tsd_gb_fail(g, TSD_BAD_REQUEST, #n ": bad shape");               \
		cJSON *o = tsd_gb_node(g, #n, NULL, &x, 1);                                     \
		return tsd_gb_done(g, o, o && tsd_gb_ints(o, "shape", shape, ndim));                \
	}

#define GB_HAS_PERM GB_YES
#define GB_PERM(n, lo, hi)                                                                 \
	int tsd_g_##n(tsd_graph *g, int x, int np, const int *perm)                         \
	{                                                                                   \
		int64_t v[TSD_MAX_DIMS];                                                    \
		if (np < 0 || np > TSD_MAX_DIMS || (np && !perm))                           \
			return tsd_gb_fail(g, TSD_BAD_REQUEST, #n ": bad perm");                \
		for (int k = 0; k < np; k++)                                                \
			v[k] = perm[k];                                                     \
		cJSON *o = tsd_gb_node(g, #n, NULL, &x, 1);                                     \
		return tsd_gb_done(g, o, o && tsd_gb_ints(o, "perm", v, np));                       \
	}

#define GB_HAS_DIMS GB_YES
#define GB_DIMS(n, lo, hi)                                                                 \
	int tsd_g_##n(tsd_graph *g, int x, int a, int b)                                    \
	{                                                                                   \
		cJSON *o = tsd_gb_node(g, #n, NULL, &x, 1);                                     \
		return tsd_gb_done(g, o, o && tsd_gb_ints(o, "dims", (const int64_t[]){a, b}, 2));  \
	}

#define GB_HAS_DTYPE GB_YES
#define GB_DTYPE(n, lo, hi)                                                                \
	int tsd_g_##n(tsd_graph *g, int x, tsd_dtype dtype)                                 \
	{                                                                                   \
		if (!tsd_dtype_valid(dtype))                                                \
			return tsd_gb_fail(g, TSD_BAD_REQUEST, #n ": bad dtype");               \
		cJSON *o = tsd_gb_node(g, #n, NULL, &x, 1);                                     \
		return tsd_gb_done(g, o, o && cJSON_AddStringToObject(o, "dtype", tsd_dtype_name(dtype))); \
	}

#define GB_HAS_CONV GB_YES
#define GB_CONV(n, lo, hi)                                                                 \
	int tsd_g_##n(tsd_graph *g, int x, int w, int bias, int stride_h, int stride_w,     \
		      int pad_h, int pad_w)                                                 \
	{                                                                                   \
		cJSON *o = tsd_gb_node(g, #n, NULL, (const int[]){x, w, bias}, bias < 0 ? 2 : 3); \
		return tsd_gb_done(g, o, o && tsd_gb_ints(o, "stride", (const int64_t[]){stride_h, stride_w}, 2) && \
					     tsd_gb_ints(o, "padding", (const int64_t[]){pad_h, pad_w}, 2)); \
	}

/* sum, mean, max: "axes" only when given (absent: all), "keepdim" only when true */
static int gb_reduce(tsd_graph *g, const char *op, int x, const int *axes, int naxes, bool keepdim)
{
	int64_t v[TSD_MAX_DIMS];
	if (naxes < 0 || naxes > TSD_MAX_DIMS || (naxes && !axes))
		return tsd_gb_fail(g, TSD_BAD_REQUEST, "%s: bad axes", op);
	for (int k = 0; k < naxes; k++)
		v[k] = axes[k];
	cJSON *o = tsd_gb_node(g, op, NULL, &x, 1);
	return tsd_gb_done(g, o, o && (!naxes || tsd_gb_ints(o, "axes", v, naxes)) &&
				     (!keepdim || cJSON_AddTrueToObject(o, "keepdim")));
}

/* The ops whose signature is their own. */
static int gb_many(tsd_graph *g, const char *op, const int *in, int n, int axis)
{
	if (n < 1 || n > PROTO_GRAPH_MAX_IN || !in)
		return tsd_gb_fail(g, TSD_BAD_REQUEST, "%s: %d inputs, expected 1..%d", op, n, PROTO_GRAPH_MAX_IN);
	cJSON *o = tsd_gb_node(g, op, NULL, in, n);
	return tsd_gb_done(g, o, o && cJSON_AddNumberToObject(o, "axis", axis));
}

int tsd_g_cat(tsd_graph *g, const int *in, int n, int axis)
{
	return gb_many(g, "cat", in, n, axis);
}

int tsd_g_stack(tsd_graph *g, const int *in, int n, int axis)
{
	return gb_many(g, "stack", in, n, axis);
}

int tsd_g_argmax(tsd_graph *g, int x, int axis, bool keepdim)
{
	cJSON *o = tsd_gb_node(g, "argmax", NULL, &x, 1);
	return tsd_gb_done(g, o, o && cJSON_AddNumberToObject(o, "axis", axis) &&
				     (!keepdim || cJSON_AddTrueToObject(o, "keepdim")));
}

int tsd_g_one_hot(tsd_graph *g, int labels, int64_t num_classes)
{
	cJSON *o = tsd_gb_node(g, "one_hot", NULL, &labels, 1);
	return tsd_gb_done(g, o, o && cJSON_AddNumberToObject(o, "num_classes", (double)num_classes));
}

int tsd_g_slice(tsd_graph *g, int x, int axis, int64_t start, int64_t stop, int64_t step)
{
	cJSON *o = tsd_gb_node(g, "slice", NULL, &x, 1);
	return tsd_gb_done(g, o, o && cJSON_AddNumberToObject(o, "axis", axis) &&
				     (start == TSD_SLICE_NONE || cJSON_AddNumberToObject(o, "start", (double)start)) &&
				     (stop == TSD_SLICE_NONE || cJSON_AddNumberToObject(o, "stop", (double)stop)) &&
				     cJSON_AddNumberToObject(o, "step", (double)step));
}

#define PG_OP(e, n, lo, hi, a) GB_IF(GB_KNOWN(GB_HAS_##a))(GB_##a, GB_SKIP)(n, lo, hi)
#include "graph_ops.def"
#undef PG_OP
