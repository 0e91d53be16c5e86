/* reduce.c: the reduce ops (sum, max, prod over any axes) and what is built on them: min, mean,
 * var, std, logsumexp, softmax, log_softmax, argmax and argmin, each with as few reduce nodes as
 * its maths allows. */
#include <math.h>
#include <stdint.h>

#include "composite.h"

/* ---- the reduce ops: sum, max, prod ---- */

static eng_tensor *reduce(const eng_tensor *a, eng_op op, const int *axes, int naxes, bool keepdim)
{
	if (!a)
		return NULL;
	eng_ctx *ctx = a->ctx;
	const eng_node *src = a->node;
	uint32_t mask;
	const char *fn = op == ENG_OP_RSUM ? "sum" : op == ENG_OP_RMAX ? "max" : "prod";
	if (!eng_build_axes_mask(ctx, fn, src->ndim, axes, naxes, &mask))
		return NULL;
	int64_t shape[ENG_MAX_DIMS], kshape[ENG_MAX_DIMS];
	int kn = 0;
	for (int i = 0; i < src->ndim; i++) {
		shape[i] = (mask >> i) & 1 ? 1 : src->shape[i];
		if (!((mask >> i) & 1))
			kshape[kn++] = src->shape[i];
	}
	eng_tensor *r;
	if (!mask) {
		r = eng_build_ref(ctx, a->node);
	} else {
		eng_node_desc d = {.op = op, .dtype = src->dtype, .ndim = src->ndim, .shape = shape,
				   .src = {(eng_node *)src}, .axes = mask};
		r = eng_tensor_wrap(ctx, eng_build_node(ctx, &d));
	}
	if (keepdim || !r)
		return r;
	eng_tensor *k = eng_reshape(r, kn, kshape);
	eng_tensor_free(r);
	return k;
}

eng_tensor *eng_sum(const eng_tensor *a, const int *axes, int naxes, bool keepdim)
{
	if (!a)
		return NULL;
	/* sums of bool and uint8 count in int32, like other frameworks widen them */
	if (a->node->dtype == ENG_BOOL || a->node->dtype == ENG_U8) {
		eng_scope_begin(a->ctx);
		eng_tensor *r = eng_keep(reduce(eng_cast(a, ENG_I32), ENG_OP_RSUM, axes, naxes, keepdim));
		eng_scope_end(a->ctx);
		return r;
	}
	return reduce(a, ENG_OP_RSUM, axes, naxes, keepdim);
}

eng_tensor *eng_max(const eng_tensor *a, const int *axes, int naxes, bool keepdim)
{
	return reduce(a, ENG_OP_RMAX, axes, naxes, keepdim);
}

eng_tensor *eng_prod(const eng_tensor *a, const int *axes, int naxes, bool keepdim)
{
	return reduce(a, ENG_OP_RPROD, axes, naxes, keepdim);
}

/* ---- built on them ---- */

/* Validate an axis list as eng_sum does (naxes == 0: all axes) and count the elements each
 * output element reduces over. */
static bool reduce_count(const eng_tensor *a, const char *fn, const int *axes, int naxes,
			 int64_t *count)
{
	int nd = a->node->ndim;
	uint32_t mask = 0;
	if (naxes == 0) {
		mask = nd ? (1u << nd) - 1 : 0;
	} else {
		if (naxes < 0 || !axes) {
			eng_set_error(a->ctx, ENG_EINVAL, "%s: bad axis list (%d axes)", fn, naxes);
			return false;
		}
		for (int i = 0; i < naxes; i++) {
			int ax;
			if (!eng_axis_norm(a->ctx, fn, nd, axes[i], &ax))
				return false;
			mask |= 1u << ax;
		}
	}
	*count = 1;
	for (int i = 0; i < nd; i++)
		if ((mask >> i) & 1)
			*count *= a->node->shape[i];
	return true;
}

/* An all-ones value of an integer or bool dtype: x ^ ones reverses the order of x's values
 * without overflow (unlike -x at the minimum). */
