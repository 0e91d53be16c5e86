/* ops_scatter.c: ONNX GatherND, ScatterElements (and the older Scatter), ScatterND,
 * TensorScatter and MaxUnpool, through linearised indices and one-hot masks (static shapes; sizes of the masks
 * are bounded). */
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

#define ONX_MAX_MASK ((int64_t)1 << 26) /* elements of a one-hot mask */

static eng_tensor *wrap(onx_node *n, eng_tensor *idx, eng_tensor *dim)
{
	return eng_where(eng_lt(idx, eng_scalar(n->ctx, ENG_I64, 0)), eng_add(idx, dim), idx);
}

/* Linear index into the flattened dims [b, b + k) of data for indices (..., k); negative entries
 * count from the end of their dim. */
static eng_tensor *linear_index(onx_node *n, eng_tensor *data, eng_tensor *idx, int b, int k)
{
	int64_t strides[ENG_MAX_DIMS], dims[ENG_MAX_DIMS], acc = 1;
	for (int j = k - 1; j >= 0; j--) {
		dims[j] = eng_shape(data)[b + j];
		strides[j] = acc;
		acc *= dims[j];
	}
	int q = eng_ndim(idx);
	int64_t sh[ENG_MAX_DIMS];
	for (int i = 0; i < q; i++)
		sh[i] = i == q - 1 ? k : 1;
	eng_tensor *i64 = eng_cast(idx, ENG_I64);
	eng_tensor *d = eng_from_data(n->ctx, ENG_I64, q, sh, dims), *st = eng_from_data(n->ctx, ENG_I64, q, sh, strides);
	int last = q - 1;
	return eng_sum(eng_mul(wrap(n, i64, d), st), &last, 1, false);
}

eng_status onx_op_gather_nd(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *idx = onx_in(n, 1);
	if (!x || !idx)
		return onx_fail(n, ENG_EINVAL, "two inputs are needed");
	int r = eng_ndim(x), q = eng_ndim(idx), b = (int)onx_attr_i(n, "batch_dims", 0);
	if (q < 1 || b < 0 || b >= q || b >= r)
		return onx_fail(n, ENG_ESHAPE, "ranks %d, %d with batch_dims %d", r, q, b);
	int k = (int)eng_shape(idx)[q - 1];
	if (k < 1 || b + k > r)
		return onx_fail(n, ENG_ESHAPE, "indices' last dim %d does not fit data of rank %d", k, r);
	const int64_t *xs = eng_shape(x), *is = eng_shape(idx);
	int64_t B = 1, P = 1, rest = 1, M = 1;
	for (int i = 0; i < b; i++)
		B *= xs[i];
	for (int i = b; i < b + k; i++)
		P *= xs[i];
	for (int i = b + k; i < r; i++)
		rest *= xs[i];
	for (int i = b; i < q - 1; i++)
		M *= is[i];
	eng_tensor *lin = linear_index(n, x, idx, b, k); /* (B..., M...) */
	lin = eng_reshape(lin, 2, (int64_t[]){B, M});
	lin = eng_add(lin, eng_mul_s(eng_index(n->ctx, ENG_I64, 2, (int64_t[]){B, M}, 0), (double)P));
	lin = eng_reshape(lin, 3, (int64_t[]){1, B * M, 1});
	lin = eng_expand(lin, 3, (int64_t[]){1, B * M, rest});
	eng_tensor *g = B * M != 0 && rest != 0 ? eng_gather(eng_reshape(x, 3, (int64_t[]){1, B * P, rest}), 1, lin)
				      : eng_zeros(n->ctx, eng_tensor_dtype(x), 3, (int64_t[]){1, B * M, rest});
	int64_t out[ENG_MAX_DIMS];
	int nd = 0;
	for (int i = 0; i < q - 1; i++)
		out[nd++] = is[i];
	for (int i = b + k; i < r; i++) {
		if (nd == ENG_MAX_DIMS)
			return onx_fail(n, ENG_ENOTSUP, "output rank above %d", ENG_MAX_DIMS);
		out[nd++] = xs[i];
	}
	n->out[0] = eng_reshape(g, nd, out);
	return onx_check(n, n->out[0]);
}

static eng_status reduction(onx_node *n, char *buf, size_t len, const char **red)
{
	*red = onx_attr_s(n, "reduction", "none", buf, len);
	if (strcmp(*red, "none") && strcmp(*red, "add") && strcmp(*red, "mul") && strcmp(*red, "max") && strcmp(*red, "min"))
		return onx_fail(n, ENG_EINVAL, "attribute 'reduction' '%s'", *red);
	return ENG_OK;
}

/* Combine data with the scattered values: val and hit have data's shape. For "mul", "max",
 * "min" val holds the reduction of the updates. */
