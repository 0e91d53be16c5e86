/* tensor.h: tensor handles as the API builders see them: a handle owns one node reference and
 * belongs to a scope (context.c). Engine-private. */
#ifndef ENG_TENSOR_H
#define ENG_TENSOR_H

#include "device/device.h"
#include "realize/realize.h"
#include "tensor/tensor.h"
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

#endif
