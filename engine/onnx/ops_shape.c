/* ops_shape.c: ONNX movement ops: Reshape, Flatten, Squeeze/Unsqueeze, Transpose, Concat, Split,
 * Slice, Expand, Tile, and the shape-only ops Shape and Size (constants at build time). */
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

#define MAXV 64 /* values of a shape-like input */

static eng_status need(onx_node *n, eng_tensor *x)
{
	return x ? ENG_OK : onx_fail(n, ENG_EINVAL, "input 0 is missing");
}

eng_status onx_op_reshape(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	eng_status s = need(n, x);
	if (s)
		return s;
	int64_t sh[MAXV];
	int cnt;
	s = n->opset < 5 ? onx_attr_ints(n, "shape", sh, MAXV, &cnt) : onx_in_ints(n, 1, sh, MAXV, &cnt);
	if (s)
		return s;
	if (cnt < 0)
		return onx_fail(n, ENG_EINVAL, "the shape is missing");
	if (cnt > ENG_MAX_DIMS)
		return onx_fail(n, ENG_ENOTSUP, "%d dims (at most %d)", cnt, ENG_MAX_DIMS);
	bool allowzero = onx_attr_i(n, "allowzero", 0);
	for (int i = 0; i < cnt; i++) {
		if (sh[i] == 0 && !allowzero) {
			if (i >= eng_ndim(x))
				return onx_fail(n, ENG_ESHAPE, "shape[%d] = 0 copies a dim the input lacks", i);
			sh[i] = eng_shape(x)[i];
		} else if (sh[i] < -1)
			return onx_fail(n, ENG_ESHAPE, "shape[%d] = %lld", i, (long long)sh[i]);
	}
	n->out[0] = eng_reshape(x, cnt, sh);
	return onx_check(n, n->out[0]);
}

eng_status onx_op_flatten(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	eng_status s = need(n, x);
	if (s)
		return s;
	int r = eng_ndim(x);
	int64_t axis = onx_attr_i(n, "axis", 1);
	if (axis < 0)
		axis += r;
	if (axis < 0 || axis > r)
		return onx_fail(n, ENG_EAXIS, "attribute 'axis' is out of range for rank %d", r);
	int64_t d0 = 1, d1 = 1;
	for (int i = 0; i < r; i++)
		*(i < axis ? &d0 : &d1) *= eng_shape(x)[i];
	n->out[0] = eng_reshape(x, 2, (int64_t[]){d0, d1});
	return onx_check(n, n->out[0]);
}

/* axes from the attribute (opset < 13) or input 1 */
static eng_status axes_of(onx_node *n, int64_t *ax, int *cnt)
{
	return n->opset < 13 ? onx_attr_ints(n, "axes", ax, MAXV, cnt) : onx_in_ints(n, 1, ax, MAXV, cnt);
}

eng_status onx_op_squeeze(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	eng_status s = need(n, x);
	if (s)
		return s;
	int64_t ax[MAXV];
	int cnt, r = eng_ndim(x);
	if ((s = axes_of(n, ax, &cnt)))
		return s;
	bool drop[ENG_MAX_DIMS] = {0};
	for (int i = 0; i < cnt; i++) {
		int a;
		if (!onx_axis(ax[i], r, &a))
			return onx_fail(n, ENG_EAXIS, "axis %lld is out of range for rank %d", (long long)ax[i], r);
		if (eng_shape(x)[a] != 1)
			return onx_fail(n, ENG_ESHAPE, "axis %d has size %lld, not 1", a, (long long)eng_shape(x)[a]);
		drop[a] = true;
	}
	int64_t sh[ENG_MAX_DIMS];
	int nd = 0;
	for (int i = 0; i < r; i++)
		if (!(cnt < 0 ? eng_shape(x)[i] == 1 : drop[i]))
			sh[nd++] = eng_shape(x)[i];
	n->out[0] = eng_reshape(x, nd, sh);
	return onx_check(n, n->out[0]);
}

