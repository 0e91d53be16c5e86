/* ops_index.c: ONNX indexing ops, Gather and GatherElements (negative indices count from the
 * end), and Pad (constant mode; negative pads crop). */
#include <math.h>
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

/* idx with negative entries moved into [0, dim). */
static eng_tensor *wrap_idx(onx_node *n, const eng_tensor *idx, int64_t dim)
{
	eng_dtype dt = eng_tensor_dtype(idx);
	eng_tensor *z = eng_scalar(n->ctx, dt, 0);
	return eng_where(eng_lt(idx, z), eng_add_s(idx, (double)dim), idx);
}

/* Gather's and GatherElements' operands: data, integer indices and the axis. */
static eng_status gather_args(onx_node *n, eng_tensor **x, eng_tensor **idx, int *a)
{
	*x = onx_in(n, 0), *idx = onx_in(n, 1);
	if (!*x || !*idx)
		return onx_fail(n, ENG_EINVAL, "two inputs are needed");
	if (!eng_dtype_is_int(eng_tensor_dtype(*idx)))
		return onx_fail(n, ENG_EDTYPE, "indices must be int32 or int64");
	if (!onx_axis(onx_attr_i(n, "axis", 0), eng_ndim(*x), a))
		return onx_fail(n, ENG_EAXIS, "attribute 'axis' is out of range for rank %d", eng_ndim(*x));
	return ENG_OK;
}

eng_status onx_op_gather(onx_node *n)
{
	eng_tensor *x, *idx;
	int a;
	eng_status st = gather_args(n, &x, &idx, &a);
	if (st)
		return st;
	int r = eng_ndim(x);
	int q = eng_ndim(idx);
	if (r - 1 + q > ENG_MAX_DIMS)
		return onx_fail(n, ENG_ENOTSUP, "output rank %d (at most %d)", r - 1 + q, ENG_MAX_DIMS);
	const int64_t *xs = eng_shape(x);
	int64_t pre = 1, post = 1, dim = xs[a], k = eng_numel(idx);
	for (int i = 0; i < a; i++)
		pre *= xs[i];
	for (int i = a + 1; i < r; i++)
		post *= xs[i];
	/* x as (pre, dim, post), indices as (1, k, 1) expanded to (pre, k, post) */
	eng_tensor *x3 = eng_reshape(x, 3, (int64_t[]){pre, dim, post}), *g;
	if (n->in[1]->is_const && q <= 1 && k >= 1 && k <= 16) {
		/* constant indices (e.g. a state's layer): slices of x, views, where a gather compares
		 * every index with every row */
		int64_t iv[16];
		int cnt;
		eng_status s = onx_in_ints(n, 1, iv, 16, &cnt);
		if (s)
			return s;
		eng_tensor *parts[16];
		for (int i = 0; i < cnt; i++) {
			if (iv[i] < -dim || iv[i] >= dim)
				return onx_fail(n, ENG_EINVAL, "index %lld is out of range for %lld", (long long)iv[i], (long long)dim);
			int64_t at = iv[i] < 0 ? iv[i] + dim : iv[i];
			parts[i] = eng_slice(x3, 1, at, at + 1, 1);
		}
		g = cnt == 1 ? parts[0] : eng_cat(parts, cnt, 1);
	} else {
		eng_tensor *i3 = eng_reshape(wrap_idx(n, idx, dim), 3, (int64_t[]){1, k, 1});
		i3 = eng_expand(i3, 3, (int64_t[]){pre, k, post});
		g = k == 0 || pre == 0 || post == 0 ? eng_zeros(n->ctx, eng_tensor_dtype(x), 3, (int64_t[]){pre, k, post})
						      : eng_gather(x3, 1, i3);
	}
	int64_t out[ENG_MAX_DIMS];
	int nd = 0;
	for (int i = 0; i < a; i++)
		out[nd++] = xs[i];
	for (int i = 0; i < q; i++)
		out[nd++] = eng_shape(idx)[i];
	for (int i = a + 1; i < r; i++)
		out[nd++] = xs[i];
	n->out[0] = eng_reshape(g, nd, out);
	return onx_check(n, n->out[0]);
}

eng_status onx_op_gather_elements(onx_node *n)
{
	eng_tensor *x, *idx;
	int a;
	eng_status st = gather_args(n, &x, &idx, &a);
	if (st)
		return st;
	n->out[0] = eng_gather(x, a, wrap_idx(n, idx, eng_shape(x)[a]));
	return onx_check(n, n->out[0]);
}

/* Pads that repeat the edge (edge), mirror without it (reflect) or wrap around (wrap), one axis
 * at a time by concatenating slices. */
