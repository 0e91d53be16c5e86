/* ops_state.c: ops that carry a recurrent state from one call to the next (opset 27, Gated
 * DeltaNet and Mamba layers): CausalConvWithState (a causal depthwise 1-D convolution whose
 * last k-1 input positions are the next call's state) and LinearAttention (the linear, gated,
 * delta and gated-delta recurrences, unrolled over the tokens of the call). Tensor API
 * compositions, computed in float32 and cast back to the inputs' type. */
#include <math.h>
#include <string.h>

#include "ops.h"

/* Tokens LinearAttention unrolls: each is a few kernels (the recurrence is sequential; a
 * chunked form is not implemented). */
#define LINATTN_MAX_T 4096

/* CausalConvWithState: input (B, C, L), weight (C, 1, k), bias (C), past_state (B, C, k-1). */
eng_status onx_op_causal_conv_state(onx_node *n)
{
	eng_tensor *x = onx_in(n, 0), *w = onx_in(n, 1), *bias = onx_in(n, 2), *past = onx_in(n, 3);
	char buf[16];
	const char *act = onx_attr_s(n, "activation", "none", buf, sizeof(buf));
	bool silu = !strcmp(act, "silu") || !strcmp(act, "swish");
	if (!silu && strcmp(act, "none"))
		return onx_fail(n, ENG_EINVAL, "activation '%s': expected none, silu or swish", act);
	if (!x || !w || eng_ndim(x) != 3 || eng_ndim(w) != 3)
		return onx_fail(n, ENG_ESHAPE, "input (B, C, L) and weight (C, 1, k) are needed");
	eng_dtype dt = eng_tensor_dtype(x);
	if (!eng_dtype_is_float(dt))
		return onx_fail(n, ENG_EDTYPE, "input must be a float tensor");
	const int64_t *xs = eng_shape(x), *ws = eng_shape(w);
	int64_t B = xs[0], C = xs[1], L = xs[2], k = ws[2];
	if (ws[0] != C || ws[1] != 1 || k < 1)
		return onx_fail(n, ENG_ESHAPE, "weight must be (C, 1, k) with C = %lld, k >= 1", (long long)C);
	if (bias && (eng_ndim(bias) != 1 || eng_shape(bias)[0] != C))
		return onx_fail(n, ENG_ESHAPE, "bias must be (C) with C = %lld", (long long)C);
	int64_t ps[3] = {B, C, k - 1};
	if (past && (eng_ndim(past) != 3 || memcmp(eng_shape(past), ps, sizeof(ps))))
		return onx_fail(n, ENG_ESHAPE, "past_state must be (B, C, k - 1) = (%lld, %lld, %lld)", (long long)B,
				(long long)C, (long long)(k - 1));
	eng_tensor *head = past ? eng_cast(past, ENG_F32) : eng_zeros(n->ctx, ENG_F32, 3, ps);
	eng_tensor *padded = eng_cat((eng_tensor *[2]){head, eng_cast(x, ENG_F32)}, 2, 2); /* (B, C, L + k - 1) */
	int one[2] = {1, 1}, zero[2] = {0, 0};
	eng_tensor *y = eng_conv2d(eng_unsqueeze(padded, 2), eng_unsqueeze(eng_cast(w, ENG_F32), 2),
				   bias ? eng_cast(bias, ENG_F32) : NULL, one, zero, one, (int)C);
	y = eng_cast(eng_reshape(y, 3, (int64_t[]){B, C, L}), dt); /* the convolution rounded to its type */
	if (silu)
		y = eng_cast(eng_silu(eng_cast(y, ENG_F32)), dt);
	n->out[0] = y;
	if (n->n_out > 1)
		n->out[1] = eng_cast(eng_slice(padded, 2, L, L + k - 1, 1), past ? eng_tensor_dtype(past) : dt);
	eng_status st = n->n_out > 1 ? onx_check(n, n->out[1]) : ENG_OK;
	return st ? st : onx_check(n, n->out[0]);
}

/* (B, T, H*D) -> (B, H, T, D) in float32 */
static eng_tensor *heads4(const eng_tensor *x, int64_t h)
{
	const int64_t *s = eng_shape(x);
	static const int perm[4] = {0, 2, 1, 3};
	return eng_permute(eng_reshape(eng_cast(x, ENG_F32), 4, (int64_t[]){s[0], s[1], h, s[2] / h}), perm);
}

