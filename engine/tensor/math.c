/* math.c: elementwise math and activation functions, composed from the low-level ops
 * (exp2, log2, sin, sqrt, recip, trunc, where, ...) so the scheduler fuses them freely. */
#include <math.h>
#include <stdint.h>

#include "composite.h"

#define LOG2E 1.4426950408889634074
#define LN2   0.69314718055994530942

/* Define a one-argument function: x is a as float (float32 for integer inputs), `expr` builds
 * the result inside a scope that frees every intermediate. */
#define FLOAT_FN(name, expr)                               \
	eng_tensor *name(const eng_tensor *a)              \
	{                                                  \
		if (!a)                                    \
			return NULL;                       \
		eng_scope_begin(a->ctx);                   \
		eng_tensor *x = eng_to_float(a);           \
		eng_tensor *r = x ? eng_keep(expr) : NULL; \
		eng_scope_end(a->ctx);                     \
		return r;                                  \
	}

/* ---- elementwise math ---- */

static eng_tensor *exp_f(const eng_tensor *x)
{
	return eng_exp2(eng_mul_s(x, LOG2E));
}
static eng_tensor *log_f(const eng_tensor *x)
{
	return eng_mul_s(eng_log2(x), LN2);
}
static eng_tensor *cos_f(const eng_tensor *x)
{
	return eng_sin(eng_rsub_s(M_PI / 2, x));
}

FLOAT_FN(eng_exp, exp_f(x))
FLOAT_FN(eng_log, log_f(x))
FLOAT_FN(eng_cos, cos_f(x))
FLOAT_FN(eng_tan, eng_mul(eng_sin(x), eng_recip(cos_f(x))))
FLOAT_FN(eng_rsqrt, eng_recip(eng_sqrt(x)))

/* where(a < 0, -a, a); unsigned and bool values are their own absolute value. */
eng_tensor *eng_abs(const eng_tensor *a)
{
	if (!a)
		return NULL;
	if (eng_dtype_is_unsigned(a->node->dtype))
		return eng_dup(a);
	eng_scope_begin(a->ctx);
	eng_tensor *r = eng_keep(eng_where(eng_lt(a, eng_scalar_as(a, 0)), eng_neg(a), a));
	eng_scope_end(a->ctx);
	return r;
}

/* -1, 0 or 1 in a's dtype; NaN stays NaN (and -0.0 gives 0). */
eng_tensor *eng_sign(const eng_tensor *a)
{
	if (!a)
		return NULL;
	eng_dtype dt = a->node->dtype;
	if (dt == ENG_BOOL)
		return eng_dup(a);
	eng_ctx *ctx = a->ctx;
	eng_scope_begin(ctx);
	eng_tensor *zero = eng_scalar_as(a, 0);
	eng_tensor *r = eng_where(eng_gt(a, zero), eng_scalar_as(a, 1), zero);
	if (dt != ENG_U8)
		r = eng_where(eng_lt(a, zero), eng_scalar_as(a, -1), r);
	if (eng_dtype_is_float(dt))
		r = eng_where(eng_ne(a, a), a, r);
	r = eng_keep(r);
	eng_scope_end(ctx);
	return r;
}

eng_tensor *eng_square(const eng_tensor *a)
{
	return a ? eng_mul(a, a) : NULL;
}

/* floor/ceil from trunc: trunc rounds toward zero, so step down (up) where it went the wrong
 * way. Integers are already whole. */
static eng_tensor *floor_ceil(const eng_tensor *a, bool ceil_)
{
	if (!a)
		return NULL;
	if (!eng_dtype_is_float(a->node->dtype))
		return eng_dup(a);
	eng_scope_begin(a->ctx);
	eng_tensor *t = eng_trunc(a);
	eng_tensor *r = ceil_ ? eng_where(eng_gt(a, t), eng_add_s(t, 1), t)
			      : eng_where(eng_lt(a, t), eng_sub_s(t, 1), t);
	r = eng_keep(r);
	eng_scope_end(a->ctx);
	return r;
}

eng_tensor *eng_floor(const eng_tensor *a)
{
	return floor_ceil(a, false);
}
eng_tensor *eng_ceil(const eng_tensor *a)
{
	return floor_ceil(a, true);
}

/* Round half to even without adding 0.5 (which can round up in float): t = trunc(x) and the
 * exact fraction f = x - t; move t one step away from zero when |f| > 0.5, or when |f| == 0.5
 * and t is odd. NaN and infinities come out unchanged. */
