/* ops_elementwise.c: ONNX elementwise ops: math, comparisons and logic, variadic Min/Max/Sum/
 * Mean, Clip, Where, Cast/CastLike, as compositions of the Tensor API. */
#include <math.h>
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

/* ---- unary ---- */

static eng_tensor *erf_t(const eng_tensor *x)
{
	/* Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), odd in x. */
	eng_tensor *ax = eng_abs(x);
	eng_tensor *t = eng_recip(eng_add_s(eng_mul_s(ax, 0.3275911), 1.0));
	eng_tensor *p = eng_mul_s(t, 1.061405429);
	p = eng_mul(eng_add_s(p, -1.453152027), t);
	p = eng_mul(eng_add_s(p, 1.421413741), t);
	p = eng_mul(eng_add_s(p, -0.284496736), t);
	p = eng_mul(eng_add_s(p, 0.254829592), t);
	eng_tensor *y = eng_rsub_s(1.0, eng_mul(p, eng_exp(eng_neg(eng_mul(x, x)))));
	return eng_mul(eng_sign(x), y);
}

/* atan by range reduction to |u| <= tan(pi/8) and its odd series (|error| < 1e-6). */
static eng_tensor *atan_t(eng_ctx *ctx, const eng_tensor *x)
{
	eng_dtype dt = eng_tensor_dtype(x);
	eng_tensor *ax = eng_abs(x);
	eng_tensor *big = eng_gt(ax, eng_scalar(ctx, dt, 1.0));
	eng_tensor *t = eng_where(big, eng_recip(ax), ax);
	eng_tensor *mid = eng_gt(t, eng_scalar(ctx, dt, 0.41421356237309503));
	eng_tensor *u = eng_where(mid, eng_div(eng_add_s(t, -1.0), eng_add_s(t, 1.0)), t);
	eng_tensor *u2 = eng_mul(u, u);
	eng_tensor *p = eng_rsub_s(1.0 / 9, eng_mul_s(u2, 1.0 / 11));
	p = eng_rsub_s(1.0 / 7, eng_mul(u2, p));
	p = eng_rsub_s(1.0 / 5, eng_mul(u2, p));
	p = eng_rsub_s(1.0 / 3, eng_mul(u2, p));
	p = eng_mul(u, eng_rsub_s(1.0, eng_mul(u2, p)));
	eng_tensor *a = eng_add(p, eng_where(mid, eng_scalar(ctx, dt, M_PI / 4), eng_scalar(ctx, dt, 0)));
	a = eng_where(big, eng_rsub_s(M_PI / 2, a), a);
	return eng_where(eng_lt(x, eng_scalar(ctx, dt, 0)), eng_neg(a), a);
}

static eng_tensor *isinf_t(onx_node *n, const eng_tensor *x)
{
	bool neg = onx_attr_i(n, "detect_negative", 1), pos = onx_attr_i(n, "detect_positive", 1);
	eng_tensor *r = eng_zeros(n->ctx, ENG_BOOL, eng_ndim(x), eng_shape(x));
	if (pos)
		r = eng_or(r, eng_eq(x, eng_scalar(n->ctx, eng_tensor_dtype(x), INFINITY)));
	if (neg)
		r = eng_or(r, eng_eq(x, eng_scalar(n->ctx, eng_tensor_dtype(x), -INFINITY)));
	return r;
}