/* x[:, :, t] of a (B, H, T, ...) tensor, the token axis dropped */
static eng_tensor *token(const eng_tensor *x, int64_t t) { return eng_squeeze(eng_slice(x, 2, t, t + 1, 1), 2); }

/* [B, kvh, a, b] -> [B, kvh * g, a, b], each head repeated g times in place (h0 h0 h1 h1 ...) */
static eng_tensor *repeat_heads(const eng_tensor *x, int64_t g)
{
	const int64_t *s = eng_shape(x);
	if (g == 1)
		return eng_reshape(x, 4, s);
	int64_t e[5] = {s[0], s[1], g, s[2], s[3]}, r[4] = {s[0], s[1] * g, s[2], s[3]};
	return eng_reshape(eng_expand(eng_unsqueeze(x, 2), 5, e), 4, r);
}

/* LinearAttention: query (B, T, Hq*dk), key (B, T, Hkv*dk), value (B, T, Hkv*dv), past_state
 * (B, Hkv, dk, dv), decay (B, T, Hkv or Hkv*dk, log-space), beta (B, T, Hkv or 1). */
eng_status onx_op_linear_attention(onx_node *n)
{
	eng_tensor *q = onx_in(n, 0), *k = onx_in(n, 1), *v = onx_in(n, 2), *past = onx_in(n, 3);
	eng_tensor *decay = onx_in(n, 4), *beta = onx_in(n, 5);
	char buf[16];
	const char *rule = onx_attr_s(n, "update_rule", "gated_delta", buf, sizeof(buf));
	bool gated = !strcmp(rule, "gated") || !strcmp(rule, "gated_delta");
	bool delta = !strcmp(rule, "delta") || !strcmp(rule, "gated_delta");
	if (!gated && !delta && strcmp(rule, "linear"))
		return onx_fail(n, ENG_EINVAL, "update_rule '%s': expected linear, gated, delta or gated_delta", rule);
	(void)onx_attr_i(n, "chunk_size", 64); /* a hint for chunked kernels: no effect on the result */
	int64_t hq = onx_attr_i(n, "q_num_heads", 0), hkv = onx_attr_i(n, "kv_num_heads", 0);
	if (hq <= 0 || hkv <= 0 || hq % hkv)
		return onx_fail(n, ENG_EINVAL, "q_num_heads (%lld) must be a positive multiple of kv_num_heads (%lld)",
				(long long)hq, (long long)hkv);
	if (gated != (decay != NULL))
		return onx_fail(n, ENG_EINVAL, "update_rule '%s' %s decay input", rule, gated ? "needs a" : "takes no");
	if (delta != (beta != NULL))
		return onx_fail(n, ENG_EINVAL, "update_rule '%s' %s beta input", rule, delta ? "needs a" : "takes no");
	if (!q || !k || !v || eng_ndim(q) != 3 || eng_ndim(k) != 3 || eng_ndim(v) != 3)
		return onx_fail(n, ENG_ESHAPE, "query, key and value must be rank 3 (B, T, H*D)");
	eng_dtype dt = eng_tensor_dtype(q);
	if (!eng_dtype_is_float(dt))
		return onx_fail(n, ENG_EDTYPE, "query must be a float tensor");
	const int64_t *qs = eng_shape(q), *ks = eng_shape(k), *vs = eng_shape(v);
	int64_t B = qs[0], T = qs[1];
	if (qs[2] % hq || vs[2] % hkv || ks[0] != B || vs[0] != B || ks[1] != T || vs[1] != T)
		return onx_fail(n, ENG_ESHAPE, "query, key and value must share (B, T) and split into their heads");
	int64_t dk = qs[2] / hq, dv = vs[2] / hkv;
	if (ks[2] != hkv * dk)
		return onx_fail(n, ENG_ESHAPE, "key's last dim %lld is not kv_num_heads * d_k = %lld", (long long)ks[2],
				(long long)(hkv * dk));
	if (T > LINATTN_MAX_T)
		return onx_fail(n, ENG_ENOTSUP, "%lld tokens in one call (at most %d: the recurrence is unrolled)",
				(long long)T, LINATTN_MAX_T);
	int64_t ss[4] = {B, hkv, dk, dv};
	if (past && (eng_ndim(past) != 4 || memcmp(eng_shape(past), ss, sizeof(ss))))
		return onx_fail(n, ENG_ESHAPE, "past_state must be (B, kv_num_heads, d_k, d_v) = (%lld, %lld, %lld, %lld)",
				(long long)B, (long long)hkv, (long long)dk, (long long)dv);
	eng_tensor *g4 = NULL, *b4 = NULL;
	static const int perm[4] = {0, 2, 1, 3};
	if (decay) {
		int64_t last = eng_ndim(decay) == 3 ? eng_shape(decay)[2] : 0;
		if (eng_ndim(decay) != 3 || eng_shape(decay)[0] != B || eng_shape(decay)[1] != T ||
		    (last != hkv && last != hkv * dk))
			return onx_fail(n, ENG_ESHAPE, "decay must be (B, T, kv_num_heads) or (B, T, kv_num_heads * d_k)");
		g4 = last == hkv ? eng_permute(eng_reshape(eng_cast(decay, ENG_F32), 4, (int64_t[]){B, T, hkv, 1}), perm)
				 : heads4(decay, hkv); /* (B, Hkv, T, 1 or dk) */
		g4 = eng_exp(g4);
	}
	if (beta) {
		int64_t last = eng_ndim(beta) == 3 ? eng_shape(beta)[2] : 0;
		if (eng_ndim(beta) != 3 || eng_shape(beta)[0] != B || eng_shape(beta)[1] != T || (last != hkv && last != 1))
			return onx_fail(n, ENG_ESHAPE, "beta must be (B, T, kv_num_heads) or (B, T, 1)");
		b4 = eng_permute(eng_reshape(eng_cast(beta, ENG_F32), 4, (int64_t[]){B, T, last, 1}), perm);
	}
	double scale = onx_attr_f(n, "scale", 0.0);
	if (scale == 0.0)
		scale = 1.0 / sqrt((double)dk);
	eng_tensor *q4 = heads4(q, hq), *k4 = heads4(k, hkv), *v4 = heads4(v, hkv);
	eng_tensor *state = past ? eng_cast(past, ENG_F32) : eng_zeros(n->ctx, ENG_F32, 4, ss);
	eng_tensor *outs[LINATTN_MAX_T];
	int dk_axis = 2;
	for (int64_t t = 0; t < T; t++) {
		eng_tensor *kt = token(k4, t), *vt = token(v4, t); /* (B, Hkv, dk), (B, Hkv, dv) */
		if (gated) /* S *= exp(g_t), over d_v */
			state = eng_mul(state, eng_unsqueeze(token(g4, t), 3));
		if (delta) { /* v_t <- beta_t (v_t - S^T k_t) */
			eng_tensor *got = eng_sum(eng_mul(state, eng_unsqueeze(kt, 3)), &dk_axis, 1, false);
			vt = eng_mul(token(b4, t), eng_sub(vt, got));
		}
		state = eng_add(state, eng_mul(eng_unsqueeze(kt, 3), eng_unsqueeze(vt, 2)));
		if (t + 1 < T)
			state = eng_contiguous(state); /* each token's state once, not again in every later one */
		eng_tensor *o = eng_sum(eng_mul(eng_unsqueeze(token(q4, t), 3), repeat_heads(state, hq / hkv)), &dk_axis, 1,
					false); /* (B, Hq, dv) */
		outs[t] = eng_mul_s(o, scale);
		if (!outs[t])
			return onx_check(n, NULL);
	}
	eng_tensor *y = T ? eng_stack(outs, (int)T, 1) : eng_zeros(n->ctx, ENG_F32, 4, (int64_t[]){B, 0, hq, dv});
	n->out[0] = eng_cast(eng_reshape(y, 3, (int64_t[]){B, T, hq * dv}), dt); /* (B, T, Hq, dv) flattened */
	if (n->n_out > 1)
		n->out[1] = eng_cast(state, past ? eng_tensor_dtype(past) : dt);
	eng_status st = n->n_out > 1 ? onx_check(n, n->out[1]) : ENG_OK;
	return st ? st : onx_check(n, n->out[0]);
}
