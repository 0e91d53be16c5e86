/* test_onnx_ops.c: importer ops that ONNX's Debian test data (opsets up to 17) does not cover,
 * checked against references computed here: Attention (opset 23) with 3-D inputs split into
 * heads, grouped-query heads, an additive mask and a scale; with a key/value cache, causal
 * masking aligned to it, a short boolean mask and softcap; with padded key lengths (opset 24);
 * the errors of the ops onnx 1.23 added; TopK's ties with its fill. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <tensord/onnx.h>
#include "onnx_mb.h"
#include "testutil.h"

static void fill(float *x, int n, unsigned seed)
{
	for (int i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		x[i] = (float)((seed >> 16) % 2001) / 1000.0f - 1.0f;
	}
}

/* Attention on 4-D [B, H, S, D] arrays in double: k and v hold all Skv keys (cache included);
 * kvh heads serve H / kvh query heads each; bias (additive, [Sq, Skv]) or NULL; causal: key j
 * for query i iff j <= i + off[b]; valid (or NULL): batch b's keys from valid[b] on are padding;
 * cap > 0: softcap. y [B, H, Sq, DV]. */
static void attention_ref(int B, int H, int kvh, int sq, int skv, int D, int DV, const float *q, const float *k,
			  const float *v, const double *bias, bool causal, const int *off, const int *valid, double scale,
			  double cap, double *y)
{
	for (int b = 0; b < B; b++)
		for (int h = 0; h < H; h++) {
			int kh = h / (H / kvh);
			for (int i = 0; i < sq; i++) {
				double s[64], mx = -INFINITY, sum = 0;
				for (int j = 0; j < skv; j++) {
					double a = 0;
					for (int d = 0; d < D; d++)
						a += (double)q[((b * H + h) * sq + i) * D + d] * k[((b * kvh + kh) * skv + j) * D + d];
					a *= scale;
					if (cap > 0)
						a = cap * tanh(a / cap);
					if (bias)
						a += bias[i * skv + j];
					if ((causal && j > i + off[b]) || (valid && j >= valid[b]))
						a = -INFINITY;
					s[j] = a;
					mx = fmax(mx, a);
				}
				for (int j = 0; j < skv; j++)
					sum += s[j] = exp(s[j] - mx);
				for (int e = 0; e < DV; e++) {
					double acc = 0;
					for (int j = 0; j < skv; j++)
						acc += s[j] / sum * v[((b * kvh + kh) * skv + j) * DV + e];
					y[((b * H + h) * sq + i) * DV + e] = acc;
				}
			}
		}
}

static eng_onnx_model *load(eng_ctx *ctx, mb *b)
{
	size_t len;
	char err[512];
	uint8_t *buf = mb_pack(b, &len);
	eng_onnx_model *m = eng_onnx_load_mem(ctx, buf, len, NULL, 0, err, sizeof(err));
	free(buf);
	ck_assert_msg(m, "%s", err);
	return m;
}

static void expect_close(const float *got, const double *want, int n, const char *what)
{
	for (int i = 0; i < n; i++)
		ck_assert_msg(fabs(got[i] - want[i]) <= 1e-5 + 1e-4 * fabs(want[i]), "%s[%d] = %g, want %g", what, i,
			      got[i], want[i]);
}

/* 3-D inputs: Q [2, 3, 4 heads x 2], K [2, 5, 2 heads x 2], V [2, 5, 2 heads x 3]; a float mask
 * [3, 5]; scale 0.7. Y [2, 3, 4 x 3]. */
