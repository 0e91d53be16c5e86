/* elementwise.c: the Tensor API's elementwise ops (casts, unary, binary, where): one validated
 * graph node per call, with broadcasting and dtype promotion. No arithmetic happens here. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "device/device.h"
#include "realize/realize.h"
#include "tensor/tensor.h"

#define CTX(t) ((t)->ctx)

/* ---- creation ---- */

/* ---- elementwise ---- */

static eng_tensor *unary(const eng_tensor *a, eng_op op, eng_dtype out_dt)
{
	if (!a)
		return NULL;
	eng_node_desc d = {.op = op, .dtype = out_dt, .ndim = a->node->ndim, .shape = a->node->shape,
			   .src = {a->node}};
	return eng_tensor_wrap(a->ctx, eng_build_node(a->ctx, &d));
}

eng_tensor *eng_cast(const eng_tensor *a, eng_dtype dt)
{
	if (!a)
		return NULL;
	if (!eng_dtype_valid(dt)) {
		eng_set_error(a->ctx, ENG_EDTYPE, "cast: invalid dtype %d", (int)dt);
		return NULL;
	}
	if (a->node->dtype == dt)
		return eng_build_ref(a->ctx, a->node);
	if (a->node->op == ENG_OP_CONST) {
		/* fold with the same rules kernels follow: float -> int saturates (NaN -> 0), int ->
		 * int wraps, anything -> bool is != 0 */
		eng_node *s = a->node;
		eng_const_value c;
		if (eng_dtype_is_float(s->dtype) && !eng_dtype_is_float(dt) && dt != ENG_BOOL) {
			double v = s->arg.c.f, lo = dt == ENG_U8 ? 0 : dt == ENG_I32 ? -2147483648.0 : -9223372036854775808.0;
			double hi = dt == ENG_U8 ? 255 : dt == ENG_I32 ? 2147483647.0 : 9223372036854775807.0;
			c.i = v != v ? 0 : v <= lo ? (int64_t)lo : v >= hi ? (dt == ENG_I64 ? INT64_MAX : (int64_t)hi) : (int64_t)v;
		} else if (eng_dtype_is_float(s->dtype)) {
			c = eng_build_scalar(dt, s->arg.c.f);
		} else if (eng_dtype_is_float(dt)) {
			c = eng_build_scalar(dt, (double)s->arg.c.i);
		} else {
			c.i = s->arg.c.i;
			c = dt == ENG_BOOL ? (eng_const_value){.i = c.i != 0} : dt == ENG_U8 ? (eng_const_value){.i = (uint8_t)c.i}
			  : dt == ENG_I32 ? (eng_const_value){.i = (int32_t)(uint32_t)(uint64_t)c.i} : c;
		}
		return eng_tensor_wrap(a->ctx, eng_build_const(a->ctx, dt, s->ndim, s->shape, c));
	}
	return unary(a, ENG_OP_CAST, dt);
}

eng_tensor *eng_bitcast(const eng_tensor *a, eng_dtype dt)
{
	if (!a)
		return NULL;
	if (!eng_dtype_valid(dt) || eng_dtype_size(dt) != eng_dtype_size(a->node->dtype) ||
	    dt == ENG_BOOL || a->node->dtype == ENG_BOOL) {
		eng_set_error(a->ctx, ENG_EDTYPE, "bitcast: %s to %s needs equal sizes, no bool",
			      eng_dtype_name(a->node->dtype), eng_dtype_name(dt));
		return NULL;
	}
	if (a->node->dtype == dt)
		return eng_build_ref(a->ctx, a->node);
	return unary(a, ENG_OP_BITCAST, dt);
}

/* Float math on any input: integers and bool are promoted to float32 first. */
static eng_tensor *float_unary(const eng_tensor *a, eng_op op)
{
	if (!a)
		return NULL;
	if (eng_dtype_is_float(a->node->dtype))
		return unary(a, op, a->node->dtype);
	eng_scope_begin(a->ctx);
	eng_tensor *r = eng_keep(unary(eng_cast(a, ENG_F32), op, ENG_F32));
	eng_scope_end(a->ctx);
	return r;
}

