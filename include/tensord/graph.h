/* graph.h: a builder of the graph format of realize and model.load (docs/PROTOCOL.md) in C:
 *     int h = tsd_g_relu(g, tsd_g_add(g, tsd_g_matmul(g, x, w1), b1));
 * Nodes are int handles. The first failure sticks on the graph: every later call returns -1, and
 * tsd_graph_json reports it, so a caller chains calls and checks once. */
#ifndef TSD_GRAPH_H
#define TSD_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "protocol.h"

/* A graph under construction. Threads: one thread at a time per graph. */
typedef struct tsd_graph tsd_graph;

/* A new empty graph, freed with tsd_graph_free; NULL when out of memory. */
tsd_graph *tsd_graph_create(void);
void tsd_graph_free(tsd_graph *g); /* NULL is fine */

/* TSD_OK, or the first failure's status (TSD_BAD_REQUEST: a bad handle or argument;
 * TSD_TOO_LARGE: too many nodes or outputs; TSD_OUT_OF_MEMORY); and its message ("" when ok),
 * e.g. "add: input 1: 7 is not a node of this graph". Owned by g. */
tsd_status tsd_graph_status(const tsd_graph *g);
const char *tsd_graph_error(const tsd_graph *g);

/* Rename node to id (1..64 bytes, unique); nodes that use it follow. Returns node, or -1. */
int tsd_graph_name(tsd_graph *g, int node, const char *id);
/* Mark node as an output of the graph (in call order), renaming it to id when id is non-NULL
 * (replies name output tensors by node id: "y"). Returns node, or -1. Ops' ids are generated
 * ("matmul3") unless renamed; input and param ids are the caller's. Ids are unique, 1..64 bytes. */
int tsd_graph_output(tsd_graph *g, int node, const char *id);

/* The graph as {"nodes": [...], "outputs": [...]}: a new object the caller deletes (cJSON_Delete),
 * or NULL when a builder call failed or no output was marked (tsd_graph_status says which). */
cJSON *tsd_graph_json(tsd_graph *g);
/* The same as compact JSON text, malloc'd (the caller frees it with tsd_free), or NULL. */
char *tsd_graph_text(tsd_graph *g);

/* ---- nodes: each returns the new node's handle (>= 0), or -1 once the graph has failed ----
 * Handles given as inputs must be earlier nodes of the same graph. */

/* input (per request) and param (the model's weights): id names the tensor sent for it; a -1 in
 * an input's shape is the batch dimension. shape: ndim (0..8) entries, only read. */
int tsd_g_input(tsd_graph *g, const char *id, tsd_dtype dtype, int ndim, const int64_t *shape);
int tsd_g_param(tsd_graph *g, const char *id, tsd_dtype dtype, int ndim, const int64_t *shape);
/* A scalar constant (finite). */
int tsd_g_const(tsd_graph *g, double value, tsd_dtype dtype);

/* Elementwise, broadcasting. */
int tsd_g_add(tsd_graph *g, int a, int b);
int tsd_g_sub(tsd_graph *g, int a, int b);
int tsd_g_mul(tsd_graph *g, int a, int b);
int tsd_g_div(tsd_graph *g, int a, int b);
int tsd_g_neg(tsd_graph *g, int x);
int tsd_g_exp(tsd_graph *g, int x);
int tsd_g_log(tsd_graph *g, int x);
int tsd_g_sqrt(tsd_graph *g, int x);
int tsd_g_relu(tsd_graph *g, int x);
int tsd_g_sigmoid(tsd_graph *g, int x);
int tsd_g_tanh(tsd_graph *g, int x);

/* a @ b with numpy's rules. */
int tsd_g_matmul(tsd_graph *g, int a, int b);
/* x @ w.T + bias; bias -1 for none. */
int tsd_g_linear(tsd_graph *g, int x, int w, int bias);

/* Along axis (negative counts from the end). */
int tsd_g_softmax(tsd_graph *g, int x, int axis);
int tsd_g_log_softmax(tsd_graph *g, int x, int axis);

/* Reductions over axes[0..naxes) (naxes 0: all axes); keepdim keeps them as size 1. */
int tsd_g_sum(tsd_graph *g, int x, const int *axes, int naxes, bool keepdim);
int tsd_g_mean(tsd_graph *g, int x, const int *axes, int naxes, bool keepdim);
int tsd_g_max(tsd_graph *g, int x, const int *axes, int naxes, bool keepdim);

/* Movement: reshape to shape[0..ndim) (one -1 inferred), permute by perm[0..n), swap two axes. */
int tsd_g_reshape(tsd_graph *g, int x, int ndim, const int64_t *shape);
int tsd_g_permute(tsd_graph *g, int x, int n, const int *perm);
int tsd_g_transpose(tsd_graph *g, int x, int a, int b);
int tsd_g_cast(tsd_graph *g, int x, tsd_dtype dtype);

/* x [N,C,H,W], w [O,C,KH,KW], bias [O] or -1; stride 1..64, padding 0..64 per spatial axis. */
int tsd_g_conv2d(tsd_graph *g, int x, int w, int bias, int stride_h, int stride_w, int pad_h,
		 int pad_w);

/* Comparisons (bool results, broadcasting) and selection: cond ? a : b. */
int tsd_g_eq(tsd_graph *g, int a, int b);
int tsd_g_lt(tsd_graph *g, int a, int b);
int tsd_g_where(tsd_graph *g, int cond, int a, int b);
/* int32 index of the first maximum along axis; keepdim keeps it as size 1. */
int tsd_g_argmax(tsd_graph *g, int x, int axis, bool keepdim);
/* Integer labels [...] -> float32 [..., num_classes] (1..2^20); out-of-range labels: zero rows. */
int tsd_g_one_hot(tsd_graph *g, int labels, int64_t num_classes);
/* in[0..n) (1..16 nodes) joined along an existing axis (cat) or a new one (stack). */
int tsd_g_cat(tsd_graph *g, const int *in, int n, int axis);
int tsd_g_stack(tsd_graph *g, const int *in, int n, int axis);
/* Python's x[start:stop:step] along axis; TSD_SLICE_NONE for an omitted bound; step != 0. */
#define TSD_SLICE_NONE INT64_MIN
int tsd_g_slice(tsd_graph *g, int x, int axis, int64_t start, int64_t stop, int64_t step);
/* x in a buffer of its own (a value read many times is not recomputed in its readers). */
int tsd_g_contiguous(tsd_graph *g, int x);

/* Any op by name, for ops without a typed function (a daemon newer than this header): in[0..nin)
 * its inputs, attrs (an object, may be NULL) its attribute fields, copied. An op this library
 * knows has its input count checked; an unknown one is left for the daemon to judge. */
int tsd_g_op(tsd_graph *g, const char *op, const int *in, int nin, const cJSON *attrs);

#endif