eng_tensor *eng_round(const eng_tensor *a)
{
	if (!a)
		return NULL;
	if (!eng_dtype_is_float(a->node->dtype))
		return eng_dup(a);
	eng_scope_begin(a->ctx);
	eng_tensor *t = eng_trunc(a);
	eng_tensor *af = eng_abs(eng_sub(a, t));
	eng_tensor *odd = eng_ne(eng_mul_s(eng_trunc(eng_mul_s(t, 0.5)), 2), t);
	eng_tensor *half = eng_scalar_as(a, 0.5);
	eng_tensor *up = eng_or(eng_gt(af, half), eng_and(eng_eq(af, half), odd));
	eng_tensor *step = eng_where(eng_lt(a, eng_scalar_as(a, 0)), eng_scalar_as(a, -1),
				     eng_scalar_as(a, 1));
	eng_tensor *r = eng_keep(eng_where(up, eng_add(t, step), t));
	eng_scope_end(a->ctx);
	return r;
}

/* Clamp a bound to an integer dtype's range, so the scalar does not wrap. */
static double int_bound(eng_dtype dt, double v)
{
	double lo = 0, hi = 1;
	switch (dt) {
	case ENG_U8:
		hi = 255;
		break;
	case ENG_I32:
		lo = INT32_MIN, hi = INT32_MAX;
		break;
	case ENG_I64:
		lo = -9223372036854775808.0, hi = 9223372036854774784.0;
		break;
	default:
		break;
	}
	return v < lo ? lo : v > hi ? hi : v;
}

/* minimum(maximum(a, lo), hi): lo > hi gives hi everywhere, infinite bounds are skipped. An
 * integer a with a non-integral bound becomes float32. */
eng_tensor *eng_clamp(const eng_tensor *a, double lo, double hi)
{
	if (!a)
		return NULL;
	if (isnan(lo) || isnan(hi)) {
		eng_set_error(a->ctx, ENG_EINVAL, "clamp: bounds must not be NaN");
		return NULL;
	}
	eng_dtype dt = a->node->dtype;
	if (!eng_dtype_is_float(dt) &&
	    ((isfinite(lo) && lo != floor(lo)) || (isfinite(hi) && hi != floor(hi))))
		dt = ENG_F32;
	eng_scope_begin(a->ctx);
	eng_tensor *r = eng_cast(a, dt);
	if (!eng_dtype_is_float(dt)) {
		if (lo > -INFINITY)
			lo = int_bound(dt, lo);
		if (hi < INFINITY)
			hi = int_bound(dt, hi);
	}
	if (lo > -INFINITY)
		r = eng_maximum(r, eng_scalar(a->ctx, dt, lo));
	if (hi < INFINITY)
		r = eng_minimum(r, eng_scalar(a->ctx, dt, hi));
	r = eng_keep(r);
	eng_scope_end(a->ctx);
	return r;
}

/* ---- powers ---- */

/* a^b for float a and b of one dtype: exp2(b*log2|a|), negated for a < 0 with an odd integer
 * b, NaN for a < 0 with a non-integer b, and 1 where b == 0 or a == 1 (even for NaN). */
static eng_tensor *pow_float(const eng_tensor *a, const eng_tensor *b)
{
	eng_ctx *ctx = a->ctx;
	eng_dtype dt = a->node->dtype;
	eng_tensor *one = eng_scalar(ctx, dt, 1);
	eng_tensor *mag = eng_exp2(eng_mul(b, eng_log2(eng_abs(a))));
	eng_tensor *neg = eng_lt(a, eng_scalar(ctx, dt, 0));
	eng_tensor *whole = eng_eq(eng_trunc(b), b);
	eng_tensor *odd = eng_ne(eng_mul_s(eng_trunc(eng_mul_s(b, 0.5)), 2), b);
	eng_tensor *r = eng_where(eng_and(neg, odd), eng_neg(mag), mag);
	r = eng_where(eng_and(neg, eng_logical_not(whole)), eng_scalar(ctx, dt, NAN), r);
	return eng_where(eng_or(eng_eq(b, eng_scalar(ctx, dt, 0)), eng_eq(a, one)), one, r);
}

/* Elementwise a^b in the promoted dtype. Integer results are computed in float32 and rounded,
 * so they are exact while |result| < 2^24. */
eng_tensor *eng_pow(const eng_tensor *a, const eng_tensor *b)
{
	if (!a || !b)
		return NULL;
	if (!eng_same_ctx(a, b, "pow"))
		return NULL;
	eng_dtype dt = eng_dtype_promote(a->node->dtype, b->node->dtype);
	eng_dtype fdt = eng_dtype_float_of(dt);
	eng_scope_begin(a->ctx);
	eng_tensor *r = pow_float(eng_cast(a, fdt), eng_cast(b, fdt));
	if (!eng_dtype_is_float(dt))
		r = eng_cast(eng_round(r), dt);
	r = eng_keep(r);
	eng_scope_end(a->ctx);
	return r;
}

/* a^p with p known: small integer powers by multiplication, 0.5 and -0.5 by sqrt, -1 by recip,
 * else the general formula specialised on p. An integer a keeps its dtype for integer p >= 0
 * and becomes float32 otherwise. */