static eng_tensor *combine(const char *red, eng_tensor *data, eng_tensor *val, eng_tensor *hit)
{
	if (!strcmp(red, "none"))
		return eng_where(hit, val, data);
	if (!strcmp(red, "add"))
		return eng_add(data, val);
	if (!strcmp(red, "mul"))
		return eng_mul(data, val);
	return eng_where(hit, !strcmp(red, "max") ? eng_maximum(data, val) : eng_minimum(data, val), data);
}

/* Reduce u over axis a where mask m holds: sum, product, max or min. */
static eng_tensor *masked_reduce(onx_node *n, const char *red, eng_tensor *m, eng_tensor *u, int a)
{
	eng_dtype dt = eng_tensor_dtype(u);
	double big = eng_dtype_is_float(dt) ? 1.0 / 0.0 : 2147483647.0;
	if (!strcmp(red, "mul"))
		return eng_prod(eng_where(m, u, eng_scalar(n->ctx, dt, 1)), &a, 1, false);
	if (!strcmp(red, "max"))
		return eng_max(eng_where(m, u, eng_scalar(n->ctx, dt, -big)), &a, 1, false);
	if (!strcmp(red, "min"))
		return eng_min(eng_where(m, u, eng_scalar(n->ctx, dt, big)), &a, 1, false);
	return eng_sum(eng_where(m, u, eng_scalar(n->ctx, dt, 0)), &a, 1, false);
}

eng_status onx_op_scatter_elements(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *idx = onx_in(n, 1), *upd = onx_in(n, 2);
	if (!x || !idx || !upd)
		return onx_fail(n, ENG_EINVAL, "three inputs are needed");
	int r = eng_ndim(x), a;
	if (eng_ndim(idx) != r || eng_ndim(upd) != r || r + 1 > ENG_MAX_DIMS)
		return onx_fail(n, ENG_ESHAPE, "data, indices and updates must have one rank (< %d)", ENG_MAX_DIMS);
	if (!onx_axis(onx_attr_i(n, "axis", 0), r, &a))
		return onx_fail(n, ENG_EAXIS, "attribute 'axis' is out of range for rank %d", r);
	char buf[16];
	const char *red;
	eng_status s = reduction(n, buf, sizeof(buf), &red);
	if (s)
		return s;
	const int64_t *xs = eng_shape(x), *is = eng_shape(idx);
	int64_t dim = xs[a], tot = eng_numel(idx) * dim;
	for (int i = 0; i < r; i++)
		if (is[i] > xs[i] || eng_shape(upd)[i] != is[i])
			return onx_fail(n, ENG_ESHAPE, "indices and updates must agree and fit in data");
	if (tot > ONX_MAX_MASK)
		return onx_fail(n, ENG_ENOTSUP, "a one-hot mask of %lld elements", (long long)tot);
	eng_tensor *i64 = eng_cast(idx, ENG_I64);
	i64 = eng_where(eng_lt(i64, eng_scalar(n->ctx, ENG_I64, 0)), eng_add_s(i64, (double)dim), i64);
	int64_t msh[ENG_MAX_DIMS];
	memcpy(msh, is, sizeof(int64_t) * (size_t)r);
	msh[r] = dim;
	eng_tensor *m = eng_eq(eng_unsqueeze(i64, r), eng_index(n->ctx, ENG_I64, r + 1, msh, r)); /* (S..., dim) */
	eng_tensor *u = eng_unsqueeze(upd, r);
	eng_tensor *val = masked_reduce(n, red, m, u, a); /* (S without a..., dim) */
	int ax = a;
	eng_tensor *hit = eng_gt(eng_sum(eng_cast(m, ENG_I32), &ax, 1, false), eng_scalar(n->ctx, ENG_I32, 0));
	/* move the dim axis (last) back to position a */
	int perm[ENG_MAX_DIMS];
	for (int i = 0, k = 0; i < r; i++)
		perm[i] = i == a ? r - 1 : k++;
	val = eng_permute(val, perm);
	hit = eng_permute(hit, perm);
	/* pad the other dims up to data's */
	int64_t p[ENG_MAX_DIMS][2] = {{0}};
	for (int i = 0; i < r; i++)
		p[i][1] = i == a ? 0 : xs[i] - is[i];
	val = eng_pad(val, p);
	hit = eng_pad(hit, p);
	if (!strcmp(red, "mul"))
		val = eng_where(hit, val, eng_scalar(n->ctx, eng_tensor_dtype(x), 1));
	eng_tensor *y = combine(red, x, val, hit);
	n->out[0] = y && eng_tensor_dtype(y) != eng_tensor_dtype(x) ? eng_cast(y, eng_tensor_dtype(x)) : y;
	return onx_check(n, n->out[0]);
}

