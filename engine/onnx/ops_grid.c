/* ops_grid.c: ONNX GridSample (2-D; bilinear, nearest, bicubic; zeros, border and reflection
 * padding; align_corners): sampling positions come from the grid tensor, so taps are gathered
 * with indices computed lazily like everything else; and AffineGrid, which makes such grids. */
#include <math.h>
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

typedef struct gs {
	onx_node *n;
	eng_tensor *x3;  /* (N, C, H*W) */
	int64_t N, C, H, W, P; /* P = Ho*Wo */
	int pad;         /* 0 zeros, 1 border, 2 reflection */
	bool align;
} gs;

/* reflect coordinate v into [lo, hi] (ONNX's rule: fold by whole ranges, parity decides) */
static eng_tensor *reflect(eng_tensor *v, double lo, double hi)
{
	double rng = hi - lo;
	if (rng <= 0)
		return eng_mul_s(v, 0);
	eng_tensor *below = eng_rsub_s(lo, v), *above = eng_add_s(v, -hi);
	eng_tensor *nb = eng_floor(eng_div_s(below, rng)), *na = eng_floor(eng_div_s(above, rng));
	eng_tensor *rb = eng_sub(below, eng_mul_s(nb, rng)), *ra = eng_sub(above, eng_mul_s(na, rng));
	eng_tensor *evenb = eng_eq(eng_sub(nb, eng_mul_s(eng_floor(eng_div_s(nb, 2)), 2)), eng_mul_s(nb, 0));
	eng_tensor *evena = eng_eq(eng_sub(na, eng_mul_s(eng_floor(eng_div_s(na, 2)), 2)), eng_mul_s(na, 0));
	eng_tensor *vb = eng_where(evenb, eng_add_s(rb, lo), eng_rsub_s(hi, rb));
	eng_tensor *va = eng_where(evena, eng_rsub_s(hi, ra), eng_add_s(ra, lo));
	eng_tensor *zero = eng_mul_s(v, 0);
	return eng_where(eng_gt(below, zero), vb, eng_where(eng_gt(above, zero), va, v));
}

/* The value at integer positions (iy, ix) (float tensors (N, P)), per padding mode; (N, C, P). */
static eng_tensor *tap(const gs *g, eng_tensor *iy, eng_tensor *ix)
{
	eng_tensor *valid = NULL;
	if (g->pad == 1) {
		iy = eng_clamp(iy, 0, (double)(g->H - 1));
		ix = eng_clamp(ix, 0, (double)(g->W - 1));
	} else if (g->pad == 2) {
		double lo = g->align ? 0 : -0.5;
		iy = eng_clamp(eng_round(reflect(iy, lo, g->align ? (double)(g->H - 1) : g->H - 0.5)), 0, (double)(g->H - 1));
		ix = eng_clamp(eng_round(reflect(ix, lo, g->align ? (double)(g->W - 1) : g->W - 0.5)), 0, (double)(g->W - 1));
	} else {
		eng_tensor *z = eng_mul_s(iy, 0);
		valid = eng_and(eng_and(eng_ge(iy, z), eng_le(iy, eng_add_s(z, (double)(g->H - 1)))),
				eng_and(eng_ge(ix, z), eng_le(ix, eng_add_s(z, (double)(g->W - 1)))));
		iy = eng_clamp(iy, 0, (double)(g->H - 1));
		ix = eng_clamp(ix, 0, (double)(g->W - 1));
	}
	eng_tensor *flat = eng_cast(eng_add(eng_mul_s(iy, (double)g->W), ix), ENG_I64); /* (N, P) */
	eng_tensor *idx = eng_expand(eng_reshape(flat, 3, (int64_t[]){g->N, 1, g->P}), 3, (int64_t[]){g->N, g->C, g->P});
	eng_tensor *v = eng_gather(g->x3, 2, idx);
	if (valid)
		v = eng_where(eng_reshape(valid, 3, (int64_t[]){g->N, 1, g->P}), v, eng_scalar(g->n->ctx, eng_tensor_dtype(v), 0));
	return v;
}