eng_status onx_op_unsqueeze(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	eng_status s = need(n, x);
	if (s)
		return s;
	int64_t ax[MAXV];
	int cnt;
	if ((s = axes_of(n, ax, &cnt)))
		return s;
	if (cnt < 0)
		return onx_fail(n, ENG_EINVAL, "axes are missing");
	int r = eng_ndim(x) + cnt;
	if (r > ENG_MAX_DIMS)
		return onx_fail(n, ENG_ENOTSUP, "rank %d (at most %d)", r, ENG_MAX_DIMS);
	bool ins[ENG_MAX_DIMS] = {0};
	for (int i = 0; i < cnt; i++) {
		int a;
		if (!onx_axis(ax[i], r, &a) || ins[a])
			return onx_fail(n, ENG_EAXIS, "axis %lld is out of range or repeated", (long long)ax[i]);
		ins[a] = true;
	}
	int64_t sh[ENG_MAX_DIMS];
	for (int i = 0, k = 0; i < r; i++)
		sh[i] = ins[i] ? 1 : eng_shape(x)[k++];
	n->out[0] = eng_reshape(x, r, sh);
	return onx_check(n, n->out[0]);
}

eng_status onx_op_transpose(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	eng_status s = need(n, x);
	if (s)
		return s;
	int r = eng_ndim(x), perm[ENG_MAX_DIMS];
	int64_t p[MAXV];
	int cnt;
	if ((s = onx_attr_ints(n, "perm", p, MAXV, &cnt)))
		return s;
	if (cnt >= 0 && cnt != r)
		return onx_fail(n, ENG_EINVAL, "attribute 'perm' has %d entries for rank %d", cnt, r);
	for (int i = 0; i < r; i++) {
		if (cnt < 0)
			perm[i] = r - 1 - i;
		else if (!onx_axis(p[i], r, &perm[i]))
			return onx_fail(n, ENG_EAXIS, "attribute 'perm': %lld is out of range", (long long)p[i]);
	}
	n->out[0] = eng_permute(x, perm);
	return onx_check(n, n->out[0]);
}

eng_status onx_op_concat(onx_node *n)
{
	eng_tensor *ts[64];
	int k = 0;
	for (int i = 0; i < n->n_in; i++)
		if (onx_in(n, i))
			ts[k++] = onx_in(n, i);
	if (!k)
		return onx_fail(n, ENG_EINVAL, "no inputs");
	if (!onx_attr(n, "axis"))
		return onx_fail(n, ENG_EINVAL, "attribute 'axis' is missing");
	int a;
	if (!onx_axis(onx_attr_i(n, "axis", 0), eng_ndim(ts[0]), &a))
		return onx_fail(n, ENG_EAXIS, "attribute 'axis' is out of range");
	for (int i = 1; i < k; i++)
		if (eng_tensor_dtype(ts[i]) != eng_tensor_dtype(ts[0]))
			return onx_fail(n, ENG_EDTYPE, "inputs differ in type");
	/* zero-size inputs add nothing (the engine's cat wants them all non-empty) */
	eng_tensor *keep[64];
	int m = 0;
	for (int i = 0; i < k; i++)
		if (eng_shape(ts[i])[a] != 0 || (m == 0 && i == k - 1))
			keep[m++] = ts[i];
	n->out[0] = m == 1 ? eng_reshape(keep[0], eng_ndim(keep[0]), eng_shape(keep[0])) : eng_cat(keep, m, a);
	return onx_check(n, n->out[0]);
}

