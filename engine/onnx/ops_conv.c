/* ops_conv.c: ONNX Conv, ConvTranspose and pooling (Max, Average, Lp; 1-D to 3-D), with pads
 * made explicit (asymmetric, auto_pad SAME_UPPER/SAME_LOWER/VALID, ceil_mode), and the global
 * poolings of any rank. */
#include <math.h>
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

typedef struct win {
	int s;                       /* spatial dims (1 to 3) */
	int64_t in[3], k[3], st[3], dil[3], pb[3], pe[3];
} win;

/* Window attributes of node n for input spatial sizes in and kernel k (already in w). */
static eng_status window(onx_node *n, win *w, bool ceil_mode)
{
	int64_t v[8];
	int cnt;
	eng_status s;
	for (int i = 0; i < w->s; i++)
		w->st[i] = w->dil[i] = 1, w->pb[i] = w->pe[i] = 0;
	if ((s = onx_attr_ints(n, "strides", v, 8, &cnt)))
		return s;
	if (cnt >= 0 && cnt != w->s)
		return onx_fail(n, ENG_EINVAL, "attribute 'strides' has %d entries", cnt);
	for (int i = 0; i < cnt; i++)
		w->st[i] = v[i];
	if ((s = onx_attr_ints(n, "dilations", v, 8, &cnt)))
		return s;
	if (cnt >= 0 && cnt != w->s)
		return onx_fail(n, ENG_EINVAL, "attribute 'dilations' has %d entries", cnt);
	for (int i = 0; i < cnt; i++)
		w->dil[i] = v[i];
	if ((s = onx_attr_ints(n, "pads", v, 8, &cnt)))
		return s;
	if (cnt >= 0 && cnt != 2 * w->s)
		return onx_fail(n, ENG_EINVAL, "attribute 'pads' has %d entries", cnt);
	for (int i = 0; i < cnt; i++)
		*(i < w->s ? &w->pb[i] : &w->pe[i - w->s]) = v[i];
	for (int i = 0; i < w->s; i++)
		if (w->st[i] < 1 || w->dil[i] < 1 || w->pb[i] < 0 || w->pe[i] < 0 || w->k[i] < 1)
			return onx_fail(n, ENG_EINVAL, "strides, dilations and kernel must be >= 1, pads >= 0");
	char buf[16];
	const char *ap = onx_attr_s(n, "auto_pad", "NOTSET", buf, sizeof(buf));
	if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
		for (int i = 0; i < w->s; i++) {
			int64_t out = (w->in[i] + w->st[i] - 1) / w->st[i];
			int64_t tot = (out - 1) * w->st[i] + (w->k[i] - 1) * w->dil[i] + 1 - w->in[i];
			tot = tot > 0 ? tot : 0;
			w->pb[i] = ap[5] == 'U' ? tot / 2 : tot - tot / 2;
			w->pe[i] = tot - w->pb[i];
		}
	} else if (!strcmp(ap, "VALID")) {
		for (int i = 0; i < w->s; i++)
			w->pb[i] = w->pe[i] = 0;
	} else if (strcmp(ap, "NOTSET"))
		return onx_fail(n, ENG_EINVAL, "attribute 'auto_pad' '%s'", ap);
	for (int i = 0; i < w->s; i++) {
		int64_t ext = (w->k[i] - 1) * w->dil[i] + 1, span = w->in[i] + w->pb[i] + w->pe[i];
		if (span < ext)
			return onx_fail(n, ENG_ESHAPE, "the window (%lld) is larger than the padded input (%lld)", (long long)ext, (long long)span);
		if (ceil_mode) {
			int64_t out = (span - ext + w->st[i] - 1) / w->st[i] + 1;
			if ((out - 1) * w->st[i] >= w->in[i] + w->pb[i])
				out--;
			int64_t need = (out - 1) * w->st[i] + ext - span;
			if (need > 0)
				w->pe[i] += need; /* the caller's mask keeps this extra pad out of averages */
		}
	}
	return ENG_OK;
}

/* x (N, C, spatial) as 4-D (1-D inputs get a unit H axis). */
static eng_tensor *as4d(const eng_tensor *x)
{
	if (eng_ndim(x) == 4)
		return (eng_tensor *)x;
	const int64_t *s = eng_shape(x);
	return eng_reshape(x, 4, (int64_t[]){s[0], s[1], 1, s[2]});
}

static void pads4(const win *w, int64_t (*p)[2])
{
	memset(p, 0, sizeof(int64_t) * 8);
	for (int i = 0; i < w->s; i++) {
		int d = 4 - w->s + i;
		p[d][0] = w->pb[i];
		p[d][1] = w->pe[i];
	}
}