static void cubic(eng_tensor *t, eng_tensor **c)
{
	const double A = -0.75;
	/* distances 1 + t, t, 1 - t, 2 - t */
	eng_tensor *d0 = eng_add_s(t, 1), *d1 = t, *d2 = eng_rsub_s(1, t), *d3 = eng_rsub_s(2, t);
	/* |d| <= 1: (A+2)d^3 - (A+3)d^2 + 1 ; 1 < |d| < 2: A d^3 - 5A d^2 + 8A d - 4A */
	c[1] = eng_add_s(eng_mul(eng_mul(d1, d1), eng_add_s(eng_mul_s(d1, A + 2), -(A + 3))), 1);
	c[2] = eng_add_s(eng_mul(eng_mul(d2, d2), eng_add_s(eng_mul_s(d2, A + 2), -(A + 3))), 1);
	c[0] = eng_add_s(eng_mul(d0, eng_add_s(eng_mul(d0, eng_add_s(eng_mul_s(d0, A), -5 * A)), 8 * A)), -4 * A);
	c[3] = eng_add_s(eng_mul(d3, eng_add_s(eng_mul(d3, eng_add_s(eng_mul_s(d3, A), -5 * A)), 8 * A)), -4 * A);
}

eng_status onx_op_grid_sample(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *grid = onx_in(n, 1);
	if (!x || !grid)
		return onx_fail(n, ENG_EINVAL, "X and grid are needed");
	if (eng_ndim(x) != 4 || eng_ndim(grid) != 4 || eng_shape(grid)[3] != 2 || eng_shape(grid)[0] != eng_shape(x)[0])
		return onx_fail(n, ENG_ENOTSUP, "only 2-D sampling: X (N, C, H, W) and grid (N, Ho, Wo, 2)");
	eng_dtype dt = eng_tensor_dtype(x);
	if (!eng_dtype_is_float(dt))
		return onx_fail(n, ENG_ENOTSUP, "type %s is not supported", eng_dtype_name(dt));
	char mb[16], pb[16];
	const char *mode = onx_attr_s(n, "mode", "bilinear", mb, sizeof(mb));
	const char *pad = onx_attr_s(n, "padding_mode", "zeros", pb, sizeof(pb));
	gs g = {.n = n, .N = eng_shape(x)[0], .C = eng_shape(x)[1], .H = eng_shape(x)[2], .W = eng_shape(x)[3],
		.align = onx_attr_i(n, "align_corners", 0) != 0};
	g.P = eng_shape(grid)[1] * eng_shape(grid)[2];
	g.pad = !strcmp(pad, "zeros") ? 0 : !strcmp(pad, "border") ? 1 : !strcmp(pad, "reflection") ? 2 : -1;
	int m = !strcmp(mode, "bilinear") || !strcmp(mode, "linear") ? 0 : !strcmp(mode, "nearest") ? 1
		: !strcmp(mode, "bicubic") || !strcmp(mode, "cubic") ? 2 : -1;
	if (g.pad < 0 || m < 0)
		return onx_fail(n, ENG_EINVAL, "attributes 'mode' '%s', 'padding_mode' '%s'", mode, pad);
	if (g.H < 1 || g.W < 1)
		return onx_fail(n, ENG_ESHAPE, "an empty image");
	g.x3 = eng_reshape(x, 3, (int64_t[]){g.N, g.C, g.H * g.W});
	eng_tensor *gf = eng_reshape(eng_cast(grid, ENG_F32), 3, (int64_t[]){g.N, g.P, 2});
	eng_tensor *gx = eng_reshape(eng_slice(gf, 2, 0, 1, 1), 2, (int64_t[]){g.N, g.P});
	eng_tensor *gy = eng_reshape(eng_slice(gf, 2, 1, 2, 1), 2, (int64_t[]){g.N, g.P});
	/* unnormalise to pixel coordinates */
	eng_tensor *ix = g.align ? eng_mul_s(eng_add_s(gx, 1), (g.W - 1) / 2.0) : eng_mul_s(eng_add_s(eng_mul_s(eng_add_s(gx, 1), (double)g.W), -1), 0.5);
	eng_tensor *iy = g.align ? eng_mul_s(eng_add_s(gy, 1), (g.H - 1) / 2.0) : eng_mul_s(eng_add_s(eng_mul_s(eng_add_s(gy, 1), (double)g.H), -1), 0.5);
	if (g.pad == 2 && m != 2) { /* reflect the sampling point itself (the taps are reflected again) */
		double lo = g.align ? 0 : -0.5;
		ix = reflect(ix, lo, g.align ? (double)(g.W - 1) : g.W - 0.5);
		iy = reflect(iy, lo, g.align ? (double)(g.H - 1) : g.H - 0.5);
	} else if (g.pad == 1 && m != 2) {
		ix = eng_clamp(ix, 0, (double)(g.W - 1));
		iy = eng_clamp(iy, 0, (double)(g.H - 1));
	}
	eng_tensor *y;
	if (m == 1) {
		y = tap(&g, eng_round(iy), eng_round(ix));
	} else if (m == 0) {
		eng_tensor *x0 = eng_floor(ix), *y0 = eng_floor(iy);
		eng_tensor *wx = eng_sub(ix, x0), *wy = eng_sub(iy, y0);
		eng_tensor *x1 = eng_add_s(x0, 1), *y1 = eng_add_s(y0, 1);
		eng_tensor *wx3 = eng_reshape(wx, 3, (int64_t[]){g.N, 1, g.P}), *wy3 = eng_reshape(wy, 3, (int64_t[]){g.N, 1, g.P});
		eng_tensor *top = eng_add(eng_mul(tap(&g, y0, x0), eng_rsub_s(1, wx3)), eng_mul(tap(&g, y0, x1), wx3));
		eng_tensor *bot = eng_add(eng_mul(tap(&g, y1, x0), eng_rsub_s(1, wx3)), eng_mul(tap(&g, y1, x1), wx3));
		y = eng_add(eng_mul(top, eng_rsub_s(1, wy3)), eng_mul(bot, wy3));
	} else {
		eng_tensor *x0 = eng_floor(ix), *y0 = eng_floor(iy), *cx[4], *cy[4];
		cubic(eng_reshape(eng_sub(ix, x0), 3, (int64_t[]){g.N, 1, g.P}), cx);
		cubic(eng_reshape(eng_sub(iy, y0), 3, (int64_t[]){g.N, 1, g.P}), cy);
		y = NULL;
		for (int a = 0; a < 4; a++) {
			eng_tensor *row = NULL;
			for (int b = 0; b < 4; b++) {
				eng_tensor *v = eng_mul(tap(&g, eng_add_s(y0, a - 1), eng_add_s(x0, b - 1)), cx[b]);
				row = row ? eng_add(row, v) : v;
			}
			row = eng_mul(row, cy[a]);
			y = y ? eng_add(y, row) : row;
		}
	}
	n->out[0] = y ? eng_cast(eng_reshape(y, 4, (int64_t[]){g.N, g.C, eng_shape(grid)[1], eng_shape(grid)[2]}), dt) : y;
	return onx_check(n, n->out[0]);
}

