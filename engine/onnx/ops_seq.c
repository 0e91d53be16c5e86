/* ops_seq.c: ONNX ops along one axis: CumSum, ReverseSequence, the signal windows (Hann,
 * Hamming, Blackman) and MelWeightMatrix, and Compress/NonZero (their output shapes need
 * values at build time). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

eng_status onx_op_cumsum(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	int64_t av[2];
	int cnt, r = eng_ndim(x), a;
	eng_status s = onx_in_ints(n, 1, av, 2, &cnt);
	if (s)
		return s;
	if (cnt != 1 || !onx_axis(av[0], r, &a))
		return onx_fail(n, ENG_EAXIS, "axis must be one value in range for rank %d", r);
	bool excl = onx_attr_i(n, "exclusive", 0), rev = onx_attr_i(n, "reverse", 0);
	int64_t len = eng_shape(x)[a];
	if (len * eng_numel(x) > ((int64_t)1 << 26))
		return onx_fail(n, ENG_ENOTSUP, "an axis of %lld over %lld elements", (long long)len, (long long)eng_numel(x));
	/* y[.., i, ..] = sum_j x[.., j, ..] * m[j, i]: x gets a new axis after a for i */
	int64_t sh[ENG_MAX_DIMS];
	if (r + 1 > ENG_MAX_DIMS)
		return onx_fail(n, ENG_ENOTSUP, "rank %d", r);
	for (int i = 0; i <= r; i++)
		sh[i] = i == a || i == a + 1 ? len : 1;
	eng_tensor *j = eng_index(n->ctx, ENG_I64, r + 1, sh, a), *i = eng_index(n->ctx, ENG_I64, r + 1, sh, a + 1);
	eng_tensor *m = rev ? (excl ? eng_gt(j, i) : eng_ge(j, i)) : (excl ? eng_lt(j, i) : eng_le(j, i));
	eng_tensor *xe = eng_unsqueeze(x, a + 1);
	bool prod = !strcmp(n->pb->op_type, "CumProd"); /* the same with products over the mask */
	eng_tensor *y = prod ? eng_prod(eng_where(m, xe, eng_scalar(n->ctx, eng_tensor_dtype(x), 1)), &a, 1, false)
			     : eng_sum(eng_where(m, xe, eng_scalar(n->ctx, eng_tensor_dtype(x), 0)), &a, 1, false);
	n->out[0] = y && eng_tensor_dtype(y) != eng_tensor_dtype(x) ? eng_cast(y, eng_tensor_dtype(x)) : y;
	return onx_check(n, n->out[0]);
}

eng_status onx_op_reverse_sequence(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *lens = onx_in(n, 1);
	if (!x || !lens)
		return onx_fail(n, ENG_EINVAL, "input and sequence_lens are needed");
	int r = eng_ndim(x);
	int ta = (int)onx_attr_i(n, "time_axis", 0), ba = (int)onx_attr_i(n, "batch_axis", 1);
	if (r < 2 || (ta != 0 && ta != 1) || (ba != 0 && ba != 1) || ta == ba)
		return onx_fail(n, ENG_EINVAL, "time_axis and batch_axis must be 0 and 1 (in either order)");
	/* index along the time axis: t < len[b] ? len[b] - 1 - t : t */
	eng_tensor *t = eng_index(n->ctx, ENG_I64, r, eng_shape(x), ta);
	int64_t lsh[ENG_MAX_DIMS];
	for (int i = 0; i < r; i++)
		lsh[i] = i == ba ? eng_shape(x)[ba] : 1;
	eng_tensor *l = eng_reshape(eng_cast(lens, ENG_I64), r, lsh);
	eng_tensor *idx = eng_where(eng_lt(t, l), eng_sub(eng_add_s(l, -1), t), t);
	n->out[0] = eng_gather(x, ta, idx);
	return onx_check(n, n->out[0]);
}