eng_tensor *eng_exp2(const eng_tensor *a) { return float_unary(a, ENG_OP_EXP2); }
eng_tensor *eng_log2(const eng_tensor *a) { return float_unary(a, ENG_OP_LOG2); }
eng_tensor *eng_sin(const eng_tensor *a) { return float_unary(a, ENG_OP_SIN); }
eng_tensor *eng_sqrt(const eng_tensor *a) { return float_unary(a, ENG_OP_SQRT); }
eng_tensor *eng_recip(const eng_tensor *a) { return float_unary(a, ENG_OP_RECIP); }

eng_tensor *eng_trunc(const eng_tensor *a)
{
	if (!a)
		return NULL;
	if (!eng_dtype_is_float(a->node->dtype))
		return eng_build_ref(a->ctx, a->node);
	return unary(a, ENG_OP_TRUNC, a->node->dtype);
}

eng_tensor *eng_neg(const eng_tensor *a)
{
	if (!a)
		return NULL;
	if (a->node->dtype == ENG_BOOL) {
		eng_set_error(a->ctx, ENG_EDTYPE, "neg: not defined for bool (use logical_not)");
		return NULL;
	}
	return unary(a, ENG_OP_NEG, a->node->dtype);
}

/* Broadcast shapes numpy-style into out; false (with error set) if incompatible. */
static bool broadcast_shape(eng_ctx *ctx, const char *fn, const eng_node *a, const eng_node *b,
			    int *ndim, int64_t *out)
{
	int n = a->ndim > b->ndim ? a->ndim : b->ndim;
	for (int i = 0; i < n; i++) {
		int ia = i - (n - a->ndim), ib = i - (n - b->ndim);
		int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
		if (da != db && da != 1 && db != 1) {
			eng_set_error(ctx, ENG_ESHAPE,
				      "%s: shapes do not broadcast (dimension %d: %lld vs %lld)", fn, i,
				      (long long)da, (long long)db);
			return false;
		}
		out[i] = da == 1 ? db : da;
	}
	*ndim = n;
	return true;
}

/* Reshape (prepend ones) and expand a to shape; returns a new tensor. */
static eng_tensor *broadcast_to(const eng_tensor *a, int ndim, const int64_t *shape)
{
	if (a->node->ndim == ndim && !memcmp(a->node->shape, shape, sizeof(int64_t) * ndim))
		return eng_build_ref(a->ctx, a->node);
	int64_t tmp[ENG_MAX_DIMS];
	int pad = ndim - a->node->ndim;
	for (int i = 0; i < ndim; i++)
		tmp[i] = i < pad ? 1 : a->node->shape[i - pad];
	eng_scope_begin(a->ctx);
	eng_tensor *r = eng_keep(eng_expand(eng_reshape(a, ndim, tmp), ndim, shape));
	eng_scope_end(a->ctx);
	return r;
}

/* The public function name of a binary op, for messages. */
static const char *api_name(eng_op op)
{
	switch (op) {
	case ENG_OP_ADD: return "add";
	case ENG_OP_SUB: return "sub";
	case ENG_OP_MUL: return "mul";
	case ENG_OP_IDIV: return "idiv";
	case ENG_OP_MOD: return "mod";
	case ENG_OP_MAX: return "maximum";
	case ENG_OP_CMPLT: return "compare";
	case ENG_OP_CMPEQ: return "eq";
	case ENG_OP_CMPNE: return "ne";
	case ENG_OP_AND: return "and";
	case ENG_OP_OR: return "or";
	case ENG_OP_XOR: return "xor";
	case ENG_OP_SHL: return "shl";
	case ENG_OP_SHR: return "shr";
	default: return eng_op_name(op);
	}
}

static bool binary_dtype_ok(eng_ctx *ctx, eng_op op, eng_dtype dt)
{
	switch (op) {
	case ENG_OP_IDIV:
	case ENG_OP_MOD:
	case ENG_OP_SHL:
	case ENG_OP_SHR:
		if (!eng_dtype_is_int(dt)) {
			eng_set_error(ctx, ENG_EDTYPE, "%s: needs integer operands, got %s",
				      api_name(op), eng_dtype_name(dt));
			return false;
		}
		return true;
	case ENG_OP_AND:
	case ENG_OP_OR:
	case ENG_OP_XOR:
		if (eng_dtype_is_float(dt)) {
			eng_set_error(ctx, ENG_EDTYPE, "%s: needs bool or integer operands, got %s",
				      api_name(op), eng_dtype_name(dt));
			return false;
		}
		return true;
	default:
		return true;
	}
}