/* AffineGrid (opset 20): theta (N, 2, 3) or (N, 3, 4) times the homogeneous positions of a
 * (H, W) or (D, H, W) grid spanning [-1, 1] (pixel centres, or corners with align_corners):
 * grid (N, H, W, 2) or (N, D, H, W, 3), each position (x, y[, z]). size must be a constant. */
eng_status onx_op_affine_grid(onx_node *n)
{
	eng_tensor *theta = onx_in(n, 0);
	int64_t size[5];
	int cnt;
	eng_status st = onx_in_ints(n, 1, size, 5, &cnt);
	if (st)
		return st;
	if (!theta || (cnt != 4 && cnt != 5))
		return onx_fail(n, ENG_EINVAL, "theta and a size of 4 (N, C, H, W) or 5 (N, C, D, H, W) values are needed");
	int nd = cnt - 2; /* spatial dims: 2 or 3 */
	const int64_t *ts = eng_shape(theta);
	if (eng_ndim(theta) != 3 || ts[0] != size[0] || ts[1] != nd || ts[2] != nd + 1 || !eng_dtype_is_float(eng_tensor_dtype(theta)))
		return onx_fail(n, ENG_ESHAPE, "theta must be float (N, %d, %d) with N = %lld for this size", nd, nd + 1,
				(long long)size[0]);
	int64_t count = 1;
	for (int d = 0; d < nd; d++) {
		if (size[2 + d] < 1 || size[2 + d] > ((int64_t)1 << 20))
			return onx_fail(n, ENG_EINVAL, "size %lld of spatial dim %d", (long long)size[2 + d], d);
		count *= size[2 + d];
	}
	if (count > ((int64_t)1 << 26))
		return onx_fail(n, ENG_ENOTSUP, "a grid of %lld positions", (long long)count);
	bool corners = onx_attr_i(n, "align_corners", 0) != 0;
	/* the homogeneous positions (count, nd + 1): x along the last spatial dim, then y, z, 1 */
	const int64_t *sp = size + 2;
	eng_tensor *cols[4];
	for (int j = 0; j < nd; j++) {
		int d = nd - 1 - j; /* x is the last dim's coordinate */
		int64_t len = sp[d];
		double step = corners ? (len > 1 ? 2.0 / (double)(len - 1) : 0.0) : 2.0 / (double)len;
		double first = corners ? -1.0 : -1.0 + 1.0 / (double)len;
		eng_tensor *i = eng_index(n->ctx, ENG_F32, nd, sp, d);
		cols[j] = eng_reshape(eng_add_s(eng_mul_s(i, step), first), 2, (int64_t[]){count, 1});
	}
	cols[nd] = eng_ones(n->ctx, ENG_F32, 2, (int64_t[]){count, 1});
	eng_tensor *pos = eng_cat(cols, nd + 1, 1); /* (count, nd + 1) */
	/* grid[n, p, i] = sum_j theta[n, i, j] pos[p, j] */
	eng_tensor *g = eng_matmul(eng_unsqueeze(pos, 0), eng_transpose(eng_cast(theta, ENG_F32), 1, 2));
	int64_t out[5] = {size[0], 0, 0, 0, 0};
	for (int d = 0; d < nd; d++)
		out[1 + d] = sp[d];
	out[1 + nd] = nd;
	n->out[0] = eng_cast(eng_reshape(g, nd + 2, out), eng_tensor_dtype(theta));
	return onx_check(n, n->out[0]);
}

