/* ops_resize.c: ONNX Resize (nearest, linear, cubic; the coordinate transformation modes of
 * opsets 10-18) and Upsample, one axis at a time: the taps and weights of every output index are
 * computed here (shapes are static) and applied with eng_gather and a weighted sum. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

typedef struct rs_opts {
	char mode[16], ctm[32], nearest[24];
	double cubic_a, extrap;
	bool exclude_outside;
} rs_opts;

/* Source coordinate of output index x on an axis of in -> out (scale as ONNX uses it). */
static double src_coord(const rs_opts *o, double x, int64_t in, int64_t out, double scale, double r0, double r1, bool *outside)
{
	double len = scale * (double)in, v;
	*outside = false;
	if (!strcmp(o->ctm, "align_corners"))
		v = len == 1 ? 0 : x * (double)(in - 1) / (len - 1);
	else if (!strcmp(o->ctm, "asymmetric"))
		v = x / scale;
	else if (!strcmp(o->ctm, "tf_half_pixel_for_nn"))
		v = (x + 0.5) / scale;
	else if (!strcmp(o->ctm, "pytorch_half_pixel"))
		v = len == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
	else if (!strcmp(o->ctm, "tf_crop_and_resize")) {
		v = len > 1 ? r0 * (double)(in - 1) + x * (r1 - r0) * (double)(in - 1) / (len - 1) : 0.5 * (r0 + r1) * (double)(in - 1);
		*outside = v < 0 || v > (double)(in - 1);
	} else if (!strcmp(o->ctm, "half_pixel_symmetric")) { /* half_pixel, centred on the whole output */
		double adj = (double)out / len, c = (double)in / 2;
		v = c * (1 - adj) + (x + 0.5) / scale - 0.5;
	} else /* half_pixel */
		v = (x + 0.5) / scale - 0.5;
	return v;
}