/* The unary ops, by name; float-only ones are not applied to integers. */
static eng_tensor *unary(onx_node *n, const char *op, const eng_tensor *x)
{
	eng_ctx *ctx = n->ctx;
	eng_dtype dt = eng_tensor_dtype(x);
	if (!strcmp(op, "Neg")) return eng_neg(x);
	if (!strcmp(op, "Abs")) return eng_abs(x);
	if (!strcmp(op, "Sqrt")) return eng_sqrt(x);
	if (!strcmp(op, "Exp")) return eng_exp(x);
	if (!strcmp(op, "Log")) return eng_log(x);
	if (!strcmp(op, "Reciprocal")) return eng_recip(x);
	if (!strcmp(op, "Floor")) return eng_floor(x);
	if (!strcmp(op, "Ceil")) return eng_ceil(x);
	if (!strcmp(op, "Round")) return eng_round(x);
	if (!strcmp(op, "Sign")) return eng_sign(x);
	if (!strcmp(op, "Sin")) return eng_sin(x);
	if (!strcmp(op, "Cos")) return eng_cos(x);
	if (!strcmp(op, "Tan")) return eng_tan(x);
	if (!strcmp(op, "Tanh")) return eng_tanh(x);
	if (!strcmp(op, "Sigmoid")) return eng_sigmoid(x);
	if (!strcmp(op, "Relu")) return eng_relu(x);
	if (!strcmp(op, "Not")) return eng_logical_not(x);
	if (!strcmp(op, "Erf")) return erf_t(x);
	if (!strcmp(op, "Atan")) return atan_t(ctx, x);
	if (!strcmp(op, "Asin")) return atan_t(ctx, eng_div(x, eng_sqrt(eng_rsub_s(1.0, eng_mul(x, x)))));
	if (!strcmp(op, "Acos"))
		return eng_rsub_s(M_PI / 2, atan_t(ctx, eng_div(x, eng_sqrt(eng_rsub_s(1.0, eng_mul(x, x))))));
	if (!strcmp(op, "Sinh")) return eng_mul_s(eng_sub(eng_exp(x), eng_exp(eng_neg(x))), 0.5);
	if (!strcmp(op, "Cosh")) return eng_mul_s(eng_add(eng_exp(x), eng_exp(eng_neg(x))), 0.5);
	if (!strcmp(op, "Asinh")) return eng_log(eng_add(x, eng_sqrt(eng_add_s(eng_mul(x, x), 1.0))));
	if (!strcmp(op, "Acosh")) return eng_log(eng_add(x, eng_sqrt(eng_add_s(eng_mul(x, x), -1.0))));
	if (!strcmp(op, "Atanh"))
		return eng_mul_s(eng_log(eng_div(eng_rsub_s(1.0, eng_neg(x)), eng_rsub_s(1.0, x))), 0.5);
	if (!strcmp(op, "IsNaN")) return eng_ne(x, x);
	if (!strcmp(op, "IsInf")) return isinf_t(n, x);
	if (!strcmp(op, "Softsign")) return eng_div(x, eng_add_s(eng_abs(x), 1.0));
	if (!strcmp(op, "Softplus")) return eng_softplus(x);
	if (!strcmp(op, "Mish")) return eng_mul(x, eng_tanh(eng_softplus(x)));
	if (!strcmp(op, "Swish")) return eng_mul(x, eng_sigmoid(eng_mul_s(x, onx_attr_f(n, "alpha", 1.0))));
	if (!strcmp(op, "LeakyRelu")) return eng_leaky_relu(x, onx_attr_f(n, "alpha", 0.01));
	if (!strcmp(op, "Elu")) return eng_elu(x, onx_attr_f(n, "alpha", 1.0));
	if (!strcmp(op, "Selu")) {
		double a = onx_attr_f(n, "alpha", 1.67326319217681884765625), g = onx_attr_f(n, "gamma", 1.05070102214813232421875);
		eng_tensor *neg = eng_mul_s(eng_add_s(eng_exp(x), -1.0), a);
		return eng_mul_s(eng_where(eng_gt(x, eng_scalar(ctx, dt, 0)), x, neg), g);
	}
	if (!strcmp(op, "Celu")) {
		double a = onx_attr_f(n, "alpha", 1.0);
		eng_tensor *neg = eng_mul_s(eng_add_s(eng_exp(eng_div_s(x, a)), -1.0), a);
		return eng_add(eng_relu(x), eng_minimum(eng_scalar(ctx, dt, 0), neg));
	}
	if (!strcmp(op, "ThresholdedRelu"))
		return eng_where(eng_gt(x, eng_scalar(ctx, dt, onx_attr_f(n, "alpha", 1.0))), x, eng_scalar(ctx, dt, 0));
	if (!strcmp(op, "HardSigmoid"))
		return eng_clamp(eng_add_s(eng_mul_s(x, onx_attr_f(n, "alpha", 0.2)), onx_attr_f(n, "beta", 0.5)), 0.0, 1.0);
	if (!strcmp(op, "HardSwish"))
		return eng_mul(x, eng_clamp(eng_add_s(eng_mul_s(x, 1.0 / 6.0), 0.5), 0.0, 1.0));
	if (!strcmp(op, "Gelu")) {
		char buf[16];
		const char *ap = onx_attr_s(n, "approximate", "none", buf, sizeof(buf));
		if (!strcmp(ap, "tanh"))
			return eng_gelu(x);
		return eng_mul(eng_mul_s(x, 0.5), eng_add_s(erf_t(eng_mul_s(x, M_SQRT1_2)), 1.0));
	}
	return NULL;
}