/* One axis of RoiAlign's sampling points: for each roi r and output bin p, the grid's g samples
 * start + p * bin + (i + 0.5) * bin / g over an axis of n pixels, as the two pixels each reads
 * (lo, hi: int64 (R, P * g)) and their weights (wlo, whi: float (R, P * g), zero for a point
 * outside [-1, n], where the reference reads nothing). start and bin are (R, 1). */
typedef struct roi_axis {
	eng_tensor *lo, *hi, *wlo, *whi;
} roi_axis;

static roi_axis roi_samples(eng_ctx *ctx, eng_tensor *start, eng_tensor *bin, int64_t P, int64_t g, int64_t n)
{
	roi_axis a;
	int64_t pg = P * g;
	/* step k = p * g + i: start + (p + (i + 0.5) / g) * bin */
	eng_tensor *k = eng_reshape(eng_arange(ctx, ENG_I64, 0, (double)pg, 1), 2, (int64_t[]){1, pg});
	eng_tensor *gs = eng_scalar(ctx, ENG_I64, (double)g);
	eng_tensor *pos = eng_cast(eng_idiv(k, gs), ENG_F32); /* the bin p */
	eng_tensor *frac = eng_mul_s(eng_add_s(eng_cast(eng_mod(k, gs), ENG_F32), 0.5), 1.0 / (double)g);
	eng_tensor *y = eng_add(start, eng_mul(eng_add(pos, frac), bin)); /* (R, P * g) */
	eng_tensor *ok = eng_and(eng_ge(y, eng_scalar(ctx, ENG_F32, -1.0)), eng_le(y, eng_scalar(ctx, ENG_F32, (double)n)));
	y = eng_maximum(y, eng_scalar(ctx, ENG_F32, 0.0));
	eng_tensor *fl = eng_floor(y), *last = eng_scalar(ctx, ENG_F32, (double)(n - 1));
	eng_tensor *edge = eng_ge(fl, last); /* at or past the last pixel: both taps on it */
	eng_tensor *lo = eng_where(edge, last, fl);
	y = eng_where(edge, last, y);
	eng_tensor *l = eng_sub(y, lo), *okf = eng_cast(ok, ENG_F32);
	a.lo = eng_cast(lo, ENG_I64);
	a.hi = eng_cast(eng_where(edge, last, eng_add_s(lo, 1.0)), ENG_I64);
	a.wlo = eng_mul(eng_add_s(eng_neg(l), 1.0), okf);
	a.whi = eng_mul(l, okf);
	return a;
}

/* x (R, C, A, B) gathered along axis ax at idx (R, P) broadcast over the other dims. */
static eng_tensor *take(eng_tensor *x, int ax, eng_tensor *idx)
{
	const int64_t *s = eng_shape(x);
	int64_t sh[4] = {s[0], 1, 1, 1}, ex[4] = {s[0], s[1], s[2], s[3]};
	sh[ax] = eng_shape(idx)[1];
	ex[ax] = sh[ax];
	return eng_gather(x, ax, eng_expand(eng_reshape(idx, 4, sh), 4, ex));
}

/* RoiAlign (opsets 10, 16): bilinear samples on a grid of sampling_ratio x sampling_ratio points
 * in each of the output_height x output_width bins of each roi, averaged (or the largest weighted
 * tap, mode max), as ONNX's reference. An adaptive grid (sampling_ratio 0: its size depends on the
 * rois' values) is not supported. */
