/* ops_misc.c: smaller ONNX ops built from masks and movement: Trilu, EyeLike, OneHot, Shrink,
 * DepthToSpace/SpaceToDepth, LRN, MeanVarianceNormalization, LpNormalization, CenterCropPad. */
#include <math.h>
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

eng_status onx_op_trilu(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	int r = eng_ndim(x);
	if (r < 2)
		return onx_fail(n, ENG_ESHAPE, "the input needs at least 2 dims");
	int64_t k[2] = {0};
	int cnt;
	eng_status s = onx_in_ints(n, 1, k, 2, &cnt);
	if (s)
		return s;
	if (cnt > 1)
		return onx_fail(n, ENG_EINVAL, "k must be a scalar");
	eng_tensor *row = eng_index(n->ctx, ENG_I64, r, eng_shape(x), r - 2);
	eng_tensor *col = eng_index(n->ctx, ENG_I64, r, eng_shape(x), r - 1);
	eng_tensor *d = eng_sub(col, row), *kk = eng_scalar(n->ctx, ENG_I64, (double)(cnt > 0 ? k[0] : 0));
	eng_tensor *mask = onx_attr_i(n, "upper", 1) ? eng_ge(d, kk) : eng_le(d, kk);
	n->out[0] = eng_where(mask, x, eng_scalar(n->ctx, eng_tensor_dtype(x), 0));
	return onx_check(n, n->out[0]);
}

eng_status onx_op_eyelike(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	if (eng_ndim(x) != 2)
		return onx_fail(n, ENG_ESHAPE, "the input must be 2-D");
	eng_dtype dt = eng_tensor_dtype(x);
	if (onx_attr(n, "dtype") && !onx_node_dtype(n, (int)onx_attr_i(n, "dtype", 0), &dt))
		return onx_fail(n, ENG_ENOTSUP, "attribute 'dtype' %s is not supported", onx_type_name((int)onx_attr_i(n, "dtype", 0)));
	eng_tensor *row = eng_index(n->ctx, ENG_I64, 2, eng_shape(x), 0);
	eng_tensor *col = eng_index(n->ctx, ENG_I64, 2, eng_shape(x), 1);
	eng_tensor *mask = eng_eq(eng_sub(col, row), eng_scalar(n->ctx, ENG_I64, (double)onx_attr_i(n, "k", 0)));
	n->out[0] = eng_cast(mask, dt);
	return onx_check(n, n->out[0]);
}

eng_status onx_op_onehot(onx_node *n)
{
	eng_tensor *idx = onx_in(n, 0), *vals = onx_in(n, 2);
	if (!idx || !vals)
		return onx_fail(n, ENG_EINVAL, "indices, depth and values are needed");
	double depth;
	bool present;
	eng_status s = onx_in_scalar(n, 1, &depth, &present);
	if (s)
		return s;
	if (!present || depth < 1 || depth > (double)(1 << 30))
		return onx_fail(n, ENG_EINVAL, "depth %g", depth);
	if (eng_numel(vals) != 2)
		return onx_fail(n, ENG_ESHAPE, "values must hold 2 entries");
	int r = eng_ndim(idx) + 1, a;
	if (r > ENG_MAX_DIMS || !onx_axis(onx_attr_i(n, "axis", -1), r, &a))
		return onx_fail(n, ENG_EAXIS, "attribute 'axis' is out of range for rank %d", r);
	int64_t dep = (int64_t)depth;
	eng_tensor *i = eng_cast(idx, eng_dtype_is_float(eng_tensor_dtype(idx)) ? ENG_I64 : ENG_I64);
	i = eng_where(eng_lt(i, eng_scalar(n->ctx, ENG_I64, 0)), eng_add_s(i, (double)dep), i);
	eng_tensor *iu = eng_unsqueeze(i, a);
	int64_t sh[ENG_MAX_DIMS];
	for (int d = 0, k = 0; d < r; d++)
		sh[d] = d == a ? dep : eng_shape(idx)[k++];
	eng_tensor *mask = eng_eq(eng_index(n->ctx, ENG_I64, r, sh, a), iu);
	eng_tensor *v = eng_reshape(vals, 1, (int64_t[]){2});
	eng_tensor *off = eng_reshape(eng_shrink(v, (const int64_t[][2]){{0, 1}}), 0, NULL);
	eng_tensor *on = eng_reshape(eng_shrink(v, (const int64_t[][2]){{1, 2}}), 0, NULL);
	n->out[0] = eng_where(mask, on, off);
	return onx_check(n, n->out[0]);
}

eng_status onx_op_shrink(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	double l = onx_attr_f(n, "lambd", 0.5), b = onx_attr_f(n, "bias", 0);
	eng_dtype dt = eng_tensor_dtype(x);
	eng_tensor *y = eng_where(eng_lt(x, eng_scalar(n->ctx, dt, -l)), eng_add_s(x, b),
				  eng_where(eng_gt(x, eng_scalar(n->ctx, dt, l)), eng_sub_s(x, b), eng_scalar(n->ctx, dt, 0)));
	n->out[0] = y ? eng_cast(y, dt) : y;
	return onx_check(n, n->out[0]);
}