eng_status onx_op_window(onx_node *n)
{
	double size;
	bool present;
	eng_status s = onx_in_scalar(n, 0, &size, &present);
	if (s)
		return s;
	if (!present || size < 0 || size > (double)(1 << 24))
		return onx_fail(n, ENG_EINVAL, "size %g", size);
	eng_dtype dt = ENG_F32;
	if (onx_attr(n, "output_datatype") && !onx_node_dtype(n, (int)onx_attr_i(n, "output_datatype", 1), &dt))
		return onx_fail(n, ENG_ENOTSUP, "attribute 'output_datatype' %lld is not supported", (long long)onx_attr_i(n, "output_datatype", 1));
	int64_t N = (int64_t)size;
	double denom = onx_attr_i(n, "periodic", 1) ? (double)N : (double)(N - 1);
	const char *op = n->pb->op_type;
	eng_tensor *k = eng_arange(n->ctx, ENG_F32, 0, (double)N, 1);
	eng_tensor *ph = eng_mul_s(k, denom > 0 ? 2 * M_PI / denom : 0);
	eng_tensor *y;
	if (!strcmp(op, "HannWindow"))
		y = eng_rsub_s(0.5, eng_mul_s(eng_cos(ph), 0.5));
	else if (!strcmp(op, "HammingWindow"))
		y = eng_rsub_s(25.0 / 46.0, eng_mul_s(eng_cos(ph), 21.0 / 46.0));
	else
		y = eng_add(eng_rsub_s(0.42, eng_mul_s(eng_cos(ph), 0.5)), eng_mul_s(eng_cos(eng_mul_s(ph, 2)), 0.08));
	n->out[0] = y ? eng_cast(y, dt) : y;
	n->out_const = true;
	return onx_check(n, n->out[0]);
}

/* MelWeightMatrix: [dft_length / 2 + 1, num_mel_bins] triangles on the mel scale, computed on
 * the host in double as the spec's reference does (mel = 2595 log10(1 + hz / 700), the edges
 * num_mel_bins + 2 points apart, each a spectrogram bin floor((dft_length + 1) hz /
 * sample_rate)); the scalars must be known at build time (they give the shape). */
eng_status onx_op_mel_weights(onx_node *n)
{
	double v[5];
	bool present;
	static const char *const what[5] = {"num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"};
	for (int i = 0; i < 5; i++) {
		eng_status s = onx_in_scalar(n, i, &v[i], &present);
		if (s)
			return s;
		if (!present)
			return onx_fail(n, ENG_EINVAL, "input %d (%s) is needed", i, what[i]);
	}
	eng_dtype dt = ENG_F32;
	if (onx_attr(n, "output_datatype") && !onx_node_dtype(n, (int)onx_attr_i(n, "output_datatype", 1), &dt))
		return onx_fail(n, ENG_ENOTSUP, "attribute 'output_datatype' %lld is not supported", (long long)onx_attr_i(n, "output_datatype", 1));
	const int64_t mels = (int64_t)v[0], bins = (int64_t)v[1] / 2 + 1;
	if (v[0] < 1 || v[0] > 4096 || v[1] < 1 || v[1] > (1 << 20) || v[2] <= 0 || !(v[3] >= 0) || !(v[4] > v[3]) ||
	    mels * bins > (1 << 24))
		return onx_fail(n, ENG_EINVAL, "num_mel_bins %g, dft_length %g, sample_rate %g, edges %g..%g hertz: out of range", v[0], v[1],
				v[2], v[3], v[4]);
	float *w = calloc((size_t)(mels * bins), sizeof(float));
	int64_t *f = malloc(sizeof(int64_t) * (size_t)(mels + 2));
	if (!w || !f) {
		free(w);
		free(f);
		return onx_fail(n, ENG_ENOMEM, "out of memory");
	}
	const double lo = 2595 * log10(1 + v[3] / 700), hi = 2595 * log10(1 + v[4] / 700), step = (hi - lo) / (double)(mels + 2);
	for (int64_t i = 0; i < mels + 2; i++) {
		double hz = 700 * (pow(10, ((double)i * step + lo) / 2595) - 1);
		f[i] = (int64_t)floor((v[1] + 1) * hz / v[2]);
	}
	bool ok = true;
	for (int64_t m = 0; m < mels && ok; m++) {
		int64_t l = f[m], c = f[m + 1], h = f[m + 2];
		ok = l >= 0 && c >= l && h >= c && h <= bins && c < bins;
		for (int64_t j = l; ok && j <= c; j++)
			w[j * mels + m] = c == l ? 1.0f : (float)((double)(j - l) / (double)(c - l));
		for (int64_t j = c; ok && j < h; j++)
			w[j * mels + m] = (float)((double)(h - j) / (double)(h - c));
	}
	free(f);
	if (!ok) {
		free(w);
		return onx_fail(n, ENG_EINVAL, "upper_edge_hertz %g reaches past the spectrogram's %lld bins", v[4], (long long)bins);
	}
	int64_t sh[2] = {bins, mels};
	eng_tensor *y = eng_from_data(n->ctx, ENG_F32, 2, sh, w);
	free(w);
	n->out[0] = y ? eng_cast(y, dt) : y;
	n->out_const = true;
	return onx_check(n, n->out[0]);
}