/* Ops whose result keeps the input's dtype only for floats (an int input is an error). */
static bool float_only(const char *op)
{
	static const char *const ops[] = {"Sqrt", "Exp", "Log", "Reciprocal", "Sin", "Cos", "Tan", "Tanh",
		"Sigmoid", "Erf", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Softsign", "Softplus", "Mish", "Swish",
		"LeakyRelu", "Elu", "Selu", "Celu", "ThresholdedRelu", "HardSigmoid", "HardSwish", "Gelu",
		"Floor", "Ceil", "Round", "IsNaN", "IsInf", "Atan", "Asin", "Acos"};
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (!strcmp(ops[i], op))
			return true;
	return false;
}

eng_status onx_op_unary(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	const char *op = n->pb->op_type;
	eng_dtype dt = eng_tensor_dtype(x);
	if (float_only(op) && !eng_dtype_is_float(dt))
		return onx_fail(n, ENG_ENOTSUP, "input of type %s is not supported", eng_dtype_name(dt));
	if (!strcmp(op, "Not") && dt != ENG_BOOL)
		return onx_fail(n, ENG_EDTYPE, "input must be bool");
	if (!strcmp(op, "BitwiseNot")) { /* every bit flipped: xor with all ones (a narrow type wraps after) */
		if (!eng_dtype_is_int(dt))
			return onx_fail(n, ENG_EDTYPE, "input must be an integer");
		n->out[0] = eng_xor(x, eng_scalar(n->ctx, dt, dt == ENG_U8 ? 255 : -1));
		return onx_check(n, n->out[0]);
	}
	eng_tensor *y = unary(n, op, x);
	if (!y)
		return onx_check(n, y);
	/* keep the input's dtype (float16 stays float16) except for predicates */
	if (strcmp(op, "IsNaN") && strcmp(op, "IsInf") && eng_tensor_dtype(y) != dt)
		y = eng_cast(y, dt);
	n->out[0] = y;
	return onx_check(n, y);
}

eng_status onx_op_identity(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	n->out[0] = eng_reshape(x, eng_ndim(x), eng_shape(x));
	return onx_check(n, n->out[0]);
}

/* ---- binary ---- */

/* a / b for floats, closer to IEEE division than the engine's a * recip(b): one correction step
 * q + (a - q b) / b, kept only where it is finite (b = 0 or an infinity keep q). Division that
 * feeds Round, Floor or a Cast then agrees with other runtimes at the halfway points. */
eng_tensor *onx_div_exact(const eng_tensor *a, const eng_tensor *b)
{
	eng_tensor *rb = eng_recip(b);
	eng_tensor *q = eng_mul(a, rb);
	eng_tensor *corr = eng_mul(eng_sub(a, eng_mul(q, b)), rb);
	eng_tensor *finite = eng_eq(eng_sub(corr, corr), eng_mul_s(corr, 0.0));
	eng_tensor *y = eng_where(finite, eng_add(q, corr), q);
	return y && eng_tensor_dtype(y) != eng_tensor_dtype(q) ? eng_cast(y, eng_tensor_dtype(q)) : y;
}

static eng_tensor *mod_t(onx_node *n, const eng_tensor *a, const eng_tensor *b)
{
	eng_ctx *ctx = n->ctx;
	eng_dtype dt = eng_tensor_dtype(a);
	bool fmod_ = onx_attr_i(n, "fmod", 0);
	eng_tensor *r;
	if (eng_dtype_is_float(dt)) {
		/* C fmod: a - b * trunc(a / b); a finite a over an infinite b is a itself (the
		 * formula's inf * 0 would be NaN) */
		r = eng_sub(a, eng_mul(b, eng_trunc(eng_div(a, b))));
		eng_tensor *inf = eng_scalar(ctx, dt, INFINITY);
		r = eng_where(eng_and(eng_eq(eng_abs(b), inf), eng_lt(eng_abs(a), inf)), a, r);
	} else {
		r = eng_mod(a, b); /* truncating, as C */
	}
	if (!fmod_) { /* the sign of the divisor, as Python */
		eng_tensor *z = eng_scalar(ctx, dt, 0);
		eng_tensor *fix = eng_and(eng_ne(r, z), eng_ne(eng_lt(r, z), eng_lt(b, z)));
		r = eng_where(fix, eng_add(r, b), r);
	}
	return r;
}

