/* test_rows.c: eng_rows_independent, the proof that callers' rows can share a launch: graphs
 * whose rows stay apart (found, with their output axes) and each way rows can meet (refused,
 * saying how). Every accepted case is also checked numerically: row 0 of the output is the same
 * whatever the other rows hold. */
#include <check.h>
#include <string.h>

#include "testutil.h"

#define B 5

typedef eng_tensor *(*graph_fn)(eng_ctx *ctx, eng_tensor *x);

static eng_tensor *mlp(eng_ctx *ctx, eng_tensor *x) /* x [B, 4] */
{
	int64_t ws[2] = {4, 3}, bs[1] = {3};
	eng_tensor *w = eng_rand(ctx, ENG_F32, 2, ws), *b = eng_rand(ctx, ENG_F32, 1, bs);
	return eng_relu(eng_add(eng_matmul(x, w), b));
}

static eng_tensor *softmax_rows(eng_ctx *ctx, eng_tensor *x)
{
	(void)ctx;
	return eng_softmax(x, 1);
}

static eng_tensor *transposed(eng_ctx *ctx, eng_tensor *x) /* output [4, B]: axis 1 */
{
	return eng_transpose(mlp(ctx, x), 0, 1);
}

/* [B, 4] -> [B * 2, 2] (rows merged with the next axis) -> matmul -> back to [B, 2, 3] -> [B, 6] */
static eng_tensor *merged_and_back(eng_ctx *ctx, eng_tensor *x)
{
	int64_t m[2] = {B * 2, 2}, ws[2] = {2, 3}, back[2] = {B, 6};
	eng_tensor *h = eng_matmul(eng_reshape(x, 2, m), eng_rand(ctx, ENG_F32, 2, ws));
	return eng_reshape(eng_sigmoid(h), 2, back);
}

static eng_tensor *cat_features(eng_ctx *ctx, eng_tensor *x) /* [B, 4] ++ [B, 4]^2 along axis 1 */
{
	(void)ctx;
	eng_tensor *p[2] = {x, eng_mul(x, x)};
	return eng_cat(p, 2, 1);
}

static eng_tensor *batch_sum(eng_ctx *ctx, eng_tensor *x)
{
	(void)ctx;
	int ax = 0;
	return eng_add(x, eng_sum(x, &ax, 1, true));
}

static eng_tensor *batch_norm(eng_ctx *ctx, eng_tensor *x) /* training-mode statistics */
{
	(void)ctx;
	int ax = 0;
	return eng_sub(x, eng_mean(x, &ax, 1, true));
}

static eng_tensor *position(eng_ctx *ctx, eng_tensor *x) /* adds the row's index */
{
	int64_t s[2] = {B, 1};
	eng_tensor *i = eng_reshape(eng_arange(ctx, ENG_F32, 0, B, 1), 2, s);
	return eng_add(x, i);
}

static eng_tensor *per_row_weight(eng_ctx *ctx, eng_tensor *x)
{
	int64_t s[2] = {B, 4};
	return eng_mul(x, eng_rand(ctx, ENG_F32, 2, s));
}

static eng_tensor *first_row(eng_ctx *ctx, eng_tensor *x) /* row 0 broadcast to every row */
{
	(void)ctx;
	int64_t s[2] = {B, 4};
	return eng_add(x, eng_expand(eng_slice(x, 0, 0, 1, 1), 2, s));
}

static eng_tensor *rows_as_columns(eng_ctx *ctx, eng_tensor *x) /* x[i, j] * x[j, i]-like */
{
	(void)ctx;
	int64_t m[2] = {4, B};
	eng_tensor *t = eng_reshape(x, 2, m); /* a reshape that splits rows across both axes */
	return eng_reshape(eng_exp(t), 2, (int64_t[2]){B, 4});
}

static eng_tensor *constant(eng_ctx *ctx, eng_tensor *x)
{
	(void)x;
	int64_t s[2] = {B, 4};
	return eng_full(ctx, ENG_F32, 2, s, 1.0);
}

static eng_tensor *reversed(eng_ctx *ctx, eng_tensor *x)
{
	(void)ctx;
	int ax = 0;
	return eng_flip(x, &ax, 1);
}

static eng_tensor *input(eng_ctx *ctx, float first)
{
	float d[B * 4];
	for (int i = 0; i < B * 4; i++)
		d[i] = i < 4 ? first + (float)i : (float)((i * 37) % 11) - 5.0f * first;
	int64_t s[2] = {B, 4};
	return eng_from_data(ctx, ENG_F32, 2, s, d);
}

/* Proves fn row-independent with output axis `axis`, and checks it: row 0 of the output (along
 * that axis) is the same for two inputs that differ in every other row. */
static void accepted(graph_fn fn, int axis)
{
	eng_ctx *ctx = tu_ctx_new();
	eng_manual_seed(ctx, 7);
	eng_tensor *x1 = input(ctx, 1.0f), *x2 = input(ctx, 2.0f);
	/* x2's first row made equal to x1's: only rows 1.. differ */
	eng_tensor *x2r = eng_cat((eng_tensor *[2]){eng_slice(x1, 0, 0, 1, 1), eng_slice(x2, 0, 1, B, 1)}, 2, 0);
	int in_axis = 0, out_axis = -1;
	eng_manual_seed(ctx, 9);
	eng_tensor *y1 = fn(ctx, x1);
	ck_assert_msg(eng_rows_independent(&x1, &in_axis, 1, &y1, 1, &out_axis) == ENG_OK, "%s", eng_errmsg(ctx));
	ck_assert_int_eq(out_axis, axis);
	eng_manual_seed(ctx, 9);
	eng_tensor *y2 = fn(ctx, eng_contiguous(x2r));
	eng_tensor *r1 = eng_slice(y1, axis, 0, 1, 1), *r2 = eng_slice(y2, axis, 0, 1, 1);
	ck_assert_int_eq(eng_realize((eng_tensor *[2]){r1, r2}, 2), ENG_OK);
	float a[64], b[64];
	size_t n = (size_t)eng_numel(r1);
	ck_assert_uint_le(n, 64);
	ck_assert_int_eq(eng_realize_into(r1, a, n * 4), ENG_OK);
	ck_assert_int_eq(eng_realize_into(r2, b, n * 4), ENG_OK);
	ck_assert(!memcmp(a, b, n * 4));
	eng_ctx_destroy(ctx);
}

