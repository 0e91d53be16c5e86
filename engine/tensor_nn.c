/* tensor_nn.c: neural-network functions: matmul, linear, conv2d, pooling, one_hot, gather,
 * embedding, layernorm and sparse cross-entropy, each a broadcast product plus one reduction. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "composite.h"

/* ---- shape helpers (all NULL-propagating) ---- */

/* x with nold axes starting at ax replaced by the nnew sizes in ins. */
static eng_tensor *reshape_at(const eng_tensor *x, int ax, int nold, const int64_t *ins, int nnew)
{
	if (!x)
		return NULL;
	const eng_node *n = x->node;
	int64_t shape[ENG_MAX_DIMS];
	int k = 0;
	if (n->ndim - nold + nnew > ENG_MAX_DIMS) {
		eng_set_error(x->ctx, ENG_ERANGE, "reshape: more than %d dims", ENG_MAX_DIMS);
		return NULL;
	}
	for (int i = 0; i < ax; i++)
		shape[k++] = n->shape[i];
	for (int i = 0; i < nnew; i++)
		shape[k++] = ins[i];
	for (int i = ax + nold; i < n->ndim; i++)
		shape[k++] = n->shape[i];
	return eng_reshape(x, k, shape);
}

/* x restricted to [begin, end) on axis ax. */
static eng_tensor *shrink_at(const eng_tensor *x, int ax, int64_t begin, int64_t end)
{
	if (!x)
		return NULL;
	int64_t r[ENG_MAX_DIMS][2];
	for (int i = 0; i < x->node->ndim; i++)
		r[i][0] = 0, r[i][1] = x->node->shape[i];
	r[ax][0] = begin, r[ax][1] = end;
	return eng_shrink(x, (const int64_t(*)[2])r);
}

/* x with zeros added on axis ax. */
static eng_tensor *pad_at(const eng_tensor *x, int ax, int64_t before, int64_t after)
{
	if (!x)
		return NULL;
	int64_t p[ENG_MAX_DIMS][2];
	memset(p, 0, sizeof(p));
	p[ax][0] = before, p[ax][1] = after;
	return eng_pad(x, (const int64_t(*)[2])p);
}

