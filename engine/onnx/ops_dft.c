/* ops_dft.c: ONNX DFT and STFT as matmuls with cosine and sine matrices computed here (the
 * lengths are static); complex values are a trailing axis of 2 (real, imaginary). */
#include <math.h>
#include <stdlib.h>

#include "onnx_int.h"
#include "ops.h"

/* x: (..., L) real and imaginary parts (im may be NULL) -> (..., K, 2) of the DFT over the last
 * axis of length L (already padded or cut), K = onesided ? L/2 + 1 : L. */
static eng_tensor *dft_last(onx_node *n, eng_tensor *re, eng_tensor *im, int64_t L, bool inverse, bool onesided)
{
	int64_t K = onesided ? L / 2 + 1 : L;
	float *c = malloc(sizeof(float) * (size_t)(L * K + 1)), *s = malloc(sizeof(float) * (size_t)(L * K + 1));
	if (!c || !s) {
		free(c), free(s);
		onx_fail(n, ENG_ENOMEM, "out of memory");
		return NULL;
	}
	double sign = inverse ? 1 : -1;
	for (int64_t t = 0; t < L; t++)
		for (int64_t k = 0; k < K; k++) {
			double ang = 2 * M_PI * (double)((t * k) % L) / (double)L;
			c[t * K + k] = (float)cos(ang);
			s[t * K + k] = (float)(sign * sin(ang));
		}
	eng_tensor *C = eng_from_data(n->ctx, ENG_F32, 2, (int64_t[]){L, K}, c), *S = eng_from_data(n->ctx, ENG_F32, 2, (int64_t[]){L, K}, s);
	free(c), free(s);
	/* (re + i im)(C + i S) = re C - im S + i (re S + im C) */
	eng_tensor *yr = eng_matmul(re, C), *yi = eng_matmul(re, S);
	if (im) {
		yr = eng_sub(yr, eng_matmul(im, S));
		yi = eng_add(yi, eng_matmul(im, C));
	}
	if (inverse) {
		yr = eng_div_s(yr, (double)L);
		yi = eng_div_s(yi, (double)L);
	}
	eng_tensor *parts[2] = {yr, yi};
	return eng_stack(parts, 2, eng_ndim(yr));
}

/* Real and imaginary parts of x (..., 1 | 2) as float32 without the last axis. */
static eng_status split_complex(onx_node *n, eng_tensor *x, eng_tensor **re, eng_tensor **im)
{
	int r = eng_ndim(x);
	int64_t c = r ? eng_shape(x)[r - 1] : 0;
	if (c != 1 && c != 2)
		return onx_fail(n, ENG_ESHAPE, "the last axis must be 1 (real) or 2 (complex), not %lld", (long long)c);
	eng_tensor *xf = eng_cast(x, ENG_F32);
	*re = eng_reshape(eng_slice(xf, r - 1, 0, 1, 1), r - 1, eng_shape(x));
	*im = c == 2 ? eng_reshape(eng_slice(xf, r - 1, 1, 2, 1), r - 1, eng_shape(x)) : NULL;
	return onx_check(n, *re);
}

/* t with axis a resized to L (cut or zero-padded at the end) */
static eng_tensor *fit(eng_tensor *t, int a, int64_t L)
{
	int64_t have = eng_shape(t)[a];
	if (have == L)
		return t;
	if (have > L)
		return eng_slice(t, a, 0, L, 1);
	int64_t p[ENG_MAX_DIMS][2] = {{0}};
	p[a][1] = L - have;
	return eng_pad(t, p);
}

/* Optional scalar input i as a whole number (dflt when omitted); out of int64's range is an error. */
static eng_status in_count(onx_node *n, int i, int64_t dflt, int64_t *out)
{
	double d;
	bool given;
	eng_status s = onx_in_scalar(n, i, &d, &given);
	if (s)
		return s;
	if (given && !(fabs(d) < 9.2e18))
		return onx_fail(n, ENG_EINVAL, "input %d (%g) is not a usable whole number", i, d);
	*out = given ? (int64_t)d : dflt;
	return ENG_OK;
}