static void refused(graph_fn fn, const char *why)
{
	eng_ctx *ctx = tu_ctx_new();
	eng_tensor *x = input(ctx, 1.0f), *y = fn(ctx, x);
	int in_axis = 0, out_axis = -1;
	ck_assert_ptr_nonnull(y);
	ck_assert_int_eq(eng_rows_independent(&x, &in_axis, 1, &y, 1, &out_axis), ENG_EINVAL);
	ck_assert_msg(strstr(eng_errmsg(ctx), why), "wanted \"%s\" in \"%s\"", why, eng_errmsg(ctx));
	eng_ctx_destroy(ctx);
}

START_TEST(rows_stay_apart)
{
	accepted(mlp, 0);
	accepted(softmax_rows, 0);
	accepted(transposed, 1);
	accepted(merged_and_back, 0);
	accepted(cat_features, 0);
}
END_TEST

START_TEST(rows_meet)
{
	refused(batch_sum, "reduction runs over the batch axis");
	refused(batch_norm, "reduction runs over the batch axis");
	refused(position, "changes along the batch axis");
	refused(per_row_weight, "changes along the batch axis");
	refused(first_row, "batch axis is sliced");
	refused(rows_as_columns, "reshape splits the batch axis");
	refused(constant, "does not depend on the inputs' rows");
	refused(reversed, "batch axis is reversed");
}
END_TEST

/* Two inputs whose batch axes differ (a recurrent state [2, B, 3] beside x [B, 4]). */
START_TEST(inputs_with_other_axes)
{
	eng_ctx *ctx = tu_ctx_new();
	int64_t ss[3] = {2, B, 3};
	eng_tensor *in[2] = {input(ctx, 1.0f), eng_rand(ctx, ENG_F32, 3, ss)};
	int ax[2] = {0, 1}, out_axis[2] = {-1, -1}, zero = 0;
	eng_tensor *h = eng_sum(in[1], &zero, 1, false); /* [B, 3] */
	eng_tensor *y[2] = {eng_cat((eng_tensor *[2]){in[0], h}, 2, 1), eng_tanh(in[1])};
	ck_assert_msg(eng_rows_independent(in, ax, 2, y, 2, out_axis) == ENG_OK, "%s", eng_errmsg(ctx));
	ck_assert_int_eq(out_axis[0], 0);
	ck_assert_int_eq(out_axis[1], 1);
	/* x given a leading axis meets the state along the state's batch axis: fine */
	eng_tensor *both = eng_add(eng_reshape(in[0], 3, (int64_t[3]){1, B, 4}), eng_slice(in[1], 2, 0, 1, 1));
	ck_assert_int_eq(eng_rows_independent(in, ax, 2, &both, 1, out_axis), ENG_OK);
	ck_assert_int_eq(out_axis[0], 1);
	/* x's rows against the state's first axis: rows along different axes meet */
	eng_tensor *cross = eng_add(eng_reshape(eng_slice(in[0], 1, 0, 2, 1), 3, (int64_t[3]){B, 2, 1}),
				    eng_reshape(eng_slice(in[1], 2, 0, 1, 1), 3, (int64_t[3]){1, 2, B}));
	ck_assert_int_eq(eng_rows_independent(in, ax, 2, &cross, 1, out_axis), ENG_EINVAL);
	ck_assert_msg(strstr(eng_errmsg(ctx), "different axes"), "%s", eng_errmsg(ctx));
	/* the state's rows merged with the axis after them */
	eng_tensor *x2 = eng_reshape(eng_slice(in[1], 2, 0, 2, 1), 2, (int64_t[2]){2, B * 2});
	ck_assert_int_eq(eng_rows_independent(in, ax, 2, &x2, 1, out_axis), ENG_EINVAL);
	/* the check needs at least two rows, the same number in every input */
	int64_t s1[2] = {1, 4};
	eng_tensor *one = eng_zeros(ctx, ENG_F32, 2, s1);
	ck_assert_int_eq(eng_rows_independent(&one, ax, 1, &one, 1, out_axis), ENG_EINVAL);
	eng_tensor *mism[2] = {in[0], eng_rand(ctx, ENG_F32, 2, (int64_t[2]){B + 1, 2})};
	ck_assert_int_eq(eng_rows_independent(mism, ax, 2, y, 1, out_axis), ENG_EINVAL);
	ck_assert_msg(strstr(eng_errmsg(ctx), "rows"), "%s", eng_errmsg(ctx));
	eng_ctx_destroy(ctx);
}
END_TEST

Suite *rows_suite(void)
{
	Suite *s = suite_create("rows");
	TCase *tc = tcase_create("rows");
	tcase_add_test(tc, rows_stay_apart);
	tcase_add_test(tc, rows_meet);
	tcase_add_test(tc, inputs_with_other_axes);
	suite_add_tcase(s, tc);
	return s;
}