/* Pads (begin, end) of the spatial axes of x (rank 2 + w->s); negative values crop. */
static eng_tensor *pad_spatial(eng_tensor *x, int s, const int64_t *b, const int64_t *e)
{
	int r = eng_ndim(x);
	int64_t p[ENG_MAX_DIMS][2] = {{0}}, c[ENG_MAX_DIMS][2];
	bool crop = false;
	for (int d = 0; d < r; d++)
		c[d][0] = 0, c[d][1] = eng_shape(x)[d];
	for (int i = 0; i < s; i++) {
		int d = 2 + i;
		if (b[i] < 0)
			c[d][0] = -b[i], crop = true;
		else
			p[d][0] = b[i];
		if (e[i] < 0)
			c[d][1] += e[i], crop = true;
		else
			p[d][1] = e[i];
	}
	if (crop)
		x = eng_shrink(x, c);
	return eng_pad(x, p);
}

/* Pooling of a padded xp (N, C, spatial...) as a max or sum over the kernel's offsets, each a
 * strided slice (any rank, dilations): prod(kernel) slices. */
static eng_tensor *pool_slices(onx_node *n, eng_tensor *xp, const win *w, bool is_max)
{
	int64_t o[3], off[3] = {0}, total = 1;
	for (int i = 0; i < w->s; i++) {
		int64_t ext = (w->k[i] - 1) * w->dil[i] + 1;
		o[i] = (eng_shape(xp)[2 + i] - ext) / w->st[i] + 1;
		total *= w->k[i];
	}
	bool phase = w->s <= 2 && total > 16;
	for (int i = 0; i < w->s; i++)
		phase &= w->st[i] % w->dil[i] == 0;
	if (phase) {
		/* every window starts on a multiple of the dilation: pool the phase-0 sub-grid with the
		 * undilated kernel and stride / dilation */
		eng_tensor *g = xp;
		for (int i = 0; i < w->s; i++)
			g = eng_slice(g, 2 + i, 0, INT64_MAX, w->dil[i]);
		eng_tensor *g4 = as4d(g);
		int kern[2] = {w->s == 2 ? (int)w->k[0] : 1, (int)w->k[w->s - 1]};
		int str[2] = {w->s == 2 ? (int)(w->st[0] / w->dil[0]) : 1, (int)(w->st[w->s - 1] / w->dil[w->s - 1])};
		eng_tensor *y = is_max ? eng_max_pool2d(g4, kern, str, NULL)
				       : eng_mul_s(eng_avg_pool2d(g4, kern, str, NULL), (double)(kern[0] * kern[1]));
		if (!y)
			return NULL;
		int64_t rg[4][2] = {{0, eng_shape(y)[0]}, {0, eng_shape(y)[1]}, {0, w->s == 2 ? o[0] : 1}, {0, o[w->s - 1]}};
		y = eng_shrink(y, rg);
		if (y && w->s == 1)
			y = eng_reshape(y, 3, (int64_t[]){eng_shape(y)[0], eng_shape(y)[1], o[0]});
		return y;
	}
	if (total > 4096) {
		onx_fail(n, ENG_ENOTSUP, "a kernel of %lld elements with dilations or 3-D is not supported", (long long)total);
		return NULL;
	}
	eng_tensor *acc = NULL;
	for (int64_t t = 0; t < total; t++) {
		eng_tensor *v = xp;
		for (int i = 0; i < w->s; i++) {
			int64_t st = off[i] * w->dil[i];
			v = eng_slice(v, 2 + i, st, st + (o[i] - 1) * w->st[i] + 1, w->st[i]);
		}
		acc = !acc ? v : is_max ? eng_maximum(acc, v) : eng_add(acc, v);
		for (int i = w->s - 1; i >= 0; i--) { /* next offset */
			if (++off[i] < w->k[i])
				break;
			off[i] = 0;
		}
	}
	return acc;
}

/* 3-D convolution as a sum over the depth taps of 2-D convolutions with depth folded into the
 * batch. xp is padded already. */
static eng_tensor *conv3d(const win *w, eng_tensor *xp, eng_tensor *wt, int group)
{
	const int64_t *xs = eng_shape(xp), *ws = eng_shape(wt);
	int64_t N = xs[0], C = xs[1], Hp = xs[3], Wp = xs[4], M = ws[0];
	int64_t Do = (xs[2] - ((w->k[0] - 1) * w->dil[0] + 1)) / w->st[0] + 1;
	int stride[2] = {(int)w->st[1], (int)w->st[2]}, dil[2] = {(int)w->dil[1], (int)w->dil[2]};
	eng_tensor *acc = NULL;
	for (int64_t kd = 0; kd < w->k[0]; kd++) {
		int64_t st = kd * w->dil[0];
		eng_tensor *xs2 = eng_slice(xp, 2, st, st + (Do - 1) * w->st[0] + 1, w->st[0]);
		xs2 = eng_reshape(eng_permute(xs2, (int[]){0, 2, 1, 3, 4}), 4, (int64_t[]){N * Do, C, Hp, Wp});
		eng_tensor *wk = eng_reshape(eng_slice(wt, 2, kd, kd + 1, 1), 4, (int64_t[]){M, ws[1], ws[3], ws[4]});
		eng_tensor *y = eng_conv2d(xs2, wk, NULL, stride, (int[]){0, 0}, dil, group);
		acc = acc ? eng_add(acc, y) : y;
	}
	if (!acc)
		return NULL;
	const int64_t *ys = eng_shape(acc);
	acc = eng_reshape(acc, 5, (int64_t[]){N, Do, M, ys[2], ys[3]});
	return eng_permute(acc, (int[]){0, 2, 1, 3, 4});
}