static eng_tensor *all_ones(const eng_tensor *a)
{
	eng_dtype dt = a->node->dtype;
	return eng_scalar(a->ctx, dt, dt == ENG_BOOL ? 1 : dt == ENG_U8 ? 255 : -1);
}

/* An order-reversing map of a: -a for floats, a ^ all-ones for integers and bool. */
static eng_tensor *reverse_order(const eng_tensor *a)
{
	if (!a)
		return NULL;
	return eng_dtype_is_float(a->node->dtype) ? eng_neg(a) : eng_xor(a, all_ones(a));
}

eng_tensor *eng_min(const eng_tensor *a, const int *axes, int naxes, bool keepdim)
{
	int64_t count;
	if (!a || !reduce_count(a, "min", axes, naxes, &count))
		return NULL;
	eng_scope_begin(a->ctx);
	eng_tensor *r = eng_keep(reverse_order(eng_max(reverse_order(a), axes, naxes, keepdim)));
	eng_scope_end(a->ctx);
	return r;
}

/* Accumulation dtype for mean and var: float32 (float16 and integers are widened). */
static eng_tensor *acc_float(const eng_tensor *a)
{
	return eng_cast(a, ENG_F32);
}

/* sum(a) * (1/count) in float32; call inside a scope. */
static eng_tensor *mean_f32(const eng_tensor *a, const int *axes, int naxes, bool keepdim,
			    int64_t count)
{
	return eng_mul_s(eng_sum(acc_float(a), axes, naxes, keepdim), 1.0 / (double)count);
}

/* Mean in float (float16 stays float16, integers give float32); an empty reduction is NaN. */
eng_tensor *eng_mean(const eng_tensor *a, const int *axes, int naxes, bool keepdim)
{
	int64_t count;
	if (!a || !reduce_count(a, "mean", axes, naxes, &count))
		return NULL;
	eng_scope_begin(a->ctx);
	eng_tensor *r = mean_f32(a, axes, naxes, keepdim, count);
	r = eng_keep(eng_cast(r, eng_dtype_float_of(a->node->dtype)));
	eng_scope_end(a->ctx);
	return r;
}

/* sum((a - mean)^2) / max(count - correction, 0) in float32; call inside a scope. */
static eng_tensor *var_f32(const eng_tensor *a, const char *fn, const int *axes, int naxes,
			   bool keepdim, int correction)
{
	int64_t count;
	if (!reduce_count(a, fn, axes, naxes, &count))
		return NULL;
	eng_tensor *x = acc_float(a);
	eng_tensor *d = eng_sub(x, mean_f32(x, axes, naxes, true, count));
	double den = (double)count - correction;
	return eng_mul_s(eng_sum(eng_mul(d, d), axes, naxes, keepdim), 1.0 / (den > 0 ? den : 0));
}

eng_tensor *eng_var(const eng_tensor *a, const int *axes, int naxes, bool keepdim, int correction)
{
	if (!a)
		return NULL;
	eng_scope_begin(a->ctx);
	eng_tensor *r = var_f32(a, "var", axes, naxes, keepdim, correction);
	r = eng_keep(eng_cast(r, eng_dtype_float_of(a->node->dtype)));
	eng_scope_end(a->ctx);
	return r;
}

eng_tensor *eng_std(const eng_tensor *a, const int *axes, int naxes, bool keepdim, int correction)
{
	if (!a)
		return NULL;
	eng_scope_begin(a->ctx);
	eng_tensor *r = eng_sqrt(var_f32(a, "std", axes, naxes, keepdim, correction));
	r = eng_keep(eng_cast(r, eng_dtype_float_of(a->node->dtype)));
	eng_scope_end(a->ctx);
	return r;
}

/* log(sum(exp(x - m))) + m with m the max along axis, replaced by 0 where it is not finite
 * (a row of -inf gives -inf, a row holding +inf gives +inf, not NaN). */
