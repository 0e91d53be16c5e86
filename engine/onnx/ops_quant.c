/* ops_quant.c: ONNX uint8 quantisation (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear;
 * per-tensor or per-axis scales). */
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

/* p (a scalar or 1-D per-axis) shaped to broadcast along axis a of rank r. */
static eng_tensor *along(onx_node *n, eng_tensor *p, int r, eng_status *s)
{
	if (eng_ndim(p) == 0 || eng_numel(p) == 1)
		return eng_reshape(p, 0, NULL);
	int a;
	if (!onx_axis(onx_attr_i(n, "axis", 1), r, &a)) {
		*s = onx_fail(n, ENG_EAXIS, "attribute 'axis' is out of range for rank %d", r);
		return NULL;
	}
	int64_t sh[ENG_MAX_DIMS];
	for (int i = 0; i < r; i++)
		sh[i] = i == a ? eng_numel(p) : 1;
	return eng_reshape(p, r, sh);
}

static eng_tensor *to_u8(onx_node *n, eng_tensor *v)
{
	return eng_cast(eng_clamp(eng_round(v), 0, 255), ENG_U8);
}

eng_status onx_op_quantize(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *sc = onx_in(n, 1), *zp = onx_in(n, 2);
	if (!x || !sc)
		return onx_fail(n, ENG_EINVAL, "x and y_scale are needed");
	if (zp && eng_tensor_dtype(zp) != ENG_U8)
		return onx_fail(n, ENG_ENOTSUP, "zero point type %s is not supported (uint8 is)", eng_dtype_name(eng_tensor_dtype(zp)));
	eng_status s = ENG_OK;
	int r = eng_ndim(x);
	eng_tensor *scb = along(n, sc, r, &s);
	eng_tensor *zpb = zp ? along(n, eng_cast(zp, ENG_F32), r, &s) : NULL;
	if (s)
		return s;
	eng_tensor *v = eng_div(eng_cast(x, ENG_F32), eng_cast(scb, ENG_F32));
	v = eng_round(v);
	if (zpb)
		v = eng_add(v, zpb);
	n->out[0] = to_u8(n, v);
	return onx_check(n, n->out[0]);
}

eng_status onx_op_dequantize(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *sc = onx_in(n, 1), *zp = onx_in(n, 2);
	if (!x || !sc)
		return onx_fail(n, ENG_EINVAL, "x and x_scale are needed");
	eng_dtype dt = eng_tensor_dtype(x);
	if (dt != ENG_U8 && dt != ENG_I32)
		return onx_fail(n, ENG_ENOTSUP, "input type %s is not supported", eng_dtype_name(dt));
	eng_status s = ENG_OK;
	int r = eng_ndim(x);
	eng_tensor *scb = along(n, sc, r, &s);
	eng_tensor *zpb = zp ? along(n, eng_cast(zp, ENG_F32), r, &s) : NULL;
	if (s)
		return s;
	eng_tensor *v = eng_cast(x, ENG_F32);
	if (zpb)
		v = eng_sub(v, zpb);
	n->out[0] = eng_cast(eng_mul(v, scb), eng_tensor_dtype(sc));
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
	eng_tensor *zpf = eng_clamp(eng_round(eng_neg(eng_div(lo, scale))), 0, 255);
	n->out[0] = to_u8(n, eng_add(eng_round(eng_div(xf, scale)), zpf));
	if (n->n_out > 1)
		n->out[1] = scale;
	if (n->n_out > 2)
		n->out[2] = eng_cast(zpf, ENG_U8);
	return onx_check(n, n->out[0]);
}
