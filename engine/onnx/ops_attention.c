/* ops_attention.c: Attention (opsets 23-25): scaled dot-product attention over heads, with 3-D
 * inputs split into heads, a key/value cache (past -> present), grouped-query heads, a boolean
 * or additive mask, causal masking aligned to the cache, a sliding window, softcap and padded
 * key lengths; and RotaryEmbedding. All as Tensor API compositions. */
#include <math.h>

#include "ops.h"

/* [B, S, heads * d] -> [B, heads, S, d] */
static eng_tensor *split_heads(const eng_tensor *x, int64_t heads)
{
	const int64_t *s = eng_shape(x);
	int64_t sh[4] = {s[0], s[1], heads, s[2] / heads};
	static const int perm[4] = {0, 2, 1, 3};
	return eng_permute(eng_reshape(x, 4, sh), perm);
}

/* [B, kvh, S, d] -> [B, kvh * g, S, d], each head repeated g times in place (h0 h0 h1 h1 ...) */
static eng_tensor *repeat_heads(const eng_tensor *x, int64_t g)
{
	const int64_t *s = eng_shape(x);
	int64_t e[5] = {s[0], s[1], g, s[2], s[3]}, r[4] = {s[0], s[1] * g, s[2], s[3]};
	return eng_reshape(eng_expand(eng_unsqueeze(x, 2), 5, e), 4, r);
}

/* The additive bias [.., Sq, Skv] (0 or -inf for a boolean mask; padded to Skv with -inf or
 * false when shorter), or NULL for none. */
static eng_tensor *mask_bias(onx_node *n, const eng_tensor *m, int64_t skv)
{
	int r = eng_ndim(m);
	int64_t last = eng_shape(m)[r - 1];
	bool is_bool = eng_tensor_dtype(m) == ENG_BOOL;
	eng_tensor *f = is_bool ? eng_where(m, eng_full(n->ctx, ENG_F32, 0, NULL, 0.0),
					    eng_full(n->ctx, ENG_F32, 0, NULL, -INFINITY))
				: eng_cast(m, ENG_F32);
	if (last < skv && f) {
		int64_t sh[ENG_MAX_DIMS];
		for (int d = 0; d < r; d++)
			sh[d] = d == r - 1 ? skv - last : eng_shape(m)[d];
		f = eng_cat((eng_tensor *[2]){f, eng_full(n->ctx, ENG_F32, r, sh, -INFINITY)}, 2, r - 1);
	}
	return f;
}

/* Allowed keys of a causal block: key j for query i iff j <= i + offset; offset [B,1,1,1] or
 * a scalar. Returns the 0 / -inf bias [.., Sq, Skv]. */
static eng_tensor *causal_bias(onx_node *n, int64_t sq, int64_t skv, const eng_tensor *offset)
{
	int64_t qs[2] = {sq, 1}, ks[2] = {1, skv};
	eng_tensor *i = eng_reshape(eng_arange(n->ctx, ENG_I64, 0, (double)sq, 1), 2, qs);
	eng_tensor *j = eng_reshape(eng_arange(n->ctx, ENG_I64, 0, (double)skv, 1), 2, ks);
	eng_tensor *lim = eng_add(i, offset); /* j allowed iff j < lim + 1 */
	eng_tensor *ok = eng_lt(j, eng_add_s(lim, 1));
	return eng_where(ok, eng_full(n->ctx, ENG_F32, 0, NULL, 0.0), eng_full(n->ctx, ENG_F32, 0, NULL, -INFINITY));
}

