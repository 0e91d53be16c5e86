/* ops_quant.c: ONNX uint8 quantisation (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear;
 * per-tensor or per-axis scales) and Einsum without ellipsis or repeated labels. */
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

/* p (a scalar or 1-D per-axis) shaped to broadcast along axis a of rank r. */
static eng_tensor *along(onx_node *n, eng_tensor *p, int r, eng_status *s)
{
	if (eng_ndim(p) == 0 || eng_numel(p) == 1)
		return eng_reshape(p, 0, NULL);
	int a;
	if (!onx_axis(onx_attr_i(n, "axis", 1), r, &a)) {
		*s = onx_fail(n, ENG_EAXIS, "attribute 'axis' is out of range for rank %d", r);
		return NULL;
	}
	int64_t sh[ENG_MAX_DIMS];
	for (int i = 0; i < r; i++)
		sh[i] = i == a ? eng_numel(p) : 1;
	return eng_reshape(p, r, sh);
}

static eng_tensor *to_u8(onx_node *n, eng_tensor *v)
{
	return eng_cast(eng_clamp(eng_round(v), 0, 255), ENG_U8);
}

eng_status onx_op_quantize(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *sc = onx_in(n, 1), *zp = onx_in(n, 2);
	if (!x || !sc)
		return onx_fail(n, ENG_EINVAL, "x and y_scale are needed");
	if (zp && eng_tensor_dtype(zp) != ENG_U8)
		return onx_fail(n, ENG_ENOTSUP, "zero point type %s is not supported (uint8 is)", eng_dtype_name(eng_tensor_dtype(zp)));
	eng_status s = ENG_OK;
	int r = eng_ndim(x);
	eng_tensor *scb = along(n, sc, r, &s);
	eng_tensor *zpb = zp ? along(n, eng_cast(zp, ENG_F32), r, &s) : NULL;
	if (s)
		return s;
	eng_tensor *v = eng_div(eng_cast(x, ENG_F32), eng_cast(scb, ENG_F32));
	v = eng_round(v);
	if (zpb)
		v = eng_add(v, zpb);
	n->out[0] = to_u8(n, v);
	return onx_check(n, n->out[0]);
}

eng_status onx_op_dequantize(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *sc = onx_in(n, 1), *zp = onx_in(n, 2);
	if (!x || !sc)
		return onx_fail(n, ENG_EINVAL, "x and x_scale are needed");
	eng_dtype dt = eng_tensor_dtype(x);
	if (dt != ENG_U8 && dt != ENG_I32)
		return onx_fail(n, ENG_ENOTSUP, "input type %s is not supported", eng_dtype_name(dt));
	eng_status s = ENG_OK;
	int r = eng_ndim(x);
	eng_tensor *scb = along(n, sc, r, &s);
	eng_tensor *zpb = zp ? along(n, eng_cast(zp, ENG_F32), r, &s) : NULL;
	if (s)
		return s;
	eng_tensor *v = eng_cast(x, ENG_F32);
	if (zpb)
		v = eng_sub(v, zpb);
	n->out[0] = eng_cast(eng_mul(v, scb), eng_tensor_dtype(sc));
	return onx_check(n, n->out[0]);
}

eng_status onx_op_dynamic_quantize(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	eng_tensor *xf = eng_cast(x, ENG_F32), *zero = eng_scalar(n->ctx, ENG_F32, 0);
	eng_tensor *hi = eng_maximum(eng_max(xf, NULL, 0, false), zero), *lo = eng_minimum(eng_min(xf, NULL, 0, false), zero);
	eng_tensor *scale = eng_div_s(eng_sub(hi, lo), 255.0);
	eng_tensor *zpf = eng_clamp(eng_round(eng_neg(eng_div(lo, scale))), 0, 255);
	n->out[0] = to_u8(n, eng_add(eng_round(eng_div(xf, scale)), zpf));
	if (n->n_out > 1)
		n->out[1] = scale;
	if (n->n_out > 2)
		n->out[2] = eng_cast(zpf, ENG_U8);
	return onx_check(n, n->out[0]);
}

/* ---- Einsum ---- */

/* Parse one operand's labels (letters, spaces skipped) from *p up to ',' '-' or the end. */
static int labels(const char **p, char *out)
{
	int k = 0;
	for (; **p && **p != ',' && **p != '-'; (*p)++) {
		char c = **p;
		if (c == ' ')
			continue;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) || k == ENG_MAX_DIMS)
			return -1;
		out[k++] = c;
	}
	return k;
}