static eng_tensor *pad_from_edges(onx_node *n, eng_tensor *v, int64_t (*pads)[2], const char *mode)
{
	for (int d = 0; d < eng_ndim(v) && v; d++) {
		int64_t b = pads[d][0], e = pads[d][1], len = eng_shape(v)[d];
		if (!b && !e)
			continue;
		if (mode[0] == 'r' ? (b > len - 1 || e > len - 1) : (len == 0 || (mode[0] == 'w' && (b > len || e > len)))) {
			onx_fail(n, ENG_ESHAPE, "pads (%lld, %lld) do not fit axis %d of size %lld in mode %s", (long long)b, (long long)e, d,
				 (long long)len, mode);
			return NULL;
		}
		eng_tensor *parts[3];
		int k = 0;
		int64_t sh[ENG_MAX_DIMS];
		memcpy(sh, eng_shape(v), sizeof(int64_t) * (size_t)eng_ndim(v));
		if (b) {
			eng_tensor *l;
			if (mode[0] == 'e') {
				sh[d] = b;
				l = eng_expand(eng_slice(v, d, 0, 1, 1), eng_ndim(v), sh);
			} else if (mode[0] == 'r')
				l = eng_flip(eng_slice(v, d, 1, b + 1, 1), &d, 1);
			else
				l = eng_slice(v, d, len - b, len, 1);
			parts[k++] = l;
		}
		parts[k++] = v;
		if (e) {
			eng_tensor *r;
			if (mode[0] == 'e') {
				sh[d] = e;
				r = eng_expand(eng_slice(v, d, len - 1, len, 1), eng_ndim(v), sh);
			} else if (mode[0] == 'r')
				r = eng_flip(eng_slice(v, d, len - 1 - e, len - 1, 1), &d, 1);
			else
				r = eng_slice(v, d, 0, e, 1);
			parts[k++] = r;
		}
		v = eng_cat(parts, k, d);
	}
	return v;
}

eng_status onx_op_pad(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	int r = eng_ndim(x);
	char buf[16];
	const char *mode = onx_attr_s(n, "mode", "constant", buf, sizeof(buf));
	if (strcmp(mode, "constant") && strcmp(mode, "edge") && strcmp(mode, "reflect") && strcmp(mode, "wrap"))
		return onx_fail(n, ENG_EINVAL, "attribute 'mode' '%s'", mode);
	int64_t p[2 * ENG_MAX_DIMS + 1], axv[ENG_MAX_DIMS + 1];
	int cnt, nax = -1;
	double value = 0;
	eng_status s;
	if (n->opset < 11) {
		if ((s = onx_attr_ints(n, n->opset < 2 ? "paddings" : "pads", p, 2 * ENG_MAX_DIMS + 1, &cnt)))
			return s;
		value = onx_attr_f(n, "value", 0);
	} else {
		bool present;
		if ((s = onx_in_ints(n, 1, p, 2 * ENG_MAX_DIMS + 1, &cnt)) || (s = onx_in_scalar(n, 2, &value, &present)) ||
		    (s = onx_in_ints(n, 3, axv, ENG_MAX_DIMS + 1, &nax)))
			return s;
	}
	int axes[ENG_MAX_DIMS];
	if (nax < 0) {
		nax = r;
		for (int i = 0; i < r; i++)
			axes[i] = i;
	} else
		for (int i = 0; i < nax; i++)
			if (!onx_axis(axv[i], r, &axes[i]))
				return onx_fail(n, ENG_EAXIS, "axis %lld is out of range", (long long)axv[i]);
	if (cnt != 2 * nax)
		return onx_fail(n, ENG_EINVAL, "%d pads for %d axes", cnt, nax);
	int64_t pads[ENG_MAX_DIMS][2] = {{0}}, crop[ENG_MAX_DIMS][2];
	bool any_crop = false;
	for (int i = 0; i < r; i++)
		crop[i][0] = 0, crop[i][1] = eng_shape(x)[i];
	for (int i = 0; i < nax; i++) {
		int d = axes[i];
		int64_t b = p[i], e = p[i + nax];
		if (b < 0)
			crop[d][0] = -b, any_crop = true;
		else
			pads[d][0] = b;
		if (e < 0)
			crop[d][1] = eng_shape(x)[d] + e, any_crop = true;
		else
			pads[d][1] = e;
		if (crop[d][1] < crop[d][0])
			return onx_fail(n, ENG_ESHAPE, "pads crop axis %d below zero", d);
	}
	eng_tensor *v = any_crop ? eng_shrink(x, crop) : (eng_tensor *)x;
	if (strcmp(mode, "constant")) {
		n->out[0] = pad_from_edges(n, v, pads, mode);
		return onx_check(n, n->out[0]);
	}
	eng_tensor *y = eng_pad(v, pads);
	if (value != 0 && y) {
		eng_tensor *mask = eng_pad(eng_ones(n->ctx, ENG_BOOL, r, eng_shape(v)), pads);
		y = eng_where(mask, y, eng_scalar(n->ctx, eng_tensor_dtype(x), value));
	}
	n->out[0] = y;
	return onx_check(n, y);
}