/* Whether a 1-D convolution (x (N, C, L), constant weight (M, C, K), no groups or dilation, pads
 * and stride in w) is better run by conv1d_dense: an input not much longer than the kernel (the
 * dense weight's extra zeros cost at most half the work again) and a weight of at most 2^20. */
static bool dense_fits(onx_node *n, const eng_tensor *x, const eng_tensor *wt, const win *w, int64_t group)
{
	if (eng_ndim(x) != 3 || group != 1 || w->dil[0] != 1 || !onx_derived_ok(n, 1) ||
	    eng_tensor_dtype(x) != eng_tensor_dtype(wt) || !eng_dtype_is_float(eng_tensor_dtype(x)))
		return false;
	int64_t L = eng_shape(x)[2], K = w->k[0], O = (L + w->pb[0] + w->pe[0] - K) / w->st[0] + 1;
	return 2 * L <= 3 * K && O <= 64 && eng_shape(x)[1] * L * eng_shape(wt)[0] * O <= ((int64_t)1 << 20);
}

/* That convolution as one matmul (N, C * L) x (C * L, O * M): the dense weight puts each output
 * position's taps where its window reads the input (zeros where the window lies in the padding),
 * computed once (onx_derived_put). The windows' reduction would run a few outputs per row. */
static eng_tensor *conv1d_dense(onx_node *n, eng_tensor *x, eng_tensor *wt, const win *w)
{
	const int64_t *xs = eng_shape(x), *ws = eng_shape(wt);
	int64_t N = xs[0], C = xs[1], L = xs[2], M = ws[0], K = ws[2];
	int64_t O = (L + w->pb[0] + w->pe[0] - K) / w->st[0] + 1;
	eng_tensor *wd = onx_derived_get(n);
	if (!wd) {
		eng_tensor *slabs[64];
		for (int64_t o = 0; o < O; o++) { /* slab o (M, C, L): w's taps from x's o * st - pb on */
			int64_t at = o * w->st[0] - w->pb[0];
			slabs[o] = pad_spatial(wt, 1, (int64_t[]){at}, (int64_t[]){L - at - K});
		}
		/* (C, L, O, M): the output channels are the columns' fast axis, the one vectorised */
		eng_tensor *d = eng_permute(eng_stack(slabs, (int)O, 3), (int[]){1, 2, 3, 0});
		wd = onx_derived_put(n, eng_reshape(d, 2, (int64_t[]){C * L, O * M}));
	}
	eng_tensor *y = eng_matmul(eng_reshape(x, 2, (int64_t[]){N, C * L}), wd);
	return eng_permute(eng_reshape(y, 3, (int64_t[]){N, O, M}), (int[]){0, 2, 1});
}

/* A convolution striding sx > 1 along the width (x4 padded (N, C, H, W), w4 (M, C/g, KH, KW))
 * as one of stride 1 there over the input split into sx column phases, stored ((N, C * sx, H,
 * W / sx), channel c * sx + p holding columns p, p + sx, ...) by the weight split the same way
 * ((M, C/g * sx, KH, ceil(KW / sx)), zero taps past KW). The output row then reads the input
 * contiguously and vectorises, where every other column does not. Returns (N, M, OH, OW). */
static eng_tensor *conv_phases(onx_node *n, eng_tensor *x4, eng_tensor *w4, eng_tensor *b, const int st[2],
			       const int dil[2], int group)
{
	const int64_t *xs = eng_shape(x4), *ws = eng_shape(w4);
	int64_t sx = st[1], N = xs[0], C = xs[1], H = xs[2], Wp = (xs[3] + sx - 1) / sx * sx;
	int64_t M = ws[0], cg = ws[1], KH = ws[2], KW = ws[3], K2 = (KW + sx - 1) / sx;
	int64_t ow = (xs[3] - KW) / sx + 1;
	int64_t px[4][2] = {{0, 0}, {0, 0}, {0, 0}, {0, Wp - xs[3]}};
	eng_tensor *xp = eng_reshape(eng_pad(x4, px), 5, (int64_t[]){N, C, H, Wp / sx, sx});
	xp = eng_contiguous(eng_reshape(eng_permute(xp, (int[]){0, 1, 4, 2, 3}), 4, (int64_t[]){N, C * sx, H, Wp / sx}));
	eng_tensor *wp = onx_derived_ok(n, 1) ? onx_derived_get(n) : NULL;
	if (!wp) {
		int64_t pw[4][2] = {{0, 0}, {0, 0}, {0, 0}, {0, K2 * sx - KW}};
		wp = eng_reshape(eng_pad(w4, pw), 5, (int64_t[]){M, cg, KH, K2, sx});
		wp = eng_reshape(eng_permute(wp, (int[]){0, 1, 4, 2, 3}), 4, (int64_t[]){M, cg * sx, KH, K2});
		if (onx_derived_ok(n, 1))
			wp = onx_derived_put(n, wp);
	}
	eng_tensor *y = eng_conv2d(xp, wp, b, (int[]){st[0], 1}, (int[]){0, 0}, (int[]){dil[0], 1}, group);
	if (!y || eng_shape(y)[3] == ow)
		return y;
	int64_t keep[4][2] = {{0, N}, {0, M}, {0, eng_shape(y)[2]}, {0, ow}};
	return eng_shrink(y, keep);
}