START_TEST(attention_3d_gqa_mask)
{
	enum { B = 2, SQ = 3, SKV = 5, H = 4, KVH = 2, D = 2, DV = 3 };
	float q[B * SQ * H * D], k[B * SKV * KVH * D], v[B * SKV * KVH * DV], mask[SQ * SKV];
	fill(q, B * SQ * H * D, 1);
	fill(k, B * SKV * KVH * D, 2);
	fill(v, B * SKV * KVH * DV, 3);
	fill(mask, SQ * SKV, 4);
	mb b;
	mb_init(&b, 23);
	mb_input(&b, "Q", 3, (int64_t[]){B, SQ, H * D});
	mb_input(&b, "K", 3, (int64_t[]){B, SKV, KVH * D});
	mb_input(&b, "V", 3, (int64_t[]){B, SKV, KVH * DV});
	mb_input(&b, "mask", 2, (int64_t[]){SQ, SKV});
	mb_output(&b, "Y", 3, (int64_t[]){B, SQ, H * DV});
	static char *in[] = {"Q", "K", "V", "mask"}, *out[] = {"Y"};
	Onnx__NodeProto *nd = mb_node(&b, "Attention", 4, in, 1, out);
	Onnx__AttributeProto at[3], *ap[3] = {mb_attr_ints(&at[0], "q_num_heads", (int64_t[]){H}, 0),
					      mb_attr_ints(&at[1], "kv_num_heads", (int64_t[]){KVH}, 0),
					      mb_attr_f(&at[2], "scale", 0.7f)};
	nd->n_attribute = 3;
	nd->attribute = ap;
	eng_ctx *ctx = tu_ctx_new();
	eng_onnx_model *m = load(ctx, &b);
	eng_tensor *x[4] = {eng_from_data(ctx, ENG_F32, 3, (int64_t[]){B, SQ, H * D}, q),
			    eng_from_data(ctx, ENG_F32, 3, (int64_t[]){B, SKV, KVH * D}, k),
			    eng_from_data(ctx, ENG_F32, 3, (int64_t[]){B, SKV, KVH * DV}, v),
			    eng_from_data(ctx, ENG_F32, 2, (int64_t[]){SQ, SKV}, mask)},
		   *y = NULL;
	ck_assert_msg(eng_onnx_build(m, x, &y, 0) == ENG_OK, "%s", eng_errmsg(ctx));
	ck_assert_int_eq(eng_ndim(y), 3);
	ck_assert_int_eq(eng_shape(y)[2], H * DV);
	float got[B * SQ * H * DV];
	ck_assert_int_eq(eng_tensor_read(y, got, sizeof(got)), ENG_OK);
	/* the reference on the 4-D views: [B, S, heads, d] -> [B, heads, S, d] */
	float q4[sizeof(q) / 4], k4[sizeof(k) / 4], v4[sizeof(v) / 4];
	for (int bb = 0; bb < B; bb++)
		for (int s = 0; s < SKV; s++)
			for (int h = 0; h < H; h++)
				for (int d = 0; d < DV; d++) {
					if (s < SQ && d < D)
						q4[((bb * H + h) * SQ + s) * D + d] = q[((bb * SQ + s) * H + h) * D + d];
					if (h < KVH && d < D)
						k4[((bb * KVH + h) * SKV + s) * D + d] = k[((bb * SKV + s) * KVH + h) * D + d];
					if (h < KVH)
						v4[((bb * KVH + h) * SKV + s) * DV + d] = v[((bb * SKV + s) * KVH + h) * DV + d];
				}
	double bias[SQ * SKV], y4[B * H * SQ * DV], want[B * SQ * H * DV];
	for (int i = 0; i < SQ * SKV; i++)
		bias[i] = mask[i];
	attention_ref(B, H, KVH, SQ, SKV, D, DV, q4, k4, v4, bias, false, NULL, NULL, 0.7, 0, y4);
	for (int bb = 0; bb < B; bb++)
		for (int h = 0; h < H; h++)
			for (int s = 0; s < SQ; s++)
				for (int e = 0; e < DV; e++)
					want[((bb * SQ + s) * H + h) * DV + e] = y4[((bb * H + h) * SQ + s) * DV + e];
	expect_close(got, want, B * SQ * H * DV, "Y");
	eng_tensor_free(y);
	eng_onnx_free(m);
	tu_ctx_free(ctx);
}
END_TEST

/* 4-D with a cache of 2 keys (initializers), causal, a boolean mask one key short (padded
 * with false), softcap 2; outputs Y and present_key. */