eng_tensor *eng_logsumexp(const eng_tensor *a, int axis, bool keepdim)
{
	int ax;
	if (!a || !eng_axis_norm(a->ctx, "logsumexp", a->node->ndim, axis, &ax))
		return NULL;
	eng_scope_begin(a->ctx);
	eng_tensor *x = eng_to_float(a);
	eng_tensor *m = eng_max(x, &ax, 1, true);
	eng_tensor *zero = eng_scalar_as(x, 0);
	m = eng_where(eng_eq(eng_sub(m, m), zero), m, zero); /* inf - inf and NaN are not 0 */
	eng_tensor *s = eng_sum(eng_exp(eng_sub(x, m)), &ax, 1, keepdim);
	eng_tensor *r = eng_keep(eng_add(eng_log(s), keepdim ? m : eng_squeeze(m, ax)));
	eng_scope_end(a->ctx);
	return r;
}

/* e = exp(x - max(x)); e / sum(e). */
eng_tensor *eng_softmax(const eng_tensor *a, int axis)
{
	int ax;
	if (!a || !eng_axis_norm(a->ctx, "softmax", a->node->ndim, axis, &ax))
		return NULL;
	eng_scope_begin(a->ctx);
	eng_tensor *x = eng_to_float(a);
	eng_tensor *e = eng_exp(eng_sub(x, eng_max(x, &ax, 1, true)));
	eng_tensor *r = eng_keep(eng_mul(e, eng_recip(eng_sum(e, &ax, 1, true))));
	eng_scope_end(a->ctx);
	return r;
}

/* (x - max(x)) - log(sum(exp(x - max(x)))). */
eng_tensor *eng_log_softmax(const eng_tensor *a, int axis)
{
	int ax;
	if (!a || !eng_axis_norm(a->ctx, "log_softmax", a->node->ndim, axis, &ax))
		return NULL;
	eng_scope_begin(a->ctx);
	eng_tensor *x = eng_to_float(a);
	eng_tensor *xm = eng_sub(x, eng_max(x, &ax, 1, true));
	eng_tensor *r = eng_keep(eng_sub(xm, eng_log(eng_sum(eng_exp(xm), &ax, 1, true))));
	eng_scope_end(a->ctx);
	return r;
}

/* With n the axis size and idx the INDEX leaf along it: n - max(where(a == max(a), n - idx, 0))
 * is the first position holding the maximum. A NaN counts as a maximum, so the result is always
 * in [0, n). */
static eng_tensor *argmax_impl(const eng_tensor *a, const char *fn, int axis, bool keepdim)
{
	if (!a)
		return NULL;
	eng_ctx *ctx = a->ctx;
	const eng_node *n = a->node;
	int ax;
	if (!eng_axis_norm(ctx, fn, n->ndim, axis, &ax))
		return NULL;
	int64_t len = n->shape[ax];
	if (len == 0 || len > INT32_MAX) {
		eng_set_error(ctx, ENG_ESHAPE, "%s: axis %d has %lld elements (need 1 to 2^31-1)",
			      fn, axis, (long long)len);
		return NULL;
	}
	eng_tensor *idx = eng_index(ctx, ENG_I32, n->ndim, n->shape, ax);
	eng_tensor *hit = eng_eq(a, eng_max(a, &ax, 1, true));
	if (eng_dtype_is_float(n->dtype))
		hit = eng_or(hit, eng_ne(a, a));
	eng_tensor *rev = eng_where(hit, eng_rsub_s((double)len, idx), eng_scalar(ctx, ENG_I32, 0));
	return eng_rsub_s((double)len, eng_max(rev, &ax, 1, keepdim));
}

eng_tensor *eng_argmax(const eng_tensor *a, int axis, bool keepdim)
{
	if (!a)
		return NULL;
	eng_scope_begin(a->ctx);
	eng_tensor *r = eng_keep(argmax_impl(a, "argmax", axis, keepdim));
	eng_scope_end(a->ctx);
	return r;
}

eng_tensor *eng_argmin(const eng_tensor *a, int axis, bool keepdim)
{
	if (!a)
		return NULL;
	eng_scope_begin(a->ctx);
	eng_tensor *r = eng_keep(argmax_impl(reverse_order(a), "argmin", axis, keepdim));
	eng_scope_end(a->ctx);
	return r;
}