eng_status onx_op_conv(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *wt = onx_in(n, 1), *b = onx_in(n, 2);
	if (!x || !wt)
		return onx_fail(n, ENG_EINVAL, "X and W are needed");
	int r = eng_ndim(x);
	if (r < 3 || r > 5)
		return onx_fail(n, ENG_ENOTSUP, "%d-D convolution is not supported (1-D to 3-D are)", r - 2);
	if (eng_ndim(wt) != r)
		return onx_fail(n, ENG_ESHAPE, "W has rank %d, X %d", eng_ndim(wt), r);
	win w = {.s = r - 2};
	int64_t ks[8];
	int cnt;
	eng_status s = onx_attr_ints(n, "kernel_shape", ks, 8, &cnt);
	if (s)
		return s;
	for (int i = 0; i < w.s; i++) {
		w.in[i] = eng_shape(x)[2 + i];
		w.k[i] = eng_shape(wt)[2 + i];
		if (cnt >= 0 && (cnt != w.s || ks[i] != w.k[i]))
			return onx_fail(n, ENG_ESHAPE, "attribute 'kernel_shape' disagrees with W");
	}
	if ((s = window(n, &w, false)))
		return s;
	int64_t group = onx_attr_i(n, "group", 1);
	if (group < 1 || eng_shape(x)[1] % group || eng_shape(x)[1] / group != eng_shape(wt)[1])
		return onx_fail(n, ENG_ESHAPE, "attribute 'group' %lld disagrees with X and W channels", (long long)group);
	if (r == 5) {
		eng_tensor *y = conv3d(&w, pad_spatial(x, 3, w.pb, w.pe), wt, (int)group);
		if (y && b)
			y = eng_add(y, eng_reshape(b, 5, (int64_t[]){1, eng_numel(b), 1, 1, 1}));
		n->out[0] = y ? eng_cast(y, eng_tensor_dtype(x)) : y;
		return onx_check(n, n->out[0]);
	}
	if (dense_fits(n, x, wt, &w, group)) {
		eng_tensor *y = conv1d_dense(n, x, wt, &w);
		if (y && b)
			y = eng_add(y, eng_reshape(b, 3, (int64_t[]){1, eng_numel(b), 1}));
		n->out[0] = y;
		return onx_check(n, y);
	}
	int64_t p[4][2];
	pads4(&w, p);
	eng_tensor *x4 = eng_pad(as4d(x), p);
	eng_tensor *w4 = as4d(wt);
	int stride[2] = {w.s == 2 ? (int)w.st[0] : 1, (int)w.st[w.s - 1]};
	int dil[2] = {w.s == 2 ? (int)w.dil[0] : 1, (int)w.dil[w.s - 1]};
	eng_tensor *y;
	if (stride[1] > 1 && stride[1] <= 4 && dil[1] == 1 && (eng_shape(x4)[3] - eng_shape(w4)[3]) / stride[1] + 1 >= 8)
		y = conv_phases(n, x4, w4, b, stride, dil, (int)group);
	else
		y = eng_conv2d(x4, w4, b, stride, (int[]){0, 0}, dil, (int)group);
	if (y && r == 3)
		y = eng_reshape(y, 3, (int64_t[]){eng_shape(y)[0], eng_shape(y)[1], eng_shape(y)[3]});
	n->out[0] = y ? eng_cast(y, eng_tensor_dtype(x)) : y;
	return onx_check(n, n->out[0]);
}

/* Pooling of any rank and dilation through pool_slices (masks as in onx_op_pool). */
static eng_status pool_general(onx_node *n, eng_tensor *x, const win *w, bool is_max)
{
	eng_dtype dt = eng_tensor_dtype(x);
	int r = eng_ndim(x);
	eng_tensor *y;
	if (is_max) {
		double lo = eng_dtype_is_float(dt) ? -INFINITY : dt == ENG_U8 ? 0 : NAN;
		if (isnan(lo))
			return onx_fail(n, ENG_ENOTSUP, "type %s is not supported", eng_dtype_name(dt));
		eng_tensor *mask = pad_spatial(eng_ones(n->ctx, ENG_BOOL, r, eng_shape(x)), w->s, w->pb, w->pe);
		eng_tensor *xp = eng_where(mask, pad_spatial(x, w->s, w->pb, w->pe), eng_scalar(n->ctx, dt, lo));
		y = pool_slices(n, xp, w, true);
	} else {
		if (!eng_dtype_is_float(dt))
			return onx_fail(n, ENG_ENOTSUP, "type %s is not supported", eng_dtype_name(dt));
		eng_tensor *mask;
		if (onx_attr_i(n, "count_include_pad", 0)) {
			win dec = {.s = w->s};
			for (int i = 0; i < w->s; i++)
				dec.in[i] = w->in[i], dec.k[i] = w->k[i];
			eng_status s = window(n, &dec, false);
			if (s)
				return s;
			int64_t big[ENG_MAX_DIMS], eb[3], ee[3];
			for (int i = 0; i < r; i++)
				big[i] = eng_shape(x)[i] + (i >= 2 ? dec.pb[i - 2] + dec.pe[i - 2] : 0);
			for (int i = 0; i < w->s; i++)
				eb[i] = w->pb[i] - dec.pb[i], ee[i] = w->pe[i] - dec.pe[i];
			mask = pad_spatial(eng_ones(n->ctx, dt, r, big), w->s, eb, ee);
		} else
			mask = pad_spatial(eng_ones(n->ctx, dt, r, eng_shape(x)), w->s, w->pb, w->pe);
		eng_tensor *sum = pool_slices(n, pad_spatial(x, w->s, w->pb, w->pe), w, false);
		eng_tensor *cnt = sum ? pool_slices(n, mask, w, false) : NULL;
		y = cnt ? eng_div(sum, cnt) : NULL;
	}
	n->out[0] = y ? eng_cast(y, dt) : y;
	return onx_check(n, n->out[0]);
}