/* Pow's exponent when it is a constant small whole number (0 to 4) that leaves the shape of a
 * float base as it is: eng_pow_s then multiplies, exactly as pow rounds. */
static bool const_pow_exponent(onx_node *n, double *p)
{
	const eng_tensor *a = onx_in(n, 0), *b = onx_in(n, 1);
	if (!n->in[1]->is_const || eng_numel(b) != 1 || eng_ndim(b) > eng_ndim(a) ||
	    !eng_dtype_is_float(eng_tensor_dtype(a)))
		return false;
	eng_tensor *f = eng_cast(b, ENG_F32);
	float v = 0.5f;
	bool ok = f && !eng_tensor_read(f, &v, sizeof(v)); /* a failure stays the context's error */
	eng_tensor_free(f);
	if (!ok)
		return false;
	*p = v;
	return v >= 0 && v <= 4 && v == (float)(int)v;
}

eng_status onx_op_binary(onx_node *n)
{
	eng_tensor *a = onx_in(n, 0), *b = onx_in(n, 1);
	if (!a || !b)
		return onx_fail(n, ENG_EINVAL, "two inputs are needed");
	const char *op = n->pb->op_type;
	eng_dtype da = eng_tensor_dtype(a), db = eng_tensor_dtype(b);
	bool same = strcmp(op, "Pow") != 0 && strcmp(op, "BitShift") != 0;
	if (same && da != db)
		return onx_fail(n, ENG_EDTYPE, "inputs differ in type (%s, %s)", eng_dtype_name(da), eng_dtype_name(db));
	eng_tensor *y = NULL;
	if (onx_in_narrow(n, 0) == ONX_UINT64 && (strstr(op, "Less") == op || strstr(op, "Greater") == op)) {
		/* uint64 held as int64's bits: ordered as int64 once the top bit is flipped */
		eng_tensor *top = eng_scalar(n->ctx, ENG_I64, -9223372036854775808.0);
		a = eng_xor(a, top), b = eng_xor(b, top);
	}
	if (!strcmp(op, "Add")) y = eng_add(a, b);
	else if (!strcmp(op, "Sub")) y = eng_sub(a, b);
	else if (!strcmp(op, "Mul")) y = eng_mul(a, b);
	else if (!strcmp(op, "Div")) y = eng_dtype_is_float(da) ? onx_div_exact(a, b) : eng_idiv(a, b);
	else if (!strcmp(op, "Pow")) {
		if (da == ENG_BOOL || db == ENG_BOOL)
			return onx_fail(n, ENG_EDTYPE, "bool operands");
		double p;
		if (const_pow_exponent(n, &p)) { /* x^2 as x*x etc.: exact, and no log2/exp2 per element */
			n->out[0] = eng_pow_s(a, p);
			return onx_check(n, n->out[0]);
		}
		/* an integer base computes in float32 and rounds (exact below 2^24) */
		y = eng_cast(eng_pow(a, eng_dtype_is_float(da) ? eng_cast(b, da) : b), da);
	} else if (!strcmp(op, "Mod")) y = mod_t(n, a, b);
	else if (!strcmp(op, "Equal")) y = eng_eq(a, b);
	else if (!strcmp(op, "Less")) y = eng_lt(a, b);
	else if (!strcmp(op, "Greater")) y = eng_gt(a, b);
	else if (!strcmp(op, "LessOrEqual")) y = eng_le(a, b);
	else if (!strcmp(op, "GreaterOrEqual")) y = eng_ge(a, b);
	else if (!strcmp(op, "And") || !strcmp(op, "Or") || !strcmp(op, "Xor")) {
		if (da != ENG_BOOL)
			return onx_fail(n, ENG_EDTYPE, "inputs must be bool");
		y = op[0] == 'A' ? eng_and(a, b) : op[0] == 'O' ? eng_or(a, b) : eng_xor(a, b);
	} else if (!strncmp(op, "Bitwise", 7)) { /* And, Or, Xor of integers, bit by bit */
		if (!eng_dtype_is_int(da))
			return onx_fail(n, ENG_EDTYPE, "inputs must be integers");
		y = op[7] == 'A' ? eng_and(a, b) : op[7] == 'O' ? eng_or(a, b) : eng_xor(a, b);
	} else if (!strcmp(op, "BitShift")) {
		char buf[16];
		const char *dir = onx_attr_s(n, "direction", "", buf, sizeof(buf));
		if (da != db || !eng_dtype_is_int(da))
			return onx_fail(n, ENG_ENOTSUP, "types %s, %s are not supported", eng_dtype_name(da), eng_dtype_name(db));
		bool left = !strcmp(dir, "LEFT");
		if (!left && strcmp(dir, "RIGHT"))
			return onx_fail(n, ENG_EINVAL, "attribute 'direction': '%s'", dir);
		/* a shift by a negative amount or by the width or more: 0, or -1 for a negative value
		 * shifted right (opset 28 defines them; the engine's shift takes the amount mod width) */
		eng_tensor *z = eng_scalar(n->ctx, da, 0);
		eng_tensor *ok = eng_and(eng_ge(b, z), eng_lt(b, eng_scalar(n->ctx, da, eng_dtype_bits(da))));
		eng_tensor *bs = eng_where(ok, b, z);
		eng_tensor *out = left || eng_dtype_is_unsigned(da) ? z : eng_where(eng_lt(a, z), eng_scalar(n->ctx, da, -1), z);
		y = eng_where(ok, left ? eng_shl(a, bs) : eng_shr(a, bs), out);
	}
	if (!y)
		return onx_check(n, y);
	n->out[0] = y;
	return ENG_OK;
}

