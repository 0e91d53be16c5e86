/* test_errors.c: bad input through the public API: each case must give NULL or a status plus a
 * message naming the function, keep the first error across nested calls, and leak nothing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"
#include "testutil.h"

#define ANY_ERR ENG_STATUS_COUNT
static const int64_t BIG = (int64_t)1 << 31;

/* expr must return NULL and set status code (ANY_ERR: any non-OK) with a message that contains
 * word (case-insensitively). The error is cleared first. */
#define EXPECT_NULL(ctx, expr, code, word)                                         \
	do {                                                                       \
		eng_clear_error(ctx);                                              \
		const void *r_ = (expr);                                           \
		expect_err_at(__LINE__, (ctx), #expr, r_ == NULL, (code), (word)); \
	} while (0)

/* expr must return a non-OK status with the given code and word. */
#define EXPECT_STATUS(ctx, expr, code, word)                                         \
	do {                                                                         \
		eng_clear_error(ctx);                                                \
		eng_status s_ = (expr);                                              \
		expect_err_at(__LINE__, (ctx), #expr, s_ != ENG_OK, (code), (word)); \
		ck_assert_int_eq(s_, eng_error(ctx));                                \
	} while (0)

static void expect_err_at(int line, eng_ctx *ctx, const char *what, bool failed, eng_status code,
			  const char *word)
{
	const char *msg = eng_errmsg(ctx);
	ck_assert_msg(failed, "line %d: %s: did not fail", line, what);
	ck_assert_msg(eng_error(ctx) != ENG_OK, "line %d: %s: failed without setting an error",
		      line, what);
	ck_assert_msg(code == ANY_ERR || eng_error(ctx) == code,
		      "line %d: %s: status %s, want %s (%s)", line, what,
		      eng_strerror(eng_error(ctx)), eng_strerror(code), msg);
	ck_assert_msg(word == NULL || strcasestr(msg, word),
		      "line %d: %s: message '%s' does not mention '%s'", line, what, msg, word);
}

static eng_tensor *f32(eng_ctx *ctx, int nd, const int64_t *s)
{
	return eng_zeros(ctx, ENG_F32, nd, s);
}

START_TEST(shape_errors)
{
	eng_ctx *ctx = tu_ctx_new();
	int64_t s23[2] = {2, 3}, s4[1] = {4}, s5[1] = {5}, s42[2] = {4, 2}, s43[2] = {4, 3};
	eng_tensor *a = f32(ctx, 2, s23), *v4 = f32(ctx, 1, s4);
	EXPECT_NULL(ctx, eng_add(a, v4), ENG_ESHAPE, "add");
	EXPECT_NULL(ctx, eng_mul(v4, a), ENG_ESHAPE, "mul");
	EXPECT_NULL(ctx, eng_lt(a, v4), ENG_ESHAPE, NULL);
	EXPECT_NULL(ctx, eng_where(f32(ctx, 1, s5), a, a), ENG_ESHAPE, "where");
	EXPECT_NULL(ctx, eng_where(a, a, v4), ENG_ESHAPE, "where");
	EXPECT_NULL(ctx, eng_reshape(a, 2, s42), ENG_ESHAPE, "reshape");
	EXPECT_NULL(ctx, eng_reshape(a, 2, (int64_t[]){-1, -1}), ENG_ESHAPE, "reshape");
	EXPECT_NULL(ctx, eng_reshape(a, 2, (int64_t[]){-2, -3}), ENG_ESHAPE, "reshape");
	EXPECT_NULL(ctx, eng_reshape(a, 2, (int64_t[]){4, -1}), ENG_ESHAPE, "reshape");
	EXPECT_NULL(ctx, eng_reshape(a, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 2, 3, 1}), ANY_ERR,
		    "reshape");
	EXPECT_NULL(ctx, eng_expand(a, 2, s43), ENG_ESHAPE, "expand");
	EXPECT_NULL(ctx, eng_expand(a, 1, s4), ENG_ESHAPE, "expand");
	EXPECT_NULL(ctx, eng_shrink(a, (const int64_t[][2]){{0, 2}, {2, 5}}), ENG_ESHAPE, "shrink");
	EXPECT_NULL(ctx, eng_shrink(a, (const int64_t[][2]){{1, 0}, {0, 3}}), ENG_ESHAPE, "shrink");
	EXPECT_NULL(ctx, eng_shrink(a, (const int64_t[][2]){{-1, 1}, {0, 3}}), ENG_ESHAPE,
		    "shrink");
	EXPECT_NULL(ctx, eng_pad(a, (const int64_t[][2]){{0, -1}, {0, 0}}), ENG_ERANGE, "pad");
	EXPECT_NULL(ctx, eng_matmul(a, f32(ctx, 2, s42)), ENG_ESHAPE, "matmul");
	EXPECT_NULL(ctx, eng_matmul(a, eng_scalar(ctx, ENG_F32, 1)), ANY_ERR, "matmul");
	EXPECT_NULL(
		ctx,
		eng_matmul(f32(ctx, 3, (int64_t[]){2, 2, 3}), f32(ctx, 3, (int64_t[]){3, 3, 2})),
		ENG_ESHAPE, "matmul");
	EXPECT_NULL(ctx, eng_linear(a, f32(ctx, 2, s42), NULL), ANY_ERR, "linear");
	EXPECT_NULL(ctx, eng_linear(a, f32(ctx, 2, (int64_t[]){5, 3}), v4), ANY_ERR, "linear");
	eng_tensor *lst[2] = {a, f32(ctx, 2, (int64_t[]){2, 4})};
	EXPECT_NULL(ctx, eng_cat(lst, 2, 0), ANY_ERR, "cat");
	ck_assert(eng_cat(lst, 0, 0) == NULL); /* no operand: no context to report to */
	ck_assert(eng_stack(lst, -1, 0) == NULL);
	EXPECT_NULL(ctx, eng_stack(lst, 2, 0), ANY_ERR, "stack");
	EXPECT_NULL(ctx, eng_repeat(a, (int64_t[]){-1, 2}), ANY_ERR, "repeat");
	eng_tensor *x4 = f32(ctx, 4, (int64_t[]){1, 3, 5, 5});
	const int one[2] = {1, 1}, zero[2] = {0, 0};
	EXPECT_NULL(ctx,
		    eng_conv2d(x4, f32(ctx, 4, (int64_t[]){2, 2, 3, 3}), NULL, one, zero, one, 1),
		    ANY_ERR, "conv2d");
	EXPECT_NULL(ctx,
		    eng_conv2d(x4, f32(ctx, 4, (int64_t[]){2, 1, 3, 3}), NULL, one, zero, one, 2),
		    ANY_ERR, "conv2d");
	EXPECT_NULL(ctx,
		    eng_conv2d(x4, f32(ctx, 4, (int64_t[]){2, 3, 7, 7}), NULL, one, zero, one, 1),
		    ANY_ERR, "conv2d");
	EXPECT_NULL(ctx,
		    eng_conv2d(a, f32(ctx, 4, (int64_t[]){2, 3, 1, 1}), NULL, one, zero, one, 1),
		    ANY_ERR, "conv2d");
	EXPECT_NULL(ctx,
		    eng_conv2d(x4, f32(ctx, 4, (int64_t[]){2, 3, 1, 1}), NULL, zero, zero, one, 1),
		    ANY_ERR, "conv2d");
	EXPECT_NULL(ctx, eng_max_pool2d(x4, zero, NULL, NULL), ANY_ERR, "max_pool2d");
	EXPECT_NULL(ctx, eng_avg_pool2d(v4, (int[]){2, 2}, NULL, NULL), ANY_ERR, "avg_pool2d");
	EXPECT_NULL(ctx, eng_gather(a, 1, eng_zeros(ctx, ENG_I32, 1, s4)), ANY_ERR, "gather");
	EXPECT_NULL(ctx, eng_embedding(v4, eng_zeros(ctx, ENG_I32, 1, s4)), ANY_ERR, "embedding");
	EXPECT_NULL(ctx, eng_sparse_cross_entropy(a, eng_zeros(ctx, ENG_I32, 1, s4)), ANY_ERR,
		    "cross");
	EXPECT_NULL(ctx, eng_slice(a, 1, 0, 3, 0), ANY_ERR, "slice");
	EXPECT_NULL(ctx, eng_one_hot(eng_zeros(ctx, ENG_I32, 1, s4), -2), ANY_ERR, "one_hot");
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(axis_errors)
{
	eng_ctx *ctx = tu_ctx_new();
	int64_t s23[2] = {2, 3};
	eng_tensor *a = f32(ctx, 2, s23);
	int ax2 = 2, axm3 = -3;
	EXPECT_NULL(ctx, eng_sum(a, &ax2, 1, false), ENG_EAXIS, "sum");
	EXPECT_NULL(ctx, eng_max(a, &axm3, 1, true), ENG_EAXIS, "max");
	EXPECT_NULL(ctx, eng_prod(a, &ax2, 1, false), ENG_EAXIS, "prod");
	EXPECT_NULL(ctx, eng_flip(a, (int[]){7}, 1), ENG_EAXIS, "flip");
	EXPECT_NULL(ctx, eng_permute(a, (int[]){0, 0}), ENG_EAXIS, "permute");
	EXPECT_NULL(ctx, eng_permute(a, (int[]){0, 5}), ENG_EAXIS, "permute");
	EXPECT_NULL(ctx, eng_index(ctx, ENG_I32, 2, s23, 2), ENG_EAXIS, "index");
	EXPECT_NULL(ctx, eng_softmax(a, 3), ENG_EAXIS, "softmax");
	EXPECT_NULL(ctx, eng_log_softmax(a, -3), ENG_EAXIS, "log_softmax");
	EXPECT_NULL(ctx, eng_logsumexp(a, 2, false), ENG_EAXIS, "logsumexp");
	EXPECT_NULL(ctx, eng_argmax(a, 5, false), ENG_EAXIS, "argmax");
	EXPECT_NULL(ctx, eng_argmin(a, -4, false), ENG_EAXIS, "argmin");
	EXPECT_NULL(ctx, eng_mean(a, &ax2, 1, false), ENG_EAXIS, "mean");
	EXPECT_NULL(ctx, eng_var(a, &ax2, 1, false, 1), ENG_EAXIS, "var");
	EXPECT_NULL(ctx, eng_std(a, &ax2, 1, false, 1), ENG_EAXIS, "std");
	EXPECT_NULL(ctx, eng_min(a, &ax2, 1, false), ENG_EAXIS, "min");
	EXPECT_NULL(ctx, eng_transpose(a, 0, 2), ENG_EAXIS, "transpose");
	EXPECT_NULL(ctx, eng_squeeze(a, 3), ENG_EAXIS, "squeeze");
	EXPECT_NULL(ctx, eng_unsqueeze(a, 4), ENG_EAXIS, "unsqueeze");
	EXPECT_NULL(ctx, eng_flatten(a, 1, 0), ANY_ERR, "flatten");
	EXPECT_NULL(ctx, eng_slice(a, 2, 0, 1, 1), ENG_EAXIS, "slice");
	eng_tensor *l[2] = {a, a};
	EXPECT_NULL(ctx, eng_cat(l, 2, 2), ENG_EAXIS, "cat");
	EXPECT_NULL(ctx, eng_stack(l, 2, 4), ENG_EAXIS, "stack");
	EXPECT_NULL(ctx, eng_gather(a, 2, eng_zeros(ctx, ENG_I32, 2, s23)), ENG_EAXIS, "gather");
	tu_ctx_free(ctx);
}
END_TEST

/* Shape products that overflow, negative and too many dimensions. */
START_TEST(size_errors)
{
	eng_ctx *ctx = tu_ctx_new();
	int64_t huge[2] = {BIG, BIG}, neg[2] = {2, -1}, s11[2] = {1, 1};
	float dummy[4] = {0};
	EXPECT_NULL(ctx, eng_zeros(ctx, ENG_F32, 2, huge), ENG_ERANGE, "full");
	EXPECT_NULL(ctx, eng_empty(ctx, ENG_F32, 2, huge), ENG_ERANGE, "empty");
	EXPECT_NULL(ctx, eng_from_data(ctx, ENG_F32, 2, huge, dummy), ENG_ERANGE, "from_data");
	EXPECT_NULL(ctx, eng_rand(ctx, ENG_F32, 2, huge), ANY_ERR, "rand");
	EXPECT_NULL(ctx, eng_index(ctx, ENG_I32, 2, huge, 0), ENG_ERANGE, "index");
	EXPECT_NULL(ctx, eng_zeros(ctx, ENG_F32, 3, (int64_t[]){INT64_MAX, 2, 2}), ENG_ERANGE,
		    "full");
	EXPECT_NULL(ctx, eng_zeros(ctx, ENG_F32, 3, (int64_t[]){0, INT64_MAX, INT64_MAX}),
		    ENG_ERANGE, "full");
	/* a zero dim does not excuse the others: permuted, [2^40, 2^40, 0] overflowed numel */
	int64_t zhuge[3] = {0, (int64_t)1 << 40, (int64_t)1 << 40};
	EXPECT_NULL(ctx, eng_zeros(ctx, ENG_F32, 3, zhuge), ENG_ERANGE, "full");
	EXPECT_NULL(ctx, eng_empty(ctx, ENG_F32, 3, zhuge), ENG_ERANGE, "empty");
	EXPECT_NULL(ctx, eng_from_data(ctx, ENG_F32, 3, (int64_t[]){BIG, 0, BIG}, dummy), ENG_ERANGE,
		    "from_data");
	eng_tensor *zok = eng_zeros(ctx, ENG_F32, 3, (int64_t[]){0, (int64_t)1 << 20, (int64_t)1 << 20});
	ck_assert_msg(zok != NULL, "%s", eng_errmsg(ctx));
	ck_assert_int_eq(eng_numel(eng_permute(zok, (int[]){2, 1, 0})), 0);
	eng_tensor *one = eng_zeros(ctx, ENG_F32, 2, s11);
	EXPECT_NULL(ctx, eng_expand(one, 2, huge), ENG_ERANGE, "expand");
	EXPECT_NULL(ctx,
		    eng_reshape(eng_zeros(ctx, ENG_F32, 1, (int64_t[]){0}), 3,
				(int64_t[]){BIG, BIG, 0}),
		    ENG_ERANGE, "reshape");
	EXPECT_NULL(ctx, eng_pad(one, (const int64_t[][2]){{BIG, 0}, {BIG, 0}}), ENG_ERANGE, "pad");
	EXPECT_NULL(ctx, eng_repeat(one, huge), ANY_ERR, "repeat");
	EXPECT_NULL(ctx, eng_zeros(ctx, ENG_F32, 2, neg), ENG_ESHAPE, "full");
	EXPECT_NULL(ctx, eng_from_data(ctx, ENG_F32, 2, neg, dummy), ANY_ERR, "from_data");
	EXPECT_NULL(ctx, eng_zeros(ctx, ENG_F32, -1, NULL), ANY_ERR, "full");
	EXPECT_NULL(ctx, eng_zeros(ctx, ENG_F32, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}),
		    ENG_ERANGE, "full");
	EXPECT_NULL(ctx, eng_arange(ctx, ENG_F32, 0, 10, 0), ENG_EINVAL, "arange");
	EXPECT_NULL(ctx, eng_arange(ctx, ENG_F32, 0, 1e15, 1e-5), ENG_ERANGE, "arange");
	EXPECT_NULL(ctx, eng_arange(ctx, ENG_F32, 0, NAN, 1), ENG_EINVAL, "arange");
	EXPECT_NULL(ctx, eng_eye(ctx, ENG_F32, -1), ENG_ERANGE, "eye");
	EXPECT_NULL(ctx, eng_from_data(ctx, ENG_F32, 1, (int64_t[]){3}, NULL), ENG_EINVAL,
		    "from_data");
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(dtype_errors)
{
	eng_ctx *ctx = tu_ctx_new();
	int64_t s3[1] = {3};
	eng_tensor *f = f32(ctx, 1, s3), *h = eng_zeros(ctx, ENG_F16, 1, s3),
		   *i = eng_zeros(ctx, ENG_I32, 1, s3);
	eng_tensor *bo = eng_zeros(ctx, ENG_BOOL, 1, s3);
	EXPECT_NULL(ctx, eng_idiv(f, f), ENG_EDTYPE, "idiv");
	EXPECT_NULL(ctx, eng_idiv(i, f), ENG_EDTYPE, "idiv"); /* promotes to float */
	EXPECT_NULL(ctx, eng_mod(h, h), ENG_EDTYPE, "mod");
	EXPECT_NULL(ctx, eng_shl(f, i), ENG_EDTYPE, "shl");
	EXPECT_NULL(ctx, eng_shr(bo, bo), ENG_EDTYPE, "shr");
	EXPECT_NULL(ctx, eng_and(f, f), ENG_EDTYPE, "and");
	EXPECT_NULL(ctx, eng_xor(h, bo), ENG_EDTYPE, "xor");
	EXPECT_NULL(ctx, eng_bitcast(f, ENG_F16), ENG_EDTYPE, "bitcast");
	EXPECT_NULL(ctx, eng_bitcast(f, ENG_I64), ENG_EDTYPE, "bitcast");
	EXPECT_NULL(ctx, eng_bitcast(bo, ENG_U8), ENG_EDTYPE, "bitcast");
	EXPECT_NULL(ctx, eng_bitcast(eng_zeros(ctx, ENG_U8, 1, s3), ENG_BOOL), ENG_EDTYPE,
		    "bitcast");
	EXPECT_NULL(ctx, eng_neg(bo), ENG_EDTYPE, "neg");
	EXPECT_NULL(ctx, eng_cast(f, (eng_dtype)99), ENG_EDTYPE, "cast");
	EXPECT_NULL(ctx, eng_zeros(ctx, (eng_dtype)-1, 1, s3), ENG_EDTYPE, "full");
	EXPECT_NULL(ctx, eng_empty(ctx, ENG_DTYPE_COUNT, 1, s3), ENG_EDTYPE, "empty");
	EXPECT_NULL(ctx, eng_index(ctx, ENG_BOOL, 1, s3, 0), ENG_EDTYPE, "index");
	EXPECT_NULL(ctx, eng_rand(ctx, ENG_I32, 1, s3), ENG_EDTYPE, "rand");
	EXPECT_NULL(ctx, eng_randn(ctx, ENG_BOOL, 1, s3), ENG_EDTYPE, "randn");
	eng_tensor *t = eng_from_data(ctx, ENG_F32, 1, s3, (float[]){1, 2, 3});
	EXPECT_NULL(ctx, eng_assign(t, i), ENG_EDTYPE, "assign");
	EXPECT_NULL(ctx, eng_assign(t, h), ENG_EDTYPE, "assign");
	EXPECT_NULL(ctx, eng_one_hot(f, 3), ANY_ERR, "one_hot");
	EXPECT_NULL(ctx, eng_gather(f, 0, f), ANY_ERR, "gather");
	EXPECT_NULL(ctx, eng_embedding(f32(ctx, 2, (int64_t[]){3, 2}), f), ANY_ERR, "embedding");
	/* the failed assigns left t as it was */
	float out[3];
	eng_clear_error(ctx);
	ck_assert_int_eq(eng_tensor_read(t, out, sizeof(out)), ENG_OK);
	ck_assert(out[0] == 1 && out[1] == 2 && out[2] == 3);
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(assign_shape_error)
{
	eng_ctx *ctx = tu_ctx_new();
	eng_tensor *t = f32(ctx, 2, (int64_t[]){2, 3});
	eng_clear_error(ctx);
	ck_assert(eng_assign(t, f32(ctx, 1, (int64_t[]){4})) == NULL);
	ck_assert_int_ne(eng_error(ctx), ENG_OK);
	const char *m = eng_errmsg(ctx);
	ck_assert_msg(strcasestr(m, "assign") || strcasestr(m, "expand"), "message: %s", m);
	tu_ctx_free(ctx);
}
END_TEST

/* Nested calls return NULL and keep the FIRST error. */
START_TEST(null_propagation)
{
	eng_ctx *ctx = tu_ctx_new();
	int64_t s23[2] = {2, 3};
	eng_tensor *a = f32(ctx, 2, s23);
	eng_clear_error(ctx);
	eng_tensor *r1 = eng_reshape(a, 2, (int64_t[]){4, 4});
	eng_tensor *r2 = eng_permute(a, (int[]){1, 1});
	ck_assert(r1 == NULL && r2 == NULL);
	eng_tensor *r = eng_exp(eng_sum(eng_add(r1, r2), NULL, 0, false));
	ck_assert(r == NULL);
	ck_assert_int_eq(eng_error(ctx), ENG_ESHAPE);
	ck_assert_msg(strstr(eng_errmsg(ctx), "reshape") && !strstr(eng_errmsg(ctx), "permute"),
		      "message: %s", eng_errmsg(ctx));
	/* a later failure does not overwrite it either */
	ck_assert(eng_matmul(a, a) == NULL);
	ck_assert_msg(strstr(eng_errmsg(ctx), "reshape"), "message: %s", eng_errmsg(ctx));
	/* deep composite chains propagate */
	eng_clear_error(ctx);
	eng_tensor *bad = eng_matmul(a, a);
	ck_assert(bad == NULL);
	ck_assert(eng_softmax(eng_relu(eng_layernorm(bad, 1e-5)), 0) == NULL);
	ck_assert_msg(strcasestr(eng_errmsg(ctx), "matmul"), "message: %s", eng_errmsg(ctx));
	/* every function given NULL returns NULL and sets no error */
	eng_clear_error(ctx);
	const int k2[2] = {2, 2};
	int ax0 = 0;
	eng_tensor *nul = NULL;
	const void *res[] = {
		eng_exp2(NULL),
		eng_log2(NULL),
		eng_sin(NULL),
		eng_sqrt(NULL),
		eng_recip(NULL),
		eng_neg(NULL),
		eng_trunc(NULL),
		eng_cast(NULL, ENG_F32),
		eng_bitcast(NULL, ENG_I32),
		eng_add(NULL, a),
		eng_sub(a, NULL),
		eng_mul(NULL, NULL),
		eng_div(NULL, a),
		eng_idiv(a, NULL),
		eng_mod(NULL, a),
		eng_maximum(NULL, a),
		eng_minimum(a, NULL),
		eng_lt(NULL, a),
		eng_gt(a, NULL),
		eng_le(NULL, a),
		eng_ge(a, NULL),
		eng_eq(NULL, a),
		eng_ne(a, NULL),
		eng_and(NULL, a),
		eng_or(a, NULL),
		eng_xor(NULL, a),
		eng_shl(NULL, a),
		eng_shr(a, NULL),
		eng_where(NULL, a, a),
		eng_where(a, NULL, a),
		eng_where(a, a, NULL),
		eng_add_s(NULL, 1),
		eng_sub_s(NULL, 1),
		eng_mul_s(NULL, 1),
		eng_div_s(NULL, 1),
		eng_rsub_s(1, NULL),
		eng_sum(NULL, NULL, 0, false),
		eng_max(NULL, &ax0, 1, true),
		eng_prod(NULL, NULL, 0, false),
		eng_reshape(NULL, 1, s23),
		eng_permute(NULL, (int[]){0, 1}),
		eng_expand(NULL, 2, s23),
		eng_pad(NULL, (const int64_t[][2]){{0, 0}, {0, 0}}),
		eng_shrink(NULL, (const int64_t[][2]){{0, 1}, {0, 1}}),
		eng_flip(NULL, &ax0, 1),
		eng_contiguous(NULL),
		eng_assign(NULL, a),
		eng_assign(a, NULL),
		eng_full_like(NULL, 1),
		eng_exp(NULL),
		eng_log(NULL),
		eng_cos(NULL),
		eng_tan(NULL),
		eng_abs(NULL),
		eng_sign(NULL),
		eng_square(NULL),
		eng_rsqrt(NULL),
		eng_pow(NULL, a),
		eng_pow(a, NULL),
		eng_pow_s(NULL, 2),
		eng_clamp(NULL, 0, 1),
		eng_floor(NULL),
		eng_ceil(NULL),
		eng_round(NULL),
		eng_logical_not(NULL),
		eng_relu(NULL),
		eng_leaky_relu(NULL, 0.1),
		eng_sigmoid(NULL),
		eng_tanh(NULL),
		eng_gelu(NULL),
		eng_silu(NULL),
		eng_softplus(NULL),
		eng_elu(NULL, 1),
		eng_min(NULL, NULL, 0, false),
		eng_mean(NULL, NULL, 0, false),
		eng_var(NULL, NULL, 0, false, 1),
		eng_std(NULL, NULL, 0, false, 1),
		eng_logsumexp(NULL, 0, false),
		eng_softmax(NULL, 0),
		eng_log_softmax(NULL, 0),
		eng_argmax(NULL, 0, false),
		eng_argmin(NULL, 0, false),
		eng_transpose(NULL, 0, 1),
		eng_flatten(NULL, 0, -1),
		eng_squeeze(NULL, 0),
		eng_unsqueeze(NULL, 0),
		eng_slice(NULL, 0, 0, 1, 1),
		eng_cat(&nul, 1, 0),
		eng_stack(&nul, 1, 0),
		eng_repeat(NULL, (int64_t[]){1, 1}),
		eng_matmul(NULL, a),
		eng_matmul(a, NULL),
		eng_linear(NULL, a, NULL),
		eng_linear(a, NULL, NULL),
		eng_conv2d(NULL, a, NULL, k2, k2, k2, 1),
		eng_conv2d(a, NULL, NULL, k2, k2, k2, 1),
		eng_max_pool2d(NULL, k2, NULL, NULL),
		eng_avg_pool2d(NULL, k2, NULL, NULL),
		eng_one_hot(NULL, 3),
		eng_gather(NULL, 0, a),
		eng_gather(a, 0, NULL),
		eng_embedding(NULL, a),
		eng_embedding(a, NULL),
		eng_layernorm(NULL, 1e-5),
		eng_sparse_cross_entropy(NULL, a),
		eng_sparse_cross_entropy(a, NULL),
	};
	for (size_t k = 0; k < sizeof(res) / sizeof(res[0]); k++)
		ck_assert_msg(res[k] == NULL, "call %zu with a NULL operand returned a tensor", k);
	ck_assert_msg(eng_error(ctx) == ENG_OK, "a NULL operand set an error: %s", eng_errmsg(ctx));
	tu_ctx_free(ctx);
}
END_TEST

/* Reading, realizing and creating: status codes and messages. */
START_TEST(runtime_errors)
{
	eng_ctx *ctx = tu_ctx_new();
	int64_t s3[1] = {3};
	eng_tensor *t = eng_from_data(ctx, ENG_F32, 1, s3, (float[]){1, 2, 3});
	float out[4];
	EXPECT_STATUS(ctx, eng_tensor_read(t, out, sizeof(float) * 2), ENG_EINVAL, "read");
	EXPECT_STATUS(ctx, eng_tensor_read(t, out, sizeof(float) * 4), ENG_EINVAL, "read");
	EXPECT_STATUS(ctx, eng_tensor_read(eng_cast(t, ENG_F16), out, sizeof(float) * 3),
		      ENG_EINVAL, "read");
	eng_clear_error(ctx);
	ck_assert_int_eq(eng_tensor_read(NULL, out, 4), ENG_EINVAL);
	eng_tensor *two[2] = {t, NULL};
	EXPECT_STATUS(ctx, eng_realize(two, 2), ENG_EINVAL, "realize");
	eng_clear_error(ctx);
	ck_assert(isnan(eng_item(t)));
	ck_assert_int_eq(eng_error(ctx), ENG_ESHAPE);
	ck_assert_msg(strcasestr(eng_errmsg(ctx), "item"), "message: %s", eng_errmsg(ctx));
	eng_clear_error(ctx);
	ck_assert(isnan(eng_item(NULL)));
	/* after clearing, the context works normally */
	eng_clear_error(ctx);
	ck_assert_int_eq(eng_tensor_read(eng_mul_s(t, 2), out, sizeof(float) * 3), ENG_OK);
	ck_assert(out[0] == 2 && out[1] == 4 && out[2] == 6);
	ck_assert(eng_item(eng_sum(t, NULL, 0, false)) == 6);
	ck_assert_int_eq(eng_error(ctx), ENG_OK);
	ck_assert_str_eq(eng_errmsg(ctx), "");
	/* a failed read of the right size from a failed graph does not crash */
	ck_assert_int_eq(eng_realize(NULL, 0), ENG_OK);
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(context_errors)
{
	char err[256] = "";
	eng_ctx_opts o;
	eng_ctx_opts_default(&o);
	o.debug = tu_debug();
	o.device = "NOSUCHDEV";
	ck_assert(eng_ctx_create(&o, err, sizeof(err)) == NULL);
	ck_assert_msg(strstr(err, "NOSUCHDEV"), "message: %s", err);
	ck_assert(eng_ctx_create(&o, NULL, 0) == NULL); /* no message buffer: still fine */
	eng_ctx_destroy(NULL);
	/* operands from two contexts */
	eng_ctx *c1 = tu_ctx_new(), *c2 = tu_ctx_new();
	int64_t s2[1] = {2};
	eng_tensor *a = eng_ones(c1, ENG_F32, 1, s2), *b = eng_ones(c2, ENG_F32, 1, s2);
	EXPECT_NULL(c1, eng_add(a, b), ENG_EINVAL, "context");
	EXPECT_NULL(c1, eng_matmul(a, b), ENG_EINVAL, "context");
	eng_tensor *both[2] = {a, b};
	EXPECT_NULL(c1, eng_cat(both, 2, 0), ANY_ERR, NULL);
	/* scopes nested too deep report an error and still unwind cleanly */
	eng_clear_error(c1);
	for (int i = 0; i < 70; i++) {
		eng_scope_begin(c1);
		eng_ones(c1, ENG_F32, 1, s2);
	}
	ck_assert_int_eq(eng_error(c1), ENG_ESTATE);
	for (int i = 0; i < 70; i++)
		eng_scope_end(c1);
	eng_scope_end(c1); /* unbalanced end: ignored */
	eng_tensor_free(NULL);
	tu_ctx_free(c2);
	tu_ctx_free(c1);
	ck_assert_str_eq(eng_strerror(ENG_OK), "ok");
	ck_assert(eng_strerror((eng_status)1000) != NULL);
}
END_TEST

Suite *errors_suite(void)
{
	const TTest *const tests[] = {shape_errors,   axis_errors,	  size_errors,
				      dtype_errors,   assign_shape_error, null_propagation,
				      runtime_errors, context_errors};
	return tu_suite("errors", tests, (int)(sizeof(tests) / sizeof(tests[0])), TU_TIMEOUT);
}