/* MaxPool with its Indices output (flat positions in the input, row-major or, with
 * storage_order 1, column-major over the spatial dims): a running max over the kernel's offsets,
 * the first maximum kept. */
static eng_status max_pool_indices(onx_node *n, eng_tensor *x, const win *w)
{
	eng_dtype dt = eng_tensor_dtype(x);
	int r = eng_ndim(x);
	if (!eng_dtype_is_float(dt) || w->s != 2)
		return onx_fail(n, ENG_ENOTSUP, "output Indices for %s %d-D pooling is not supported", eng_dtype_name(dt), w->s);
	const int64_t *xs = eng_shape(x);
	int64_t C = xs[1], H = xs[2], W = xs[3];
	bool colmajor = onx_attr_i(n, "storage_order", 0) != 0;
	eng_tensor *mask = pad_spatial(eng_ones(n->ctx, ENG_BOOL, r, xs), 2, w->pb, w->pe);
	eng_tensor *xp = eng_where(mask, pad_spatial(x, 2, w->pb, w->pe), eng_scalar(n->ctx, dt, -INFINITY));
	const int64_t *ps = eng_shape(xp);
	eng_tensor *in_ = eng_index(n->ctx, ENG_I64, r, ps, 0), *ic = eng_index(n->ctx, ENG_I64, r, ps, 1);
	eng_tensor *ih = eng_add_s(eng_index(n->ctx, ENG_I64, r, ps, 2), (double)-w->pb[0]);
	eng_tensor *iw = eng_add_s(eng_index(n->ctx, ENG_I64, r, ps, 3), (double)-w->pb[1]);
	eng_tensor *sp = colmajor ? eng_add(eng_mul_s(iw, (double)H), ih) : eng_add(eng_mul_s(ih, (double)W), iw);
	eng_tensor *flat = eng_add(eng_mul_s(eng_add(eng_mul_s(in_, (double)C), ic), (double)(H * W)), sp);
	int64_t o[2];
	for (int i = 0; i < 2; i++)
		o[i] = (ps[2 + i] - ((w->k[i] - 1) * w->dil[i] + 1)) / w->st[i] + 1;
	eng_tensor *best = NULL, *bidx = NULL;
	for (int64_t a = 0; a < w->k[0]; a++)
		for (int64_t b = 0; b < w->k[1]; b++) {
			eng_tensor *v = xp, *iv = flat;
			int64_t st0 = a * w->dil[0], st1 = b * w->dil[1];
			v = eng_slice(eng_slice(v, 2, st0, st0 + (o[0] - 1) * w->st[0] + 1, w->st[0]), 3, st1, st1 + (o[1] - 1) * w->st[1] + 1, w->st[1]);
			iv = eng_slice(eng_slice(iv, 2, st0, st0 + (o[0] - 1) * w->st[0] + 1, w->st[0]), 3, st1, st1 + (o[1] - 1) * w->st[1] + 1, w->st[1]);
			if (!best) {
				best = v;
				bidx = iv;
				continue;
			}
			eng_tensor *upd = eng_gt(v, best);
			best = eng_where(upd, v, best);
			bidx = eng_where(upd, iv, bidx);
		}
	n->out[0] = best;
	n->out[1] = bidx;
	return onx_check(n, bidx);
}

