/* tensor.h: tensor handles as the API builders see them: a handle owns one node reference and
 * belongs to a scope (context.c). Engine-private. */
#ifndef ENG_TENSOR_H
#define ENG_TENSOR_H

#include "device/device.h"
#include "realize/realize.h"
#include "graph/node.h"

struct eng_tensor {
	eng_ctx *ctx;
	eng_node *node;          /* owned reference */
	int scope;               /* depth of the owning scope; -1: owned by another tensor (a gradient) */
	eng_tensor *prev, *next; /* the owning scope's list */
	bool requires_grad;
	eng_tensor *grad; /* owned, or NULL */
};

/* Wrap a node in a new tensor in the innermost scope; takes ownership of the node reference.
 * node NULL (allocation failure) sets ENOMEM and returns NULL. */
eng_tensor *eng_tensor_wrap(eng_ctx *ctx, eng_node *node);
static inline eng_node *eng_tensor_node(const eng_tensor *t) { return t->node; }

/* Take t out of its scope: it is then owned by whoever holds it (freed with eng_tensor_free). */
void eng_tensor_unscope(eng_tensor *t);
/* After a realize: a tensor whose node is a realized assign becomes a plain buffer node of the
 * target's new version, so the graph that computed it can be freed. */
void eng_tensor_settle(eng_tensor *t);

/* Builders' helpers (build.c). The node for d, or NULL with the context error set when its
 * sources live on different devices (or on ENOMEM); a new reference. */
eng_node *eng_build_node(eng_ctx *ctx, const eng_node_desc *d);
/* A new tensor on a node already referenced elsewhere (takes its own reference). */
eng_tensor *eng_build_ref(eng_ctx *ctx, eng_node *n);
/* ndim and shape valid for function fn (dims, sizes, element limit), else the error is set. */
bool eng_build_check_shape(eng_ctx *ctx, const char *fn, int ndim, const int64_t *shape);
/* v as a constant of dtype dt (integers saturate and wrap as casts do, bool is v != 0). */
eng_const_value eng_build_scalar(eng_dtype dt, double v);
/* A constant node of dtype dt and shape, or NULL with the error set. */
eng_node *eng_build_const(eng_ctx *ctx, eng_dtype dt, int ndim, const int64_t *shape, eng_const_value c);
/* An axis list (negative axes count from the end, no repeats) as a bit mask; naxes 0 is
 * every axis. false with the error set, naming fn. */
bool eng_build_axes_mask(eng_ctx *ctx, const char *fn, int ndim, const int *axes, int naxes, uint32_t *mask);

#endif
