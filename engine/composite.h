/* composite.h: small helpers shared by the composite-function files (tensor_math.c,
 * tensor_reduce.c, tensor_shape.c, tensor_nn.c); they build graphs only from public ops. */
#ifndef ENG_COMPOSITE_H
#define ENG_COMPOSITE_H

#include "internal.h"

/* A new handle on a's node (a NULL stays NULL). */
static inline eng_tensor *eng_dup(const eng_tensor *a)
{
	return a ? eng_cast(a, a->node->dtype) : NULL;
}

/* a as a float tensor: unchanged if float, else cast to float32. */
static inline eng_tensor *eng_to_float(const eng_tensor *a)
{
	return a ? eng_cast(a, eng_dtype_float_of(a->node->dtype)) : NULL;
}

/* A scalar of a's dtype (NULL for a NULL a). */
static inline eng_tensor *eng_scalar_as(const eng_tensor *a, double v)
{
	return a ? eng_scalar(a->ctx, a->node->dtype, v) : NULL;
}

/* Normalise axis (negative counts from the end) for ndim dims; false with EAXIS set if out of
 * range. fn names the caller in the message. */
static inline bool eng_axis_norm(eng_ctx *ctx, const char *fn, int ndim, int axis, int *out)
{
	int ax = axis < 0 ? axis + ndim : axis;
	if (ax < 0 || ax >= ndim) {
		eng_set_error(ctx, ENG_EAXIS, "%s: axis %d out of range for %d dims", fn, axis, ndim);
		return false;
	}
	*out = ax;
	return true;
}

/* Both tensors belong to one context; false with EINVAL set otherwise. */
static inline bool eng_same_ctx(const eng_tensor *a, const eng_tensor *b, const char *fn)
{
	if (a->ctx == b->ctx)
		return true;
	eng_set_error(a->ctx, ENG_EINVAL, "%s: operands from different contexts", fn);
	return false;
}

#endif