START_TEST(attention_cache_causal_softcap)
{
	enum { H = 2, SQ = 3, P = 2, SKV = SQ + P, D = 4 };
	float q[H * SQ * D], k[H * SQ * D], v[H * SQ * D], pk[H * P * D], pv[H * P * D];
	fill(q, H * SQ * D, 5);
	fill(k, H * SQ * D, 6);
	fill(v, H * SQ * D, 7);
	fill(pk, H * P * D, 8);
	fill(pv, H * P * D, 9);
	bool mask[SQ * (SKV - 1)] = {1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1};
	mb b;
	mb_init(&b, 23);
	mb_input(&b, "Q", 4, (int64_t[]){1, H, SQ, D});
	mb_input(&b, "K", 4, (int64_t[]){1, H, SQ, D});
	mb_input(&b, "V", 4, (int64_t[]){1, H, SQ, D});
	b.inp[3] = mb_value(&b, &b.in[3], "mask", 9, 2, (int64_t[]){SQ, SKV - 1});
	b.g.n_input++;
	mb_output(&b, "Y", 4, (int64_t[]){1, H, SQ, D});
	mb_output(&b, "present_key", 4, (int64_t[]){1, H, SKV, D});
	static int64_t cdims[4] = {1, H, P, D};
	mb_init_f32(&b, "pk", 4, cdims, pk, H * P * D);
	mb_init_f32(&b, "pv", 4, cdims, pv, H * P * D);
	static char *in[] = {"Q", "K", "V", "mask", "pk", "pv"}, *out[] = {"Y", "present_key"};
	Onnx__NodeProto *nd = mb_node(&b, "Attention", 6, in, 2, out);
	Onnx__AttributeProto at[2], *ap[2] = {mb_attr_ints(&at[0], "is_causal", (int64_t[]){1}, 0),
					      mb_attr_f(&at[1], "softcap", 2.0f)};
	nd->n_attribute = 2;
	nd->attribute = ap;
	eng_ctx *ctx = tu_ctx_new();
	eng_onnx_model *m = load(ctx, &b);
	eng_tensor *x[4] = {eng_from_data(ctx, ENG_F32, 4, (int64_t[]){1, H, SQ, D}, q),
			    eng_from_data(ctx, ENG_F32, 4, (int64_t[]){1, H, SQ, D}, k),
			    eng_from_data(ctx, ENG_F32, 4, (int64_t[]){1, H, SQ, D}, v),
			    eng_from_data(ctx, ENG_BOOL, 2, (int64_t[]){SQ, SKV - 1}, mask)},
		   *y[2] = {NULL, NULL};
	ck_assert_msg(eng_onnx_build(m, x, y, 0) == ENG_OK, "%s", eng_errmsg(ctx));
	float got[H * SQ * D], pres[H * SKV * D];
	ck_assert_int_eq(eng_tensor_read(y[0], got, sizeof(got)), ENG_OK);
	ck_assert_int_eq(eng_tensor_read(y[1], pres, sizeof(pres)), ENG_OK);
	float kall[H * SKV * D], vall[H * SKV * D];
	for (int h = 0; h < H; h++)
		for (int s = 0; s < SKV; s++)
			for (int d = 0; d < D; d++) {
				int at_ = (h * SKV + s) * D + d;
				kall[at_] = s < P ? pk[(h * P + s) * D + d] : k[(h * SQ + s - P) * D + d];
				vall[at_] = s < P ? pv[(h * P + s) * D + d] : v[(h * SQ + s - P) * D + d];
			}
	double bias[SQ * SKV], want[H * SQ * D], wk[H * SKV * D];
	for (int i = 0; i < SQ; i++)
		for (int j = 0; j < SKV; j++)
			bias[i * SKV + j] = j < SKV - 1 && mask[i * (SKV - 1) + j] ? 0 : -INFINITY;
	attention_ref(1, H, H, SQ, SKV, D, D, q, kall, vall, bias, true, (int[]){P}, NULL, 1 / sqrt((double)D), 2.0, want);
	expect_close(got, want, H * SQ * D, "Y");
	for (int i = 0; i < H * SKV * D; i++)
		wk[i] = kall[i];
	expect_close(pres, wk, H * SKV * D, "present_key");
	eng_tensor_free(y[0]);
	eng_tensor_free(y[1]);
	eng_onnx_free(m);
	tu_ctx_free(ctx);
}
END_TEST