eng_status onx_op_roi_align(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *rois = onx_in(n, 1), *bi = onx_in(n, 2);
	char mb[16], cb[32];
	const char *mode = onx_attr_s(n, "mode", "avg", mb, sizeof(mb));
	const char *ctm = onx_attr_s(n, "coordinate_transformation_mode", n->opset >= 16 ? "half_pixel" : "output_half_pixel",
				     cb, sizeof(cb));
	bool is_max = !strcmp(mode, "max"), half = !strcmp(ctm, "half_pixel");
	if (!is_max && strcmp(mode, "avg"))
		return onx_fail(n, ENG_EINVAL, "mode '%s': expected avg or max", mode);
	if (!half && strcmp(ctm, "output_half_pixel"))
		return onx_fail(n, ENG_EINVAL, "coordinate_transformation_mode '%s': expected half_pixel or output_half_pixel", ctm);
	int64_t PH = onx_attr_i(n, "output_height", 1), PW = onx_attr_i(n, "output_width", 1);
	int64_t g = onx_attr_i(n, "sampling_ratio", 0);
	double scale = onx_attr_f(n, "spatial_scale", 1.0);
	if (!x || !rois || !bi || eng_ndim(x) != 4 || eng_ndim(rois) != 2 || eng_shape(rois)[1] != 4 || eng_ndim(bi) != 1 ||
	    eng_shape(bi)[0] != eng_shape(rois)[0] || eng_dtype_is_float(eng_tensor_dtype(bi)))
		return onx_fail(n, ENG_ESHAPE, "X (N, C, H, W), rois (R, 4) and integer batch_indices (R) are needed");
	if (PH < 1 || PW < 1 || PH > 4096 || PW > 4096)
		return onx_fail(n, ENG_EINVAL, "output_height and output_width must be 1 to 4096");
	if (g <= 0)
		return onx_fail(n, ENG_ENOTSUP, "sampling_ratio %lld: the adaptive grid (its size from the rois' values) is not supported",
				(long long)g);
	if (g > 64)
		return onx_fail(n, ENG_EINVAL, "sampling_ratio %lld (at most 64)", (long long)g);
	const int64_t *xs = eng_shape(x);
	int64_t R = eng_shape(rois)[0], C = xs[1], H = xs[2], W = xs[3];
	eng_tensor *xf = eng_cast(x, ENG_F32), *rf = eng_cast(rois, ENG_F32);
	double off = half ? 0.5 : 0.0;
	eng_tensor *c[4];
	for (int i = 0; i < 4; i++)
		c[i] = eng_add_s(eng_mul_s(eng_slice(rf, 1, i, i + 1, 1), scale), -off); /* (R, 1) */
	eng_tensor *rw = eng_sub(c[2], c[0]), *rh = eng_sub(c[3], c[1]);
	if (!half)
		rw = eng_maximum(rw, eng_scalar(n->ctx, ENG_F32, 1.0)), rh = eng_maximum(rh, eng_scalar(n->ctx, ENG_F32, 1.0));
	roi_axis ay = roi_samples(n->ctx, c[1], eng_mul_s(rh, 1.0 / (double)PH), PH, g, H);
	roi_axis ax = roi_samples(n->ctx, c[0], eng_mul_s(rw, 1.0 / (double)PW), PW, g, W);
	/* each roi's image (R, C, H, W), then its rows (R, C, PH g, W), then the taps (R, C, PH g, PW g) */
	eng_tensor *bidx = eng_expand(eng_reshape(eng_cast(bi, ENG_I64), 4, (int64_t[]){R, 1, 1, 1}), 4, (int64_t[]){R, C, H, W});
	eng_tensor *img = eng_gather(xf, 0, bidx);
	eng_tensor *rows[2] = {take(img, 2, ay.lo), take(img, 2, ay.hi)}, *wy[2] = {ay.wlo, ay.whi}, *wx[2] = {ax.wlo, ax.whi};
	eng_tensor *cols[2] = {ax.lo, ax.hi}, *acc = NULL;
	int64_t wys[4] = {R, 1, PH * g, 1}, wxs[4] = {R, 1, 1, PW * g};
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 2; j++) {
			eng_tensor *w = eng_mul(eng_reshape(wy[i], 4, wys), eng_reshape(wx[j], 4, wxs));
			eng_tensor *t = eng_mul(w, take(rows[i], 3, cols[j]));
			acc = !acc ? t : is_max ? eng_maximum(acc, t) : eng_add(acc, t);
		}
	int64_t s6[6] = {R, C, PH, g, PW, g};
	int red[2] = {3, 5};
	eng_tensor *y = eng_reshape(acc, 6, s6);
	y = is_max ? eng_max(y, red, 2, false) : eng_mul_s(eng_sum(y, red, 2, false), 1.0 / (double)(g * g));
	n->out[0] = eng_cast(y, eng_tensor_dtype(x));
	return onx_check(n, n->out[0]);
}