/* x expanded to size e on axis ax (which has size 1). */
static eng_tensor *expand_at(const eng_tensor *x, int ax, int64_t e)
{
	if (!x)
		return NULL;
	int64_t s[ENG_MAX_DIMS];
	for (int i = 0; i < x->node->ndim; i++)
		s[i] = i == ax ? e : -1;
	return eng_expand(x, x->node->ndim, s);
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* ---- sliding windows (movement ops only) ---- */

/* Number of windows of K taps, dilation d, stride s over n elements (0 if none fits). */
static int64_t window_count(int64_t n, int64_t k, int64_t s, int64_t d)
{
	int64_t span = d * (k - 1) + 1;
	return n < span ? 0 : (n - span) / s + 1;
}

/* Replace axis ax (size n) of x by two axes (O, K) with y[.., o, k, ..] = x[.., o*s + k*d, ..].
 * Windows that do not overlap (d = 1, K <= s): reshape the axis into (O, s) and keep K columns.
 * Otherwise tile the axis R times, flatten, and re-cut the flat run into K rows of width
 * w = d (mod n): row k then starts at element k*d, and keeping every s-th of its first O*s
 * entries gives the windows. Only reshape/expand/shrink are used, so no index is ever guarded,
 * and the source index simplifies to (k*w + o*s) mod n = k*d + o*s. Call inside a scope. */
static eng_tensor *window_axis(const eng_tensor *x, int ax, int64_t k, int64_t s, int64_t d)
{
	if (!x)
		return NULL;
	int64_t n = x->node->shape[ax], o = window_count(n, k, s, d), sz[2];
	if ((d == 1 || k == 1) && k <= s) {
		eng_tensor *t = o * s <= n ? shrink_at(x, ax, 0, o * s) : pad_at(x, ax, 0, o * s - n);
		sz[0] = o, sz[1] = s;
		return shrink_at(reshape_at(t, ax, 1, sz, 2), ax + 1, 0, k);
	}
	int64_t w = d + (o * s > d ? ceil_div(o * s - d, n) : 0) * n; /* >= o*s, = d (mod n) */
	int64_t reps = ceil_div(k * w, n);
	sz[0] = 1, sz[1] = n;
	eng_tensor *t = expand_at(reshape_at(x, ax, 1, sz, 2), ax, reps);
	sz[0] = reps * n;
	t = shrink_at(reshape_at(t, ax, 2, sz, 1), ax, 0, k * w);
	sz[0] = k, sz[1] = w;
	t = reshape_at(t, ax, 1, sz, 2);
	if (s == 1) {
		t = shrink_at(t, ax + 1, 0, o);
	} else {
		sz[0] = o, sz[1] = s;
		t = reshape_at(shrink_at(t, ax + 1, 0, o * s), ax + 1, 1, sz, 2);
		t = reshape_at(shrink_at(t, ax + 2, 0, 1), ax + 1, 2, sz, 1);
	}
	return eng_transpose(t, ax, ax + 1);
}

/* x (..., H, W) -> windows (..., OH, OW, KH, KW). Call inside a scope. */
static eng_tensor *windows_2d(const eng_tensor *x, const int64_t k[2], const int64_t s[2],
			      const int64_t d[2])
{
	if (!x)
		return NULL;
	int nd = x->node->ndim;
	eng_tensor *t = window_axis(x, nd - 2, k[0], s[0], d[0]);  /* (.., OH, KH, W) */
	t = window_axis(t, nd, k[1], s[1], d[1]);                  /* (.., OH, KH, OW, KW) */
	int perm[ENG_MAX_DIMS];
	for (int i = 0; i < nd - 2; i++)
		perm[i] = i;
	perm[nd - 2] = nd - 2, perm[nd - 1] = nd, perm[nd] = nd - 1, perm[nd + 1] = nd + 1;
	return t ? eng_permute(t, perm) : NULL;
}

/* Sum over axes; float16 products are accumulated in float32. The result has dtype dt. Call
 * inside a scope. */
static eng_tensor *sum_as(const eng_tensor *x, const int *axes, int naxes, eng_dtype dt)
{
	if (x && x->node->dtype == ENG_F16)
		x = eng_cast(x, ENG_F32);
	return eng_cast(eng_sum(x, axes, naxes, false), dt);
}

/* ---- matmul and linear ---- */

/* a (.., M, K) times b (.., K, N), batch dims broadcasting: (a[.., M, 1, K] * bT[.., 1, N, K])
 * summed over K. Call inside a scope. */
static eng_tensor *matmul_core(const eng_tensor *a, const eng_tensor *b, eng_dtype dt)
{
	int da = a->node->ndim, last = -1;
	int64_t mk[3] = {a->node->shape[da - 2], 1, a->node->shape[da - 1]};
	eng_tensor *bt = eng_transpose(b, -1, -2);
	int64_t nk[3] = {1, b->node->shape[b->node->ndim - 1], b->node->shape[b->node->ndim - 2]};
	eng_tensor *prod = eng_mul(reshape_at(a, da - 2, 2, mk, 3),
				   bt ? reshape_at(bt, bt->node->ndim - 2, 2, nk, 3) : NULL);
	return sum_as(prod, &last, 1, dt);
}

eng_tensor *eng_matmul(const eng_tensor *a, const eng_tensor *b)
{
	if (!a || !b)
		return NULL;
	eng_ctx *ctx = a->ctx;
	if (!eng_same_ctx(a, b, "matmul"))
		return NULL;
	const eng_node *na = a->node, *nb = b->node;
	if (na->ndim == 0 || nb->ndim == 0) {
		eng_set_error(ctx, ENG_ESHAPE, "matmul: operands need at least 1 dim (got %d and %d)",
			      na->ndim, nb->ndim);
		return NULL;
	}
	bool a1 = na->ndim == 1, b1 = nb->ndim == 1;
	int da = a1 ? 2 : na->ndim, db = b1 ? 2 : nb->ndim;
	int64_t m = a1 ? 1 : na->shape[da - 2], ka = na->shape[na->ndim - 1];
	int64_t kb = b1 ? nb->shape[0] : nb->shape[db - 2], n = b1 ? 1 : nb->shape[db - 1];
	if (ka != kb) {
		eng_set_error(ctx, ENG_ESHAPE, "matmul: inner dimensions differ (%lld vs %lld)",
			      (long long)ka, (long long)kb);
		return NULL;
	}
	/* batch dims broadcast like elementwise ops */
	int ba = da - 2, bb = db - 2, nbat = ba > bb ? ba : bb;
	int64_t bshape[ENG_MAX_DIMS], out[ENG_MAX_DIMS], batch = 1;
	for (int i = 0; i < nbat; i++) {
		int ia = i - (nbat - ba), ib = i - (nbat - bb);
		int64_t x = ia >= 0 ? na->shape[ia] : 1, y = ib >= 0 ? nb->shape[ib] : 1;
		if (x != y && x != 1 && y != 1) {
			eng_set_error(ctx, ENG_ESHAPE,
				      "matmul: batch dimension %d does not broadcast (%lld vs %lld)", i,
				      (long long)x, (long long)y);
			return NULL;
		}
		bshape[i] = x == 1 ? y : x;
		batch *= bshape[i];
	}
	int nout = nbat;
	memcpy(out, bshape, sizeof(int64_t) * nbat);
	if (!a1)
		out[nout++] = m;
	if (!b1)
		out[nout++] = n;
	eng_dtype dt = eng_dtype_promote(na->dtype, nb->dtype);
	eng_scope_begin(ctx);
	int64_t s2[ENG_MAX_DIMS];
	const eng_tensor *x = a, *y = b; /* as (.., M, K) and (.., K, N) */
	if (a1) {
		s2[0] = 1, s2[1] = ka;
		x = eng_reshape(a, 2, s2);
	}
	if (b1) {
		s2[0] = kb, s2[1] = 1;
		y = eng_reshape(b, 2, s2);
	}
	if (x && y && nbat + 3 > ENG_MAX_DIMS) { /* no room for the product's axes: merge batch */
		memcpy(s2, bshape, sizeof(int64_t) * nbat);
		s2[nbat] = m, s2[nbat + 1] = ka;
		int64_t mk[3] = {batch, m, ka}, kn[3] = {batch, kb, n};
		x = eng_reshape(eng_expand(x, nbat + 2, s2), 3, mk);
		s2[nbat] = kb, s2[nbat + 1] = n;
		y = eng_reshape(eng_expand(y, nbat + 2, s2), 3, kn);
	}
	eng_tensor *r = x && y ? eng_reshape(matmul_core(x, y, dt), nout, out) : NULL;
	r = eng_keep(r);
	eng_scope_end(ctx);
	return r;
}

eng_tensor *eng_linear(const eng_tensor *x, const eng_tensor *w, const eng_tensor *bias)
{
	if (!x || !w)
		return NULL;
	eng_ctx *ctx = x->ctx;
	if (!eng_same_ctx(x, w, "linear") || (bias && !eng_same_ctx(x, bias, "linear")))
		return NULL;
	const eng_node *nx = x->node, *nw = w->node;
	if (nw->ndim != 2 || nx->ndim < 1 || nx->shape[nx->ndim - 1] != nw->shape[1]) {
		eng_set_error(ctx, ENG_ESHAPE,
			      "linear: need x (..., in) and weight (out, in); got %d-d x and %d-d weight"
			      " or mismatched in",
			      nx->ndim, nw->ndim);
		return NULL;
	}
	if (bias && (bias->node->ndim != 1 || bias->node->shape[0] != nw->shape[0])) {
		eng_set_error(ctx, ENG_ESHAPE, "linear: bias must have shape (%lld)",
			      (long long)nw->shape[0]);
		return NULL;
	}
	eng_scope_begin(ctx);
	eng_tensor *r = eng_matmul(x, eng_transpose(w, 0, 1));
	if (bias)
		r = eng_add(r, bias);
	r = eng_keep(r);
	eng_scope_end(ctx);
	return r;
}

/* ---- convolution and pooling ---- */

/* Read a 2-vector of non-negative (or positive) ints, or def for NULL. */
static bool pair_arg(eng_ctx *ctx, const char *fn, const char *what, const int *v, int def,
		     int min, int64_t out[2])
{
	for (int i = 0; i < 2; i++) {
		out[i] = v ? v[i] : def;
		if (out[i] < min || out[i] > (1 << 24)) {
			eng_set_error(ctx, ENG_EINVAL, "%s: %s[%d] = %lld out of range (min %d)", fn, what,
				      i, (long long)out[i], min);
			return false;
		}
	}
	return true;
}

/* x (N, Cin, H, W), w (Cout, Cin/g, KH, KW): windows (N, Cin, OH, OW, KH, KW) viewed as
 * (N, g, 1, OH, OW, Cin/g, KH, KW) times w viewed as (1, g, Cout/g, 1, 1, Cin/g, KH, KW), one
 * sum over the last three axes. stride, padding, dilation NULL mean 1, 0, 1. */
eng_tensor *eng_conv2d(const eng_tensor *x, const eng_tensor *w, const eng_tensor *bias,
		       const int stride[2], const int padding[2], const int dilation[2], int groups)
{
	if (!x || !w)
		return NULL;
	eng_ctx *ctx = x->ctx;
	if (!eng_same_ctx(x, w, "conv2d") || (bias && !eng_same_ctx(x, bias, "conv2d")))
		return NULL;
	const eng_node *nx = x->node, *nw = w->node;
	int64_t s[2], p[2], d[2], k[2], o[2];
	if (nx->ndim != 4 || nw->ndim != 4) {
		eng_set_error(ctx, ENG_ESHAPE, "conv2d: need 4-d input and weight, got %d-d and %d-d",
			      nx->ndim, nw->ndim);
		return NULL;
	}
	if (!pair_arg(ctx, "conv2d", "stride", stride, 1, 1, s) ||
	    !pair_arg(ctx, "conv2d", "padding", padding, 0, 0, p) ||
	    !pair_arg(ctx, "conv2d", "dilation", dilation, 1, 1, d))
		return NULL;
	int64_t bs = nx->shape[0], cin = nx->shape[1], cout = nw->shape[0];
	if (groups < 1 || cin % groups || cout % groups || nw->shape[1] * groups != cin) {
		eng_set_error(ctx, ENG_ESHAPE,
			      "conv2d: %lld input channels, weight (%lld, %lld, ..) and groups %d do not"
			      " agree",
			      (long long)cin, (long long)cout, (long long)nw->shape[1], groups);
		return NULL;
	}
	for (int i = 0; i < 2; i++) {
		k[i] = nw->shape[2 + i];
		o[i] = window_count(nx->shape[2 + i] + 2 * p[i], k[i], s[i], d[i]);
		if (k[i] < 1 || o[i] < 1) {
			eng_set_error(ctx, ENG_ESHAPE,
				      "conv2d: kernel %lld (dilation %lld) does not fit input size %lld with"
				      " padding %lld",
				      (long long)k[i], (long long)d[i], (long long)nx->shape[2 + i],
				      (long long)p[i]);
			return NULL;
		}
	}
	if (bias && (bias->node->ndim != 1 || bias->node->shape[0] != cout)) {
		eng_set_error(ctx, ENG_ESHAPE, "conv2d: bias must have shape (%lld)", (long long)cout);
		return NULL;
	}
	eng_dtype dt = eng_dtype_promote(nx->dtype, nw->dtype);
	int64_t g = groups, cig = cin / g, cog = cout / g;
	int64_t pads[4][2] = {{0, 0}, {0, 0}, {p[0], p[0]}, {p[1], p[1]}};
	int64_t xs[8] = {bs, g, 1, cig, o[0], o[1], k[0], k[1]};
	int64_t ws[8] = {1, g, cog, 1, 1, cig, k[0], k[1]};
	int64_t os[4] = {bs, cout, o[0], o[1]}, bsh[4] = {1, cout, 1, 1};
	int xperm[8] = {0, 1, 2, 4, 5, 3, 6, 7}, red[3] = {5, 6, 7};
	eng_scope_begin(ctx);
	eng_tensor *win = windows_2d(eng_pad(x, (const int64_t(*)[2])pads), k, s, d);
	win = eng_permute(eng_reshape(win, 8, xs), xperm);
	eng_tensor *r = sum_as(eng_mul(win, eng_reshape(w, 8, ws)), red, 3, dt);
	r = eng_reshape(r, 4, os);
	if (bias)
		r = eng_add(r, eng_reshape(bias, 4, bsh));
	r = eng_keep(r);
	eng_scope_end(ctx);
	return r;
}

/* The smallest value of dt, used to pad for max pooling; 0 for bool and uint8. */
static double lowest(eng_dtype dt)
{
	switch (dt) {
	case ENG_I32:
		return INT32_MIN;
	case ENG_I64:
		return -9223372036854775808.0;
	case ENG_F16:
	case ENG_F32:
		return -INFINITY;
	default:
		return 0;
	}
}

/* Windows over the last two axes of x, reduced by max or mean (zero padding counted). With
 * more than three leading axes (no room for the window axes) they are merged into one. */
static eng_tensor *pool2d(const char *fn, const eng_tensor *x, const int kernel[2],
			  const int stride[2], const int padding[2], bool is_max)
{
	if (!x)
		return NULL;
	eng_ctx *ctx = x->ctx;
	const eng_node *n = x->node;
	int nd = n->ndim;
	int64_t k[2], s[2], p[2], o[2], d[2] = {1, 1};
	if (nd < 2) {
		eng_set_error(ctx, ENG_ESHAPE, "%s: input needs at least 2 dims, got %d", fn, nd);
		return NULL;
	}
	if (!kernel) {
		eng_set_error(ctx, ENG_EINVAL, "%s: kernel is NULL", fn);
		return NULL;
	}
	if (!pair_arg(ctx, fn, "kernel", kernel, 1, 1, k) ||
	    !pair_arg(ctx, fn, "stride", stride ? stride : kernel, 1, 1, s) ||
	    !pair_arg(ctx, fn, "padding", padding, 0, 0, p))
		return NULL;
	for (int i = 0; i < 2; i++) {
		if (2 * p[i] > k[i]) {
			eng_set_error(ctx, ENG_EINVAL, "%s: padding %lld exceeds half the kernel %lld", fn,
				      (long long)p[i], (long long)k[i]);
			return NULL;
		}
		o[i] = window_count(n->shape[nd - 2 + i] + 2 * p[i], k[i], s[i], 1);
		if (o[i] < 1) {
			eng_set_error(ctx, ENG_ESHAPE, "%s: kernel %lld larger than input size %lld", fn,
				      (long long)k[i], (long long)n->shape[nd - 2 + i]);
			return NULL;
		}
	}
	int64_t out[ENG_MAX_DIMS], view[ENG_MAX_DIMS], pads[ENG_MAX_DIMS][2];
	int nv = nd + 3 > ENG_MAX_DIMS ? 3 : nd; /* dims of the windowed view */
	memcpy(out, n->shape, sizeof(int64_t) * nd);
	out[nd - 2] = o[0], out[nd - 1] = o[1];
	view[0] = 1;
	for (int i = 0; i < nd - 2; i++)
		if (nv == 3)
			view[0] *= n->shape[i];
		else
			view[i] = n->shape[i];
	view[nv - 2] = n->shape[nd - 2], view[nv - 1] = n->shape[nd - 1];
	memset(pads, 0, sizeof(pads));
	pads[nv - 2][0] = pads[nv - 2][1] = p[0];
	pads[nv - 1][0] = pads[nv - 1][1] = p[1];
	int red[2] = {nv, nv + 1};
	eng_scope_begin(ctx);
	eng_tensor *t = eng_pad(eng_reshape(x, nv, view), (const int64_t(*)[2])pads);
	if (is_max && (p[0] || p[1]) && lowest(n->dtype) != 0) {
		eng_tensor *inside = eng_pad(eng_full(ctx, ENG_BOOL, nv, view, 1), (const int64_t(*)[2])pads);
		t = eng_where(inside, t, eng_scalar(ctx, n->dtype, lowest(n->dtype)));
	}
	t = windows_2d(t, k, s, d);
	t = is_max ? eng_max(t, red, 2, false) : eng_mean(t, red, 2, false);
	eng_tensor *r = eng_keep(eng_reshape(t, nd, out));
	eng_scope_end(ctx);
	return r;
}

eng_tensor *eng_max_pool2d(const eng_tensor *x, const int kernel[2], const int stride[2],
			   const int padding[2])
{
	return pool2d("max_pool2d", x, kernel, stride, padding, true);
}

eng_tensor *eng_avg_pool2d(const eng_tensor *x, const int kernel[2], const int stride[2],
			   const int padding[2])
{
	return pool2d("avg_pool2d", x, kernel, stride, padding, false);
}

/* ---- indexing by comparison with the INDEX leaf ---- */

static bool int_arg(const eng_tensor *t, const char *fn, const char *what)
{
	if (eng_dtype_is_int(t->node->dtype))
		return true;
	eng_set_error(t->ctx, ENG_EDTYPE, "%s: %s must be an integer tensor, got %s", fn, what,
		      eng_dtype_name(t->node->dtype));
	return false;
}

/* labels[..., None] == index along a new last axis; labels outside [0, C) give a zero row. */
eng_tensor *eng_one_hot(const eng_tensor *labels, int64_t num_classes)
{
	if (!labels)
		return NULL;
	eng_ctx *ctx = labels->ctx;
	const eng_node *n = labels->node;
	if (!int_arg(labels, "one_hot", "labels"))
		return NULL;
	if (num_classes < 1 || num_classes > INT32_MAX) {
		eng_set_error(ctx, ENG_EINVAL, "one_hot: num_classes %lld out of range",
			      (long long)num_classes);
		return NULL;
	}
	if (n->ndim >= ENG_MAX_DIMS) {
		eng_set_error(ctx, ENG_ERANGE, "one_hot: labels already have %d dims", n->ndim);
		return NULL;
	}
	int64_t shape[ENG_MAX_DIMS];
	memcpy(shape, n->shape, sizeof(int64_t) * n->ndim);
	shape[n->ndim] = num_classes;
	eng_scope_begin(ctx);
	eng_tensor *idx = eng_index(ctx, ENG_I32, n->ndim + 1, shape, n->ndim);
	eng_tensor *r = eng_eq(eng_unsqueeze(labels, n->ndim), idx);
	r = eng_keep(eng_cast(r, ENG_F32));
	eng_scope_end(ctx);
	return r;
}

/* out = sum over j of where(idx[.., i, ..] == j, a[.., j, ..], 0) along a new axis after axis:
 * a compare against the INDEX leaf and one reduction. Indices outside [0, n) give 0. */
eng_tensor *eng_gather(const eng_tensor *a, int axis, const eng_tensor *idx)
{
	if (!a || !idx)
		return NULL;
	eng_ctx *ctx = a->ctx;
	const eng_node *na = a->node, *ni = idx->node;
	int ax;
	if (!eng_same_ctx(a, idx, "gather") || !int_arg(idx, "gather", "idx") ||
	    !eng_axis_norm(ctx, "gather", na->ndim, axis, &ax))
		return NULL;
	if (ni->ndim != na->ndim) {
		eng_set_error(ctx, ENG_ESHAPE, "gather: idx has %d dims, input has %d", ni->ndim,
			      na->ndim);
		return NULL;
	}
	if (na->ndim >= ENG_MAX_DIMS) {
		eng_set_error(ctx, ENG_ERANGE, "gather: input already has %d dims", na->ndim);
		return NULL;
	}
	int64_t r[ENG_MAX_DIMS][2], wide[ENG_MAX_DIMS + 1];
	int nd = na->ndim, red = ax + 1;
	for (int i = 0; i < nd; i++) {
		if (i != ax && ni->shape[i] > na->shape[i]) {
			eng_set_error(ctx, ENG_ESHAPE, "gather: idx size %lld exceeds input size %lld on"
				      " axis %d", (long long)ni->shape[i], (long long)na->shape[i], i);
			return NULL;
		}
		r[i][0] = 0, r[i][1] = i == ax ? na->shape[i] : ni->shape[i];
	}
	for (int i = 0, k = 0; i <= nd; i++)
		wide[i] = i == red ? na->shape[ax] : ni->shape[k++];
	eng_dtype it = na->shape[ax] > INT32_MAX ? ENG_I64 : ENG_I32;
	eng_scope_begin(ctx);
	eng_tensor *src = eng_unsqueeze(eng_shrink(a, (const int64_t(*)[2])r), ax);
	eng_tensor *hit = eng_eq(eng_unsqueeze(idx, red), eng_index(ctx, it, nd + 1, wide, red));
	eng_tensor *out = eng_where(hit, src, eng_scalar_as(a, 0));
	out = eng_keep(sum_as(out, &red, 1, na->dtype));
	eng_scope_end(ctx);
	return out;
}

/* sum over v of where(idx[..., None, None] == v, table[v, :], 0): result idx.shape + (D). */
eng_tensor *eng_embedding(const eng_tensor *table, const eng_tensor *idx)
{
	if (!table || !idx)
		return NULL;
	eng_ctx *ctx = table->ctx;
	const eng_node *nt = table->node, *ni = idx->node;
	if (!eng_same_ctx(table, idx, "embedding") || !int_arg(idx, "embedding", "idx"))
		return NULL;
	if (nt->ndim != 2) {
		eng_set_error(ctx, ENG_ESHAPE, "embedding: table must be 2-d (V, D), got %d dims",
			      nt->ndim);
		return NULL;
	}
	if (ni->ndim + 2 > ENG_MAX_DIMS) {
		eng_set_error(ctx, ENG_ERANGE, "embedding: idx has too many dims (%d)", ni->ndim);
		return NULL;
	}
	int nd = ni->ndim, red = nd;
	int64_t shape[ENG_MAX_DIMS], ones[2] = {1, 1};
	memcpy(shape, ni->shape, sizeof(int64_t) * nd);
	shape[nd] = nt->shape[0], shape[nd + 1] = 1;
	eng_dtype it = nt->shape[0] > INT32_MAX ? ENG_I64 : ENG_I32;
	eng_scope_begin(ctx);
	eng_tensor *iu = reshape_at(idx, nd, 0, ones, 2);
	eng_tensor *hit = eng_eq(iu, eng_index(ctx, it, nd + 2, shape, nd));
	eng_tensor *out = eng_where(hit, table, eng_scalar_as(table, 0));
	out = eng_keep(sum_as(out, &red, 1, nt->dtype));
	eng_scope_end(ctx);
	return out;
}

/* ---- normalisation and loss ---- */

/* (x - mean) * rsqrt(mean((x - mean)^2) + eps) over the last axis, computed in float32. */
eng_tensor *eng_layernorm(const eng_tensor *x, double eps)
{
	if (!x)
		return NULL;
	eng_ctx *ctx = x->ctx;
	if (x->node->ndim < 1) {
		eng_set_error(ctx, ENG_ESHAPE, "layernorm: input needs at least 1 dim");
		return NULL;
	}
	if (!(eps >= 0) || !isfinite(eps)) {
		eng_set_error(ctx, ENG_EINVAL, "layernorm: eps must be finite and >= 0");
		return NULL;
	}
	int last = -1;
	eng_scope_begin(ctx);
	eng_tensor *xf = eng_cast(x, ENG_F32);
	eng_tensor *xc = eng_sub(xf, eng_mean(xf, &last, 1, true));
	eng_tensor *var = eng_mean(eng_mul(xc, xc), &last, 1, true);
	eng_tensor *r = eng_mul(xc, eng_rsqrt(eng_add_s(var, eps)));
	r = eng_keep(eng_cast(r, eng_dtype_float_of(x->node->dtype)));
	eng_scope_end(ctx);
	return r;
}

/* -(sum of log_softmax(logits)[i, labels[i]]) / N, as one reduction over both axes. Labels
 * outside [0, C) contribute 0. */
eng_tensor *eng_sparse_cross_entropy(const eng_tensor *logits, const eng_tensor *labels)
{
	if (!logits || !labels)
		return NULL;
	eng_ctx *ctx = logits->ctx;
	const eng_node *nl = logits->node, *ny = labels->node;
	if (!eng_same_ctx(logits, labels, "sparse_cross_entropy") ||
	    !int_arg(labels, "sparse_cross_entropy", "labels"))
		return NULL;
	if (nl->ndim != 2 || ny->ndim != 1 || ny->shape[0] != nl->shape[0] || nl->shape[1] < 1) {
		eng_set_error(ctx, ENG_ESHAPE,
			      "sparse_cross_entropy: need logits (N, C >= 1) and labels (N); got %d-d"
			      " logits and %d-d labels or mismatched N",
			      nl->ndim, ny->ndim);
		return NULL;
	}
	eng_dtype dt = eng_dtype_float_of(nl->dtype);
	eng_scope_begin(ctx);
	eng_tensor *lp = eng_log_softmax(logits, 1);
	eng_tensor *hit = eng_eq(eng_unsqueeze(labels, 1), eng_index(ctx, ENG_I32, 2, nl->shape, 1));
	eng_tensor *picked = eng_cast(eng_where(hit, lp, eng_scalar(ctx, dt, 0)), ENG_F32);
	/* per-row loss first, then the batch mean: the row reductions fuse into one kernel */
	int ax1 = 1;
	eng_tensor *row = eng_sum(picked, &ax1, 1, false);
	eng_tensor *r = eng_mul_s(eng_sum(row, NULL, 0, false), -1.0 / (double)nl->shape[0]);
	r = eng_keep(eng_cast(r, dt));
	eng_scope_end(ctx);
	return r;
}
