/* graph_batch.c: whether a validated batched graph is row-independent (output row b depends on
 * input row b only), so the batcher may stack requests along the batch dimension and pad it.
 * (cat and slice along the batch dimension never get here: shape inference refuses them.) */
#include <stdlib.h>

#include "proto_graph.h"

#define B PROTO_BATCH

/* What one node knows about the batch dimension: its axis (-1: none) and, when its value mixes
 * rows (here or in an ancestor), the node where that began (-1: none) and why. */
typedef struct batch_state {
	int axis;
	int mixed_at;
	const char *why;
} batch_state;

/* Axis of the batch dimension in n's shape, -1 for none, -2 when it appears more than once. */
static int batch_axis(const proto_gnode *n)
{
	int axis = -1;
	for (int d = 0; d < n->ndim; d++)
		if (n->shape[d] == B)
			axis = axis < 0 ? d : -2;
	return axis;
}

static int norm_axis(int ax, int nd)
{
	return ax < 0 ? ax + nd : ax;
}

static int64_t prefix_product(const int64_t *shape, int n)
{
	int64_t p = 1;
	for (int d = 0; d < n; d++)
		p *= shape[d]; /* no batch dimension before n; prefixes of validated shapes stay < 2^40 */
	return p;
}

/* Why node i (whose operands' axes are in st) mixes rows, or NULL when it keeps them apart. */
static const char *mixes(const proto_graph *g, int i, const batch_state *st)
{
	const proto_gnode *n = &g->nodes[i];
	int ax0 = n->nin ? st[n->in[0]].axis : -1, ax1 = n->nin > 1 ? st[n->in[1]].axis : -1;
	int nd0 = n->nin ? g->nodes[n->in[0]].ndim : 0, nd1 = n->nin > 1 ? g->nodes[n->in[1]].ndim : 0;
	switch (n->op) {
	case PROTO_G_SUM: case PROTO_G_MEAN: case PROTO_G_MAX:
		if (ax0 < 0)
			return NULL;
		if (!n->naxes)
			return "reduces over the batch dimension (all axes)";
		for (int k = 0; k < n->naxes; k++)
			if (norm_axis(n->axes[k], nd0) == ax0)
				return "reduces over the batch dimension";
		return NULL;
	case PROTO_G_ARGMAX:
		return ax0 >= 0 && norm_axis(n->axes[0], nd0) == ax0 ? "reduces over the batch dimension" : NULL;
	case PROTO_G_SOFTMAX: case PROTO_G_LOG_SOFTMAX:
		return ax0 >= 0 && norm_axis(n->axes[0], nd0) == ax0 ? "normalizes along the batch dimension" : NULL;
	case PROTO_G_MATMUL:
		/* the contracted k: a's last axis, b's second last (its only one when 1-d) */
		if ((ax0 >= 0 && ax0 == nd0 - 1) || (ax1 >= 0 && ax1 == (nd1 > 1 ? nd1 - 2 : 0)))
			return "contracts the batch dimension";
		break;
	case PROTO_G_LINEAR:
		/* x [.., in] with w [out, in]: in is contracted */
		if ((ax0 >= 0 && ax0 == nd0 - 1) || ax1 == 1)
			return "contracts the batch dimension";
		break;
	case PROTO_G_RESHAPE:
		/* rows stay whole iff the same number of elements precede the batch axis */
		if (ax0 >= 0 && batch_axis(n) >= 0 &&
		    prefix_product(g->nodes[n->in[0]].shape, ax0) != prefix_product(n->shape, batch_axis(n)))
			return "moves the batch dimension (the dimensions before it change their product)";
		break;
	case PROTO_G_CONV2D:
		/* shape inference admits a batch dimension at x's axis 0 only; check anyway */
		for (int k = 1; k < n->nin; k++)
			if (st[n->in[k]].axis >= 0)
				return "has the batch dimension in its weight or bias";
		if (ax0 > 0)
			return "has the batch dimension outside axis 0";
		break;
	default:
		break;
	}
	/* an operand's batch axis crossed with another's (a [B,1] + [1,B], a row against a column) */
	if (batch_axis(n) == -2)
		return "combines the batch dimension with itself on two axes";
	/* no op above drops it otherwise; should one, its rows are no longer apart */
	for (int k = 0; k < n->nin && batch_axis(n) == -1; k++)
		if (st[n->in[k]].axis >= 0)
			return "loses the batch dimension";
	return NULL;
}

/* Fill st[i] from node i's operands and op. */
static void visit(const proto_graph *g, int i, batch_state *st)
{
	const proto_gnode *n = &g->nodes[i];
	st[i] = (batch_state){.axis = batch_axis(n), .mixed_at = -1};
	for (int k = 0; k < n->nin && st[i].mixed_at < 0; k++)
		if (st[n->in[k]].mixed_at >= 0) {
			st[i].mixed_at = st[n->in[k]].mixed_at;
			st[i].why = st[n->in[k]].why;
		}
	if (st[i].mixed_at < 0 && (st[i].why = mixes(g, i, st)))
		st[i].mixed_at = i;
	if (st[i].axis < 0)
		st[i].axis = -1;
}

static tsd_status node_fail(const proto_graph *g, int i, const char *why, proto_err *err)
{
	return proto_fail(err, TSD_BAD_REQUEST, "nodes[%d] (%s): %s: %s", i, g->nodes[i].id,
			  proto_gop_name(g->nodes[i].op), why);
}

/* Check the listed nodes (inputs when is_out is false) and fill their axes. */
static tsd_status check_listed(const proto_graph *g, const batch_state *st, const int *idx, int n,
			       bool is_out, int *axis, proto_err *err)
{
	const char *what = is_out ? "outputs" : "inputs";
	for (int k = 0; k < n; k++) {
		int i = idx[k];
		if (i < 0 || i >= g->nnodes)
			return proto_fail(err, TSD_BAD_REQUEST, "%s[%d]: node index %d out of range", what, k, i);
		if (st[i].mixed_at >= 0)
			return node_fail(g, st[i].mixed_at, st[i].why, err);
		if (st[i].axis < 0)
			return proto_fail(err, TSD_BAD_REQUEST, "%s[%d] (%s): no batch dimension (every input and "
					  "output of a batched model needs one)", what, k, g->nodes[i].id);
		axis[k] = st[i].axis;
	}
	return TSD_OK;
}

tsd_status proto_graph_batch_check(const proto_graph *g, const int *inputs, int ninputs, const int *outputs,
				   int noutputs, int *in_axis, int *out_axis, proto_err *err)
{
	batch_state *st = calloc((size_t)(g->nnodes ? g->nnodes : 1), sizeof(*st));
	if (!st)
		return proto_fail(err, TSD_OUT_OF_MEMORY, "graph: no memory for the batch check");
	for (int i = 0; i < g->nnodes; i++)
		visit(g, i, st);
	tsd_status s = check_listed(g, st, inputs, ninputs, false, in_axis, err);
	if (!s)
		s = check_listed(g, st, outputs, noutputs, true, out_axis, err);
	free(st);
	return s;
}