static eng_tensor *binary(const eng_tensor *a, const eng_tensor *b, eng_op op)
{
	if (!a || !b)
		return NULL;
	eng_ctx *ctx = a->ctx;
	if (a->ctx != b->ctx) {
		eng_set_error(ctx, ENG_EINVAL, "%s: operands from different contexts", api_name(op));
		return NULL;
	}
	int ndim;
	int64_t shape[ENG_MAX_DIMS];
	if (!broadcast_shape(ctx, api_name(op), a->node, b->node, &ndim, shape))
		return NULL;
	eng_dtype dt = eng_dtype_promote(a->node->dtype, b->node->dtype);
	if (!binary_dtype_ok(ctx, op, dt))
		return NULL;
	eng_scope_begin(ctx);
	eng_tensor *ca = broadcast_to(a, ndim, shape), *cb = broadcast_to(b, ndim, shape);
	ca = eng_cast(ca, dt);
	cb = eng_cast(cb, dt);
	eng_tensor *r = NULL;
	if (ca && cb) {
		bool cmp = op == ENG_OP_CMPLT || op == ENG_OP_CMPEQ || op == ENG_OP_CMPNE;
		eng_node_desc d = {.op = op, .dtype = cmp ? ENG_BOOL : dt, .ndim = ndim, .shape = shape,
				   .src = {ca->node, cb->node}};
		r = eng_keep(eng_tensor_wrap(ctx, eng_build_node(ctx, &d)));
	}
	eng_scope_end(ctx);
	return r;
}

eng_tensor *eng_add(const eng_tensor *a, const eng_tensor *b) { return binary(a, b, ENG_OP_ADD); }
eng_tensor *eng_sub(const eng_tensor *a, const eng_tensor *b) { return binary(a, b, ENG_OP_SUB); }
eng_tensor *eng_mul(const eng_tensor *a, const eng_tensor *b) { return binary(a, b, ENG_OP_MUL); }
eng_tensor *eng_idiv(const eng_tensor *a, const eng_tensor *b) { return binary(a, b, ENG_OP_IDIV); }
eng_tensor *eng_mod(const eng_tensor *a, const eng_tensor *b) { return binary(a, b, ENG_OP_MOD); }
eng_tensor *eng_maximum(const eng_tensor *a, const eng_tensor *b) { return binary(a, b, ENG_OP_MAX); }
eng_tensor *eng_lt(const eng_tensor *a, const eng_tensor *b) { return binary(a, b, ENG_OP_CMPLT); }
eng_tensor *eng_gt(const eng_tensor *a, const eng_tensor *b) { return binary(b, a, ENG_OP_CMPLT); }
eng_tensor *eng_eq(const eng_tensor *a, const eng_tensor *b) { return binary(a, b, ENG_OP_CMPEQ); }
eng_tensor *eng_ne(const eng_tensor *a, const eng_tensor *b) { return binary(a, b, ENG_OP_CMPNE); }
eng_tensor *eng_and(const eng_tensor *a, const eng_tensor *b) { return binary(a, b, ENG_OP_AND); }
eng_tensor *eng_or(const eng_tensor *a, const eng_tensor *b) { return binary(a, b, ENG_OP_OR); }
eng_tensor *eng_xor(const eng_tensor *a, const eng_tensor *b) { return binary(a, b, ENG_OP_XOR); }
eng_tensor *eng_shl(const eng_tensor *a, const eng_tensor *b) { return binary(a, b, ENG_OP_SHL); }
eng_tensor *eng_shr(const eng_tensor *a, const eng_tensor *b) { return binary(a, b, ENG_OP_SHR); }

static eng_tensor *bool_not(const eng_tensor *a)
{
	if (!a)
		return NULL;
	eng_scope_begin(a->ctx);
	eng_tensor *r = eng_keep(eng_xor(a, eng_scalar(a->ctx, ENG_BOOL, 1)));
	eng_scope_end(a->ctx);
	return r;
}

eng_tensor *eng_le(const eng_tensor *a, const eng_tensor *b)
{
	if (!a || !b)
		return NULL;
	eng_scope_begin(a->ctx);
	eng_tensor *r = eng_keep(eng_or(eng_lt(a, b), eng_eq(a, b)));
	eng_scope_end(a->ctx);
	return r;
}

eng_tensor *eng_ge(const eng_tensor *a, const eng_tensor *b) { return eng_le(b, a); }