eng_tensor *eng_pow_s(const eng_tensor *a, double p)
{
	if (!a)
		return NULL;
	eng_ctx *ctx = a->ctx;
	eng_dtype dt = a->node->dtype;
	bool whole = isfinite(p) && p == floor(p);
	if (!eng_dtype_is_float(dt) && !(whole && p >= 0)) {
		eng_scope_begin(ctx);
		eng_tensor *r = eng_keep(eng_pow_s(eng_to_float(a), p));
		eng_scope_end(ctx);
		return r;
	}
	eng_scope_begin(ctx);
	eng_tensor *r;
	if (p == 0)
		r = eng_full_like(a, 1);
	else if (p == 1)
		r = eng_dup(a);
	else if (p == 2)
		r = eng_mul(a, a);
	else if (p == 3)
		r = eng_mul(eng_mul(a, a), a);
	else if (p == 4)
		r = eng_square(eng_mul(a, a));
	else if (!eng_dtype_is_float(dt)) /* integer a, integer p > 4: float, rounded back */
		r = eng_cast(eng_round(eng_pow_s(eng_to_float(a), p)), dt);
	else if (p == -1)
		r = eng_recip(a);
	else if (p == 0.5)
		r = eng_sqrt(a);
	else if (p == -0.5)
		r = eng_recip(eng_sqrt(a));
	else {
		eng_tensor *mag = eng_exp2(eng_mul_s(eng_log2(eng_abs(a)), p));
		eng_tensor *neg = eng_lt(a, eng_scalar_as(a, 0));
		if (!whole && !isinf(p))
			r = eng_where(neg, eng_scalar_as(a, NAN), mag);
		else if (whole && fmod(p, 2) != 0)
			r = eng_where(neg, eng_neg(mag), mag);
		else
			r = mag;
		r = eng_where(eng_eq(a, eng_scalar_as(a, 1)), eng_scalar_as(a, 1), r);
	}
	r = eng_keep(r);
	eng_scope_end(ctx);
	return r;
}

/* ---- activations ---- */

/* max(a, 0); keeps a's dtype. */
eng_tensor *eng_relu(const eng_tensor *a)
{
	if (!a)
		return NULL;
	eng_scope_begin(a->ctx);
	eng_tensor *r = eng_keep(eng_maximum(a, eng_scalar_as(a, 0)));
	eng_scope_end(a->ctx);
	return r;
}

eng_tensor *eng_leaky_relu(const eng_tensor *a, double slope)
{
	if (!a)
		return NULL;
	eng_scope_begin(a->ctx);
	eng_tensor *x = eng_to_float(a);
	eng_tensor *r = eng_where(eng_lt(x, eng_scalar_as(x, 0)), eng_mul_s(x, slope), x);
	r = eng_keep(r);
	eng_scope_end(a->ctx);
	return r;
}

/* 1 / (1 + exp(-x)), with exp(-x) as exp2(x * -log2(e)). */
static eng_tensor *sigmoid_f(const eng_tensor *x)
{
	return eng_recip(eng_add_s(eng_exp2(eng_mul_s(x, -LOG2E)), 1));
}

/* 2*sigmoid(2x) - 1. */
static eng_tensor *tanh_f(const eng_tensor *x)
{
	return eng_sub_s(eng_mul_s(sigmoid_f(eng_mul_s(x, 2)), 2), 1);
}

/* 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))). */
static eng_tensor *gelu_f(const eng_tensor *x)
{
	eng_tensor *inner = eng_add(x, eng_mul_s(eng_mul(eng_mul(x, x), x), 0.044715));
	eng_tensor *t = tanh_f(eng_mul_s(inner, 0.79788456080286535588));
	return eng_mul(eng_mul_s(x, 0.5), eng_add_s(t, 1));
}

/* log(1 + exp(x)) as max(x, 0) + log(1 + exp(-|x|)), which cannot overflow. */
static eng_tensor *softplus_f(const eng_tensor *x)
{
	eng_tensor *e = exp_f(eng_neg(eng_abs(x)));
	return eng_add(eng_relu(x), log_f(eng_add_s(e, 1)));
}

FLOAT_FN(eng_sigmoid, sigmoid_f(x))
FLOAT_FN(eng_tanh, tanh_f(x))
FLOAT_FN(eng_gelu, gelu_f(x))
FLOAT_FN(eng_silu, eng_mul(x, sigmoid_f(x)))
FLOAT_FN(eng_softplus, softplus_f(x))

/* x for x > 0, alpha*(exp(x) - 1) otherwise. */
eng_tensor *eng_elu(const eng_tensor *a, double alpha)
{
	if (!a)
		return NULL;
	eng_scope_begin(a->ctx);
	eng_tensor *x = eng_to_float(a);
	eng_tensor *neg = eng_mul_s(eng_sub_s(exp_f(x), 1), alpha);
	eng_tensor *r = eng_keep(eng_where(eng_gt(x, eng_scalar_as(x, 0)), x, neg));
	eng_scope_end(a->ctx);
	return r;
}
