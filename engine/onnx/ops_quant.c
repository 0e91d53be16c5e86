/* ops_quant.c: ONNX uint8 quantisation (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear;
 * per-tensor, per-axis or blocked scales) and the integer products (MatMulInteger, ConvInteger,
 * QLinearMatMul, QLinearConv: int32 accumulation, float requantisation). */
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

/* p (a scalar, 1-D per-axis, or blocked: x's rank with axis a's size ceil(x's / block_size),
 * opset 21) shaped to broadcast against x of rank r along axis a. */
static eng_tensor *along(onx_node *n, eng_tensor *p, const eng_tensor *x, eng_status *s)
{
	int r = eng_ndim(x), a;
	int64_t bs = onx_attr_i(n, "block_size", 0);
	if (bs == 0 && (eng_ndim(p) == 0 || eng_numel(p) == 1))
		return eng_reshape(p, 0, NULL);
	if (!onx_axis(onx_attr_i(n, "axis", 1), r, &a)) {
		*s = onx_fail(n, ENG_EAXIS, "attribute 'axis' is out of range for rank %d", r);
		return NULL;
	}
	int64_t sh[ENG_MAX_DIMS];
	if (bs == 0) {
		for (int i = 0; i < r; i++)
			sh[i] = i == a ? eng_numel(p) : 1;
		return eng_reshape(p, r, sh);
	}
	/* blocked: each entry covers block_size consecutive elements along the axis */
	const int64_t *xs = eng_shape(x), *ps = eng_shape(p);
	bool ok = bs > 0 && eng_ndim(p) == r && r < ENG_MAX_DIMS;
	for (int i = 0; ok && i < r; i++)
		ok = i == a ? ps[i] == (xs[i] + bs - 1) / bs : ps[i] == xs[i];
	if (!ok) {
		*s = onx_fail(n, ENG_ESHAPE, "a blocked scale or zero point (block_size %lld) must have x's shape with axis %d cut into blocks",
			      (long long)bs, a);
		return NULL;
	}
	int64_t e[ENG_MAX_DIMS], rg[ENG_MAX_DIMS][2];
	for (int i = 0, k = 0; i < r; i++) {
		e[k++] = ps[i];
		if (i == a)
			e[k++] = bs;
		sh[i] = i == a ? ps[i] * bs : ps[i];
		rg[i][0] = 0, rg[i][1] = xs[i];
	}
	return eng_shrink(eng_reshape(eng_expand(eng_unsqueeze(p, a + 1), r + 1, e), r, sh), rg);
}

/* The range of the integer type QuantizeLinear may produce; false for others. */
static bool quant_range(int t, double *lo, double *hi)
{
	static const struct {
		int t;
		double lo, hi;
	} r[] = {{ONX_UINT8, 0, 255}, {ONX_INT8, -128, 127}, {ONX_UINT16, 0, 65535}, {ONX_INT16, -32768, 32767},
		 {ONX_UINT4, 0, 15}, {ONX_INT4, -8, 7}, {ONX_UINT2, 0, 3}, {ONX_INT2, -2, 1}};
	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++)
		if (r[i].t == t) {
			*lo = r[i].lo, *hi = r[i].hi;
			return true;
		}
	return false;
}

/* v (float32) rounded to the nearest integer, ties to even, where a clamp to a range inside
 * +-2^22 follows (every integer type QuantizeLinear makes): v + 1.5 * 2^23 lies in (2^23, 2^24)
 * for |v| < 2^22, where the floats are the integers, so the addition rounds and the subtraction
 * is exact; larger |v|, infinities and NaN come out as large, infinite or NaN and saturate as
 * before. Two additions where eng_round's exact form for every float takes fifteen ops: the
 * rounding of each element a QDQ model quantizes. */
static eng_tensor *round_saturated(eng_tensor *v)
{
	const double magic = 12582912.0;
	return eng_sub_s(eng_add_s(v, magic), magic);
}

/* v, an integer in float32 (rounded already), saturated to uint8. */
static eng_tensor *to_u8(eng_tensor *v)
{
	return eng_cast(eng_clamp(v, 0, 255), ENG_U8);
}

