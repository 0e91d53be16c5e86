/* narrow.c: the ONNX element types the engine has no type of, held exactly in a wider one: int8,
 * int16, uint16 and the packed int4, uint4, int2, uint2 in int32, uint32 (and uint64's bits) in
 * int64, bfloat16 and
 * the float8 formats and float4e2m1 in float32. After every op that makes such a value its
 * result is wrapped (integers) or rounded (floats) back into the type (graph.c), so arithmetic
 * overflows and rounds as the type's own would. The minifloats' codes and their rounding follow
 * the ONNX spec's tables (Cast: saturate, the FNUZ formats' lone NaN and no negative zero). */
#include <math.h>
#include <string.h>

#include "onnx_int.h"

int onx_narrow_of(int t)
{
	switch (t) {
	case ONX_INT8: case ONX_INT16: case ONX_UINT16: case ONX_UINT32: case ONX_UINT64: case ONX_BFLOAT16:
	case ONX_INT4: case ONX_UINT4: case ONX_INT2: case ONX_UINT2:
	case ONX_FLOAT8E4M3FN: case ONX_FLOAT8E4M3FNUZ: case ONX_FLOAT8E5M2: case ONX_FLOAT8E5M2FNUZ:
	case ONX_FLOAT4E2M1:
		return t;
	default:
		return 0;
	}
}

int onx_narrow_bits(int t)
{
	switch (t) {
	case ONX_INT2: case ONX_UINT2: return 2;
	case ONX_INT4: case ONX_UINT4: case ONX_FLOAT4E2M1: return 4;
	case ONX_INT8: case ONX_FLOAT8E4M3FN: case ONX_FLOAT8E4M3FNUZ: case ONX_FLOAT8E5M2: case ONX_FLOAT8E5M2FNUZ: return 8;
	case ONX_INT16: case ONX_UINT16: case ONX_BFLOAT16: return 16;
	case ONX_UINT32: return 32;
	case ONX_UINT64: return 64;
	default: return 0;
	}
}

/* A minifloat format: exponent and mantissa bits, bias, largest finite value; fnuz: one NaN
 * (0x80) and no negative zero; inf: all-ones exponents are infinities and NaNs (e5m2), else
 * (e4m3fn) only the all-ones code is NaN, or (float4) there is neither. */
typedef struct mf {
	int e, m, bias;
	double max;
	bool fnuz, inf, nan;
} mf;

static bool format(int t, mf *f)
{
	switch (t) {
	case ONX_FLOAT8E4M3FN: *f = (mf){4, 3, 7, 448, false, false, true}; return true;
	case ONX_FLOAT8E4M3FNUZ: *f = (mf){4, 3, 8, 240, true, false, true}; return true;
	case ONX_FLOAT8E5M2: *f = (mf){5, 2, 15, 57344, false, true, true}; return true;
	case ONX_FLOAT8E5M2FNUZ: *f = (mf){5, 2, 16, 57344, true, false, true}; return true;
	case ONX_FLOAT4E2M1: *f = (mf){2, 1, 1, 6, false, false, false}; return true;
	default: return false;
	}
}

bool onx_minifloat(int t)
{
	mf f;
	return format(t, &f);
}

float onx_minifloat_value(int t, unsigned code)
{
	mf f;
	if (!format(t, &f))
		return NAN;
	int bits = 1 + f.e + f.m;
	unsigned sign = code >> (bits - 1) & 1, e = code >> f.m & ((1u << f.e) - 1), m = code & ((1u << f.m) - 1);
	if (f.fnuz && code == 1u << (bits - 1))
		return NAN;
	if (!f.fnuz && f.nan && e == (1u << f.e) - 1 && (f.inf || m == (1u << f.m) - 1))
		return f.inf && !m ? (sign ? -INFINITY : INFINITY) : NAN;
	double v = e ? ldexp(1.0 + ldexp(m, -f.m), (int)e - f.bias) : ldexp(m, 1 - f.bias - f.m);
	return (float)(sign ? -v : v);
}