/* opset 24's nonpad_kv_seqlen with a static cache: batch b has valid[b] keys, the causal
 * frontier sits at valid[b] - Sq, keys past valid[b] are padding. */
START_TEST(attention_nonpad_causal)
{
	enum { B = 2, H = 1, SQ = 2, SKV = 5, D = 3 };
	float q[B * H * SQ * D], k[B * H * SKV * D], v[B * H * SKV * D];
	int64_t valid64[B] = {3, 5};
	fill(q, B * H * SQ * D, 11);
	fill(k, B * H * SKV * D, 12);
	fill(v, B * H * SKV * D, 13);
	mb b;
	mb_init(&b, 24);
	mb_input(&b, "Q", 4, (int64_t[]){B, H, SQ, D});
	mb_input(&b, "K", 4, (int64_t[]){B, H, SKV, D});
	mb_input(&b, "V", 4, (int64_t[]){B, H, SKV, D});
	b.inp[3] = mb_value(&b, &b.in[3], "n", 7, 1, (int64_t[]){B});
	b.g.n_input++;
	mb_output(&b, "Y", 4, (int64_t[]){B, H, SQ, D});
	static char *in[] = {"Q", "K", "V", "", "", "", "n"}, *out[] = {"Y"};
	Onnx__NodeProto *nd = mb_node(&b, "Attention", 7, in, 1, out);
	Onnx__AttributeProto at[1], *ap[1] = {mb_attr_ints(&at[0], "is_causal", (int64_t[]){1}, 0)};
	nd->n_attribute = 1;
	nd->attribute = ap;
	eng_ctx *ctx = tu_ctx_new();
	eng_onnx_model *m = load(ctx, &b);
	eng_tensor *x[4] = {eng_from_data(ctx, ENG_F32, 4, (int64_t[]){B, H, SQ, D}, q),
			    eng_from_data(ctx, ENG_F32, 4, (int64_t[]){B, H, SKV, D}, k),
			    eng_from_data(ctx, ENG_F32, 4, (int64_t[]){B, H, SKV, D}, v),
			    eng_from_data(ctx, ENG_I64, 1, (int64_t[]){B}, valid64)},
		   *y = NULL;
	ck_assert_msg(eng_onnx_build(m, x, &y, 0) == ENG_OK, "%s", eng_errmsg(ctx));
	float got[B * H * SQ * D];
	double want[B * H * SQ * D];
	ck_assert_int_eq(eng_tensor_read(y, got, sizeof(got)), ENG_OK);
	int valid[B] = {3, 5}, off[B] = {3 - SQ, 5 - SQ};
	attention_ref(B, H, H, SQ, SKV, D, D, q, k, v, NULL, true, off, valid, 1 / sqrt((double)D), 0, want);
	expect_close(got, want, B * H * SQ * D, "Y");
	eng_tensor_free(y);
	eng_onnx_free(m);
	tu_ctx_free(ctx);
}
END_TEST

/* Builds a one-node model of op (opset 27) on float inputs of the given shapes with attributes
 * at[0..nat) and expects eng_onnx_build to fail naming `want`. */