eng_status onx_op_quantize(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *sc = onx_in(n, 1), *zp = onx_in(n, 2);
	if (!x || !sc)
		return onx_fail(n, ENG_EINVAL, "x and y_scale are needed");
	/* the quantised type: the zero point's, else output_dtype (opset 21), else uint8; its
	 * range is where the values saturate */
	int64_t od = onx_attr_i(n, "output_dtype", 0), prec = onx_attr_i(n, "precision", 0);
	int qt = zp ? (onx_in_narrow(n, 2) ? onx_in_narrow(n, 2) : onx_type_of(eng_tensor_dtype(zp))) : od ? (int)od : ONX_UINT8;
	double lo, hi;
	bool mini = onx_minifloat(qt);
	if ((!mini && !quant_range(qt, &lo, &hi)) || (od && od != qt))
		return onx_fail(n, ENG_ENOTSUP, "quantising to %s is not supported", onx_type_name(od && od != qt ? (int)od : qt));
	if (prec && prec != ONX_FLOAT) /* the type the division runs in: float32 here */
		return onx_fail(n, ENG_ENOTSUP, "precision %s is not supported", onx_type_name((int)prec));
	eng_status s = ENG_OK;
	eng_tensor *scb = along(n, sc, x, &s);
	eng_tensor *zpb = zp && !s ? along(n, eng_cast(zp, ENG_F32), x, &s) : NULL;
	if (s)
		return s;
	eng_tensor *v = onx_div_exact(eng_cast(x, ENG_F32), eng_cast(scb, ENG_F32));
	if (mini) { /* a float8 or float4: x / scale + zero point, rounded into the format */
		if (zpb)
			v = eng_add(v, zpb);
		n->out[0] = onx_minifloat_round(n->ctx, v, qt, onx_attr_i(n, "saturate", 1) != 0);
		return onx_check(n, n->out[0]);
	}
	v = round_saturated(v);
	if (zpb)
		v = eng_add(v, zpb);
	/* uint8 as uint8; the others held in int32 (int8, int16, uint16, int4, ... : onx_narrow_of) */
	n->out[0] = qt == ONX_UINT8 ? to_u8(v) : eng_cast(eng_clamp(v, lo, hi), ENG_I32);
	return onx_check(n, n->out[0]);
}

eng_status onx_op_dequantize(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *sc = onx_in(n, 1), *zp = onx_in(n, 2);
	if (!x || !sc)
		return onx_fail(n, ENG_EINVAL, "x and x_scale are needed");
	eng_dtype dt = eng_tensor_dtype(x);
	if (dt != ENG_U8 && dt != ENG_I32 && !onx_minifloat(onx_in_narrow(n, 0)))
		return onx_fail(n, ENG_ENOTSUP, "input type %s is not supported", eng_dtype_name(dt));
	eng_dtype out = eng_tensor_dtype(sc);
	int64_t od = onx_attr_i(n, "output_dtype", 0); /* opset 23: the output's float type */
	if (od && !onx_node_dtype(n, (int)od, &out))
		return onx_fail(n, ENG_ENOTSUP, "output_dtype %s is not supported", onx_type_name((int)od));
	eng_status s = ENG_OK;
	eng_tensor *scb = along(n, sc, x, &s);
	eng_tensor *zpb = zp && !s ? along(n, eng_cast(zp, ENG_F32), x, &s) : NULL;
	if (s)
		return s;
	eng_tensor *v = eng_cast(x, ENG_F32);
	if (zpb)
		v = eng_sub(v, zpb);
	n->out[0] = eng_cast(eng_mul(v, eng_cast(scb, ENG_F32)), out);
	return onx_check(n, n->out[0]);
}

eng_status onx_op_dynamic_quantize(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	eng_tensor *xf = eng_cast(x, ENG_F32), *zero = eng_scalar(n->ctx, ENG_F32, 0);
	eng_tensor *hi = eng_maximum(eng_max(xf, NULL, 0, false), zero), *lo = eng_minimum(eng_min(xf, NULL, 0, false), zero);
	eng_tensor *scale = eng_div_s(eng_sub(hi, lo), 255.0);
	eng_tensor *zpf = eng_clamp(round_saturated(eng_neg(onx_div_exact(lo, scale))), 0, 255);
	n->out[0] = to_u8(eng_add(round_saturated(onx_div_exact(xf, scale)), zpf));
	if (n->n_out > 1)
		n->out[1] = scale;
	if (n->n_out > 2)
		n->out[2] = eng_cast(zpf, ENG_U8);
	return onx_check(n, n->out[0]);
}