/* Opsets < 7: broadcasting only when attribute broadcast is 1, B aligned at attribute axis (else
 * at the end, as numpy); without it the shapes must be equal. */
eng_status onx_op_binary_legacy(onx_node *n)
{
	eng_tensor *a = onx_in(n, 0), *b = onx_in(n, 1);
	if (!a || !b)
		return onx_fail(n, ENG_EINVAL, "two inputs are needed");
	int ra = eng_ndim(a), rb = eng_ndim(b);
	if (!onx_attr_i(n, "broadcast", 0)) {
		bool same = ra == rb;
		for (int i = 0; same && i < ra; i++)
			same = eng_shape(a)[i] == eng_shape(b)[i];
		if (!same && strcmp(n->pb->op_type, "PRelu"))
			return onx_fail(n, ENG_ESHAPE, "shapes differ and attribute 'broadcast' is 0");
		return strcmp(n->pb->op_type, "PRelu") ? onx_op_binary(n) : onx_op_prelu(n);
	}
	const Onnx__AttributeProto *ax = onx_attr(n, "axis");
	if (!ax)
		return onx_op_binary(n);
	int64_t axis = onx_attr_i(n, "axis", 0);
	if (axis < 0)
		axis += ra;
	if (axis < 0 || axis + rb > ra)
		return onx_fail(n, ENG_EAXIS, "attribute 'axis' %lld does not fit B (rank %d) in A (rank %d)", (long long)axis, rb, ra);
	int64_t sh[ENG_MAX_DIMS];
	for (int i = 0; i < ra; i++)
		sh[i] = i >= axis && i < axis + rb ? eng_shape(b)[i - axis] : 1;
	onx_val bv = *n->in[1];
	bv.t = eng_reshape(b, ra, sh);
	const onx_val *ins[2] = {n->in[0], &bv};
	onx_node m = *n;
	m.in = ins;
	m.n_in = 2;
	return onx_op_binary(&m);
}