eng_status onx_op_split(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	eng_status s = need(n, x);
	if (s)
		return s;
	int r = eng_ndim(x), a;
	if (!onx_axis(onx_attr_i(n, "axis", 0), r, &a))
		return onx_fail(n, ENG_EAXIS, "attribute 'axis' is out of range");
	int64_t sp[64];
	int cnt;
	s = n->opset < 13 ? onx_attr_ints(n, "split", sp, 64, &cnt) : onx_in_ints(n, 1, sp, 64, &cnt);
	if (s)
		return s;
	int64_t dim = eng_shape(x)[a];
	int no = n->n_out;
	if (cnt < 0) {
		if (n->opset >= 18 && onx_attr(n, "num_outputs"))
			no = (int)onx_attr_i(n, "num_outputs", no);
		if (no != n->n_out)
			return onx_fail(n, ENG_EINVAL, "num_outputs %d but %d outputs", no, n->n_out);
		int64_t chunk = (dim + no - 1) / (no ? no : 1);
		if (n->opset < 18 && dim % no)
			return onx_fail(n, ENG_ESHAPE, "axis size %lld does not split into %d equal parts", (long long)dim, no);
		for (int i = 0; i < no; i++) {
			int64_t left = dim - chunk * i;
			sp[i] = left < chunk ? (left > 0 ? left : 0) : chunk;
		}
		cnt = no;
	}
	if (cnt != n->n_out)
		return onx_fail(n, ENG_EINVAL, "%d split sizes for %d outputs", cnt, n->n_out);
	int64_t off = 0;
	for (int i = 0; i < cnt; i++) {
		if (sp[i] < 0 || off + sp[i] > dim)
			return onx_fail(n, ENG_ESHAPE, "split sizes do not add up to %lld", (long long)dim);
		int64_t rg[ENG_MAX_DIMS][2];
		for (int d = 0; d < r; d++)
			rg[d][0] = 0, rg[d][1] = eng_shape(x)[d];
		rg[a][0] = off;
		rg[a][1] = off + sp[i];
		off += sp[i];
		n->out[i] = eng_shrink(x, rg);
		if ((s = onx_check(n, n->out[i])))
			return s;
	}
	if (off != dim)
		return onx_fail(n, ENG_ESHAPE, "split sizes add up to %lld, not %lld", (long long)off, (long long)dim);
	return ENG_OK;
}