static void expect_build_error(const char *op, int nin, const int64_t (*shapes)[4], const int *ranks, int nout,
			       Onnx__AttributeProto **at, int nat, const char *want)
{
	static char *in_names[] = {"a", "b", "c", "d", "e", "f"}, *out_names[] = {"y", "z"};
	mb b;
	mb_init(&b, 27);
	for (int i = 0; i < nin; i++)
		mb_input(&b, in_names[i], ranks[i], (int64_t *)shapes[i]);
	for (int i = 0; i < nout; i++)
		mb_output(&b, out_names[i], 0, NULL);
	Onnx__NodeProto *nd = mb_node(&b, op, nin, in_names, nout, out_names);
	nd->n_attribute = (size_t)nat;
	nd->attribute = at;
	eng_ctx *ctx = tu_ctx_new();
	eng_onnx_model *m = load(ctx, &b);
	eng_tensor *x[6] = {0}, *y[2] = {0};
	for (int i = 0; i < nin; i++) {
		int64_t n = 1;
		for (int d = 0; d < ranks[i]; d++)
			n *= shapes[i][d];
		x[i] = eng_zeros(ctx, ENG_F32, ranks[i], shapes[i]);
		ck_assert(n >= 0 && x[i]);
	}
	ck_assert_int_ne(eng_onnx_build(m, x, y, 0), ENG_OK);
	ck_assert_msg(strstr(eng_errmsg(ctx), want) && strstr(eng_errmsg(ctx), op), "%s", eng_errmsg(ctx));
	eng_onnx_free(m);
	tu_ctx_free(ctx);
}

/* CausalConvWithState, LinearAttention, TensorScatter and RoiAlign (their values are checked by
 * onnx 1.23's node suite) refuse bad shapes and attributes with an error naming what is wrong. */
START_TEST(new_ops_bad_input)
{
	Onnx__AttributeProto at[4];
	int r3[3] = {3, 3, 3};
	/* weight (C, 2, k) */
	const int64_t conv_bad_w[2][4] = {{1, 4, 8}, {4, 2, 3}};
	expect_build_error("CausalConvWithState", 2, conv_bad_w, r3, 2, NULL, 0, "weight must be (C, 1, k)");
	/* past_state (B, C, k) instead of k - 1 */
	const int64_t conv_bad_past[4][4] = {{1, 4, 8}, {4, 1, 3}, {4}, {1, 4, 3}};
	expect_build_error("CausalConvWithState", 4, conv_bad_past, (int[]){3, 3, 1, 3}, 2, NULL, 0,
			   "past_state must be (B, C, k - 1) = (1, 4, 2)");
	Onnx__AttributeProto *act[1] = {mb_attr_s(&at[0], "activation", "gelu")};
	expect_build_error("CausalConvWithState", 2, conv_bad_past, r3, 1, act, 1, "activation 'gelu'");
	/* q heads not a multiple of kv heads */
	const int64_t qkv[4][4] = {{1, 2, 6}, {1, 2, 4}, {1, 2, 4}, {1, 2, 4}};
	Onnx__AttributeProto *heads[3] = {mb_attr_ints(&at[0], "q_num_heads", (int64_t[]){3}, 0),
					  mb_attr_ints(&at[1], "kv_num_heads", (int64_t[]){2}, 0),
					  mb_attr_s(&at[2], "update_rule", "linear")};
	expect_build_error("LinearAttention", 3, qkv, r3, 2, heads, 3, "must be a positive multiple of kv_num_heads");
	/* the delta rule without beta, the gated rule without decay */
	heads[0] = mb_attr_ints(&at[0], "q_num_heads", (int64_t[]){2}, 0);
	heads[2] = mb_attr_s(&at[2], "update_rule", "delta");
	expect_build_error("LinearAttention", 3, qkv + 1, r3, 2, heads, 3, "update_rule 'delta' needs a beta input");
	heads[2] = mb_attr_s(&at[2], "update_rule", "gated");
	expect_build_error("LinearAttention", 3, qkv + 1, r3, 2, heads, 3, "update_rule 'gated' needs a decay input");
	/* past_state of the wrong shape */
	const int64_t qkvp[4][4] = {{1, 2, 4}, {1, 2, 4}, {1, 2, 4}, {1, 2, 2, 3}};
	int rp[4] = {3, 3, 3, 4};
	heads[2] = mb_attr_s(&at[2], "update_rule", "linear");
	expect_build_error("LinearAttention", 4, qkvp, rp, 2, heads, 3, "past_state must be (B, kv_num_heads, d_k, d_v) = (1, 2, 2, 2)");
	/* TensorScatter: an update longer than the cache, an unknown mode */
	const int64_t cache[2][4] = {{2, 4, 3}, {2, 5, 3}};
	Onnx__AttributeProto *ax[1] = {mb_attr_ints(&at[0], "axis", (int64_t[]){1}, 0)};
	expect_build_error("TensorScatter", 2, cache, r3, 1, ax, 1, "update's dim 1 (5) does not fit past_cache's (4)");
	Onnx__AttributeProto *ring[1] = {mb_attr_s(&at[0], "mode", "ring")};
	expect_build_error("TensorScatter", 2, cache, r3, 1, ring, 1, "mode 'ring'");
	/* RoiAlign: float batch indices; an adaptive grid */
	const int64_t roi[3][4] = {{1, 1, 8, 8}, {3, 4}, {3}};
	int rr[3] = {4, 2, 1};
	expect_build_error("RoiAlign", 3, roi, rr, 1, NULL, 0, "integer batch_indices (R) are needed");
}
END_TEST