eng_status onx_op_scatter_nd(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *idx = onx_in(n, 1), *upd = onx_in(n, 2);
	if (!x || !idx || !upd)
		return onx_fail(n, ENG_EINVAL, "three inputs are needed");
	int r = eng_ndim(x), q = eng_ndim(idx);
	int k = q ? (int)eng_shape(idx)[q - 1] : 0;
	if (q < 1 || k < 1 || k > r)
		return onx_fail(n, ENG_ESHAPE, "indices' last dim %d does not fit data of rank %d", k, r);
	char buf[16];
	const char *red;
	eng_status s = reduction(n, buf, sizeof(buf), &red);
	if (s)
		return s;
	const int64_t *xs = eng_shape(x);
	int64_t P = 1, rest = 1, M = 1;
	for (int i = 0; i < k; i++)
		P *= xs[i];
	for (int i = k; i < r; i++)
		rest *= xs[i];
	for (int i = 0; i < q - 1; i++)
		M *= eng_shape(idx)[i];
	if (eng_numel(upd) != M * rest)
		return onx_fail(n, ENG_ESHAPE, "updates hold %lld values, %lld expected", (long long)eng_numel(upd), (long long)(M * rest));
	if (M * P * rest > ONX_MAX_MASK)
		return onx_fail(n, ENG_ENOTSUP, "a one-hot mask of %lld elements", (long long)(M * P * rest));
	eng_tensor *lin = eng_reshape(linear_index(n, x, idx, 0, k), 2, (int64_t[]){M, 1});
	eng_tensor *m = eng_eq(lin, eng_index(n->ctx, ENG_I64, 2, (int64_t[]){1, P}, 1)); /* (M, P) */
	eng_tensor *m3 = eng_reshape(m, 3, (int64_t[]){M, P, 1});
	eng_tensor *u3 = eng_reshape(upd, 3, (int64_t[]){M, 1, rest});
	eng_tensor *val = masked_reduce(n, red, m3, u3, 0); /* (P, rest) */
	int zero = 0;
	eng_tensor *hit = eng_gt(eng_sum(eng_cast(m, ENG_I32), &zero, 1, false), eng_scalar(n->ctx, ENG_I32, 0)); /* (P) */
	hit = eng_expand(eng_reshape(hit, 2, (int64_t[]){P, 1}), 2, (int64_t[]){P, rest});
	if (!strcmp(red, "mul"))
		val = eng_where(hit, val, eng_scalar(n->ctx, eng_tensor_dtype(x), 1));
	eng_tensor *y = combine(red, eng_reshape(x, 2, (int64_t[]){P, rest}), val, hit);
	n->out[0] = y ? eng_reshape(eng_cast(y, eng_tensor_dtype(x)), r, xs) : NULL;
	return onx_check(n, n->out[0]);
}

/* MaxUnpool: X's values placed at the flat positions I (over the whole output tensor) of a
 * zero tensor whose spatial size is output_shape's or (in - 1) * stride - pads + kernel. */
eng_status onx_op_max_unpool(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *idx = onx_in(n, 1);
	if (!x || !idx)
		return onx_fail(n, ENG_EINVAL, "X and I are needed");
	int r = eng_ndim(x), s = r - 2;
	if (s < 1 || s > 3 || eng_numel(idx) != eng_numel(x))
		return onx_fail(n, ENG_ESHAPE, "X must be (N, C, spatial...) and I of its size");
	int64_t k[8], st[8], pads[8], osh[ENG_MAX_DIMS + 1];
	int nk, nst, np, no;
	eng_status e;
	if ((e = onx_attr_ints(n, "kernel_shape", k, 8, &nk)) || (e = onx_attr_ints(n, "strides", st, 8, &nst)) ||
	    (e = onx_attr_ints(n, "pads", pads, 8, &np)) || (e = onx_in_ints(n, 2, osh, ENG_MAX_DIMS + 1, &no)))
		return e;
	if (nk != s || (nst >= 0 && nst != s) || (np >= 0 && np != 2 * s) || (no >= 0 && no != r))
		return onx_fail(n, ENG_EINVAL, "kernel_shape, strides, pads or output_shape disagree with rank %d", r);
	/* the indices count in the inferred shape; an output_shape extends it (zeros at the end) */
	int64_t sh[ENG_MAX_DIMS], P = 1;
	for (int i = 0; i < r; i++) {
		if (i < 2)
			sh[i] = eng_shape(x)[i];
		else {
			int d = i - 2;
			sh[i] = (eng_shape(x)[i] - 1) * (nst >= 0 ? st[d] : 1) - (np >= 0 ? pads[d] + pads[d + s] : 0) + k[d];
		}
		if (sh[i] < 0)
			return onx_fail(n, ENG_ESHAPE, "output dim %d is %lld", i, (long long)sh[i]);
		P *= sh[i];
	}
	int64_t M = eng_numel(x);
	if (M * P > ONX_MAX_MASK)
		return onx_fail(n, ENG_ENOTSUP, "a one-hot mask of %lld elements", (long long)(M * P));
	eng_tensor *lin = eng_reshape(eng_cast(idx, ENG_I64), 2, (int64_t[]){M, 1});
	eng_tensor *m = eng_eq(lin, eng_index(n->ctx, ENG_I64, 2, (int64_t[]){1, P}, 1));
	int zero = 0;
	eng_tensor *v = eng_sum(eng_where(m, eng_reshape(x, 2, (int64_t[]){M, 1}), eng_scalar(n->ctx, eng_tensor_dtype(x), 0)), &zero, 1, false);
	eng_tensor *y = v ? eng_reshape(eng_cast(v, eng_tensor_dtype(x)), r, sh) : NULL;
	if (y && no >= 0) {
		int64_t p[ENG_MAX_DIMS][2] = {{0}};
		for (int i = 0; i < r; i++) {
			if (osh[i] < sh[i] || (i < 2 && osh[i] != sh[i]))
				return onx_fail(n, ENG_ESHAPE, "output_shape[%d] = %lld is smaller than %lld", i, (long long)osh[i], (long long)sh[i]);
			p[i][1] = osh[i] - sh[i];
		}
		y = eng_pad(y, p);
	}
	n->out[0] = y;
	return onx_check(n, n->out[0]);
}