eng_status onx_op_slice(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	eng_status s = need(n, x);
	if (s)
		return s;
	int64_t st[MAXV], en[MAXV], ax[MAXV], sp[MAXV];
	int ns, ne, na, nst;
	if (n->opset < 10) {
		if ((s = onx_attr_ints(n, "starts", st, MAXV, &ns)) || (s = onx_attr_ints(n, "ends", en, MAXV, &ne)) ||
		    (s = onx_attr_ints(n, "axes", ax, MAXV, &na)))
			return s;
		nst = -1;
	} else if ((s = onx_in_ints(n, 1, st, MAXV, &ns)) || (s = onx_in_ints(n, 2, en, MAXV, &ne)) ||
		   (s = onx_in_ints(n, 3, ax, MAXV, &na)) || (s = onx_in_ints(n, 4, sp, MAXV, &nst)))
		return s;
	if (ns < 0 || ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
		return onx_fail(n, ENG_EINVAL, "starts, ends, axes and steps differ in length");
	int r = eng_ndim(x);
	eng_tensor *y = (eng_tensor *)x;
	bool seen[ENG_MAX_DIMS] = {0};
	for (int i = 0; i < ns && y; i++) {
		int a;
		if (!onx_axis(na >= 0 ? ax[i] : i, r, &a) || seen[a])
			return onx_fail(n, ENG_EAXIS, "axis %lld is out of range or repeated", (long long)(na >= 0 ? ax[i] : i));
		seen[a] = true;
		int64_t step = nst >= 0 ? sp[i] : 1;
		if (!step)
			return onx_fail(n, ENG_EINVAL, "step 0");
		y = eng_slice(y, a, st[i], en[i], step);
	}
	n->out[0] = y == x ? eng_reshape(x, r, eng_shape(x)) : y;
	return onx_check(n, n->out[0]);
}

/* Multidirectional broadcast of shapes a and b into out; false if incompatible. */
static bool broadcast(int na, const int64_t *a, int nb, const int64_t *b, int *nout, int64_t *out)
{
	int r = na > nb ? na : nb;
	if (r > ENG_MAX_DIMS)
		return false;
	for (int i = 0; i < r; i++) {
		int64_t x = i - (r - na) >= 0 ? a[i - (r - na)] : 1, y = i - (r - nb) >= 0 ? b[i - (r - nb)] : 1;
		if (x != y && x != 1 && y != 1)
			return false;
		out[i] = x == 1 ? y : x;
	}
	*nout = r;
	return true;
}

eng_status onx_op_expand(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	eng_status s = need(n, x);
	if (s)
		return s;
	int64_t sh[MAXV], out[ENG_MAX_DIMS];
	int cnt, r;
	if ((s = onx_in_ints(n, 1, sh, MAXV, &cnt)))
		return s;
	if (cnt < 0)
		return onx_fail(n, ENG_EINVAL, "the shape is missing");
	if (cnt > ENG_MAX_DIMS || !broadcast(eng_ndim(x), eng_shape(x), cnt, sh, &r, out))
		return onx_fail(n, ENG_ESHAPE, "the shape does not broadcast with the input's");
	int64_t xs[ENG_MAX_DIMS];
	int pad = r - eng_ndim(x);
	for (int i = 0; i < r; i++)
		xs[i] = i < pad ? 1 : eng_shape(x)[i - pad];
	n->out[0] = eng_expand(eng_reshape(x, r, xs), r, out);
	return onx_check(n, n->out[0]);
}

eng_status onx_op_tile(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	eng_status s = need(n, x);
	if (s)
		return s;
	int64_t rp[MAXV];
	int cnt;
	if ((s = onx_in_ints(n, 1, rp, MAXV, &cnt)))
		return s;
	if (cnt != eng_ndim(x))
		return onx_fail(n, ENG_EINVAL, "%d repeats for rank %d", cnt, eng_ndim(x));
	for (int i = 0; i < cnt; i++)
		if (rp[i] < 0)
			return onx_fail(n, ENG_EINVAL, "repeats[%d] = %lld", i, (long long)rp[i]);
	n->out[0] = eng_repeat(x, rp);
	return onx_check(n, n->out[0]);
}

eng_status onx_op_shape(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	eng_status s = need(n, x);
	if (s)
		return s;
	int r = eng_ndim(x);
	int64_t st = onx_attr_i(n, "start", 0), en = onx_attr_i(n, "end", r);
	st = st < 0 ? st + r : st;
	en = en < 0 ? en + r : en;
	st = st < 0 ? 0 : st > r ? r : st;
	en = en < 0 ? 0 : en > r ? r : en;
	int64_t len = en > st ? en - st : 0;
	n->out[0] = eng_from_data(n->ctx, ENG_I64, 1, &len, eng_shape(x) + st);
	n->out_const = true;
	return onx_check(n, n->out[0]);
}

eng_status onx_op_size(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	eng_status s = need(n, x);
	if (s)
		return s;
	int64_t v = eng_numel(x);
	n->out[0] = eng_from_data(n->ctx, ENG_I64, 0, NULL, &v);
	n->out_const = true;
	return onx_check(n, n->out[0]);
}

eng_status onx_op_dropout(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	eng_status s = need(n, x);
	if (s)
		return s;
	if (n->opset < 7 && onx_attr_i(n, "is_test", 0) == 0)
		return onx_fail(n, ENG_ENOTSUP, "training mode (is_test = 0) is not supported");
	double train = 0;
	bool present;
	if ((s = onx_in_scalar(n, 2, &train, &present)))
		return s;
	if (train != 0) {
		/* training drops at random: only a ratio of 0 (nothing dropped) is deterministic */
		double ratio = 0.5;
		bool has_ratio;
		if ((s = onx_in_scalar(n, 1, &ratio, &has_ratio)))
			return s;
		if (ratio != 0)
			return onx_fail(n, ENG_ENOTSUP, "training mode with a ratio of %g (random) is not supported", ratio);
	}
	onx_in_unused(n, 1); /* the ratio: in inference the output is the input whatever it is */
	n->out[0] = eng_reshape(x, eng_ndim(x), eng_shape(x));
	if (n->n_out > 1)
		n->out[1] = eng_ones(n->ctx, ENG_BOOL, eng_ndim(x), eng_shape(x));
	return onx_check(n, n->out[n->n_out > 1 ? 1 : 0]);
}