eng_status onx_op_attention(onx_node *n)
{
	eng_tensor *q = onx_in(n, 0), *k = onx_in(n, 1), *v = onx_in(n, 2), *mask = onx_in(n, 3);
	eng_tensor *pk = onx_in(n, 4), *pv = onx_in(n, 5), *nonpad = onx_in(n, 6);
	if (!q || !k || !v)
		return onx_fail(n, ENG_EINVAL, "Q, K and V are needed");
	int r = eng_ndim(q);
	if ((r != 3 && r != 4) || eng_ndim(k) != r || eng_ndim(v) != r)
		return onx_fail(n, ENG_ESHAPE, "Q, K and V must all be 3-D or all 4-D");
	if (!pk != !pv)
		return onx_fail(n, ENG_EINVAL, "past_key and past_value come together");
	int64_t qh = onx_attr_i(n, "q_num_heads", 0), kvh = onx_attr_i(n, "kv_num_heads", 0);
	if (r == 3) {
		if (qh < 1 || kvh < 1 || eng_shape(q)[2] % qh || eng_shape(k)[2] % kvh || eng_shape(v)[2] % kvh)
			return onx_fail(n, ENG_EINVAL, "3-D inputs need q_num_heads and kv_num_heads dividing their hidden sizes");
		q = split_heads(q, qh);
		k = split_heads(k, kvh);
		v = split_heads(v, kvh);
		if (!q || !k || !v)
			return onx_check(n, NULL);
	}
	eng_dtype dt = eng_tensor_dtype(q);
	int64_t hd = eng_shape(q)[3];
	if (pk) {
		k = eng_cat((eng_tensor *[2]){pk, k}, 2, 2);
		v = eng_cat((eng_tensor *[2]){pv, v}, 2, 2);
		if (!k || !v)
			return onx_check(n, NULL);
	}
	const int64_t *qs = eng_shape(q), *ks = eng_shape(k), *vs = eng_shape(v);
	int64_t B = qs[0], sq = qs[2], skv = ks[2], heads = qs[1];
	if (ks[0] != B || vs[0] != B || ks[3] != hd || vs[2] != skv || ks[1] != vs[1] || heads % ks[1])
		return onx_fail(n, ENG_ESHAPE, "Q [%lld,%lld,%lld,%lld], K and V of other batch, head or length sizes",
				(long long)B, (long long)heads, (long long)sq, (long long)hd);
	eng_tensor *present_k = k, *present_v = v;
	if (heads != ks[1]) { /* grouped-query attention */
		k = repeat_heads(k, heads / ks[1]);
		v = repeat_heads(v, heads / ks[1]);
	}
	double scale = onx_attr_f(n, "scale", 1.0 / sqrt((double)hd)), cap = onx_attr_f(n, "softcap", 0.0);
	int64_t mode = onx_attr_i(n, "qk_matmul_output_mode", 0);
	if (!(scale > 0) || cap < 0)
		return onx_fail(n, ENG_EINVAL, "attribute 'scale' must be > 0 and 'softcap' >= 0");
	if (onx_attr_i(n, "softmax_precision", 1) != 1) /* the softmax runs in float32 */
		return onx_fail(n, ENG_ENOTSUP, "attribute 'softmax_precision' other than float is not supported");
	/* qk_matmul_output: 0 and 1 the scores after softcap (when set), 2 with the mask's bias
	 * added, 3 the probabilities (onnx 1.23's reference) */
	if (n->n_out > 3 && (mode < 0 || mode > 3))
		return onx_fail(n, ENG_EINVAL, "qk_matmul_output_mode %lld", (long long)mode);
	double s = sqrt(scale);
	eng_tensor *qf = eng_mul_s(eng_cast(q, ENG_F32), s), *kf = eng_mul_s(eng_cast(k, ENG_F32), s);
	eng_tensor *qk = eng_matmul(qf, eng_transpose(kf, 2, 3)); /* [B, H, Sq, Skv] */
	if (cap > 0)
		qk = eng_mul_s(eng_tanh(eng_div_s(qk, cap)), cap);
	eng_tensor *scores = qk;
	eng_tensor *bias = mask ? mask_bias(n, mask, skv) : NULL;
	/* where this block's queries stand among the keys: after the cache, or per batch after
	 * the valid keys before it */
	eng_tensor *off;
	if (!pk && nonpad) {
		int64_t os[4] = {B, 1, 1, 1};
		off = eng_reshape(eng_sub_s(eng_cast(nonpad, ENG_I64), (double)sq), 4, os);
	} else {
		off = eng_full(n->ctx, ENG_I64, 0, NULL, pk ? (double)eng_shape(pk)[2] : 0.0);
	}
	if (onx_attr_i(n, "is_causal", 0)) {
		eng_tensor *c = causal_bias(n, sq, skv, off);
		bias = bias ? eng_add(bias, c) : c;
	}
	int64_t left = onx_attr_i(n, "left_window_size", -1), right = onx_attr_i(n, "right_window_size", -1);
	if (left < -1 || right < -1)
		return onx_fail(n, ENG_EINVAL, "left_window_size and right_window_size must be -1 or >= 0");
	if (left >= 0 || right >= 0) { /* a sliding window: key j for query i iff -right <= i + off - j <= left */
		int64_t qs[2] = {sq, 1}, ks[2] = {1, skv};
		eng_tensor *i = eng_reshape(eng_arange(n->ctx, ENG_I64, 0, (double)sq, 1), 2, qs);
		eng_tensor *j = eng_reshape(eng_arange(n->ctx, ENG_I64, 0, (double)skv, 1), 2, ks);
		eng_tensor *diff = eng_sub(eng_add(i, off), j);
		eng_tensor *ok = eng_full(n->ctx, ENG_BOOL, 0, NULL, 1);
		if (left >= 0)
			ok = eng_and(ok, eng_le(diff, eng_full(n->ctx, ENG_I64, 0, NULL, (double)left)));
		if (right >= 0)
			ok = eng_and(ok, eng_ge(diff, eng_full(n->ctx, ENG_I64, 0, NULL, -(double)right)));
		eng_tensor *w = eng_where(ok, eng_full(n->ctx, ENG_F32, 0, NULL, 0.0), eng_full(n->ctx, ENG_F32, 0, NULL, -INFINITY));
		bias = bias ? eng_add(bias, w) : w;
	}
	if (nonpad) { /* keys at or past nonpad_kv_seqlen[b] are padding */
		int64_t ns[4] = {B, 1, 1, 1}, js[4] = {1, 1, 1, skv};
		eng_tensor *j = eng_reshape(eng_arange(n->ctx, ENG_I64, 0, (double)skv, 1), 4, js);
		eng_tensor *ok = eng_lt(j, eng_reshape(eng_cast(nonpad, ENG_I64), 4, ns));
		eng_tensor *p = eng_where(ok, eng_full(n->ctx, ENG_F32, 0, NULL, 0.0),
					  eng_full(n->ctx, ENG_F32, 0, NULL, -INFINITY));
		bias = bias ? eng_add(bias, p) : p;
	}
	if (bias)
		qk = eng_add(qk, bias);
	eng_tensor *with_bias = qk, *p = eng_softmax(qk, 3);
	if (bias) { /* a row whose keys are all masked attends to nothing: zeros (opsets 23, 24), not
		     * softmax's 0/0; a NaN of the inputs' own still comes through */
		int ax = eng_ndim(bias) - 1; /* broadcast against [B, H, Sq, Skv] */
		eng_tensor *none = eng_eq(eng_max(bias, &ax, 1, true), eng_full(n->ctx, ENG_F32, 0, NULL, -INFINITY));
		p = eng_where(none, eng_full(n->ctx, ENG_F32, 0, NULL, 0.0), p);
	}
	eng_tensor *y = eng_matmul(p, eng_cast(v, ENG_F32)); /* [B, H, Sq, dv] */
	if (r == 3 && y) {
		static const int perm[4] = {0, 2, 1, 3};
		int64_t s3[3] = {B, sq, -1};
		y = eng_reshape(eng_permute(y, perm), 3, s3);
	}
	n->out[0] = eng_cast(y, dt);
	if (n->n_out > 1)
		n->out[1] = present_k;
	if (n->n_out > 2)
		n->out[2] = present_v;
	if (n->n_out > 3)
		n->out[3] = eng_cast(mode == 3 ? p : mode == 2 ? with_bias : scores, dt);
	for (int i = 1; i < n->n_out && i < 4; i++)
		if (!n->out[i])
			return onx_check(n, NULL);
	return onx_check(n, n->out[0]);
}

