/* composite.h: small helpers shared by the composite-function files (math.c, reduce.c,
 * shape.c, functional.c, conv.c), built only from public ops. */
#ifndef ENG_COMPOSITE_H
#define ENG_COMPOSITE_H

#include <string.h>

#include "device/device.h"
#include "realize/realize.h"
#include "tensor/tensor.h"

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
		eng_set_error(ctx, ENG_EAXIS, "%s: axis %d out of range for %d dims", fn, axis,
			      ndim);
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

/* ---- movement on one axis (NULL-propagating) ---- */

/* x with nold axes starting at ax replaced by the nnew sizes in ins. */
static inline eng_tensor *reshape_at(const eng_tensor *x, int ax, int nold, const int64_t *ins,
				     int nnew)
{
	if (!x)
		return NULL;
	const eng_node *n = x->node;
	int64_t shape[ENG_MAX_DIMS];
	int k = 0;
	if (n->ndim - nold + nnew > ENG_MAX_DIMS) {
		eng_set_error(x->ctx, ENG_ERANGE, "reshape: more than %d dims", ENG_MAX_DIMS);
		return NULL;
	}
	for (int i = 0; i < ax; i++)
		shape[k++] = n->shape[i];
	for (int i = 0; i < nnew; i++)
		shape[k++] = ins[i];
	for (int i = ax + nold; i < n->ndim; i++)
		shape[k++] = n->shape[i];
	return eng_reshape(x, k, shape);
}

/* x restricted to [begin, end) on axis ax. */
static inline eng_tensor *shrink_at(const eng_tensor *x, int ax, int64_t begin, int64_t end)
{
	if (!x)
		return NULL;
	int64_t r[ENG_MAX_DIMS][2];
	for (int i = 0; i < x->node->ndim; i++)
		r[i][0] = 0, r[i][1] = x->node->shape[i];
	r[ax][0] = begin, r[ax][1] = end;
	return eng_shrink(x, (const int64_t(*)[2])r);
}

/* x with zeros added on axis ax. */
static inline eng_tensor *pad_at(const eng_tensor *x, int ax, int64_t before, int64_t after)
{
	if (!x)
		return NULL;
	int64_t p[ENG_MAX_DIMS][2];
	memset(p, 0, sizeof(p));
	p[ax][0] = before, p[ax][1] = after;
	return eng_pad(x, (const int64_t(*)[2])p);
}

/* x expanded to size e on axis ax (which has size 1). */
static inline eng_tensor *expand_at(const eng_tensor *x, int ax, int64_t e)
{
	if (!x)
		return NULL;
	int64_t s[ENG_MAX_DIMS];
	for (int i = 0; i < x->node->ndim; i++)
		s[i] = i == ax ? e : -1;
	return eng_expand(x, x->node->ndim, s);
}

/* Sum over axes (keepdim false) as dtype dt; float16 products accumulate in float32. Call
 * inside a scope. */
static inline eng_tensor *sum_as(const eng_tensor *x, const int *axes, int naxes, eng_dtype dt)
{
	if (x && x->node->dtype == ENG_F16)
		x = eng_cast(x, ENG_F32);
	return eng_cast(eng_sum(x, axes, naxes, false), dt);
}

/* Sparse cross-entropy, the one implementation behind eng_sparse_cross_entropy (engine.h)
 * and eng_loss_sparse_cross_entropy (nn.h), whose comment gives the contract; ignore_index
 * NULL ignores no row, fn names the caller in errors. */
eng_tensor *eng_sparse_ce(const eng_tensor *logits, const eng_tensor *labels,
			  double label_smoothing, const int64_t *ignore_index, const char *fn);

#endif
