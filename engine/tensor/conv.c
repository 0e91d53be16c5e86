/* conv.c: conv2d, max_pool2d and avg_pool2d: sliding windows cut with movement ops only
 * (reshape/expand/shrink/pad), then one broadcast product and one reduction. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "composite.h"

static int64_t ceil_div(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

/* ---- sliding windows (movement ops only) ---- */

/* Number of windows of K taps, dilation d, stride s over n elements (0 if none fits). */
static int64_t window_count(int64_t n, int64_t k, int64_t s, int64_t d)
{
	if (n < 1 ||
	    k - 1 > (n - 1) / d) /* the span d*(k-1)+1 exceeds n (checked without overflow) */
		return 0;
	return (n - d * (k - 1) - 1) / s + 1;
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
		eng_tensor *t =
			o * s <= n ? shrink_at(x, ax, 0, o * s) : pad_at(x, ax, 0, o * s - n);
		sz[0] = o, sz[1] = s;
		return shrink_at(reshape_at(t, ax, 1, sz, 2), ax + 1, 0, k);
	}
	int64_t w = d + (o * s > d ? ceil_div(o * s - d, n) : 0) * n; /* >= o*s, = d (mod n) */
	if (w > ((int64_t)1 << 40) / k) {
		eng_set_error(x->ctx, ENG_ERANGE, "windows: %lld taps need more than 2^40 elements",
			      (long long)k);
		return NULL;
	}
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
	eng_tensor *t = window_axis(x, nd - 2, k[0], s[0], d[0]); /* (.., OH, KH, W) */
	t = window_axis(t, nd, k[1], s[1], d[1]);		  /* (.., OH, KH, OW, KW) */
	int perm[ENG_MAX_DIMS];
	for (int i = 0; i < nd - 2; i++)
		perm[i] = i;
	perm[nd - 2] = nd - 2, perm[nd - 1] = nd, perm[nd] = nd - 1, perm[nd + 1] = nd + 1;
	return t ? eng_permute(t, perm) : NULL;
}

/* ---- convolution and pooling ---- */

/* Read a pair of ints (def for both when v is NULL), each in [min, 2^24]. */
static bool pair_arg(eng_ctx *ctx, const char *fn, const char *what, const int *v, int def, int min,
		     int64_t out[2])
{
	for (int i = 0; i < 2; i++) {
		out[i] = v ? v[i] : def;
		if (out[i] < min || out[i] > (1 << 24)) {
			eng_set_error(ctx, ENG_EINVAL, "%s: %s[%d] = %lld out of range (min %d)",
				      fn, what, i, (long long)out[i], min);
			return false;
		}
	}
	return true;
}

/* Pad axis ax by before/after; a negative amount cuts instead. */
static eng_tensor *pad_signed(const eng_tensor *x, int ax, int64_t before, int64_t after)
{
	if (!x)
		return NULL;
	int64_t n = x->node->shape[ax];
	eng_tensor *t = eng_dup(x);
	if (before < 0 || after < 0)
		t = shrink_at(t, ax, before < 0 ? -before : 0, after < 0 ? n + after : n);
	if (before > 0 || after > 0)
		t = pad_at(t, ax, before > 0 ? before : 0, after > 0 ? after : 0);
	return t;
}

/* conv2d's own gradient rule (see eng_vjp): in = {x, w}, args = stride, padding, dilation
 * (two each), groups. Walking the primitive ops instead would differentiate the window
 * extraction, which scatters a stored (N, Cin, OH, OW, KH, KW) product back through sums over
 * the tiled copies; here the input gradient is itself a convolution (of the stride-dilated,
 * padded output gradient with the flipped, transposed weight) and fuses like the forward. */
