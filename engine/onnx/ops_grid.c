/* ops_grid.c: ONNX GridSample (2-D; bilinear, nearest, bicubic; zeros, border and reflection
 * padding; align_corners): sampling positions come from the grid tensor, so taps are gathered
 * with indices computed lazily like everything else. */
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