eng_status onx_op_dft(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	eng_tensor *re, *im;
	eng_status s = split_complex(n, x, &re, &im);
	if (s)
		return s;
	/* the signal axis, counted in the input's rank (its trailing complex axis included): the
	 * attribute (default 1) before opset 20, input 2 (default -2, the last signal axis) since */
	int r = eng_ndim(re), a;
	int64_t ax = onx_attr_i(n, "axis", 1);
	if (n->opset >= 20 && (s = in_count(n, 2, -2, &ax)))
		return s;
	if (ax < 0)
		ax += r + 1;
	if (ax < 0 || ax > r - 1)
		return onx_fail(n, ENG_EAXIS, "the DFT axis (%s) is out of range for a signal of rank %d",
				n->opset >= 20 ? "input 2" : "attribute 'axis'", r);
	a = (int)ax;
	bool inverse = onx_attr_i(n, "inverse", 0), onesided = onx_attr_i(n, "onesided", 0);
	if (onesided && (im || inverse))
		return onx_fail(n, ENG_ENOTSUP, "onesided with complex input or inverse is not supported");
	int64_t L;
	if ((s = in_count(n, 1, eng_shape(re)[a], &L)))
		return s;
	if (L < 1 || L > 65536)
		return onx_fail(n, ENG_ENOTSUP, "a DFT length of %lld", (long long)L);
	/* move the axis last, transform, move it back (before the complex axis) */
	int perm[ENG_MAX_DIMS], inv[ENG_MAX_DIMS + 1];
	for (int i = 0, k = 0; i < r; i++)
		if (i != a)
			perm[k++] = i;
	perm[r - 1] = a;
	re = eng_permute(fit(re, a, L), perm);
	im = im ? eng_permute(fit(im, a, L), perm) : NULL;
	eng_tensor *y = dft_last(n, re, im, L, inverse, onesided); /* (..., K, 2) */
	if (!y)
		return onx_check(n, y);
	for (int i = 0; i < r; i++)
		inv[perm[i]] = i;
	inv[r] = r;
	n->out[0] = eng_cast(eng_permute(y, inv), eng_tensor_dtype(x));
	return onx_check(n, n->out[0]);
}

eng_status onx_op_stft(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *win = onx_in(n, 2);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "signal is missing");
	if (eng_ndim(x) != 3)
		return onx_fail(n, ENG_ESHAPE, "signal must be (batch, length, 1 | 2)");
	double step, fl;
	bool has_step, has_fl;
	eng_status s;
	if ((s = onx_in_scalar(n, 1, &step, &has_step)) || (s = onx_in_scalar(n, 3, &fl, &has_fl)))
		return s;
	int64_t len = eng_shape(x)[1], flen = has_fl ? (int64_t)fl : win ? eng_numel(win) : 0;
	if (!has_step || step < 1 || flen < 1 || flen > len)
		return onx_fail(n, ENG_EINVAL, "frame_step %g, frame_length %lld for a signal of %lld", step, (long long)flen, (long long)len);
	int64_t st = (int64_t)step, frames = (len - flen) / st + 1;
	if (frames > 4096)
		return onx_fail(n, ENG_ENOTSUP, "%lld frames", (long long)frames);
	eng_tensor *re, *im;
	if ((s = split_complex(n, x, &re, &im)))
		return s;
	bool onesided = onx_attr_i(n, "onesided", 1) != 0;
	if (onesided && im)
		return onx_fail(n, ENG_ENOTSUP, "onesided with a complex signal is not supported");
	eng_tensor **fr = malloc(sizeof(*fr) * (size_t)frames), **fi = im ? malloc(sizeof(*fi) * (size_t)frames) : NULL;
	if (!fr || (im && !fi)) {
		free(fr), free(fi);
		return onx_fail(n, ENG_ENOMEM, "out of memory");
	}
	for (int64_t f = 0; f < frames; f++) {
		fr[f] = eng_slice(re, 1, f * st, f * st + flen, 1);
		if (im)
			fi[f] = eng_slice(im, 1, f * st, f * st + flen, 1);
	}
	eng_tensor *R = eng_stack(fr, (int)frames, 1), *I = im ? eng_stack(fi, (int)frames, 1) : NULL; /* (B, F, flen) */
	free(fr), free(fi);
	if (win) {
		eng_tensor *w = eng_reshape(eng_cast(win, ENG_F32), 3, (int64_t[]){1, 1, flen});
		R = eng_mul(R, w);
		I = I ? eng_mul(I, w) : NULL;
	}
	eng_tensor *y = dft_last(n, R, I, flen, false, onesided);
	n->out[0] = y ? eng_cast(y, eng_tensor_dtype(x)) : y;
	return onx_check(n, n->out[0]);
}