/* TopK where the entries left tie with the chosen ones' fill (-inf among the inputs): each index
 * once, ties to the lower index, as ONNX's reference. */
START_TEST(topk_ties_with_fill)
{
	mb b;
	mb_init(&b, 24);
	mb_input(&b, "x", 2, (int64_t[]){1, 5});
	mb_init_i64(&b, "k", 1, (int64_t[]){1}, (int64_t[]){4}, 1);
	mb_output(&b, "v", 2, (int64_t[]){1, 4});
	b.outp[b.g.n_output] = mb_value(&b, &b.out[b.g.n_output], "i", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 2,
					(int64_t[]){1, 4});
	b.g.n_output++;
	static char *in[] = {"x", "k"}, *out[] = {"v", "i"};
	mb_node(&b, "TopK", 2, in, 2, out);
	eng_ctx *ctx = tu_ctx_new();
	eng_onnx_model *m = load(ctx, &b);
	float x[5] = {-INFINITY, 1.0f, -INFINITY, -INFINITY, 2.0f}, v[4];
	int64_t i[4];
	eng_tensor *in_t[1] = {eng_from_data(ctx, ENG_F32, 2, (int64_t[]){1, 5}, x)}, *y[2] = {0};
	ck_assert_msg(eng_onnx_build(m, in_t, y, 0) == ENG_OK, "%s", eng_errmsg(ctx));
	ck_assert_int_eq(eng_tensor_read(y[0], v, sizeof(v)), ENG_OK);
	ck_assert_int_eq(eng_tensor_read(y[1], i, sizeof(i)), ENG_OK);
	const int64_t want_i[4] = {4, 1, 0, 2};
	for (int j = 0; j < 4; j++)
		ck_assert_msg(i[j] == want_i[j] && v[j] == x[want_i[j]], "entry %d: index %lld value %g, want %lld", j,
			      (long long)i[j], v[j], (long long)want_i[j]);
	eng_tensor_free(y[0]);
	eng_tensor_free(y[1]);
	eng_onnx_free(m);
	tu_ctx_free(ctx);
}
END_TEST

/* QuantizeLinear's rounding (round_saturated in ops_quant.c): ties to even, both signs, values
 * past the type's range, infinities and values of 2^22 and more, against nearbyintf of the
 * correctly rounded quotient, then the zero point and the saturation to uint8. */