eng_status onx_op_pool(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	bool is_max = !strcmp(n->pb->op_type, "MaxPool");
	bool want_idx = is_max && n->n_out > 1 && *n->pb->output[1];
	int r = eng_ndim(x);
	if (r < 3 || r > 5)
		return onx_fail(n, ENG_ENOTSUP, "%d-D pooling is not supported (1-D to 3-D are)", r - 2);
	win w = {.s = r - 2};
	int64_t ks[8];
	int cnt;
	eng_status s = onx_attr_ints(n, "kernel_shape", ks, 8, &cnt);
	if (s)
		return s;
	if (cnt != w.s)
		return onx_fail(n, ENG_EINVAL, "attribute 'kernel_shape' must have %d entries", w.s);
	for (int i = 0; i < w.s; i++)
		w.in[i] = eng_shape(x)[2 + i], w.k[i] = ks[i];
	if ((s = window(n, &w, onx_attr_i(n, "ceil_mode", 0) != 0)))
		return s;
	if (want_idx)
		return max_pool_indices(n, x, &w);
	if (!strcmp(n->pb->op_type, "LpPool")) { /* (sum over the window of |x|^p)^(1/p), pads as 0 */
		double p = (double)onx_attr_i(n, "p", 2);
		if (p < 1 || !eng_dtype_is_float(eng_tensor_dtype(x)))
			return onx_fail(n, ENG_ENOTSUP, "p = %g or type %s is not supported", p, eng_dtype_name(eng_tensor_dtype(x)));
		eng_tensor *sum = pool_slices(n, pad_spatial(eng_pow_s(eng_abs(x), p), w.s, w.pb, w.pe), &w, false);
		n->out[0] = sum ? eng_cast(eng_pow_s(sum, 1.0 / p), eng_tensor_dtype(x)) : NULL;
		return onx_check(n, n->out[0]);
	}
	bool general = w.s == 3;
	for (int i = 0; i < w.s; i++)
		general |= w.dil[i] != 1;
	if (general)
		return pool_general(n, x, &w, is_max);
	int64_t p[4][2];
	pads4(&w, p);
	eng_tensor *x4 = as4d(x);
	eng_dtype dt = eng_tensor_dtype(x);
	int kern[2] = {w.s == 2 ? (int)w.k[0] : 1, (int)w.k[w.s - 1]};
	int stride[2] = {w.s == 2 ? (int)w.st[0] : 1, (int)w.st[w.s - 1]};
	eng_tensor *y;
	if (is_max) {
		double lo = eng_dtype_is_float(dt) ? -INFINITY : dt == ENG_U8 ? 0 : NAN;
		if (isnan(lo))
			return onx_fail(n, ENG_ENOTSUP, "type %s is not supported", eng_dtype_name(dt));
		eng_tensor *mask = eng_pad(eng_ones(n->ctx, ENG_BOOL, 4, eng_shape(x4)), p);
		eng_tensor *xp = eng_where(mask, eng_pad(x4, p), eng_scalar(n->ctx, dt, lo));
		y = eng_max_pool2d(xp, kern, stride, NULL);
	} else {
		if (!eng_dtype_is_float(dt))
			return onx_fail(n, ENG_ENOTSUP, "type %s is not supported", eng_dtype_name(dt));
		/* sum / count, both as averages over the same windows (the kernel area cancels) */
		eng_tensor *ones = eng_ones(n->ctx, dt, 4, eng_shape(x4));
		eng_tensor *mask;
		if (onx_attr_i(n, "count_include_pad", 0)) {
			/* declared pads count, the extra ceil_mode pad does not */
			int64_t dp[4][2], extra[4][2];
			pads4(&w, extra);
			/* recompute the declared pads */
			win dec = {.s = w.s};
			for (int i = 0; i < w.s; i++)
				dec.in[i] = w.in[i], dec.k[i] = w.k[i];
			if ((s = window(n, &dec, false)))
				return s;
			pads4(&dec, dp);
			for (int i = 0; i < 4; i++)
				extra[i][0] -= dp[i][0], extra[i][1] -= dp[i][1];
			int64_t big[4];
			for (int i = 0; i < 4; i++)
				big[i] = eng_shape(x4)[i] + dp[i][0] + dp[i][1];
			mask = eng_pad(eng_ones(n->ctx, dt, 4, big), extra);
		} else
			mask = eng_pad(ones, p);
		eng_tensor *sum = eng_avg_pool2d(eng_pad(x4, p), kern, stride, NULL);
		eng_tensor *c = eng_avg_pool2d(mask, kern, stride, NULL);
		y = eng_div(sum, c);
	}
	if (y && r == 3)
		y = eng_reshape(y, 3, (int64_t[]){eng_shape(y)[0], eng_shape(y)[1], eng_shape(y)[3]});
	n->out[0] = y ? eng_cast(y, dt) : y;
	return onx_check(n, n->out[0]);
}

eng_status onx_op_global_pool(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	int r = eng_ndim(x), ax[ENG_MAX_DIMS], nax = 0;
	for (int i = 2; i < r; i++)
		ax[nax++] = i;
	if (!nax)
		return onx_fail(n, ENG_ESHAPE, "the input needs spatial dims");
	const char *op = n->pb->op_type;
	eng_tensor *y;
	if (!strcmp(op, "GlobalLpPool")) {
		double p = (double)onx_attr_i(n, "p", 2);
		if (p < 1 || !eng_dtype_is_float(eng_tensor_dtype(x)))
			return onx_fail(n, ENG_ENOTSUP, "p = %g or type %s is not supported", p, eng_dtype_name(eng_tensor_dtype(x)));
		y = eng_pow_s(eng_sum(eng_pow_s(eng_abs(x), p), ax, nax, true), 1.0 / p);
	} else
		y = !strcmp(op, "GlobalMaxPool") ? eng_max(x, ax, nax, true) : eng_mean(x, ax, nax, true);
	n->out[0] = y ? eng_cast(y, eng_tensor_dtype(x)) : y;
	return onx_check(n, n->out[0]);
}