/* Max, Min, Sum, Mean over any number of inputs (broadcasting). */
eng_status onx_op_variadic(onx_node *n)
{
	const char *op = n->pb->op_type;
	eng_tensor *acc = NULL;
	int k = 0;
	/* uint64 held as int64's bits orders as int64 once its top bit is flipped (Max, Min; the
	 * result flipped back) */
	bool u64 = onx_in_narrow(n, 0) == ONX_UINT64 && (!strcmp(op, "Max") || !strcmp(op, "Min"));
	eng_tensor *top = u64 ? eng_scalar(n->ctx, ENG_I64, -9223372036854775808.0) : NULL;
	for (int i = 0; i < n->n_in; i++) {
		eng_tensor *x = onx_in(n, i);
		if (!x)
			continue;
		if (u64)
			x = eng_xor(x, top);
		k++;
		if (!acc)
			acc = eng_reshape(x, eng_ndim(x), eng_shape(x));
		else if (!strcmp(op, "Max"))
			acc = eng_maximum(acc, x);
		else if (!strcmp(op, "Min"))
			acc = eng_minimum(acc, x);
		else
			acc = eng_add(acc, x);
		if (!acc)
			return onx_check(n, acc);
	}
	if (!acc)
		return onx_fail(n, ENG_EINVAL, "no inputs");
	if (u64)
		acc = eng_xor(acc, top);
	if (!strcmp(op, "Mean")) {
		eng_dtype dt = eng_tensor_dtype(acc);
		acc = eng_cast(eng_div_s(acc, k), dt);
	}
	n->out[0] = acc;
	return onx_check(n, acc);
}

eng_status onx_op_clip(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	eng_tensor *y = eng_reshape(x, eng_ndim(x), eng_shape(x));
	if (n->opset < 11) {
		y = eng_clamp(y, onx_attr_f(n, "min", -INFINITY), onx_attr_f(n, "max", INFINITY));
	} else {
		eng_tensor *lo = onx_in(n, 1), *hi = onx_in(n, 2);
		if (lo)
			y = eng_maximum(y, lo);
		if (hi)
			y = eng_minimum(y, hi);
	}
	n->out[0] = y;
	return onx_check(n, y);
}

eng_status onx_op_where(onx_node *n)
{
	eng_tensor *c = onx_in(n, 0), *a = onx_in(n, 1), *b = onx_in(n, 2);
	if (!c || !a || !b)
		return onx_fail(n, ENG_EINVAL, "three inputs are needed");
	n->out[0] = eng_where(eng_cast(c, ENG_BOOL), a, b);
	return onx_check(n, n->out[0]);
}

eng_status onx_op_prelu(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *s = onx_in(n, 1);
	if (!x || !s)
		return onx_fail(n, ENG_EINVAL, "two inputs are needed");
	if (n->opset < 7 && eng_ndim(s) == 1 && eng_ndim(x) > 2 && eng_numel(s) == eng_shape(x)[1]) {
		/* opsets < 7: a 1-D slope is per channel */
		int64_t sh[ENG_MAX_DIMS];
		for (int i = 0; i < eng_ndim(x) - 1; i++)
			sh[i] = i == 0 ? eng_numel(s) : 1;
		s = eng_reshape(s, eng_ndim(x) - 1, sh);
	}
	n->out[0] = eng_where(eng_lt(x, eng_scalar(n->ctx, eng_tensor_dtype(x), 0)), eng_mul(x, s), x);
	return onx_check(n, n->out[0]);
}

eng_status onx_op_cast(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	eng_dtype to;
	if (!strcmp(n->pb->op_type, "CastLike")) {
		eng_tensor *like = onx_in(n, 1);
		if (!like)
			return onx_fail(n, ENG_EINVAL, "input 1 is missing");
		to = eng_tensor_dtype(like);
	} else {
		int64_t t = onx_attr_i(n, "to", -1);
		if (!onx_node_dtype(n, (int)t, &to))
			return onx_fail(n, ENG_ENOTSUP, "attribute 'to': type %s (%lld) is not supported", onx_type_name((int)t), (long long)t);
	}
	/* a float into int4, uint4, int2 or uint2: truncated, and 0 where that is out of the type's
	 * range (as onnx's reference, ml_dtypes, converts); other narrow targets wrap after the op */
	int nt = !strcmp(n->pb->op_type, "CastLike") ? onx_in_narrow(n, 1) : onx_narrow_of((int)onx_attr_i(n, "to", -1));
	int bits = !onx_minifloat(nt) && onx_narrow_bits(nt) < 8 ? onx_narrow_bits(nt) : 0;
	if (onx_minifloat(nt)) { /* rounded here with the node's saturate; the op's rule keeps it */
		n->out[0] = onx_minifloat_round(n->ctx, x, nt, onx_attr_i(n, "saturate", 1) != 0);
		return onx_check(n, n->out[0]);
	}
	if (bits && eng_dtype_is_float(eng_tensor_dtype(x))) {
		bool sgn = nt == ONX_INT4 || nt == ONX_INT2;
		double lo = sgn ? -(1 << (bits - 1)) : 0, hi = sgn ? (1 << (bits - 1)) - 1 : (1 << bits) - 1;
		eng_tensor *t = eng_trunc(eng_cast(x, ENG_F32));
		eng_tensor *in = eng_and(eng_ge(t, eng_scalar(n->ctx, ENG_F32, lo)), eng_le(t, eng_scalar(n->ctx, ENG_F32, hi)));
		n->out[0] = eng_cast(eng_where(in, t, eng_scalar(n->ctx, ENG_F32, 0)), to);
		return onx_check(n, n->out[0]);
	}
	n->out[0] = eng_cast(x, to);
	return onx_check(n, n->out[0]);
}