START_TEST(quantize_rounding)
{
	enum { N = 24 };
	mb b;
	mb_init(&b, 21);
	mb_input(&b, "x", 1, (int64_t[]){N});
	b.inp[b.g.n_input] = mb_value(&b, &b.in[b.g.n_input], "zp", ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, 0, NULL);
	b.g.n_input++;
	float sc[1] = {0.25f};
	mb_init_f32(&b, "s", 0, NULL, sc, 1);
	b.outp[b.g.n_output] = mb_value(&b, &b.out[b.g.n_output], "y", ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, 1,
					(int64_t[]){N});
	b.g.n_output++;
	static char *in[] = {"x", "s", "zp"}, *out[] = {"y"};
	mb_node(&b, "QuantizeLinear", 3, in, 1, out);
	eng_ctx *ctx = tu_ctx_new();
	eng_onnx_model *m = load(ctx, &b);
	float x[N] = {0.125f, 0.375f, 0.625f, -0.125f, -0.375f, -0.625f, 0.1249f, 0.1251f, -0.1251f, 31.875f, -31.875f,
		      32.125f, -32.125f, 1e30f, -1e30f, INFINITY, -INFINITY, 4194304.0f, -4194304.0f, 1048576.125f,
		      -1048576.125f, 8388607.0f, 0.0f, -0.0f};
	const uint8_t zps[3] = {128, 0, 255};
	for (int z = 0; z < 3; z++) {
		eng_tensor *in_t[2] = {eng_from_data(ctx, ENG_F32, 1, (int64_t[]){N}, x),
				       eng_from_data(ctx, ENG_U8, 0, NULL, &zps[z])}, *y[1] = {0};
		ck_assert_msg(eng_onnx_build(m, in_t, y, 0) == ENG_OK, "%s", eng_errmsg(ctx));
		uint8_t got[N];
		ck_assert_int_eq(eng_tensor_read(y[0], got, sizeof(got)), ENG_OK);
		for (int j = 0; j < N; j++) {
			float v = nearbyintf(x[j] / sc[0]) + zps[z];
			uint8_t want = v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)v;
			ck_assert_msg(got[j] == want, "x %.9g zero point %d: %d, want %d", x[j], zps[z], got[j], want);
		}
		eng_tensor_free(y[0]);
		eng_tensor_free(in_t[0]);
		eng_tensor_free(in_t[1]);
	}
	eng_onnx_free(m);
	tu_ctx_free(ctx);
}
END_TEST

/* MatMulInteger with int8 weights (the dynamic quantizer's models: onnxruntime's
 * quantize_dynamic writes int8 B with uint8 A), both zero points given: the int32 sums of the
 * centered products. int8 inputs are fed as int32 (the engine holds int8 widened). */
START_TEST(matmul_integer_int8)
{
	mb b;
	mb_init(&b, 10);
	const int U8 = ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, I8 = ONNX__TENSOR_PROTO__DATA_TYPE__INT8;
	const char *names[4] = {"a", "b", "az", "bz"};
	const int types[4] = {U8, I8, U8, I8}, nd[4] = {2, 2, 0, 0};
	const int64_t dims[4][2] = {{2, 3}, {3, 2}, {0, 0}, {0, 0}};
	for (int i = 0; i < 4; i++) {
		b.inp[b.g.n_input] = mb_value(&b, &b.in[b.g.n_input], names[i], types[i], nd[i], dims[i]);
		b.g.n_input++;
	}
	b.outp[b.g.n_output] = mb_value(&b, &b.out[b.g.n_output], "y", ONNX__TENSOR_PROTO__DATA_TYPE__INT32, 2,
					(int64_t[]){2, 2});
	b.g.n_output++;
	static char *in[] = {"a", "b", "az", "bz"}, *out[] = {"y"};
	mb_node(&b, "MatMulInteger", 4, in, 1, out);
	eng_ctx *ctx = tu_ctx_new();
	eng_onnx_model *m = load(ctx, &b);
	const uint8_t a[6] = {0, 255, 17, 128, 3, 200}, az = 12;
	const int32_t w[6] = {-128, 127, 5, -7, 0, 64}, wz = -3;
	eng_tensor *in_t[4] = {eng_from_data(ctx, ENG_U8, 2, (int64_t[]){2, 3}, a),
			       eng_from_data(ctx, ENG_I32, 2, (int64_t[]){3, 2}, w), eng_from_data(ctx, ENG_U8, 0, NULL, &az),
			       eng_from_data(ctx, ENG_I32, 0, NULL, &wz)},
		   *y[1] = {0};
	ck_assert_msg(eng_onnx_build(m, in_t, y, 0) == ENG_OK, "%s", eng_errmsg(ctx));
	int32_t got[4];
	ck_assert_int_eq(eng_tensor_read(y[0], got, sizeof(got)), ENG_OK);
	for (int r = 0; r < 2; r++)
		for (int c = 0; c < 2; c++) {
			int32_t want = 0;
			for (int k = 0; k < 3; k++)
				want += (a[r * 3 + k] - az) * (w[k * 2 + c] - wz);
			ck_assert_msg(got[r * 2 + c] == want, "y[%d][%d] = %d, want %d", r, c, got[r * 2 + c], want);
		}
	eng_tensor_free(y[0]);
	for (int i = 0; i < 4; i++)
		eng_tensor_free(in_t[i]);
	eng_onnx_free(m);
	tu_ctx_free(ctx);
}
END_TEST