/* ---- integer and quantised products ---- */

/* x as int32 minus its zero point (a scalar, or per row / per channel along axis when 1-D). */
static eng_tensor *centered(onx_node *n, eng_tensor *x, eng_tensor *zp, int axis)
{
	eng_tensor *xi = eng_cast(x, ENG_I32);
	if (!zp)
		return xi;
	eng_tensor *z = eng_cast(zp, ENG_I32);
	int r = eng_ndim(x);
	if (eng_numel(zp) > 1 && axis >= 0 && axis < r) {
		int64_t sh[ENG_MAX_DIMS];
		for (int i = 0; i < r; i++)
			sh[i] = i == axis ? eng_numel(zp) : 1;
		z = eng_reshape(z, r, sh);
	} else
		z = eng_reshape(z, 0, NULL);
	return eng_sub(xi, z);
}

/* Input i, if given, is uint8 or int8 (held in int32: onx_narrow_of), the types of the integer
 * products' operands and zero points. */
static eng_status check_8bit(onx_node *n, int i)
{
	eng_tensor *t = onx_in(n, i);
	if (t && eng_tensor_dtype(t) != ENG_U8 && onx_in_narrow(n, i) != ONX_INT8)
		return onx_fail(n, ENG_ENOTSUP, "input %d of type %s is not supported (uint8 and int8 are)", i,
				onx_in_narrow(n, i) ? onx_type_name(onx_in_narrow(n, i)) : eng_dtype_name(eng_tensor_dtype(t)));
	return ENG_OK;
}

/* Whether inputs i and j (an operand and its zero point, when given) are of one 8-bit type. */
static eng_status check_pair(onx_node *n, int i, int j)
{
	eng_status s = check_8bit(n, i);
	if (s || (s = check_8bit(n, j)))
		return s;
	if (onx_in(n, j) && onx_in_narrow(n, i) != onx_in_narrow(n, j))
		return onx_fail(n, ENG_EDTYPE, "input %d and its zero point (input %d) differ in type", i, j);
	return ENG_OK;
}

/* Run op function fn on node n with inputs replaced by ins (k of them). */
static eng_status with_inputs(onx_node *n, eng_status (*fn)(onx_node *), eng_tensor **ins, int k)
{
	onx_val v[8];
	const onx_val *pv[8];
	for (int i = 0; i < k; i++) {
		v[i] = (onx_val){ins[i], false, (uint64_t)-1, 0};
		pv[i] = ins[i] ? &v[i] : NULL;
	}
	onx_node m = *n;
	m.in = pv;
	m.n_in = k;
	return fn(&m);
}

eng_status onx_op_matmul_integer(onx_node *n)
{
	eng_tensor *a = onx_in(n, 0), *b = onx_in(n, 1);
	eng_status s;
	if (!a || !b)
		return onx_fail(n, ENG_EINVAL, "A and B are needed");
	if ((s = check_pair(n, 0, 2)) || (s = check_pair(n, 1, 3)))
		return s;
	eng_tensor *ac = centered(n, a, onx_in(n, 2), eng_ndim(a) - 2), *bc = centered(n, b, onx_in(n, 3), eng_ndim(b) - 1);
	n->out[0] = eng_cast(eng_matmul(ac, bc), ENG_I32);
	return onx_check(n, n->out[0]);
}

eng_status onx_op_conv_integer(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *w = onx_in(n, 1);
	eng_status s;
	if (!x || !w)
		return onx_fail(n, ENG_EINVAL, "x and w are needed");
	if ((s = check_pair(n, 0, 2)) || (s = check_pair(n, 1, 3)))
		return s;
	eng_tensor *ins[2] = {centered(n, x, onx_in(n, 2), -1), centered(n, w, onx_in(n, 3), 0)};
	if ((s = onx_check(n, ins[1])))
		return s;
	return with_inputs(n, onx_op_conv, ins, 2);
}