eng_status onx_op_depth_space(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	if (eng_ndim(x) != 4)
		return onx_fail(n, ENG_ESHAPE, "the input must be 4-D");
	int64_t b = onx_attr_i(n, "blocksize", 0);
	const int64_t *s = eng_shape(x);
	int64_t N = s[0], C = s[1], H = s[2], W = s[3];
	if (b < 1)
		return onx_fail(n, ENG_EINVAL, "attribute 'blocksize' %lld", (long long)b);
	eng_tensor *y;
	if (!strcmp(n->pb->op_type, "DepthToSpace")) {
		if (C % (b * b))
			return onx_fail(n, ENG_ESHAPE, "channels %lld are not a multiple of blocksize^2", (long long)C);
		char buf[8];
		bool crd = !strcmp(onx_attr_s(n, "mode", "DCR", buf, sizeof(buf)), "CRD");
		int64_t c = C / (b * b);
		if (crd)
			y = eng_permute(eng_reshape(x, 6, (int64_t[]){N, c, b, b, H, W}), (int[]){0, 1, 4, 2, 5, 3});
		else
			y = eng_permute(eng_reshape(x, 6, (int64_t[]){N, b, b, c, H, W}), (int[]){0, 3, 4, 1, 5, 2});
		y = eng_reshape(y, 4, (int64_t[]){N, c, H * b, W * b});
	} else {
		if (H % b || W % b)
			return onx_fail(n, ENG_ESHAPE, "height and width must be multiples of blocksize");
		char buf[8];
		const char *mode = onx_attr_s(n, "mode", "DCR", buf, sizeof(buf)); /* opset 28 */
		if (strcmp(mode, "DCR") && strcmp(mode, "CRD"))
			return onx_fail(n, ENG_EINVAL, "attribute 'mode' '%s' (DCR or CRD)", mode);
		const int *perm = !strcmp(mode, "CRD") ? (const int[]){0, 1, 3, 5, 2, 4} : (const int[]){0, 3, 5, 1, 2, 4};
		y = eng_permute(eng_reshape(x, 6, (int64_t[]){N, C, H / b, b, W / b, b}), perm);
		y = eng_reshape(y, 4, (int64_t[]){N, C * b * b, H / b, W / b});
	}
	n->out[0] = y;
	return onx_check(n, y);
}

eng_status onx_op_lrn(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	int r = eng_ndim(x);
	int64_t size = onx_attr_i(n, "size", 0);
	if (r < 3 || size < 1)
		return onx_fail(n, ENG_EINVAL, "needs rank >= 3 and attribute 'size' >= 1");
	double alpha = onx_attr_f(n, "alpha", 1e-4), beta = onx_attr_f(n, "beta", 0.75), bias = onx_attr_f(n, "bias", 1.0);
	int64_t lo = (size - 1) / 2, hi = size - 1 - lo, C = eng_shape(x)[1];
	int64_t p[ENG_MAX_DIMS][2] = {{0}};
	p[1][0] = lo;
	p[1][1] = hi;
	eng_tensor *sq = eng_pad(eng_mul(x, x), p), *acc = NULL;
	for (int64_t i = 0; i < size; i++) {
		eng_tensor *sl = eng_slice(sq, 1, i, i + C, 1);
		acc = acc ? eng_add(acc, sl) : sl;
	}
	eng_tensor *den = eng_pow_s(eng_add_s(eng_mul_s(acc, alpha / (double)size), bias), beta);
	n->out[0] = eng_cast(eng_div(x, den), eng_tensor_dtype(x));
	return onx_check(n, n->out[0]);
}

eng_status onx_op_mvn(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	int64_t raw[ENG_MAX_DIMS + 1];
	int cnt, r = eng_ndim(x), ax[ENG_MAX_DIMS], nax = 0;
	eng_status s = onx_attr_ints(n, "axes", raw, ENG_MAX_DIMS + 1, &cnt);
	if (s)
		return s;
	if (cnt < 0) {
		raw[0] = 0, raw[1] = 2, raw[2] = 3;
		cnt = 3;
	}
	for (int i = 0; i < cnt; i++)
		if (!onx_axis(raw[i], r, &ax[nax++]))
			return onx_fail(n, ENG_EAXIS, "axis %lld is out of range", (long long)raw[i]);
	eng_tensor *mean = eng_mean(x, ax, nax, true), *d = eng_sub(x, mean);
	eng_tensor *sd = eng_sqrt(eng_mean(eng_mul(d, d), ax, nax, true));
	n->out[0] = eng_cast(eng_div(d, eng_add_s(sd, 1e-9)), eng_tensor_dtype(x));
	return onx_check(n, n->out[0]);
}

/* element (i, j) of the last two axes of x, those axes dropped */
static eng_tensor *el(eng_tensor *x, int i, int j)
{
	int r = eng_ndim(x);
	eng_tensor *v = eng_slice(eng_slice(x, r - 2, i, i + 1, 1), r - 1, j, j + 1, 1);
	return eng_reshape(v, r - 2, eng_shape(x));
}