/* The values of input i as int64 on the host (malloc'd, *count of them), under the rule of
 * build-time values; a bool or integer tensor of any shape. */
static eng_status host_ints(onx_node *n, int i, int64_t **out, int64_t *count)
{
	*out = NULL;
	eng_status s = onx_in_check_static(n, i);
	if (s)
		return s;
	eng_tensor *t = onx_in(n, i);
	int64_t k = eng_numel(t);
	if (k > ((int64_t)1 << 24))
		return onx_fail(n, ENG_ENOTSUP, "input %d holds %lld values", i, (long long)k);
	*out = malloc(sizeof(int64_t) * (size_t)(k + 1));
	if (!*out)
		return onx_fail(n, ENG_ENOMEM, "out of memory");
	eng_tensor *c = eng_cast(t, ENG_I64);
	s = c ? eng_tensor_read(c, *out, sizeof(int64_t) * (size_t)k) : eng_error(n->ctx);
	eng_tensor_free(c);
	if (s) {
		free(*out);
		*out = NULL;
		return s;
	}
	*count = k;
	return ENG_OK;
}

eng_status onx_op_compress(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x || !onx_in(n, 1))
		return onx_fail(n, ENG_EINVAL, "input and condition are needed");
	int64_t *c, nc;
	eng_status s = host_ints(n, 1, &c, &nc);
	if (s)
		return s;
	bool has_axis = onx_attr(n, "axis") != NULL;
	int a = 0, r = eng_ndim(x);
	eng_tensor *v = (eng_tensor *)x;
	if (has_axis && !onx_axis(onx_attr_i(n, "axis", 0), r, &a)) {
		free(c);
		return onx_fail(n, ENG_EAXIS, "attribute 'axis' is out of range for rank %d", r);
	}
	if (!has_axis)
		v = eng_reshape(x, 1, (int64_t[]){eng_numel(x)});
	int64_t len = eng_shape(v)[a], k = 0;
	int64_t *idx = malloc(sizeof(int64_t) * (size_t)(len + 1));
	for (int64_t i = 0; idx && i < nc && i < len; i++)
		if (c[i])
			idx[k++] = i;
	free(c);
	if (!idx)
		return onx_fail(n, ENG_ENOMEM, "out of memory");
	int vr = eng_ndim(v);
	const int64_t *vs = eng_shape(v);
	int64_t pre = 1, post = 1;
	for (int i = 0; i < a; i++)
		pre *= vs[i];
	for (int i = a + 1; i < vr; i++)
		post *= vs[i];
	int64_t sh[ENG_MAX_DIMS];
	memcpy(sh, vs, sizeof(int64_t) * (size_t)vr);
	sh[a] = k;
	eng_tensor *y;
	if (k == 0 || pre == 0 || post == 0)
		y = eng_zeros(n->ctx, eng_tensor_dtype(x), vr, sh);
	else {
		eng_tensor *it = eng_expand(eng_from_data(n->ctx, ENG_I64, 3, (int64_t[]){1, k, 1}, idx), 3, (int64_t[]){pre, k, post});
		y = eng_reshape(eng_gather(eng_reshape(v, 3, (int64_t[]){pre, len, post}), 1, it), vr, sh);
	}
	free(idx);
	n->out[0] = y;
	return onx_check(n, y);
}