static int64_t clampi(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

static void cubic_coeffs(double r, double A, double *c)
{
	c[0] = ((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A;
	c[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
	c[2] = ((A + 2) * (1 - r) - (A + 3)) * (1 - r) * (1 - r) + 1;
	c[3] = ((A * ((1 - r) + 1) - 5 * A) * ((1 - r) + 1) + 8 * A) * ((1 - r) + 1) - 4 * A;
}

/* x gathered along axis a at idx (out entries): (pre, out, post) back to x's rank. */
static eng_tensor *take(onx_node *n, eng_tensor *x, int a, const int64_t *idx, int64_t out)
{
	int r = eng_ndim(x);
	const int64_t *s = eng_shape(x);
	int64_t pre = 1, post = 1;
	for (int i = 0; i < a; i++)
		pre *= s[i];
	for (int i = a + 1; i < r; i++)
		post *= s[i];
	eng_tensor *it = eng_from_data(n->ctx, ENG_I64, 3, (int64_t[]){1, out, 1}, idx);
	it = eng_expand(it, 3, (int64_t[]){pre, out, post});
	eng_tensor *g = eng_gather(eng_reshape(x, 3, (int64_t[]){pre, s[a], post}), 1, it);
	int64_t sh[ENG_MAX_DIMS];
	memcpy(sh, s, sizeof(int64_t) * (size_t)r);
	sh[a] = out;
	return eng_reshape(g, r, sh);
}

/* weights (out) shaped to broadcast along axis a of rank r */
static eng_tensor *weights(onx_node *n, const float *w, int64_t out, int r, int a, eng_dtype dt)
{
	int64_t sh[ENG_MAX_DIMS];
	for (int i = 0; i < r; i++)
		sh[i] = i == a ? out : 1;
	return eng_cast(eng_from_data(n->ctx, ENG_F32, r, sh, w), dt);
}

static eng_status resize_axis(onx_node *n, const rs_opts *o, eng_tensor **xp, int a, int64_t out, double scale, double r0, double r1)
{
	eng_tensor *x = *xp;
	int r = eng_ndim(x);
	int64_t in = eng_shape(x)[a];
	eng_dtype dt = eng_tensor_dtype(x);
	int taps = !strcmp(o->mode, "nearest") ? 1 : !strcmp(o->mode, "linear") ? 2 : 4;
	int64_t *idx = malloc(sizeof(int64_t) * (size_t)(out * taps + 1));
	float *w = malloc(sizeof(float) * (size_t)(out * taps + 1));
	float *mask = malloc(sizeof(float) * (size_t)(out + 1));
	if (!idx || !w || !mask) {
		free(idx), free(w), free(mask);
		return onx_fail(n, ENG_ENOMEM, "out of memory");
	}
	bool any_outside = false;
	for (int64_t i = 0; i < out; i++) {
		bool outside;
		double v = src_coord(o, (double)i, in, out, scale, r0, r1, &outside);
		mask[i] = outside;
		any_outside |= outside;
		if (taps == 1) {
			int64_t k;
			if (!strcmp(o->nearest, "floor"))
				k = (int64_t)floor(v);
			else if (!strcmp(o->nearest, "ceil"))
				k = (int64_t)ceil(v);
			else if (!strcmp(o->nearest, "round_prefer_ceil"))
				k = (int64_t)floor(v + 0.5);
			else /* round_prefer_floor */
				k = v == floor(v) + 0.5 ? (int64_t)floor(v) : (int64_t)floor(v + 0.5);
			idx[i] = clampi(k, 0, in - 1);
			w[i] = 1;
			continue;
		}
		int64_t x0 = (int64_t)floor(v);
		double ratio = v - (double)x0;
		double c[4];
		int64_t first;
		if (taps == 2) {
			c[0] = 1 - ratio, c[1] = ratio;
			first = x0;
		} else {
			cubic_coeffs(ratio, o->cubic_a, c);
			first = x0 - 1;
		}
		double sum = 0;
		for (int t = 0; t < taps; t++) {
			int64_t k = first + t;
			if (o->exclude_outside && (k < 0 || k >= in))
				c[t] = 0;
			sum += c[t];
		}
		for (int t = 0; t < taps; t++) {
			idx[t * out + i] = clampi(first + t, 0, in - 1);
			w[t * out + i] = (float)(o->exclude_outside && sum != 0 ? c[t] / sum : c[t]);
		}
	}
	eng_tensor *y = NULL;
	for (int t = 0; t < taps; t++) {
		eng_tensor *g = take(n, x, a, idx + t * out, out);
		if (taps > 1)
			g = eng_mul(g, weights(n, w + t * out, out, r, a, eng_dtype_is_float(dt) ? dt : ENG_F32));
		y = y ? eng_add(y, g) : g;
	}
	if (y && any_outside)
		y = eng_where(eng_cast(weights(n, mask, out, r, a, ENG_F32), ENG_BOOL), eng_scalar(n->ctx, eng_tensor_dtype(y), o->extrap), y);
	if (y && eng_tensor_dtype(y) != dt)
		y = eng_cast(taps > 1 && !eng_dtype_is_float(dt) ? eng_round(y) : y, dt);
	free(idx), free(w), free(mask);
	*xp = y;
	return onx_check(n, y);
}

/* Scales (floats) of input i: a constant float tensor. */
static eng_status in_floats(onx_node *n, int i, double *out, int max, int *count)
{
	*count = -1;
	eng_tensor *t = onx_in(n, i);
	if (!t)
		return ENG_OK;
	int64_t numel = eng_numel(t);
	if (numel > max)
		return onx_fail(n, ENG_ENOTSUP, "input %d holds %lld values", i, (long long)numel);
	if (numel == 0) {
		*count = 0;
		return ENG_OK;
	}
	float buf[2 * ENG_MAX_DIMS];
	eng_status s = onx_in_check_static(n, i);
	if (s)
		return s;
	eng_tensor *c = eng_cast(t, ENG_F32);
	s = c ? eng_tensor_read(c, buf, sizeof(float) * (size_t)numel) : eng_error(n->ctx);
	eng_tensor_free(c);
	if (s)
		return s;
	for (int64_t k = 0; k < numel; k++)
		out[k] = buf[k];
	*count = (int)numel;
	return ENG_OK;
}

eng_status onx_op_resize(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	int r = eng_ndim(x);
	bool upsample = !strcmp(n->pb->op_type, "Upsample");
	rs_opts o = {.cubic_a = onx_attr_f(n, "cubic_coeff_a", -0.75), .extrap = onx_attr_f(n, "extrapolation_value", 0),
		     .exclude_outside = onx_attr_i(n, "exclude_outside", 0) != 0};
	char buf[32];
	snprintf(o.mode, sizeof(o.mode), "%s", onx_attr_s(n, "mode", "nearest", buf, sizeof(buf)));
	if (!strcmp(o.mode, "bilinear"))
		snprintf(o.mode, sizeof(o.mode), "linear");
	snprintf(o.ctm, sizeof(o.ctm), "%s", upsample || n->opset < 11 ? "asymmetric" : onx_attr_s(n, "coordinate_transformation_mode", "half_pixel", buf, sizeof(buf)));
	snprintf(o.nearest, sizeof(o.nearest), "%s", upsample || n->opset < 11 ? "floor" : onx_attr_s(n, "nearest_mode", "round_prefer_floor", buf, sizeof(buf)));
	if (strcmp(o.mode, "nearest") && strcmp(o.mode, "linear") && strcmp(o.mode, "cubic"))
		return onx_fail(n, ENG_ENOTSUP, "attribute 'mode' '%s' is not supported", o.mode);
	if ((strcmp(o.ctm, "half_pixel") && strcmp(o.ctm, "half_pixel_symmetric") && strcmp(o.ctm, "align_corners") && strcmp(o.ctm, "asymmetric") &&
						  strcmp(o.ctm, "pytorch_half_pixel") && strcmp(o.ctm, "tf_crop_and_resize") &&
						  strcmp(o.ctm, "tf_half_pixel_for_nn")))
		return onx_fail(n, ENG_ENOTSUP, "attribute 'coordinate_transformation_mode' '%s' is not supported", o.ctm);
	if (onx_attr_i(n, "antialias", 0))
		return onx_fail(n, ENG_ENOTSUP, "attribute 'antialias' = 1 is not supported");
	double scales[2 * ENG_MAX_DIMS], roi[2 * ENG_MAX_DIMS];
	int64_t sizes[ENG_MAX_DIMS + 1];
	int ns = -1, nz = -1, nr = -1;
	eng_status s = ENG_OK;
	if (upsample && n->opset < 9) {
		float f[ENG_MAX_DIMS];
		if ((s = onx_attr_floats(n, "scales", f, ENG_MAX_DIMS, &ns)))
			return s;
		for (int i = 0; i < ns; i++)
			scales[i] = f[i];
	} else if (upsample || n->opset < 11) {
		s = in_floats(n, 1, scales, 2 * ENG_MAX_DIMS, &ns);
	} else {
		if (!(s = in_floats(n, 1, roi, 2 * ENG_MAX_DIMS, &nr)) && !(s = in_floats(n, 2, scales, 2 * ENG_MAX_DIMS, &ns)))
			s = onx_in_ints(n, 3, sizes, ENG_MAX_DIMS + 1, &nz);
	}
	if (s)
		return s;
	/* axes (opset 18): scales, sizes and roi name only these axes; the others stay as they are */
	int64_t ax[ENG_MAX_DIMS + 1];
	int nax = -1;
	if ((s = onx_attr_ints(n, "axes", ax, ENG_MAX_DIMS + 1, &nax)))
		return s;
	if (nax >= 0) {
		int given = nz > 0 ? nz : ns;
		if (given != nax || nax > r || (nr > 0 && nr != 2 * nax))
			return onx_fail(n, ENG_EINVAL, "scales, sizes and roi must name each of the %d axes", nax);
		double fs[2 * ENG_MAX_DIMS], fr[2 * ENG_MAX_DIMS];
		int64_t fz[ENG_MAX_DIMS];
		bool seen[ENG_MAX_DIMS] = {false};
		for (int a = 0; a < r; a++)
			fs[a] = 1, fz[a] = eng_shape(x)[a], fr[a] = 0, fr[r + a] = 1;
		for (int i = 0; i < nax; i++) {
			int a;
			if (!onx_axis(ax[i], r, &a) || seen[a])
				return onx_fail(n, ENG_EAXIS, "axis %lld is out of range or repeated", (long long)ax[i]);
			seen[a] = true;
			if (nz > 0)
				fz[a] = sizes[i];
			else
				fs[a] = scales[i];
			if (nr > 0)
				fr[a] = roi[i], fr[r + a] = roi[nax + i];
		}
		memcpy(scales, fs, sizeof(fs)), memcpy(sizes, fz, sizeof(fz)), memcpy(roi, fr, sizeof(fr));
		ns = nz > 0 ? ns : r, nz = nz > 0 ? r : nz, nr = nr > 0 ? 2 * r : nr;
	}
	bool use_sizes = nz > 0;
	/* keep_aspect_ratio_policy (opset 18) with sizes: one scale for the named axes, the
	 * smallest (not_larger) or the largest (not_smaller) of theirs, sizes rounded half up */
	char kb[16];
	const char *keep = onx_attr_s(n, "keep_aspect_ratio_policy", "stretch", kb, sizeof(kb));
	double kscale = 0;
	if (strcmp(keep, "stretch")) {
		if (strcmp(keep, "not_larger") && strcmp(keep, "not_smaller"))
			return onx_fail(n, ENG_EINVAL, "attribute 'keep_aspect_ratio_policy' '%s'", keep);
		for (int i = 0; use_sizes && i < (nax >= 0 ? nax : r); i++) {
			int a = nax >= 0 ? (int)(ax[i] < 0 ? ax[i] + r : ax[i]) : i;
			double f = eng_shape(x)[a] ? (double)sizes[a] / (double)eng_shape(x)[a] : 1;
			kscale = !i ? f : keep[4] == 'l' ? fmin(kscale, f) : fmax(kscale, f);
		}
		for (int i = 0; use_sizes && i < (nax >= 0 ? nax : r); i++) {
			int a = nax >= 0 ? (int)(ax[i] < 0 ? ax[i] + r : ax[i]) : i;
			sizes[a] = (int64_t)(kscale * (double)eng_shape(x)[a] + 0.5);
		}
	}
	if (use_sizes ? nz != r : ns != r)
		return onx_fail(n, ENG_EINVAL, "%s has %d entries for rank %d", use_sizes ? "sizes" : "scales", use_sizes ? nz : ns, r);
	if (!strcmp(o.ctm, "tf_crop_and_resize") && nr != 2 * r)
		return onx_fail(n, ENG_EINVAL, "roi must hold %d entries", 2 * r);
	eng_tensor *y = x;
	for (int a = 0; a < r && !s; a++) {
		int64_t in = eng_shape(x)[a], out;
		double sc;
		if (use_sizes) {
			out = sizes[a];
			sc = in ? (double)out / (double)in : 1;
			if (kscale > 0 && out != in) /* the kept ratio's scale, not out / in */
				sc = kscale;
		} else {
			sc = scales[a];
			if (!(sc > 0))
				return onx_fail(n, ENG_EINVAL, "scale %g", sc);
			out = (int64_t)floor((double)in * sc);
		}
		if (out < 0 || out > ((int64_t)1 << 31))
			return onx_fail(n, ENG_ERANGE, "output size %lld", (long long)out);
		double r0 = nr == 2 * r ? roi[a] : 0, r1 = nr == 2 * r ? roi[r + a] : 1;
		bool identity = out == in && sc == 1 && strcmp(o.ctm, "tf_crop_and_resize");
		if (!identity && in > 0 && out > 0)
			s = resize_axis(n, &o, &y, a, out, sc, r0, r1);
		else if (out != in)
			return onx_fail(n, ENG_ENOTSUP, "resizing an empty axis");
	}
	if (s)
		return s;
	n->out[0] = y == x ? eng_reshape(x, r, eng_shape(x)) : y;
	return onx_check(n, n->out[0]);
}