/* TensorScatter (opset 24): a key/value cache update, present = past with update written along
 * `axis` from each batch row's write index (write_indices (B), default 0; "circular" wraps
 * them modulo the cache length): for cache position s the row's j = s - w (mod the length when
 * circular) picks update[.., j, ..] where 0 <= j < the update's length, else past stays. */
eng_status onx_op_tensor_scatter(onx_node *n)
{
	eng_tensor *past = onx_in(n, 0), *upd = onx_in(n, 1), *w = onx_in(n, 2);
	char buf[16];
	const char *mode = onx_attr_s(n, "mode", "linear", buf, sizeof(buf));
	bool circular = !strcmp(mode, "circular");
	if (!circular && strcmp(mode, "linear"))
		return onx_fail(n, ENG_EINVAL, "mode '%s': expected linear or circular", mode);
	if (!past || !upd)
		return onx_fail(n, ENG_EINVAL, "past_cache and update are needed");
	int r = eng_ndim(past), a;
	if (r < 2 || eng_ndim(upd) != r || !onx_axis(onx_attr_i(n, "axis", -2), r, &a) || a == 0)
		return onx_fail(n, ENG_EAXIS, "past_cache and update of the same rank >= 2, axis in range and not the batch's");
	const int64_t *ps = eng_shape(past), *us = eng_shape(upd);
	for (int d = 0; d < r; d++)
		if (d == a ? us[d] > ps[d] : us[d] != ps[d])
			return onx_fail(n, ENG_ESHAPE, "update's dim %d (%lld) does not fit past_cache's (%lld)", d,
					(long long)us[d], (long long)ps[d]);
	if (eng_tensor_dtype(upd) != eng_tensor_dtype(past))
		return onx_fail(n, ENG_EDTYPE, "update must have past_cache's type");
	int64_t B = ps[0], M = ps[a], U = us[a];
	if (w && (eng_ndim(w) != 1 || eng_shape(w)[0] != B || eng_dtype_is_float(eng_tensor_dtype(w))))
		return onx_fail(n, ENG_ESHAPE, "write_indices must be integers of shape (%lld)", (long long)B);
	int64_t wsh[ENG_MAX_DIMS];
	for (int d = 0; d < r; d++)
		wsh[d] = d == 0 ? B : 1;
	eng_tensor *wb = w ? eng_reshape(eng_cast(w, ENG_I64), r, wsh) : eng_zeros(n->ctx, ENG_I64, r, wsh);
	eng_tensor *s = eng_index(n->ctx, ENG_I64, r, ps, a);
	eng_tensor *j = eng_sub(s, wb);
	if (circular) /* ((s - w) mod M + M) mod M: the offset into the update, wrapped */
		j = eng_mod(eng_add_s(eng_mod(j, eng_scalar(n->ctx, ENG_I64, (double)M)), (double)M),
			    eng_scalar(n->ctx, ENG_I64, (double)M));
	eng_tensor *in = eng_and(eng_ge(j, eng_scalar(n->ctx, ENG_I64, 0)), eng_lt(j, eng_scalar(n->ctx, ENG_I64, (double)U)));
	eng_tensor *jc = eng_where(in, j, eng_scalar(n->ctx, ENG_I64, 0));
	n->out[0] = U ? eng_where(in, eng_gather(upd, a, jc), past) : eng_reshape(past, r, ps);
	return onx_check(n, n->out[0]);
}