eng_status onx_op_nonzero(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	int64_t *v, nv;
	eng_status s;
	if (eng_dtype_is_float(eng_tensor_dtype(x))) {
		/* nonzero-ness as bool first, so 0.5 counts */
		onx_val tmp = *n->in[0];
		tmp.t = eng_ne(x, eng_scalar(n->ctx, eng_tensor_dtype(x), 0));
		const onx_val *ins[1] = {&tmp};
		onx_node m = *n;
		m.in = ins;
		s = host_ints(&m, 0, &v, &nv);
	} else
		s = host_ints(n, 0, &v, &nv);
	if (s)
		return s;
	int r = eng_ndim(x);
	int64_t k = 0;
	for (int64_t i = 0; i < nv; i++)
		k += v[i] != 0;
	int64_t *out = malloc(sizeof(int64_t) * (size_t)(k * (r ? r : 1) + 1));
	if (!out) {
		free(v);
		return onx_fail(n, ENG_ENOMEM, "out of memory");
	}
	int64_t col = 0;
	for (int64_t i = 0; i < nv; i++) {
		if (!v[i])
			continue;
		int64_t rem = i;
		for (int d = r - 1; d >= 0; d--) {
			out[d * k + col] = rem % eng_shape(x)[d];
			rem /= eng_shape(x)[d];
		}
		col++;
	}
	free(v);
	n->out[0] = eng_from_data(n->ctx, ENG_I64, 2, (int64_t[]){r, k}, out);
	free(out);
	return onx_check(n, n->out[0]);
}

/* ---- Unique: output shapes depend on the values, which are read while building ---- */

typedef struct uq_ctx {
	const double *v;
	int64_t rest;
} uq_ctx;

static int uq_cmp(const uq_ctx *c, int64_t a, int64_t b)
{
	for (int64_t k = 0; k < c->rest; k++) {
		double x = c->v[a * c->rest + k], y = c->v[b * c->rest + k];
		if (x != y)
			return x < y ? -1 : 1;
	}
	return 0;
}

/* insertion of row indices sorted by value, stable (first occurrence first among equals) */
static void uq_sort(const uq_ctx *c, int64_t *ord, int64_t len)
{
	for (int64_t i = 1; i < len; i++) {
		int64_t t = ord[i], j = i;
		while (j > 0 && uq_cmp(c, ord[j - 1], t) > 0) {
			ord[j] = ord[j - 1];
			j--;
		}
		ord[j] = t;
	}
}