/* y = saturate(round(acc * scale) + y_zp), scale = a_scale * b_scale / y_scale: uint8, or int8
 * (held in int32) when x is (qlinear_args: y_zp's type is x's) */
static eng_tensor *requantize(onx_node *n, eng_tensor *acc, eng_tensor *sa, eng_tensor *sb, eng_tensor *sy, eng_tensor *zy, int axis)
{
	const bool s8 = onx_in_narrow(n, 0) == ONX_INT8;
	int r = eng_ndim(acc);
	eng_tensor *scale = eng_div(eng_mul(eng_cast(sa, ENG_F32), eng_cast(sb, ENG_F32)), eng_cast(sy, ENG_F32));
	if (eng_numel(scale) > 1 && axis >= 0) {
		int64_t sh[ENG_MAX_DIMS];
		for (int i = 0; i < r; i++)
			sh[i] = i == axis ? eng_numel(scale) : 1;
		scale = eng_reshape(scale, r, sh);
	} else
		scale = eng_reshape(scale, 0, NULL);
	eng_tensor *v = round_saturated(eng_mul(eng_cast(acc, ENG_F32), scale));
	if (zy)
		v = eng_add(v, eng_reshape(eng_cast(zy, ENG_F32), 0, NULL));
	return s8 ? eng_cast(eng_clamp(v, -128, 127), ENG_I32) : eng_cast(eng_clamp(v, 0, 255), ENG_U8);
}

/* QLinearMatMul's and QLinearConv's common inputs: the two operands (0, 3) and the scales (1, 4,
 * 6) present, operands and zero points (2, 5, 7) uint8 or int8, each zero point of its operand's
 * type, the output's (y_zp's) x's. what names the operands. */
static eng_status qlinear_args(onx_node *n, const char *what)
{
	eng_status s;
	if (!onx_in(n, 0) || !onx_in(n, 3) || !onx_in(n, 1) || !onx_in(n, 4) || !onx_in(n, 6))
		return onx_fail(n, ENG_EINVAL, "%s and the scales are needed", what);
	if ((s = check_pair(n, 0, 2)) || (s = check_pair(n, 3, 5)) || (s = check_8bit(n, 7)))
		return s;
	if (onx_in(n, 7) && onx_in_narrow(n, 7) != onx_in_narrow(n, 0))
		return onx_fail(n, ENG_ENOTSUP, "an output type (y_zero_point's) other than x's is not supported");
	return ENG_OK;
}

eng_status onx_op_qlinear_matmul(onx_node *n)
{
	eng_tensor *a = onx_in(n, 0), *b = onx_in(n, 3);
	eng_status s = qlinear_args(n, "a, b");
	if (s)
		return s;
	eng_tensor *acc = eng_matmul(centered(n, a, onx_in(n, 2), eng_ndim(a) - 2), centered(n, b, onx_in(n, 5), eng_ndim(b) - 1));
	n->out[0] = acc ? requantize(n, acc, onx_in(n, 1), onx_in(n, 4), onx_in(n, 6), onx_in(n, 7), eng_ndim(acc) - 1) : NULL;
	return onx_check(n, n->out[0]);
}

eng_status onx_op_qlinear_conv(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *w = onx_in(n, 3);
	eng_status s = qlinear_args(n, "x, w");
	if (s)
		return s;
	eng_tensor *bias = onx_in(n, 8);
	if (bias && eng_tensor_dtype(bias) != ENG_I32)
		return onx_fail(n, ENG_EDTYPE, "the bias must be int32");
	eng_tensor *ins[3] = {centered(n, x, onx_in(n, 2), -1), centered(n, w, onx_in(n, 5), 0), bias};
	eng_tensor *out[1] = {NULL};
	onx_node m = *n;
	m.out = out;
	if ((s = with_inputs(&m, onx_op_conv, ins, 3)))
		return s;
	n->out[0] = requantize(n, out[0], onx_in(n, 1), onx_in(n, 4), onx_in(n, 6), onx_in(n, 7), 1);
	return onx_check(n, n->out[0]);
}
