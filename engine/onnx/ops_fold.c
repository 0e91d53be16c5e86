/* ops_fold.c: ONNX Col2Im (opset 18, PyTorch's fold): column blocks summed back into an image,
 * one strided placement per kernel offset (movement ops: a reshape, pads and a shrink), the
 * placements added, the padding cut off. Image and block shapes must be constants. */
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

#define FOLD_MAX_DIMS 3
#define FOLD_MAX_OFFSETS 4096 /* kernel offsets: one placement each */

/* g (N, C, b_0 .. b_n-1) spread along each spatial axis to stride s_d, shifted by at_d and padded
 * to p_d: element (.., i_d, ..) lands at i_d * s_d + at_d. */
static eng_tensor *place(eng_tensor *g, int nd, const int64_t *b, const int64_t *s, const int64_t *at, const int64_t *p)
{
	for (int d = 0; d < nd && g; d++) {
		int ax = 2 + d, r = eng_ndim(g);
		int64_t sh[ENG_MAX_DIMS + 1], pads[ENG_MAX_DIMS + 1][2] = {{0}}, cut[ENG_MAX_DIMS][2];
		/* (.., b, ..) -> (.., b, s, ..) zero after each element -> (.., b * s, ..) -> first (b - 1) s + 1 */
		memcpy(sh, eng_shape(g), sizeof(int64_t) * (size_t)r);
		memmove(sh + ax + 2, sh + ax + 1, sizeof(int64_t) * (size_t)(r - ax - 1));
		sh[ax + 1] = 1;
		g = eng_reshape(g, r + 1, sh);
		pads[ax + 1][1] = s[d] - 1;
		g = eng_pad(g, (const int64_t(*)[2])pads);
		memcpy(sh, eng_shape(g), sizeof(int64_t) * (size_t)(r + 1));
		sh[ax] *= sh[ax + 1];
		memmove(sh + ax + 1, sh + ax + 2, sizeof(int64_t) * (size_t)(r - ax - 1));
		g = eng_reshape(g, r, sh);
		for (int i = 0; i < r; i++)
			cut[i][0] = 0, cut[i][1] = eng_shape(g)[i];
		cut[ax][1] = (b[d] - 1) * s[d] + 1;
		g = eng_shrink(g, (const int64_t(*)[2])cut);
		int64_t pd[ENG_MAX_DIMS][2] = {{0}};
		pd[ax][0] = at[d];
		pd[ax][1] = p[d] - at[d] - cut[ax][1];
		g = eng_pad(g, (const int64_t(*)[2])pd);
	}
	return g;
}

