/* ops_const.c: ONNX ops that make constants: Constant (value, value_float(s), value_int(s)),
 * ConstantOfShape and Range (their inputs are needed at build time). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/context.h"
#include "onnx_int.h"
#include "ops.h"

eng_status onx_op_constant(onx_node *n)
{
	const Onnx__AttributeProto *a = n->pb->n_attribute == 1 ? n->pb->attribute[0] : NULL;
	if (!a)
		return onx_fail(n, ENG_EINVAL, "exactly one attribute is needed, not %zu", n->pb->n_attribute);
	const char *nm = a->name;
	eng_tensor *t = NULL;
	if (!strcmp(nm, "value")) {
		if (!a->t)
			return onx_fail(n, ENG_EINVAL, "attribute 'value' holds no tensor");
		char err[512];
		eng_status s = onx_tensor_decode(n->ctx, a->t, NULL, onx_model_flags(n), onx_model_narrowed(n), &t, err, sizeof(err));
		if (s)
			return onx_fail(n, s, "attribute 'value': %s", err);
	} else if (!strcmp(nm, "value_float")) {
		float v = a->f;
		t = eng_from_data(n->ctx, ENG_F32, 0, NULL, &v);
	} else if (!strcmp(nm, "value_int")) {
		int64_t v = a->i;
		t = eng_from_data(n->ctx, ENG_I64, 0, NULL, &v);
	} else if (!strcmp(nm, "value_floats")) {
		int64_t k = (int64_t)a->n_floats;
		t = eng_from_data(n->ctx, ENG_F32, 1, &k, a->floats);
	} else if (!strcmp(nm, "value_ints")) {
		int64_t k = (int64_t)a->n_ints;
		t = eng_from_data(n->ctx, ENG_I64, 1, &k, a->ints);
	} else
		return onx_fail(n, ENG_ENOTSUP, "attribute '%.100s' is not supported", nm);
	n->out[0] = t;
	n->out_const = true;
	return onx_check(n, t);
}

eng_status onx_op_constant_of_shape(onx_node *n)
{
	int64_t sh[ENG_MAX_DIMS + 1];
	int cnt;
	eng_status s = onx_in_ints(n, 0, sh, ENG_MAX_DIMS + 1, &cnt);
	if (s)
		return s;
	if (cnt < 0 || cnt > ENG_MAX_DIMS)
		return onx_fail(n, ENG_ENOTSUP, "the shape has %d dims", cnt);
	for (int i = 0; i < cnt; i++)
		if (sh[i] < 0)
			return onx_fail(n, ENG_ESHAPE, "shape[%d] = %lld", i, (long long)sh[i]);
	eng_dtype dt = ENG_F32;
	double v = 0;
	const Onnx__AttributeProto *a = onx_attr(n, "value");
	if (a) {
		if (!a->t)
			return onx_fail(n, ENG_EINVAL, "attribute 'value' holds no tensor");
		char err[512];
		eng_tensor *t;
		if ((s = onx_tensor_decode(n->ctx, a->t, NULL, onx_model_flags(n), onx_model_narrowed(n), &t, err, sizeof(err))))
			return onx_fail(n, s, "attribute 'value': %s", err);
		if (eng_numel(t) != 1) {
			eng_tensor_free(t);
			return onx_fail(n, ENG_EINVAL, "attribute 'value' must hold one value");
		}
		dt = eng_tensor_dtype(t);
		if (dt == ENG_I64 && a->t->n_int64_data != 1 && !a->t->has_raw_data) {
			eng_tensor_free(t);
			return onx_fail(n, ENG_EINVAL, "attribute 'value': bad int64 data");
		}
		v = eng_item(t);
		eng_tensor_free(t);
	}
	uint64_t numel = 1;
	for (int i = 0; i < cnt; i++)
		numel = sh[i] && numel > (UINT64_MAX >> 8) / (uint64_t)sh[i] ? UINT64_MAX >> 8 : numel * (uint64_t)sh[i];
	if (numel * eng_dtype_size(dt) > ((uint64_t)1 << 34))
		return onx_fail(n, ENG_ERANGE, "the shape describes too many elements");
	n->out[0] = eng_full(n->ctx, dt, cnt, sh, v);
	n->out_const = true;
	return onx_check(n, n->out[0]);
}

eng_status onx_op_range(onx_node *n)
{
	double st, lim, d;
	bool p0, p1, p2;
	eng_status s;
	if ((s = onx_in_scalar(n, 0, &st, &p0)) || (s = onx_in_scalar(n, 1, &lim, &p1)) || (s = onx_in_scalar(n, 2, &d, &p2)))
		return s;
	if (!p0 || !p1 || !p2)
		return onx_fail(n, ENG_EINVAL, "start, limit and delta are needed");
	if (d == 0 || isnan(d) || isnan(st) || isnan(lim))
		return onx_fail(n, ENG_EINVAL, "delta 0 or NaN bounds");
	eng_dtype dt = eng_tensor_dtype(onx_in(n, 0));
	double cnt = ceil((lim - st) / d);
	if (cnt > (double)((uint64_t)1 << 32))
		return onx_fail(n, ENG_ERANGE, "%g elements", cnt);
	if (cnt <= 0) {
		n->out[0] = eng_zeros(n->ctx, dt, 1, (int64_t[]){0});
	} else {
		/* start + i * delta in the input's dtype (as ONNX computes it) */
		int64_t k = (int64_t)cnt;
		eng_tensor *i = eng_arange(n->ctx, eng_dtype_is_float(dt) ? dt : ENG_I64, 0, (double)k, 1);
		eng_tensor *y = eng_add_s(eng_mul_s(i, d), st);
		n->out[0] = eng_cast(y, dt);
	}
	return onx_check(n, n->out[0]);
}