eng_tensor *onx_minifloat_round(eng_ctx *ctx, const eng_tensor *t, int nt, bool saturate)
{
	mf f;
	if (!format(nt, &f))
		return NULL;
	eng_tensor *x = eng_cast(t, ENG_F32), *a = eng_abs(x);
	/* the step between neighbours at |x|: 2^(max(exponent, the smallest normal's) - m) */
	eng_tensor *ex = eng_sub_s(eng_shr(eng_bitcast(a, ENG_I32), eng_scalar(ctx, ENG_I32, 23)), 127);
	ex = eng_maximum(ex, eng_scalar(ctx, ENG_I32, 1 - f.bias));
	eng_tensor *step = eng_bitcast(eng_shl(eng_add_s(ex, 127 - f.m), eng_scalar(ctx, ENG_I32, 23)), ENG_F32);
	eng_tensor *r = eng_mul(eng_round(eng_div(a, step)), step); /* a / step is exact: a power of two */
	eng_tensor *past = eng_gt(r, eng_scalar(ctx, ENG_F32, f.max));
	double over = saturate ? f.max : f.inf ? INFINITY : NAN;
	if (f.inf) /* an infinity stays one; only finite values saturate */
		r = eng_where(eng_eq(a, eng_scalar(ctx, ENG_F32, INFINITY)), saturate ? eng_scalar(ctx, ENG_F32, f.max) : a,
			      eng_where(past, eng_scalar(ctx, ENG_F32, over), r));
	else
		r = eng_where(past, eng_scalar(ctx, ENG_F32, over), r);
	/* the sign back: x's sign bit (so -0 stays -0), except the FNUZ formats' zero */
	eng_tensor *neg = eng_lt(eng_bitcast(x, ENG_I32), eng_scalar(ctx, ENG_I32, 0));
	if (f.fnuz)
		neg = eng_and(neg, eng_ne(r, eng_scalar(ctx, ENG_F32, 0)));
	eng_tensor *y = eng_where(neg, eng_neg(r), r);
	/* NaN stays NaN; float4, which has none, takes -0 for it (onnx's reference, ml_dtypes) */
	return eng_where(eng_ne(x, x), f.nan ? x : eng_scalar(ctx, ENG_F32, -0.0), y);
}

eng_tensor *onx_narrow_wrap(eng_ctx *ctx, eng_tensor *t, int nt)
{
	if (onx_minifloat(nt) && eng_tensor_dtype(t) == ENG_F32) /* a Cast's infinity (no saturate) stays */
		return eng_where(eng_eq(eng_abs(t), eng_scalar(ctx, ENG_F32, INFINITY)), t, onx_minifloat_round(ctx, t, nt, true));
	if (nt == ONX_UINT32 && eng_tensor_dtype(t) == ENG_I64)
		return eng_and(t, eng_scalar(ctx, ENG_I64, 4294967295.0));
	if (nt == ONX_BFLOAT16 && eng_tensor_dtype(t) == ENG_F32) {
		/* to nearest even on the upper 16 bits of the float's; NaN stays NaN */
		eng_tensor *b = eng_bitcast(t, ENG_I32);
		eng_tensor *odd = eng_and(eng_shr(b, eng_scalar(ctx, ENG_I32, 16)), eng_scalar(ctx, ENG_I32, 1));
		eng_tensor *r = eng_and(eng_add(b, eng_add_s(odd, 32767)), eng_scalar(ctx, ENG_I32, -65536));
		return eng_where(eng_ne(t, t), t, eng_bitcast(r, ENG_F32));
	}
	if (eng_tensor_dtype(t) != ENG_I32 || nt == ONX_UINT32 || nt == ONX_UINT64) /* int64 wraps as uint64 */
		return t;
	int bits = onx_narrow_bits(nt);
	if (nt == ONX_UINT16 || nt == ONX_UINT4 || nt == ONX_UINT2)
		return eng_and(t, eng_scalar(ctx, ENG_I32, (1 << bits) - 1));
	eng_tensor *sh = eng_scalar(ctx, ENG_I32, 32 - bits);
	return eng_shr(eng_shl(t, sh), sh);
}

bool onx_uint64_ok(const char *op)
{
	/* what reads a uint64's bits the same as an int64's: modular arithmetic, equality, bits,
	 * movement, and the comparisons, which order it with its top bit flipped (ops_elementwise.c);
	 * not division, right shifts, sorting or conversions to float */
	static const char *const ok[] = {"Add", "Sub", "Mul", "Neg", "Equal", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
		"Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Max", "Min", /* these flip the top bit */
		"BitwiseNot", "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split",
		"Slice", "Gather", "GatherElements", "GatherND", "Expand", "Tile", "Pad", "Where", "Shape", "Size",
		"Constant", "ConstantOfShape", "ScatterElements", "ScatterND", "DepthToSpace", "SpaceToDepth"};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (!strcmp(op, ok[i]))
			return true;
	return false;
}