static void conv2d_vjp(eng_ctx *ctx, const eng_node *n, const eng_vjp *v, eng_tensor *g,
		       eng_tensor **out)
{
	(void)n;
	const eng_node *nx = v->in[0], *nw = v->in[1];
	int64_t s[2] = {v->args[0], v->args[1]}, p[2] = {v->args[2], v->args[3]};
	int64_t d[2] = {v->args[4], v->args[5]}, groups = v->args[6];
	int64_t bs = nx->shape[0], cin = nx->shape[1], cout = nw->shape[0];
	int64_t cig = cin / groups, cog = cout / groups, k[2] = {nw->shape[2], nw->shape[3]};
	int64_t o[2] = {eng_shape(g)[2], eng_shape(g)[3]};
	eng_tensor *x = eng_tensor_wrap(ctx, eng_node_ref((eng_node *)nx));
	eng_tensor *w = eng_tensor_wrap(ctx, eng_node_ref((eng_node *)nw));

	/* dw[co, ci, ky, kx] = sum over (n, oy, ox) of g[n, co, oy, ox] * windows[n, ci, oy, ox, ky, kx] */
	int64_t pads[4][2] = {{0, 0}, {0, 0}, {p[0], p[0]}, {p[1], p[1]}};
	int64_t xs[8] = {bs, groups, 1, cig, o[0], o[1], k[0], k[1]};
	int64_t gs[8] = {bs, groups, cog, 1, o[0], o[1], 1, 1};
	int red[3] = {0, 4, 5};
	eng_tensor *win = eng_reshape(windows_2d(eng_pad(x, (const int64_t(*)[2])pads), k, s, d), 8, xs);
	eng_tensor *dw = eng_sum(eng_mul(win, eng_reshape(g, 8, gs)), red, 3, false);
	out[1] = eng_cast(eng_reshape(dw, 4, nw->shape), nw->dtype);

	/* dx: spread g to stride 1 (zeros between rows), pad so that a stride-1 convolution with
	 * the flipped weight gives the padded input's size, then cut the padding off */
	eng_tensor *t = g;
	for (int i = 0; i < 2; i++) {
		int ax = 2 + i;
		if (s[i] > 1) {
			int64_t two[2] = {o[i], 1}, one = o[i] * s[i];
			t = reshape_at(t, ax, 1, two, 2);
			t = pad_at(t, ax + 1, 0, s[i] - 1);
			t = shrink_at(reshape_at(t, ax, 2, &one, 1), ax, 0, (o[i] - 1) * s[i] + 1);
		}
		int64_t span = d[i] * (k[i] - 1), hp = nx->shape[ax] + 2 * p[i];
		int64_t extra = hp - span - 1 - (o[i] - 1) * s[i];
		t = pad_signed(t, ax, span - p[i], span - p[i] + extra);
	}
	int64_t w5[5] = {groups, cog, cig, k[0], k[1]}, wt[4] = {cin, cog, k[0], k[1]};
	int perm[5] = {0, 2, 1, 3, 4}, flip[2] = {2, 3};
	eng_tensor *wT = eng_flip(eng_reshape(eng_permute(eng_reshape(w, 5, w5), perm), 4, wt), flip, 2);
	int one[2] = {1, 1}, zero[2] = {0, 0}, dil[2] = {(int)d[0], (int)d[1]};
	/* stored padded: the convolution then reads it without a bounds check per tap */
	eng_tensor *dx = eng_conv2d(eng_contiguous(t), wT, NULL, one, zero, dil, (int)groups);
	out[0] = eng_cast(dx, nx->dtype);
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
		eng_set_error(ctx, ENG_ESHAPE,
			      "conv2d: need 4-d input and weight, got %d-d and %d-d", nx->ndim,
			      nw->ndim);
		return NULL;
	}
	if (!pair_arg(ctx, "conv2d", "stride", stride, 1, 1, s) ||
	    !pair_arg(ctx, "conv2d", "padding", padding, 0, 0, p) ||
	    !pair_arg(ctx, "conv2d", "dilation", dilation, 1, 1, d))
		return NULL;
	int64_t bs = nx->shape[0], cin = nx->shape[1], cout = nw->shape[0];
	if (groups < 1 || cin % groups || cout % groups || nw->shape[1] * groups != cin) {
		eng_set_error(
			ctx, ENG_ESHAPE,
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
				      "conv2d: kernel %lld (dilation %lld) does not fit input size "
				      "%lld with"
				      " padding %lld",
				      (long long)k[i], (long long)d[i], (long long)nx->shape[2 + i],
				      (long long)p[i]);
			return NULL;
		}
	}
	if (bias && (bias->node->ndim != 1 || bias->node->shape[0] != cout)) {
		eng_set_error(ctx, ENG_ESHAPE, "conv2d: bias must have shape (%lld)",
			      (long long)cout);
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
	eng_vjp v = {.rule = conv2d_vjp, .nin = 2, .in = {x->node, w->node},
		     .args = {s[0], s[1], p[0], p[1], d[0], d[1], g}};
	if (r && !eng_node_set_vjp(r->node, &v))
		eng_set_error(ctx, ENG_ENOMEM, "conv2d: out of memory");
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
			eng_set_error(ctx, ENG_EINVAL,
				      "%s: padding %lld exceeds half the kernel %lld", fn,
				      (long long)p[i], (long long)k[i]);
			return NULL;
		}
		o[i] = window_count(n->shape[nd - 2 + i] + 2 * p[i], k[i], s[i], 1);
		if (o[i] < 1) {
			eng_set_error(ctx, ENG_ESHAPE,
				      "%s: kernel %lld larger than input size %lld", fn,
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
		eng_tensor *inside =
			eng_pad(eng_full(ctx, ENG_BOOL, nv, view, 1), (const int64_t(*)[2])pads);
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