/* Det of (..., n, n) for n <= 3 by the explicit formulas. */
eng_status onx_op_det(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	int r = eng_ndim(x);
	if (r < 2 || eng_shape(x)[r - 1] != eng_shape(x)[r - 2])
		return onx_fail(n, ENG_ESHAPE, "the input must be (..., n, n)");
	int64_t k = eng_shape(x)[r - 1];
	eng_tensor *y;
	if (k == 1)
		y = el(x, 0, 0);
	else if (k == 2)
		y = eng_sub(eng_mul(el(x, 0, 0), el(x, 1, 1)), eng_mul(el(x, 0, 1), el(x, 1, 0)));
	else if (k == 3) {
		eng_tensor *a = eng_mul(el(x, 0, 0), eng_sub(eng_mul(el(x, 1, 1), el(x, 2, 2)), eng_mul(el(x, 1, 2), el(x, 2, 1))));
		eng_tensor *b = eng_mul(el(x, 0, 1), eng_sub(eng_mul(el(x, 1, 0), el(x, 2, 2)), eng_mul(el(x, 1, 2), el(x, 2, 0))));
		eng_tensor *c = eng_mul(el(x, 0, 2), eng_sub(eng_mul(el(x, 1, 0), el(x, 2, 1)), eng_mul(el(x, 1, 1), el(x, 2, 0))));
		y = eng_add(eng_sub(a, b), c);
	} else
		return onx_fail(n, ENG_ENOTSUP, "matrices of size %lld (at most 3)", (long long)k);
	n->out[0] = y;
	return onx_check(n, y);
}

/* x / ||x||_p along axis (p 1 or 2); a zero norm gives zeros. */
eng_status onx_op_lpnorm(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	int a;
	int64_t p = onx_attr_i(n, "p", 2);
	if (!onx_axis(onx_attr_i(n, "axis", -1), eng_ndim(x), &a))
		return onx_fail(n, ENG_EAXIS, "attribute 'axis' is out of range");
	if (p != 1 && p != 2)
		return onx_fail(n, ENG_EINVAL, "attribute 'p' must be 1 or 2, not %lld", (long long)p);
	eng_dtype dt = eng_tensor_dtype(x);
	if (!eng_dtype_is_float(dt))
		return onx_fail(n, ENG_ENOTSUP, "input of type %s is not supported", eng_dtype_name(dt));
	eng_tensor *xf = eng_cast(x, ENG_F32);
	eng_tensor *norm = p == 1 ? eng_sum(eng_abs(xf), &a, 1, true) : eng_sqrt(eng_sum(eng_mul(xf, xf), &a, 1, true));
	eng_tensor *zero = eng_eq(norm, eng_scalar(n->ctx, ENG_F32, 0));
	eng_tensor *y = eng_where(zero, eng_scalar(n->ctx, ENG_F32, 0), eng_div(xf, eng_where(zero, eng_scalar(n->ctx, ENG_F32, 1), norm)));
	n->out[0] = eng_cast(y, dt);
	return onx_check(n, n->out[0]);
}

/* Each axis named (default: all) cut to, or zero-padded to, the size asked, centred: a cut
 * starts at floor((size - want) / 2); a pad's odd pixel goes to the end. */
eng_status onx_op_center_crop_pad(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	int r = eng_ndim(x), cnt, nax;
	int64_t want[ENG_MAX_DIMS + 1], raw[ENG_MAX_DIMS + 1];
	eng_status s = onx_in_ints(n, 1, want, ENG_MAX_DIMS + 1, &cnt);
	if (s)
		return s;
	if ((s = onx_attr_ints(n, "axes", raw, ENG_MAX_DIMS + 1, &nax)))
		return s;
	if (nax < 0)
		for (nax = 0; nax < r; nax++)
			raw[nax] = nax;
	if (cnt != nax)
		return onx_fail(n, ENG_ESHAPE, "shape holds %d sizes for %d axes", cnt, nax);
	int64_t cut[ENG_MAX_DIMS][2], pad[ENG_MAX_DIMS][2] = {{0}};
	for (int i = 0; i < r; i++)
		cut[i][0] = 0, cut[i][1] = eng_shape(x)[i];
	bool seen[ENG_MAX_DIMS] = {false};
	for (int k = 0; k < nax; k++) {
		int a;
		if (!onx_axis(raw[k], r, &a) || seen[a])
			return onx_fail(n, ENG_EAXIS, "axis %lld is out of range or repeated", (long long)raw[k]);
		seen[a] = true;
		int64_t have = eng_shape(x)[a], w = want[k];
		if (w < 0 || w > ((int64_t)1 << 31))
			return onx_fail(n, ENG_ESHAPE, "a size of %lld", (long long)w);
		if (w < have)
			cut[a][0] = (have - w) / 2, cut[a][1] = cut[a][0] + w;
		else
			pad[a][0] = (w - have) / 2, pad[a][1] = w - have - pad[a][0];
	}
	n->out[0] = eng_pad(eng_shrink(x, cut), pad);
	return onx_check(n, n->out[0]);
}
