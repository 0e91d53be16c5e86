/* proto_graph.h: the graph format of model.load and realize: JSON nodes at the level of the Tensor
 * API, parsed and validated completely (ops, arity, references, attributes, shapes, limits)
 * before proto_graph_build (graph_build.h) makes engine tensors from it. No engine here: the
 * client library reads the op table and limits too. */
#ifndef PROTO_GRAPH_H
#define PROTO_GRAPH_H

#include <cjson/cJSON.h>

#include "proto.h"

#define PROTO_GRAPH_MAX_NODES 4096
#define PROTO_GRAPH_MAX_OUTPUTS 64
#define PROTO_GRAPH_MAX_IN 16 /* inputs of one node (cat, stack) */
#define PROTO_GRAPH_MAX_CLASSES (1 << 20) /* one_hot's num_classes */
#define PROTO_GRAPH_MAX_NUMEL ((int64_t)1 << 40) /* elements of any node (batch counted as 1) */
#define PROTO_BATCH (-1) /* in an inferred shape: the batch dimension, known when built */

typedef enum proto_gop {
#define PG_OP(e, name, lo, hi, attr) PROTO_G_##e,
#include "graph_ops.def"
#undef PG_OP
	PROTO_G_COUNT
} proto_gop;

/* One validated node. shape is inferred (PROTO_BATCH where the batch dimension goes); the
 * attribute fields used depend on op (graph_ops.def). */
typedef struct proto_gnode {
	char id[PROTO_MAX_ID + 1];
	proto_gop op;
	int nin;
	int in[PROTO_GRAPH_MAX_IN]; /* indices of earlier nodes */
	tsd_dtype dtype;
	int ndim;
	int64_t shape[TSD_MAX_DIMS];
	double value;         /* const */
	int naxes;            /* sum/mean/max: 0 for all; softmax, argmax, cat, stack, slice: axis in
			       * axes[0]; transpose: 2 */
	int axes[TSD_MAX_DIMS]; /* also permute's perm (ndim entries) */
	bool keepdim;         /* sum/mean/max/argmax */
	int64_t classes;      /* one_hot */
	int64_t start, stop, step; /* slice: Python's rules, INT64_MAX/INT64_MIN for an open end */
	int rank;             /* reshape: target rank and shape (one -1: inferred) */
	int64_t target[TSD_MAX_DIMS];
	tsd_dtype to;         /* cast */
	int stride[2], padding[2]; /* conv2d */
} proto_gnode;

/* A validated graph. Owns nodes; free with proto_graph_free. */
typedef struct proto_graph {
	int nnodes;
	proto_gnode *nodes;
	int noutputs;
	int outputs[PROTO_GRAPH_MAX_OUTPUTS]; /* node indices, distinct */
	int ninputs, nparams;  /* input and param nodes, counted in node order */
	bool batched;          /* some input has a batch dimension */
	uint64_t param_bytes;  /* of all params */
} proto_graph;

/* Name of an op ("matmul"); "?" when out of range. */
const char *proto_gop_name(proto_gop op);

/* Parse and validate j ({"nodes": [...], "outputs": [...]}) into g (caller's struct; on
 * success it owns memory: proto_graph_free). Params may hold at most max_param_bytes together.
 * Failures: TSD_BAD_REQUEST, TSD_SHAPE_MISMATCH (shapes that do not fit an op) or TSD_TOO_LARGE,
 * with err naming the node: "nodes[3] (h): matmul: shapes [2,3] and [4,5] do not match".
 * On failure g holds nothing to free. */
tsd_status proto_graph_parse(const cJSON *j, uint64_t max_param_bytes, proto_graph *g, proto_err *err);
void proto_graph_free(proto_graph *g);
/* Index of the node called id, or -1. */
int proto_graph_find(const proto_graph *g, const char *id);

/* Whether batched g (validated) is row-independent: output row b depends on input row b only, so
 * requests may be stacked along the batch dimension and padded with zero rows. inputs[k] and
 * outputs[k] are node indices (e.g. the input nodes and g->outputs); each must carry the batch
 * dimension, whose axis goes to in_axis[k] / out_axis[k] (caller's arrays of ninputs and
 * noutputs entries). Rows mix (reduce or softmax along the batch axis, a matmul or linear
 * contracting it or crossing it with itself, a reshape changing the product of the dimensions
 * before it) in a node that reaches a listed output: TSD_BAD_REQUEST naming that node,
 * "nodes[3] (m): mean: reduces over the batch dimension". Mixing that reaches no listed
 * output is allowed. Broadcasting against 1, elementwise ops, permute and transpose keep rows. */
tsd_status proto_graph_batch_check(const proto_graph *g, const int *inputs, int ninputs, const int *outputs,
				   int noutputs, int *in_axis, int *out_axis, proto_err *err);

/* Internal to the protocol library: infer node i's dtype and shape from its inputs (graph
 * parse), or fail naming it. */
tsd_status proto_graph_infer(proto_graph *g, int i, proto_err *err);

#endif