eng_tensor *eng_minimum(const eng_tensor *a, const eng_tensor *b)
{
	if (!a || !b)
		return NULL;
	eng_scope_begin(a->ctx);
	eng_tensor *r = eng_keep(eng_where(eng_lt(b, a), b, a));
	eng_scope_end(a->ctx);
	return r;
}

eng_tensor *eng_div(const eng_tensor *a, const eng_tensor *b)
{
	if (!a || !b)
		return NULL;
	eng_ctx *ctx = a->ctx;
	eng_dtype dt = eng_dtype_promote(a->node->dtype, b->node->dtype);
	if (!eng_dtype_is_float(dt))
		dt = ENG_F32;
	eng_scope_begin(ctx);
	eng_tensor *r = eng_keep(eng_mul(eng_cast(a, dt), eng_recip(eng_cast(b, dt))));
	eng_scope_end(ctx);
	return r;
}

eng_tensor *eng_where(const eng_tensor *cond, const eng_tensor *a, const eng_tensor *b)
{
	if (!cond || !a || !b)
		return NULL;
	eng_ctx *ctx = cond->ctx;
	if (a->ctx != ctx || b->ctx != ctx) {
		eng_set_error(ctx, ENG_EINVAL, "where: operands from different contexts");
		return NULL;
	}
	int n1, n2;
	int64_t s1[ENG_MAX_DIMS], s2[ENG_MAX_DIMS];
	if (!broadcast_shape(ctx, "where", a->node, b->node, &n1, s1))
		return NULL;
	eng_node tmp;
	tmp.ndim = (uint8_t)n1;
	memcpy(tmp.shape, s1, sizeof(s1));
	if (!broadcast_shape(ctx, "where", cond->node, &tmp, &n2, s2))
		return NULL;
	eng_dtype dt = eng_dtype_promote(a->node->dtype, b->node->dtype);
	eng_scope_begin(ctx);
	eng_tensor *c = eng_cast(broadcast_to(cond, n2, s2), ENG_BOOL);
	eng_tensor *ca = eng_cast(broadcast_to(a, n2, s2), dt);
	eng_tensor *cb = eng_cast(broadcast_to(b, n2, s2), dt);
	eng_tensor *r = NULL;
	if (c && ca && cb) {
		eng_node_desc d = {.op = ENG_OP_WHERE, .dtype = dt, .ndim = n2, .shape = s2,
				   .src = {c->node, ca->node, cb->node}};
		r = eng_keep(eng_tensor_wrap(ctx, eng_build_node(ctx, &d)));
	}
	eng_scope_end(ctx);
	return r;
}

/* A scalar of a's dtype, or float32 when a is integral and s is not. */
static eng_tensor *scalar_for(const eng_tensor *a, double s)
{
	eng_dtype dt = a->node->dtype;
	if (!eng_dtype_is_float(dt) && (s != floor(s) || !isfinite(s)))
		dt = ENG_F32;
	if (dt == ENG_BOOL && s != 0 && s != 1)
		dt = ENG_I32;
	return eng_scalar(a->ctx, dt, s);
}

#define SCALAR_OP(fn, call)                                                                  \
	eng_tensor *fn(const eng_tensor *a, double s)                                        \
	{                                                                                    \
		if (!a)                                                                      \
			return NULL;                                                         \
		eng_scope_begin(a->ctx);                                                     \
		eng_tensor *b = scalar_for(a, s);                                            \
		eng_tensor *r = eng_keep(call);                                              \
		eng_scope_end(a->ctx);                                                       \
		return r;                                                                    \
	}
SCALAR_OP(eng_add_s, eng_add(a, b))
SCALAR_OP(eng_sub_s, eng_sub(a, b))
SCALAR_OP(eng_mul_s, eng_mul(a, b))
SCALAR_OP(eng_div_s, eng_div(a, b))
#undef SCALAR_OP

eng_tensor *eng_rsub_s(double s, const eng_tensor *a)
{
	if (!a)
		return NULL;
	eng_scope_begin(a->ctx);
	eng_tensor *r = eng_keep(eng_sub(scalar_for(a, s), a));
	eng_scope_end(a->ctx);
	return r;
}

eng_tensor *eng_logical_not(const eng_tensor *a)
{
	if (!a)
		return NULL;
	eng_scope_begin(a->ctx);
	eng_tensor *r = eng_keep(bool_not(eng_cast(a, ENG_BOOL)));
	eng_scope_end(a->ctx);
	return r;
}