/* 3-D ConvTranspose: the zero-stuffed input (a stride-1 view of it through an 8-D reshape),
 * padded by the kernel's extent less the pads, convolved (conv3d) with the flipped kernel. */
static eng_status conv_transpose3d(onx_node *n, eng_tensor *x, eng_tensor *wt, eng_tensor *b, const int64_t *st,
				   const int64_t *dil, const int64_t *pb, const int64_t *pe, const int64_t *op, int g)
{
	const int64_t *xs = eng_shape(x), *ws = eng_shape(wt);
	int64_t N = xs[0], C = xs[1], D = xs[2], H = xs[3], W = xs[4];
	eng_tensor *z = eng_reshape(x, 8, (int64_t[]){N, C, D, 1, H, 1, W, 1});
	z = eng_pad(z, (const int64_t[][2]){{0, 0}, {0, 0}, {0, 0}, {0, st[0] - 1}, {0, 0}, {0, st[1] - 1}, {0, 0}, {0, st[2] - 1}});
	z = eng_reshape(z, 5, (int64_t[]){N, C, D * st[0], H * st[1], W * st[2]});
	z = eng_shrink(z, (const int64_t[][2]){{0, N}, {0, C}, {0, (D - 1) * st[0] + 1}, {0, (H - 1) * st[1] + 1}, {0, (W - 1) * st[2] + 1}});
	int64_t bb[3], ee[3];
	win w = {.s = 3};
	for (int i = 0; i < 3; i++) {
		int64_t ext = (ws[2 + i] - 1) * dil[i] + 1;
		bb[i] = ext - 1 - pb[i];
		ee[i] = ext - 1 - pe[i] + op[i];
		w.k[i] = ws[2 + i], w.st[i] = 1, w.dil[i] = dil[i];
	}
	z = pad_spatial(z, 3, bb, ee);
	int64_t Mg = ws[1], Cg = C / g;
	eng_tensor *wf = eng_flip(wt, (int[]){2, 3, 4}, 3);
	wf = eng_reshape(wf, 6, (int64_t[]){g, Cg, Mg, ws[2], ws[3], ws[4]});
	wf = eng_reshape(eng_permute(wf, (int[]){0, 2, 1, 3, 4, 5}), 5, (int64_t[]){g * Mg, Cg, ws[2], ws[3], ws[4]});
	eng_tensor *y = z && wf ? conv3d(&w, z, wf, g) : NULL;
	if (y && b)
		y = eng_add(y, eng_reshape(b, 5, (int64_t[]){1, eng_numel(b), 1, 1, 1}));
	n->out[0] = y ? eng_cast(y, eng_tensor_dtype(x)) : y;
	return onx_check(n, n->out[0]);
}

/* ConvTranspose (1-D, 2-D) as a convolution of the zero-stuffed input with the flipped kernel,
 * in and out channels swapped per group; pads (or output_shape / auto_pad) crop the result. */
