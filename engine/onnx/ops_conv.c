/* ops_conv.c: ONNX Conv and pooling (1-D and 2-D, as 2-D), with pads made explicit (asymmetric,
 * auto_pad SAME_UPPER/SAME_LOWER/VALID, ceil_mode), and the global poolings of any rank. */
#include <math.h>
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

typedef struct win {
	int s;                       /* spatial dims (1 or 2) */
	int64_t in[2], k[2], st[2], dil[2], pb[2], pe[2];
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

eng_status onx_op_conv(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *wt = onx_in(n, 1), *b = onx_in(n, 2);
	if (!x || !wt)
		return onx_fail(n, ENG_EINVAL, "X and W are needed");
	int r = eng_ndim(x);
	if (r != 3 && r != 4)
		return onx_fail(n, ENG_ENOTSUP, "%d-D convolution is not supported (1-D and 2-D are)", r - 2);
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
	int64_t p[4][2];
	pads4(&w, p);
	eng_tensor *x4 = eng_pad(as4d(x), p);
	eng_tensor *w4 = as4d(wt);
	int stride[2] = {w.s == 2 ? (int)w.st[0] : 1, (int)w.st[w.s - 1]};
	int dil[2] = {w.s == 2 ? (int)w.dil[0] : 1, (int)w.dil[w.s - 1]};
	eng_tensor *y = eng_conv2d(x4, w4, b, stride, (int[]){0, 0}, dil, (int)group);
	if (y && r == 3)
		y = eng_reshape(y, 3, (int64_t[]){eng_shape(y)[0], eng_shape(y)[1], eng_shape(y)[3]});
	n->out[0] = y ? eng_cast(y, eng_tensor_dtype(x)) : y;
	return onx_check(n, n->out[0]);
}

eng_status onx_op_pool(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	bool is_max = !strcmp(n->pb->op_type, "MaxPool");
	if (is_max && n->n_out > 1 && *n->pb->output[1])
		return onx_fail(n, ENG_ENOTSUP, "output Indices is not supported");
	int r = eng_ndim(x);
	if (r != 3 && r != 4)
		return onx_fail(n, ENG_ENOTSUP, "%d-D pooling is not supported (1-D and 2-D are)", r - 2);
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
	for (int i = 0; i < w.s; i++)
		if (w.dil[i] != 1)
			return onx_fail(n, ENG_ENOTSUP, "attribute 'dilations' other than 1 is not supported");
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
	eng_tensor *y = !strcmp(n->pb->op_type, "GlobalMaxPool") ? eng_max(x, ax, nax, true) : eng_mean(x, ax, nax, true);
	n->out[0] = y ? eng_cast(y, eng_tensor_dtype(x)) : y;
	return onx_check(n, n->out[0]);
}