/* t[..., lo:hi] along the last axis */
static eng_tensor *last_slice(eng_tensor *t, int64_t lo, int64_t hi)
{
	int64_t rg[ENG_MAX_DIMS][2];
	int r = eng_ndim(t);
	for (int i = 0; i < r; i++)
		rg[i][0] = 0, rg[i][1] = eng_shape(t)[i];
	rg[r - 1][0] = lo, rg[r - 1][1] = hi;
	return eng_shrink(t, rg);
}

/* RotaryEmbedding (RoPE): the first rotary_embedding_dim entries of each head rotated by the
 * angle of its position, pairs taken as halves or interleaved; cos/sin caches indexed by
 * position_ids when given ([max_pos, d/2]), else already [B, S, d/2]. */
eng_status onx_op_rotary(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *cosc = onx_in(n, 1), *sinc = onx_in(n, 2), *pos = onx_in(n, 3);
	if (!x || !cosc || !sinc)
		return onx_fail(n, ENG_EINVAL, "X, cos_cache and sin_cache are needed");
	eng_dtype dt = eng_tensor_dtype(x);
	int r = eng_ndim(x);
	if (!eng_dtype_is_float(dt) || (r != 3 && r != 4))
		return onx_fail(n, ENG_ESHAPE, "X must be a float tensor of rank 3 or 4");
	const int64_t *xs = eng_shape(x);
	int64_t B = xs[0], S = r == 4 ? xs[2] : xs[1], H, D;
	static const int perm[4] = {0, 2, 1, 3};
	eng_tensor *t = eng_cast(x, ENG_F32);
	if (r == 4) {
		H = xs[1], D = xs[3];
		t = eng_permute(t, perm); /* [B, S, H, D] */
	} else {
		H = onx_attr_i(n, "num_heads", 0);
		if (H <= 0 || xs[2] % H)
			return onx_fail(n, ENG_EINVAL, "a rank-3 X needs num_heads dividing its hidden size %lld", (long long)xs[2]);
		D = xs[2] / H;
		t = eng_reshape(t, 4, (int64_t[]){B, S, H, D});
	}
	int64_t rd = onx_attr_i(n, "rotary_embedding_dim", 0);
	rd = rd ? rd : D;
	if (rd < 2 || rd > D || rd % 2)
		return onx_fail(n, ENG_EINVAL, "rotary_embedding_dim %lld for heads of %lld", (long long)rd, (long long)D);
	int64_t h = rd / 2;
	eng_tensor *c = eng_cast(cosc, ENG_F32), *sn = eng_cast(sinc, ENG_F32);
	if (pos) {
		if (eng_ndim(cosc) != 2 || eng_ndim(sinc) != 2)
			return onx_fail(n, ENG_ESHAPE, "with position_ids the caches must be [max_position, dim / 2]");
		c = eng_embedding(c, pos), sn = eng_embedding(sn, pos);
	}
	if (!c || !sn || eng_ndim(c) != 3 || eng_shape(c)[2] != h || eng_shape(sn)[2] != h || eng_ndim(sn) != 3)
		return c && sn ? onx_fail(n, ENG_ESHAPE, "the caches must end in rotary_embedding_dim / 2 = %lld", (long long)h)
			       : onx_check(n, NULL);
	c = eng_unsqueeze(c, 2), sn = eng_unsqueeze(sn, 2); /* [B, S, 1, h] */
	eng_tensor *xr = last_slice(t, 0, rd), *x1, *x2;
	bool il = onx_attr_i(n, "interleaved", 0) != 0;
	int64_t s4[4] = {B, S, H, h}, s5[5] = {B, S, H, h, 2};
	if (il) {
		eng_tensor *pr = eng_reshape(xr, 5, s5);
		x1 = eng_reshape(last_slice(pr, 0, 1), 4, s4), x2 = eng_reshape(last_slice(pr, 1, 2), 4, s4);
	} else {
		x1 = last_slice(xr, 0, h), x2 = last_slice(xr, h, rd);
	}
	eng_tensor *re = eng_sub(eng_mul(c, x1), eng_mul(sn, x2)), *im = eng_add(eng_mul(sn, x1), eng_mul(c, x2)), *rot;
	if (il) {
		eng_tensor *pair[2] = {eng_unsqueeze(re, 4), eng_unsqueeze(im, 4)};
		rot = eng_reshape(eng_cat(pair, 2, 4), 4, (int64_t[]){B, S, H, rd});
	} else {
		eng_tensor *pair[2] = {re, im};
		rot = eng_cat(pair, 2, 3);
	}
	if (rd < D) {
		eng_tensor *parts[2] = {rot, last_slice(t, rd, D)};
		rot = eng_cat(parts, 2, 3);
	}
	eng_tensor *y = r == 4 ? eng_permute(rot, perm) : eng_reshape(rot, 3, xs);
	n->out[0] = eng_cast(y, dt);
	return onx_check(n, n->out[0]);
}