eng_status onx_op_conv_transpose(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *wt = onx_in(n, 1), *b = onx_in(n, 2);
	if (!x || !wt)
		return onx_fail(n, ENG_EINVAL, "X and W are needed");
	int r = eng_ndim(x);
	if (r < 3 || r > 5)
		return onx_fail(n, ENG_ENOTSUP, "%d-D transposed convolution is not supported (1-D to 3-D are)", r - 2);
	if (eng_ndim(wt) != r)
		return onx_fail(n, ENG_ESHAPE, "W has rank %d, X %d", eng_ndim(wt), r);
	int s = r - 2;
	int64_t group = onx_attr_i(n, "group", 1);
	int64_t C = eng_shape(x)[1];
	if (group < 1 || C % group || eng_shape(wt)[0] != C)
		return onx_fail(n, ENG_ESHAPE, "attribute 'group' %lld disagrees with X and W channels", (long long)group);
	int64_t st[3], dil[3], pb[3], pe[3], op[3], osh[3], k[3], in[3], v[8];
	int cnt, ocnt;
	eng_status e;
	for (int i = 0; i < s; i++) {
		st[i] = dil[i] = 1, pb[i] = pe[i] = op[i] = 0;
		k[i] = eng_shape(wt)[2 + i], in[i] = eng_shape(x)[2 + i];
	}
	const char *names[] = {"strides", "dilations", "output_padding"};
	int64_t *dst[] = {st, dil, op};
	for (int a = 0; a < 3; a++) {
		if ((e = onx_attr_ints(n, names[a], v, 8, &cnt)))
			return e;
		if (cnt >= 0 && cnt != s)
			return onx_fail(n, ENG_EINVAL, "attribute '%s' has %d entries", names[a], cnt);
		for (int i = 0; i < cnt; i++)
			dst[a][i] = v[i];
	}
	if ((e = onx_attr_ints(n, "kernel_shape", v, 8, &cnt)))
		return e;
	for (int i = 0; i < cnt; i++)
		if (cnt != s || v[i] != k[i])
			return onx_fail(n, ENG_ESHAPE, "attribute 'kernel_shape' disagrees with W");
	if ((e = onx_attr_ints(n, "pads", v, 8, &cnt)))
		return e;
	if (cnt >= 0 && cnt != 2 * s)
		return onx_fail(n, ENG_EINVAL, "attribute 'pads' has %d entries", cnt);
	for (int i = 0; i < cnt; i++)
		*(i < s ? &pb[i] : &pe[i - s]) = v[i];
	if ((e = onx_attr_ints(n, "output_shape", osh, 3, &ocnt)))
		return e;
	char buf[16];
	const char *ap = onx_attr_s(n, "auto_pad", "NOTSET", buf, sizeof(buf));
	bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
	if (ocnt >= 0 && ocnt != s)
		return onx_fail(n, ENG_ENOTSUP, "attribute 'output_shape' with %d entries (the spatial dims only are supported)", ocnt);
	for (int i = 0; i < s; i++) {
		if (st[i] < 1 || dil[i] < 1 || op[i] < 0 || pb[i] < 0 || pe[i] < 0)
			return onx_fail(n, ENG_EINVAL, "strides and dilations must be >= 1, pads >= 0");
		int64_t ext = (k[i] - 1) * dil[i] + 1, full = st[i] * (in[i] - 1) + op[i] + ext;
		if (ocnt >= 0 || same) {
			/* ONNX's rule: SAME_UPPER puts the smaller half (floor) first, otherwise last; a
			 * negative total (an output larger than the full one) extends it with zeros */
			int64_t want = ocnt >= 0 ? osh[i] : in[i] * st[i], tot = full - want;
			int64_t half = tot >= 0 ? tot / 2 : -((-tot + 1) / 2); /* floor(tot / 2) */
			bool upper = !strcmp(ap, "SAME_UPPER");
			pb[i] = upper ? half : tot - half;
			pe[i] = tot - pb[i];
		} else if (!strcmp(ap, "VALID"))
			pb[i] = pe[i] = 0;
	}
	if (s == 3)
		return conv_transpose3d(n, x, wt, b, st, dil, pb, pe, op, (int)group);
	/* zero-stuffed input, as 4-D */
	eng_tensor *x4 = as4d(x), *w4 = as4d(wt);
	int64_t S[2] = {s == 2 ? st[0] : 1, st[s - 1]}, D[2] = {s == 2 ? dil[0] : 1, dil[s - 1]};
	int64_t K[2] = {eng_shape(w4)[2], eng_shape(w4)[3]}, PB[2] = {s == 2 ? pb[0] : 0, pb[s - 1]},
		PE[2] = {s == 2 ? pe[0] : 0, pe[s - 1]}, OP[2] = {s == 2 ? op[0] : 0, op[s - 1]};
	const int64_t *xs = eng_shape(x4);
	int64_t N = xs[0], H = xs[2], W = xs[3];
	eng_tensor *z = eng_reshape(x4, 6, (int64_t[]){N, C, H, 1, W, 1});
	z = eng_pad(z, (const int64_t[][2]){{0, 0}, {0, 0}, {0, 0}, {0, S[0] - 1}, {0, 0}, {0, S[1] - 1}});
	z = eng_reshape(z, 4, (int64_t[]){N, C, H * S[0], W * S[1]});
	z = eng_shrink(z, (const int64_t[][2]){{0, N}, {0, C}, {0, (H - 1) * S[0] + 1}, {0, (W - 1) * S[1] + 1}});
	int64_t bb[2], ee[2];
	for (int i = 0; i < 2; i++) {
		int64_t ext = (K[i] - 1) * D[i] + 1;
		bb[i] = ext - 1 - PB[i];
		ee[i] = ext - 1 - PE[i] + OP[i];
	}
	z = pad_spatial(z, 2, bb, ee);
	/* kernel: (C, M/g, kh, kw) -> flipped, (M, C/g, kh, kw) */
	int64_t g = group, Mg = eng_shape(w4)[1], Cg = C / g;
	int fl[2] = {2, 3};
	eng_tensor *wf = eng_flip(w4, fl, 2);
	wf = eng_reshape(wf, 5, (int64_t[]){g, Cg, Mg, K[0], K[1]});
	wf = eng_reshape(eng_permute(wf, (int[]){0, 2, 1, 3, 4}), 4, (int64_t[]){g * Mg, Cg, K[0], K[1]});
	int dl[2] = {(int)D[0], (int)D[1]};
	eng_tensor *y = eng_conv2d(z, wf, b, (int[]){1, 1}, (int[]){0, 0}, dl, (int)g);
	if (y && r == 3)
		y = eng_reshape(y, 3, (int64_t[]){eng_shape(y)[0], eng_shape(y)[1], eng_shape(y)[3]});
	n->out[0] = y ? eng_cast(y, eng_tensor_dtype(x)) : y;
	return onx_check(n, n->out[0]);
}
