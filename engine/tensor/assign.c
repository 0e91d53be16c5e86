/* assign.c: the buffer-level ops of the Tensor API: contiguous (a realized copy) and assign
 * (an in-place update of a buffer, realized with the graph that reads it). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "device/device.h"
#include "tensor.h"

eng_tensor *eng_contiguous(const eng_tensor *a)
{
	if (!a)
		return NULL;
	if (a->node->op == ENG_OP_BUFFER || a->node->op == ENG_OP_CONTIGUOUS)
		return eng_build_ref(a->ctx, a->node);
	eng_node_desc d = {.op = ENG_OP_CONTIGUOUS, .dtype = a->node->dtype, .ndim = a->node->ndim,
			   .shape = a->node->shape, .src = {a->node}};
	return eng_tensor_wrap(a->ctx, eng_build_node(a->ctx, &d));
}

eng_tensor *eng_assign(eng_tensor *target, const eng_tensor *value)
{
	if (!target || !value)
		return NULL;
	eng_ctx *ctx = target->ctx;
	eng_node *t = target->node;
	if (value->node->dtype != t->dtype) {
		eng_set_error(ctx, ENG_EDTYPE, "assign: value is %s, target is %s",
			      eng_dtype_name(value->node->dtype), eng_dtype_name(t->dtype));
		return NULL;
	}
	eng_scope_begin(ctx);
	if (t->op != ENG_OP_BUFFER && t->op != ENG_OP_ASSIGN) {
		/* Graph nodes are shared (equal expressions are one node): writing into one in
		 * place would change every tensor built the same way. Give the target storage of
		 * its own, holding its current value, and write into that. */
		eng_tensor *fresh = eng_empty(ctx, t->dtype, t->ndim, t->shape);
		eng_node *old = fresh ? fresh->node : NULL;
		if (fresh) {
			eng_node_desc d = {.op = ENG_OP_ASSIGN, .dtype = t->dtype, .ndim = t->ndim, .shape = t->shape,
					   .src = {old, t}};
			eng_node *a = eng_node_get(ctx->graph, &d);
			if (a) {
				eng_node_unref(target->node);
				target->node = a;
				t = a;
			}
		}
	}
	eng_tensor *v = eng_expand(value, t->ndim, t->shape);
	eng_node *n = NULL;
	if (v) {
		eng_node_desc d = {.op = ENG_OP_ASSIGN, .dtype = t->dtype, .ndim = t->ndim, .shape = t->shape,
				   .src = {t, v->node}};
		n = eng_build_node(ctx, &d);
		if (!n)
			eng_set_error(ctx, ENG_ENOMEM, "assign: out of memory");
	}
	eng_scope_end(ctx);
	if (!n)
		return NULL;
	eng_node_unref(target->node);
	target->node = n;
	return target;
}