eng_status onx_op_col2im(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	int64_t img[FOLD_MAX_DIMS + 1], blk[FOLD_MAX_DIMS + 1];
	int ni, nb;
	eng_status st = onx_in_ints(n, 1, img, FOLD_MAX_DIMS + 1, &ni);
	if (!st)
		st = onx_in_ints(n, 2, blk, FOLD_MAX_DIMS + 1, &nb);
	if (st)
		return st;
	if (!x || eng_ndim(x) != 3)
		return onx_fail(n, ENG_ESHAPE, "input must be (N, C * prod(block_shape), L)");
	if (ni < 1 || ni > FOLD_MAX_DIMS || nb != ni)
		return onx_fail(n, ENG_ENOTSUP, "image_shape and block_shape of 1 to %d equal counts (got %d and %d)",
				FOLD_MAX_DIMS, ni, nb);
	int nd = ni;
	int64_t dil[FOLD_MAX_DIMS], str[FOLD_MAX_DIMS], pads[2 * FOLD_MAX_DIMS];
	int cd, cs, cp;
	if ((st = onx_attr_ints(n, "dilations", dil, nd, &cd)) || (st = onx_attr_ints(n, "strides", str, nd, &cs)) ||
	    (st = onx_attr_ints(n, "pads", pads, 2 * nd, &cp)))
		return st;
	if ((cd >= 0 && cd != nd) || (cs >= 0 && cs != nd) || (cp >= 0 && cp != 2 * nd))
		return onx_fail(n, ENG_EINVAL, "dilations and strides need %d values, pads %d", nd, 2 * nd);
	int64_t K = 1, L = 1, nblk[FOLD_MAX_DIMS], padded[FOLD_MAX_DIMS];
	for (int d = 0; d < nd; d++) {
		dil[d] = cd < 0 ? 1 : dil[d];
		str[d] = cs < 0 ? 1 : str[d];
		int64_t pb = cp < 0 ? 0 : pads[d], pe = cp < 0 ? 0 : pads[nd + d];
		if (dil[d] < 1 || str[d] < 1 || pb < 0 || pe < 0 || blk[d] < 1 || img[d] < 1 || img[d] > ((int64_t)1 << 24) ||
		    blk[d] > ((int64_t)1 << 12))
			return onx_fail(n, ENG_EINVAL, "spatial dim %d: image %lld, block %lld, dilation %lld, stride %lld, pads %lld %lld",
					d, (long long)img[d], (long long)blk[d], (long long)dil[d], (long long)str[d],
					(long long)pb, (long long)pe);
		padded[d] = img[d] + pb + pe;
		int64_t span = dil[d] * (blk[d] - 1) + 1;
		nblk[d] = padded[d] >= span ? (padded[d] - span) / str[d] + 1 : 0;
		K *= blk[d];
		L *= nblk[d];
		pads[d] = pb, pads[nd + d] = pe;
	}
	const int64_t *xs = eng_shape(x);
	if (K > FOLD_MAX_OFFSETS)
		return onx_fail(n, ENG_ENOTSUP, "a block of %lld offsets (at most %d)", (long long)K, FOLD_MAX_OFFSETS);
	if (xs[1] % K || xs[2] != L || L < 1)
		return onx_fail(n, ENG_ESHAPE, "input (%lld, %lld, %lld): dim 1 must be C * %lld and dim 2 the %lld blocks",
				(long long)xs[0], (long long)xs[1], (long long)xs[2], (long long)K, (long long)L);
	int64_t N = xs[0], C = xs[1] / K;
	/* (N, C, k_0 .. k_n-1, b_0 .. b_n-1) */
	int64_t sh[2 + 2 * FOLD_MAX_DIMS] = {N, C};
	for (int d = 0; d < nd; d++)
		sh[2 + d] = blk[d], sh[2 + nd + d] = nblk[d];
	eng_tensor *cols = eng_reshape(x, 2 + 2 * nd, sh), *sum = NULL;
	for (int64_t o = 0; o < K && cols; o++) {
		int64_t off[FOLD_MAX_DIMS], at[FOLD_MAX_DIMS], rest = o, rg[2 + 2 * FOLD_MAX_DIMS][2];
		for (int d = nd - 1; d >= 0; d--)
			off[d] = rest % blk[d], rest /= blk[d];
		for (int i = 0; i < 2 + 2 * nd; i++)
			rg[i][0] = 0, rg[i][1] = sh[i];
		for (int d = 0; d < nd; d++) {
			rg[2 + d][0] = off[d], rg[2 + d][1] = off[d] + 1;
			at[d] = off[d] * dil[d];
		}
		int64_t gs[2 + FOLD_MAX_DIMS] = {N, C};
		memcpy(gs + 2, nblk, sizeof(int64_t) * (size_t)nd);
		eng_tensor *g = eng_reshape(eng_shrink(cols, (const int64_t(*)[2])rg), 2 + nd, gs);
		g = place(g, nd, nblk, str, at, padded);
		sum = sum ? eng_add(sum, g) : g;
	}
	int64_t cut[2 + FOLD_MAX_DIMS][2] = {{0, N}, {0, C}};
	for (int d = 0; d < nd; d++)
		cut[2 + d][0] = pads[d], cut[2 + d][1] = pads[d] + img[d];
	n->out[0] = sum ? eng_shrink(sum, (const int64_t(*)[2])cut) : NULL;
	return onx_check(n, n->out[0]);
}