/* Einsum with a label repeated within an operand (ops_einsum.c's diagonal): 'iji->ji' reads
 * x[i][j][i] (axes apart, so the diagonal goes back between the others), and 'ii' with its
 * implicit output is the trace. */
START_TEST(einsum_diagonals)
{
	static const char *eqs[2] = {"iji->ji", "ii"};
	const int64_t shapes[2][3] = {{3, 2, 3}, {4, 4, 0}};
	const int ranks[2] = {3, 2};
	for (int e = 0; e < 2; e++) {
		mb b;
		mb_init(&b, 12);
		mb_input(&b, "x", ranks[e], shapes[e]);
		if (e == 0)
			mb_output(&b, "y", 2, (int64_t[]){2, 3});
		else
			mb_output(&b, "y", 0, NULL);
		static char *in[] = {"x"}, *out[] = {"y"};
		Onnx__NodeProto *nd = mb_node(&b, "Einsum", 1, in, 1, out);
		static Onnx__AttributeProto a, *ap[1];
		mb_attr_s(&a, "equation", eqs[e]);
		ap[0] = &a;
		nd->n_attribute = 1;
		nd->attribute = ap;
		eng_ctx *ctx = tu_ctx_new();
		eng_onnx_model *m = load(ctx, &b);
		float x[18];
		for (int i = 0; i < 18; i++)
			x[i] = (float)(i * 7 % 11) - 3.0f;
		eng_tensor *in_t[1] = {eng_from_data(ctx, ENG_F32, ranks[e], shapes[e], x)}, *y[1] = {0};
		ck_assert_msg(eng_onnx_build(m, in_t, y, 0) == ENG_OK, "%s: %s", eqs[e], eng_errmsg(ctx));
		float got[6];
		ck_assert_int_eq(eng_tensor_read(y[0], got, e == 0 ? 6 * sizeof(float) : sizeof(float)), ENG_OK);
		if (e == 0) {
			for (int j = 0; j < 2; j++)
				for (int i = 0; i < 3; i++)
					ck_assert_msg(got[j * 3 + i] == x[i * 6 + j * 3 + i], "y[%d][%d] = %g, want %g", j, i, got[j * 3 + i],
						      x[i * 6 + j * 3 + i]);
		} else {
			float tr = 0;
			for (int i = 0; i < 4; i++)
				tr += x[i * 5];
			ck_assert_msg(got[0] == tr, "trace %g, want %g", got[0], tr);
		}
		eng_tensor_free(y[0]);
		eng_tensor_free(in_t[0]);
		eng_onnx_free(m);
		tu_ctx_free(ctx);
	}
}
END_TEST

Suite *onnxops_suite(void)
{
	Suite *s = suite_create("onnxops");
	TCase *tc = tcase_create("attention");
	tcase_add_test(tc, attention_3d_gqa_mask);
	tcase_add_test(tc, attention_cache_causal_softcap);
	tcase_add_test(tc, attention_nonpad_causal);
	tcase_add_test(tc, new_ops_bad_input);
	tcase_add_test(tc, topk_ties_with_fill);
	tcase_add_test(tc, quantize_rounding);
	tcase_add_test(tc, matmul_integer_int8);
	tcase_add_test(tc, einsum_diagonals);
	suite_add_tcase(s, tc);
	return s;
}