eng_status onx_op_unique(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0);
	if (!x)
		return onx_fail(n, ENG_EINVAL, "input 0 is missing");
	eng_status s = onx_in_check_static(n, 0);
	if (s)
		return s;
	int r = eng_ndim(x), a = 0;
	bool has_axis = onx_attr(n, "axis") != NULL, sorted = onx_attr_i(n, "sorted", 1) != 0;
	if (has_axis && !onx_axis(onx_attr_i(n, "axis", 0), r, &a))
		return onx_fail(n, ENG_EAXIS, "attribute 'axis' is out of range for rank %d", r);
	eng_tensor *v = has_axis ? (eng_tensor *)x : eng_reshape(x, 1, (int64_t[]){eng_numel(x)});
	int vr = eng_ndim(v);
	int perm[ENG_MAX_DIMS];
	perm[0] = a;
	for (int i = 0, k = 1; i < vr; i++)
		if (i != a)
			perm[k++] = i;
	eng_tensor *p = eng_permute(v, perm);
	int64_t len = eng_shape(v)[a], numel = eng_numel(v), rest = len ? numel / len : 0;
	if (numel > (1 << 20) || len > (1 << 14))
		return onx_fail(n, ENG_ENOTSUP, "%lld values (at most 2^20, 2^14 rows)", (long long)numel);
	double *vals = malloc(sizeof(double) * (size_t)(numel + 1));
	float *f = malloc(sizeof(float) * (size_t)(numel + 1));
	int64_t *ord = malloc(sizeof(int64_t) * (size_t)(4 * len + 4));
	if (!vals || !f || !ord) {
		free(vals), free(f), free(ord);
		return onx_fail(n, ENG_ENOMEM, "out of memory");
	}
	bool flt = eng_dtype_is_float(eng_tensor_dtype(x));
	eng_tensor *c = eng_contiguous(eng_cast(p, flt ? ENG_F32 : ENG_I64));
	s = c ? eng_tensor_read(c, flt ? (void *)f : (void *)vals, (size_t)numel * (flt ? sizeof(float) : sizeof(int64_t))) : eng_error(n->ctx);
	eng_tensor_free(c);
	for (int64_t i = 0; !s && i < numel; i++)
		vals[i] = flt ? (double)f[i] : (double)((int64_t *)vals)[i];
	if (s) {
		free(vals), free(f), free(ord);
		return s;
	}
	uq_ctx q = {vals, rest};
	int64_t *first = ord + len, *inv = ord + 2 * len, *cnt = ord + 3 * len, nu = 0;
	/* unique rows in first-occurrence order */
	for (int64_t i = 0; i < len; i++) {
		int64_t k = 0;
		while (k < nu && uq_cmp(&q, first[k], i))
			k++;
		if (k == nu)
			first[nu++] = i;
	}
	for (int64_t k = 0; k < nu; k++)
		ord[k] = first[k];
	if (sorted)
		uq_sort(&q, ord, nu);
	for (int64_t i = 0; i < len; i++)
		for (int64_t k = 0; k < nu; k++)
			if (!uq_cmp(&q, ord[k], i)) {
				inv[i] = k;
				break;
			}
	for (int64_t k = 0; k < nu; k++)
		cnt[k] = 0;
	for (int64_t i = 0; i < len; i++)
		cnt[inv[i]]++;
	/* Y: the rows ord[0..nu) of v along a */
	int64_t pre = 1, post = 1;
	for (int i = 0; i < a; i++)
		pre *= eng_shape(v)[i];
	for (int i = a + 1; i < vr; i++)
		post *= eng_shape(v)[i];
	int64_t sh[ENG_MAX_DIMS];
	memcpy(sh, eng_shape(v), sizeof(int64_t) * (size_t)vr);
	sh[a] = nu;
	eng_tensor *it = eng_expand(eng_from_data(n->ctx, ENG_I64, 3, (int64_t[]){1, nu, 1}, ord), 3, (int64_t[]){pre, nu, post});
	n->out[0] = eng_reshape(eng_gather(eng_reshape(v, 3, (int64_t[]){pre, len, post}), 1, it), vr, sh);
	if (n->n_out > 1)
		n->out[1] = eng_from_data(n->ctx, ENG_I64, 1, &nu, ord);
	if (n->n_out > 2)
		n->out[2] = eng_from_data(n->ctx, ENG_I64, 1, &len, inv);
	if (n->n_out > 3)
		n->out[3] = eng_from_data(n->ctx, ENG_I64, 1, &nu, cnt);
	free(vals), free(f), free(ord);
	return onx_check(n, n->out[0]);
}