eng_status onx_op_bitcast(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	int64_t t = onx_attr_i(n, "to", -1);
	eng_dtype to, from = eng_tensor_dtype(x);
	if (!onx_node_dtype(n, (int)t, &to))
		return onx_fail(n, ENG_ENOTSUP, "attribute 'to': type %s (%lld) is not supported", onx_type_name((int)t), (long long)t);
	/* the widths the model's types have: float64 runs as float32 here (ENG_ONNX_F64_AS_F32),
	 * int8, int16, uint16 as int32 and uint32 as int64 (onx_narrow_of): their bits are not those of their types */
	int nf = onx_in_narrow(n, 0), nt = onx_narrow_of((int)t);
	if (nf || nt) { /* an integer pattern as another of the same width (the types' own widths) */
		int wf = nf ? onx_narrow_bits(nf) : 8 * (int)eng_dtype_size(from), wt = nt ? onx_narrow_bits(nt) : 8 * (int)eng_dtype_size(to);
		if (wf != wt || !eng_dtype_is_int(from) || !eng_dtype_is_int(to))
			return onx_fail(n, ENG_ENOTSUP, "%s to %s is not supported", onx_type_name(nf ? nf : onx_type_of(from)),
					onx_type_name((int)t));
		/* the bits as an unsigned number (all 64: as they are); a narrow target wraps after the op */
		eng_tensor *bits = wf == 64 ? eng_cast(x, ENG_I64)
					    : eng_and(eng_cast(x, ENG_I64), eng_scalar(n->ctx, ENG_I64, (double)((1ull << wf) - 1)));
		n->out[0] = eng_cast(bits, to);
		return onx_check(n, n->out[0]);
	}
	if (t == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE || eng_dtype_size(to) != eng_dtype_size(from))
		return onx_fail(n, ENG_ENOTSUP, "%s to %s: not the same width here (float64 runs as float32)",
				eng_dtype_name(from), onx_type_name((int)t));
	/* a bool byte is 0 or 1 (a byte of another value is no bool); eng_bitcast reinterprets the rest */
	n->out[0] = to == from ? eng_reshape(x, eng_ndim(x), eng_shape(x))
		  : to == ENG_BOOL ? eng_ne(x, eng_scalar(n->ctx, from, 0))
		  : from == ENG_BOOL ? eng_cast(x, to) : eng_bitcast(x, to);
	return onx_check(n, n->out[0]);
}

/* SwiGLU: Swish_alpha(A) * B, A and B of one shape (no broadcasting). */
eng_status onx_op_swiglu(onx_node *n)
{
	eng_tensor *a = onx_in(n, 0), *b = onx_in(n, 1);
	if (!a || !b)
		return onx_fail(n, ENG_EINVAL, "inputs A and B are needed");
	if (eng_tensor_dtype(a) != eng_tensor_dtype(b) || !eng_dtype_is_float(eng_tensor_dtype(a)))
		return onx_fail(n, ENG_EDTYPE, "A and B must be of one float type");
	bool same = eng_ndim(a) == eng_ndim(b);
	for (int i = 0; same && i < eng_ndim(a); i++)
		same = eng_shape(a)[i] == eng_shape(b)[i];
	if (!same)
		return onx_fail(n, ENG_ESHAPE, "A and B must have one shape (SwiGLU does not broadcast)");
	eng_tensor *sw = eng_mul(a, eng_sigmoid(eng_mul_s(a, onx_attr_f(n, "alpha", 1.0))));
	n->out[0] = eng_cast(eng_mul(sw, b), eng_tensor_dtype(a));
	return onx_check(n, n->out[0]);
}
