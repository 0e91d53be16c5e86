/* graph_build.h: the engine-facing half of the protocol library: a validated graph
 * (proto_graph.h) made into engine tensors, and engine statuses as the statuses a client sees. */
#ifndef PROTO_GRAPH_BUILD_H
#define PROTO_GRAPH_BUILD_H

#include <tensord/engine.h>

#include "proto_graph.h"

/* Build g's outputs on ctx through the public API. inputs[k] is the tensor for the k-th input
 * node, params[k] for the k-th param node (node order); they stay the caller's and must match
 * the declared dtype and shape (a batch dimension takes any size, the same in every input).
 * outputs (g->noutputs entries) receive new tensors in ctx's current scope, owned by the
 * caller, except that an output naming an input or param node receives that caller's tensor
 * itself. Intermediate handles are freed. On failure nothing is left in outputs, the error
 * names the node, and ctx's error is cleared (the engine status becomes the tsd_status). */
tsd_status proto_graph_build(const proto_graph *g, eng_ctx *ctx, eng_tensor *const *inputs,
			     eng_tensor *const *params, eng_tensor **outputs, proto_err *err);

/* The status a client sees for an engine failure (e.g. ENG_ESHAPE -> shape_mismatch). */
tsd_status tsd_status_from_eng(eng_status s);

#endif