eng_status onx_op_einsum(onx_node *n)
{
	char eq[256], lab[64][ENG_MAX_DIMS], outl[ENG_MAX_DIMS], all[ENG_MAX_DIMS + 1];
	onx_attr_s(n, "equation", "", eq, sizeof(eq));
	if (strstr(eq, "..."))
		return onx_fail(n, ENG_ENOTSUP, "an ellipsis in equation '%s' is not supported", eq);
	int nop = n->n_in, nl[64], nall = 0, nout = -1;
	const char *p = eq;
	for (int i = 0; i < nop; i++) {
		nl[i] = labels(&p, lab[i]);
		if (nl[i] < 0 || !onx_in(n, i) || nl[i] != eng_ndim(onx_in(n, i)))
			return onx_fail(n, ENG_EINVAL, "equation '%s' does not match input %d", eq, i);
		for (int k = 0; k < nl[i]; k++) {
			for (int j = 0; j < k; j++)
				if (lab[i][j] == lab[i][k])
					return onx_fail(n, ENG_ENOTSUP, "a repeated label (a diagonal) in '%s' is not supported", eq);
			if (!memchr(all, lab[i][k], (size_t)nall)) {
				if (nall == ENG_MAX_DIMS)
					return onx_fail(n, ENG_ENOTSUP, "more than %d labels", ENG_MAX_DIMS);
				all[nall++] = lab[i][k];
			}
		}
		if (i < nop - 1) {
			if (*p != ',')
				return onx_fail(n, ENG_EINVAL, "equation '%s' names %d operands, not %d", eq, i + 1, nop);
			p++;
		}
	}
	if (*p == '-') {
		if (p[1] != '>')
			return onx_fail(n, ENG_EINVAL, "equation '%s'", eq);
		p += 2;
		nout = labels(&p, outl);
		if (nout < 0 || *p)
			return onx_fail(n, ENG_EINVAL, "equation '%s'", eq);
	} else if (*p)
		return onx_fail(n, ENG_EINVAL, "equation '%s'", eq);
	else { /* implicit: labels seen once, alphabetically */
		nout = 0;
		for (char c = 'A'; c <= 'z'; c++) {
			int cnt = 0;
			for (int i = 0; i < nop; i++)
				cnt += memchr(lab[i], c, (size_t)nl[i]) != NULL;
			if (cnt == 1)
				outl[nout++] = c;
		}
	}
	/* every operand as rank nall in the order of all */
	int64_t dim[ENG_MAX_DIMS];
	for (int k = 0; k < nall; k++)
		dim[k] = -1;
	eng_tensor *prod = NULL;
	for (int i = 0; i < nop; i++) {
		eng_tensor *t = onx_in(n, i);
		int perm[ENG_MAX_DIMS], np = 0;
		int64_t sh[ENG_MAX_DIMS];
		for (int k = 0; k < nall; k++) {
			const char *at = memchr(lab[i], all[k], (size_t)nl[i]);
			sh[k] = 1;
			if (!at)
				continue;
			int ax = (int)(at - lab[i]);
			perm[np++] = ax;
			sh[k] = eng_shape(t)[ax];
			if (dim[k] >= 0 && dim[k] != sh[k] && sh[k] != 1 && dim[k] != 1)
				return onx_fail(n, ENG_ESHAPE, "label '%c' has sizes %lld and %lld", all[k], (long long)dim[k], (long long)sh[k]);
			if (dim[k] < 0 || dim[k] == 1)
				dim[k] = sh[k];
		}
		t = eng_reshape(eng_permute(t, perm), nall, sh);
		prod = prod ? eng_mul(prod, t) : t;
	}
	int red[ENG_MAX_DIMS], nred = 0, keep[ENG_MAX_DIMS], nkeep = 0;
	for (int k = 0; k < nall; k++) {
		if (memchr(outl, all[k], (size_t)nout))
			keep[nkeep++] = k;
		else
			red[nred++] = k;
	}
	if (nkeep != nout)
		return onx_fail(n, ENG_EINVAL, "output labels of '%s' not among the inputs'", eq);
	eng_tensor *y = nred ? eng_sum(prod, red, nred, false) : prod;
	/* y's axes are keep[] in order; permute to outl */
	int perm[ENG_MAX_DIMS];
	for (int o = 0; o < nout; o++)
		for (int k = 0; k < nkeep; k++)
			if (all[keep[k]] == outl[o])
				perm[o] = k;
	if (y && nout > 1)
		y = eng_permute(y, perm);
	if (y && eng_tensor_dtype(y) != eng_tensor_dtype(onx_in(n, 0)))
		y = eng_cast(y, eng_tensor_dtype(onx_in(n, 0)));
	n->out[0] = y;
	return onx_check(n, y);
}
