/* test_reduce_accuracy.c: reductions to a scalar or to few rows: long float32 sums within 1e-6
 * of a double reference on the CPU and OpenCL, max and integer sums exact, the same bits on every
 * run, and one launch whose reduction is split over the CPU's threads or OpenCL's work-groups.
 * Without OpenCL its tests print "reduceacc: CL SKIPPED (reason)" and pass. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensord/jit.h>

#include "backends/registry.h"
#include "schedule/schedule.h"
#include "tensor/tensor.h"
#include "testutil.h"

/* Relative error allowed of a float32 sum: naive accumulation of 2^24 values of 0.1f is off by
 * ~6e-4 and a 2048 x 2048 sum by ~1e-6 (issue 16); blocks of at most 512 (64 per vector lane, or
 * per thread without lanes) added with compensation stay under 6e-7 on both (a float32 result
 * alone is rounded by up to 6e-8). */
#define SUM_TOL 1e-6

/* A context on dev ("CPU", "CL") with backend options opts (may be NULL), or NULL when dev has
 * no device here (then the test is skipped with a line saying so). */
static eng_ctx *ctx_on(const char *dev, const char *opts)
{
	eng_ctx_opts o;
	eng_ctx_opts_default(&o);
	o.debug = tu_debug();
	o.device = dev;
	o.backend_opts = opts;
	char err[512];
	eng_ctx *ctx = eng_ctx_create(&o, err, sizeof(err));
	if (!ctx && strcmp(dev, "CPU") != 0) {
		fprintf(stderr, "reduceacc: %s SKIPPED (%s)\n", dev, err);
		return NULL;
	}
	ck_assert_msg(ctx != NULL, "%s: %s", dev, err);
	return tu_ctx_shadow(tu_ctx_track(ctx));
}

/* n float32 values: all 0.1f (kind 0), uniform in [0, 1) (kind 1), or uniform in [-3, -1)
 * (kind 2); *ref gets their sum in double. Caller frees. */
static float *values(int64_t n, int kind, double *ref)
{
	float *v = malloc((size_t)n * sizeof(float));
	ck_assert(v != NULL);
	tu_rng r = {(uint64_t)kind + 7};
	double s = 0;
	for (int64_t i = 0; i < n; i++) {
		v[i] = kind == 0 ? 0.1f : kind == 1 ? (float)tu_real(&r, 0, 1) : (float)tu_real(&r, -3, -1);
		s += (double)v[i];
	}
	*ref = s;
	return v;
}

static double rel(double got, double want) { return fabs(got - want) / fabs(want); }

/* Read a float32 scalar (realizing t), and the kernels that took. */
static float read_scalar(eng_tensor *t, uint64_t *kernels)
{
	eng_ctx *ctx = eng_tensor_ctx(t);
	ck_assert_msg(t != NULL, "build failed: %s", eng_errmsg(ctx));
	eng_reset_stats(ctx);
	float f = 0;
	ck_assert_msg(eng_tensor_read(t, &f, sizeof(f)) == ENG_OK, "%s", eng_errmsg(ctx));
	eng_stats st;
	eng_get_stats(ctx, &st);
	if (kernels)
		*kernels = st.kernels;
	return f;
}

/* sum and mean of rows x cols values of each kind on dev, against the double reference. */
static void check_sums(const char *dev, int64_t rows, int64_t cols)
{
	eng_ctx *ctx = ctx_on(dev, NULL);
	if (!ctx)
		return;
	int64_t shape[2] = {rows, cols}, n = rows * cols;
	for (int kind = 0; kind < 2; kind++) {
		double ref;
		float *v = values(n, kind, &ref);
		eng_tensor *a = eng_from_data(ctx, ENG_F32, 2, shape, v);
		free(v);
		uint64_t k;
		float s = read_scalar(eng_sum(a, NULL, 0, false), &k);
		ck_assert_msg(rel(s, ref) < SUM_TOL, "%s sum of %lldx%lld (kind %d): %.9g, want %.9g (rel %.3g)", dev,
			      (long long)rows, (long long)cols, kind, s, ref, rel(s, ref));
		ck_assert_msg(k == 1, "%s sum: %llu kernels", dev, (unsigned long long)k);
		float m = read_scalar(eng_mean(a, NULL, 0, false), &k);
		ck_assert_msg(rel(m, ref / (double)n) < SUM_TOL, "%s mean (kind %d): %.9g, want %.9g", dev, kind, m,
			      ref / (double)n);
		ck_assert_msg(k == 1, "%s mean: %llu kernels", dev, (unsigned long long)k);
		eng_tensor_free(a);
	}
	tu_ctx_free(ctx);
}

START_TEST(sum_2048_square_cpu) { check_sums("CPU", 2048, 2048); }
END_TEST

START_TEST(sum_2p24_cpu) { check_sums("CPU", 1, 1 << 24); }
END_TEST

START_TEST(sum_2048_square_cl) { check_sums("CL", 2048, 2048); }
END_TEST

START_TEST(sum_2p24_cl) { check_sums("CL", 4096, 4096); }
END_TEST

/* max to a scalar of negative values (a partial started at 0 would win) whose largest is in the
 * last quarter, and the sum of the same then an elementwise op with another input. */
static void check_max_and_after(const char *dev, const char *opts)
{
	eng_ctx *ctx = ctx_on(dev, opts);
	if (!ctx)
		return;
	int64_t n = 1 << 22, one[1] = {1};
	double ref;
	float *v = values(n, 2, &ref);
	ref += -0.5 - (double)v[n - n / 5];
	v[n - n / 5] = -0.5f;
	eng_tensor *a = eng_from_data(ctx, ENG_F32, 1, &n, v);
	uint64_t k;
	float mx = read_scalar(eng_max(a, NULL, 0, false), &k);
	ck_assert_msg(mx == -0.5f, "%s max: %.9g", dev, mx);
	ck_assert_msg(k == 1, "%s max: %llu kernels", dev, (unsigned long long)k);
	float b = 1000.0f;
	eng_tensor *bt = eng_from_data(ctx, ENG_F32, 1, one, &b);
	float got = read_scalar(eng_add(eng_mul(eng_sum(a, NULL, 0, true), bt), bt), &k);
	double want = ref * 1000.0 + 1000.0;
	ck_assert_msg(rel(got, want) < SUM_TOL, "%s sum * b + b: %.9g, want %.9g", dev, got, want);
	ck_assert_msg(k == 1, "%s sum * b + b: %llu kernels", dev, (unsigned long long)k);
	/* two reductions of a in one expression (sum and max), and the variance (whose second
	 * reduction reads the first's mean: not split) */
	eng_tensor *a2 = eng_from_data(ctx, ENG_F32, 1, &n, v); /* nothing of it computed yet */
	float sm = read_scalar(eng_sub(eng_sum(a2, NULL, 0, false), eng_max(a2, NULL, 0, false)), &k);
	ck_assert_msg(k == 1, "%s sum - max: %llu kernels", dev, (unsigned long long)k);
	ck_assert_msg(rel(sm, ref + 0.5) < SUM_TOL, "%s sum - max: %.9g, want %.9g", dev, sm, ref + 0.5);
	double mean = ref / (double)n, var = 0;
	for (int64_t i = 0; i < n; i++)
		var += ((double)v[i] - mean) * ((double)v[i] - mean);
	var /= (double)n;
	float vg = read_scalar(eng_var(a, NULL, 0, false, 0), NULL);
	ck_assert_msg(rel(vg, var) < 1e-5, "%s var: %.9g, want %.9g", dev, vg, var);
	free(v);
	tu_ctx_free(ctx);
}

START_TEST(max_and_after_cpu) { check_max_and_after("CPU", "CPU.threads=4"); }
END_TEST

START_TEST(max_and_after_cl) { check_max_and_after("CL", NULL); }
END_TEST

/* Sums of 3 long rows (each split over the threads: 8 of them, 3 chunks a row) and an int32 sum,
 * exact where the values allow. */
START_TEST(rows_and_ints_cpu)
{
	eng_ctx *ctx = ctx_on("CPU", "CPU.threads=8");
	int64_t shape[2] = {3, 1 << 20}, n = shape[0] * shape[1];
	double ref;
	float *v = values(n, 1, &ref);
	int32_t *iv = malloc((size_t)n * sizeof(int32_t));
	ck_assert(iv != NULL);
	int64_t isum = 0;
	for (int64_t i = 0; i < n; i++) {
		iv[i] = (int32_t)(i % 1000) - 400;
		isum += iv[i];
	}
	eng_tensor *a = eng_from_data(ctx, ENG_F32, 2, shape, v), *ia = eng_from_data(ctx, ENG_I32, 2, shape, iv);
	int ax = 1;
	eng_tensor *rs = eng_sum(a, &ax, 1, false);
	eng_reset_stats(ctx);
	float got[3];
	ck_assert_msg(eng_tensor_read(rs, got, sizeof(got)) == ENG_OK, "%s", eng_errmsg(ctx));
	eng_stats st;
	eng_get_stats(ctx, &st);
	ck_assert_int_eq(st.kernels, 1);
	for (int r = 0; r < 3; r++) {
		double want = 0;
		for (int64_t i = 0; i < shape[1]; i++)
			want += v[r * shape[1] + i];
		ck_assert_msg(rel(got[r], want) < SUM_TOL, "row %d: %.9g, want %.9g", r, got[r], want);
	}
	/* rows from two output loops (merged into the parallel one): [2, 3, 2^19 - 7] over axis 2 */
	int64_t s3[3] = {2, 3, (1 << 19) - 7}, n3 = s3[0] * s3[1] * s3[2];
	ck_assert(n3 <= n);
	eng_tensor *b3 = eng_from_data(ctx, ENG_F32, 3, s3, v); /* the first n3 values of v */
	int ax2 = 2;
	float got3[6];
	ck_assert_msg(eng_tensor_read(eng_sum(b3, &ax2, 1, false), got3, sizeof(got3)) == ENG_OK, "%s", eng_errmsg(ctx));
	for (int r = 0; r < 6; r++) {
		double want = 0;
		for (int64_t i = 0; i < s3[2]; i++)
			want += v[r * s3[2] + i];
		ck_assert_msg(rel(got3[r], want) < SUM_TOL, "[2, 3] row %d: %.9g, want %.9g", r, got3[r], want);
	}
	int32_t igot = 0;
	ck_assert_int_eq(eng_tensor_read(eng_sum(ia, NULL, 0, false), &igot, sizeof(igot)), ENG_OK);
	ck_assert_int_eq(igot, (int32_t)isum);
	free(v);
	free(iv);
	tu_ctx_free(ctx);
}
END_TEST

/* The same bits on every run: each time a fresh input holding the same values, so the sum is
 * launched again (the schedule cache and compiled kernel reused, the threads taking chunks as
 * they come). */
START_TEST(same_bits_every_run)
{
	eng_ctx *ctx = ctx_on("CPU", "CPU.threads=4");
	int64_t n = 1 << 22;
	double ref;
	float *v = values(n, 1, &ref);
	float first = 0;
	for (int i = 0; i < 9; i++) {
		uint64_t k;
		float s = read_scalar(eng_sum(eng_from_data(ctx, ENG_F32, 1, &n, v), NULL, 0, false), &k);
		ck_assert_msg(k == 1, "run %d: %llu kernels", i, (unsigned long long)k);
		if (i == 0)
			first = s;
		ck_assert_msg(memcmp(&first, &s, sizeof(float)) == 0, "run %d: %.9g, first %.9g", i, s, first);
	}
	free(v);
	tu_ctx_free(ctx);
}
END_TEST

/* A length that no block or chunk divides (the last block of each part is short), and sums
 * whose total overflows, holds an inf or a NaN: the same specials as a plain sum (the
 * compensation must not turn inf into NaN). */
static void check_odd_and_specials(const char *dev, const char *opts)
{
	eng_ctx *ctx = ctx_on(dev, opts);
	if (!ctx)
		return;
	int64_t n = 3000017;
	double ref;
	float *v = values(n, 0, &ref);
	eng_tensor *a = eng_from_data(ctx, ENG_F32, 1, &n, v);
	float s = read_scalar(eng_sum(a, NULL, 0, false), NULL);
	ck_assert_msg(rel(s, ref) < SUM_TOL, "%s sum of %lld: %.9g, want %.9g", dev, (long long)n, s, ref);
	for (int64_t i = 0; i < n; i++)
		v[i] = 3e38f;
	float big = read_scalar(eng_sum(eng_from_data(ctx, ENG_F32, 1, &n, v), NULL, 0, false), NULL);
	ck_assert_msg(isinf(big) && big > 0, "%s overflowing sum: %g", dev, big);
	for (int64_t i = 0; i < n; i++)
		v[i] = 1.0f;
	v[n / 2] = INFINITY;
	float inf = read_scalar(eng_sum(eng_from_data(ctx, ENG_F32, 1, &n, v), NULL, 0, false), NULL);
	ck_assert_msg(isinf(inf) && inf > 0, "%s sum with an inf: %g", dev, inf);
	v[n / 3] = NAN;
	float nan = read_scalar(eng_sum(eng_from_data(ctx, ENG_F32, 1, &n, v), NULL, 0, false), NULL);
	ck_assert_msg(isnan(nan), "%s sum with a NaN: %g", dev, nan);
	free(v);
	tu_ctx_free(ctx);
}

START_TEST(odd_and_specials_cpu) { check_odd_and_specials("CPU", "CPU.threads=4"); }
END_TEST

START_TEST(odd_and_specials_cl) { check_odd_and_specials("CL", NULL); }
END_TEST

static eng_status mean_step(eng_ctx *ctx, eng_tensor *const *in, int nin, eng_tensor **out, int nout, void *user)
{
	(void)ctx, (void)nin, (void)nout, (void)user;
	out[0] = eng_mean(in[0], NULL, 0, false);
	return out[0] ? ENG_OK : eng_error(ctx);
}

/* A JIT replay launches a split kernel as the realize did: its chunks, then <name>_fin. */
START_TEST(split_in_jit_replay)
{
	eng_ctx *ctx = ctx_on("CPU", "CPU.threads=4");
	eng_jit *j = eng_jit_create(ctx, mean_step, NULL, 1, 1, NULL);
	ck_assert(j != NULL);
	int64_t n = 1 << 20;
	for (int call = 0; call < 4; call++) {
		double ref;
		float *v = values(n, 1, &ref);
		ref += 1000.0 - (double)v[call]; /* a different input each call */
		v[call] = 1000.0f;
		eng_tensor *x = eng_from_data(ctx, ENG_F32, 1, &n, v), *m = NULL;
		free(v);
		ck_assert_msg(eng_jit_call(j, &x, &m) == ENG_OK, "%s", eng_errmsg(ctx));
		float got = read_scalar(m, NULL);
		ck_assert_msg(rel(got, ref / (double)n) < SUM_TOL, "call %d: %.9g, want %.9g", call, got, ref / (double)n);
	}
	eng_jit_info info;
	eng_jit_get_info(j, &info);
	ck_assert_int_ge(info.replays, 1);
	ck_assert_int_eq(info.kernels, 1);
	eng_jit_destroy(j);
	tu_ctx_free(ctx);
}
END_TEST

/* On a CPU of 4 threads, a sum of 2^22 elements is one kernel whose parallel loop is 4 chunks
 * of the reduction (eng_kernel_ir.split); a sum of 2 rows of 2^20 is 2 chunks a row. */
START_TEST(split_over_threads)
{
	eng_ctx *ctx = tu_ctx_new();
	bk_device dev;
	bk_err err;
	bk_target bt;
	bk_opts opts = {.n = 1, .key = {"threads"}, .value = {"4"}};
	ck_assert_msg(bk_backend_find("CPU")->open(0, &opts, 0, &dev, &err) == ENG_OK, "%s", err.msg);
	ck_assert_msg(bk_device_check(&dev, &bt, &err) == ENG_OK, "%s", err.msg);
	ck_assert_int_gt(bt.split_scratch, 0);
	bk_target tg = bt;
	tg.cache_l1 = tg.cache_l2 = 0; /* reductions as they are planned, no cache blocking */
	int64_t flat[1] = {1 << 22}, rows[2] = {2, 1 << 20}, small[1] = {1000};
	float *zeros = calloc((size_t)flat[0], sizeof(float));
	ck_assert(zeros != NULL);
	int ax = 1;
	eng_tensor *sums[3] = {eng_sum(eng_from_data(ctx, ENG_F32, 1, flat, zeros), NULL, 0, false),
			       eng_sum(eng_from_data(ctx, ENG_F32, 2, rows, zeros), &ax, 1, false),
			       eng_sum(eng_from_data(ctx, ENG_F32, 1, small, zeros), NULL, 0, false)};
	free(zeros);
	/* a short sum stays whole */
	int64_t want_split[3] = {4, 2, 0}, want_par[3] = {4, 4, 1};
	for (int i = 0; i < 3; i++) {
		eng_node *root = eng_tensor_node(sums[i]);
		eng_schedule sch;
		ck_assert_msg(eng_schedule_build_on(ctx, &tg, &root, 1, &sch) == ENG_OK, "%s", eng_errmsg(ctx));
		ck_assert_int_eq(sch.n, 1);
		ck_assert_int_eq(sch.items[0].ir.split, want_split[i]);
		ck_assert_int_eq(sch.items[0].ir.nparallel, want_par[i]);
		eng_schedule_free(&sch);
	}
	dev.ops->destroy(dev.ctx);
	tu_ctx_free(ctx);
}
END_TEST

/* On OpenCL (work-groups of 64), a sum of 2^22 elements is one kernel of several work-groups,
 * each reducing a chunk (then <name>_fin combines their partials). */
START_TEST(split_over_groups_cl)
{
	eng_ctx *ctx = tu_ctx_new();
	bk_device dev;
	bk_err err;
	bk_target bt;
	eng_status s = bk_backend_find("CL")->open(0, NULL, 0, &dev, &err);
	if (s == ENG_ENOTFOUND) {
		fprintf(stderr, "reduceacc: CL SKIPPED (%s)\n", err.msg);
		tu_ctx_free(ctx);
		return;
	}
	ck_assert_msg(s == ENG_OK && bk_device_check(&dev, &bt, &err) == ENG_OK, "%s", err.msg);
	bk_target tg = bt;
	tg.cache_l1 = tg.cache_l2 = 0; /* reductions as they are planned, no cache blocking */
	int64_t n[1] = {1 << 22};
	float *zeros = calloc((size_t)n[0], sizeof(float));
	ck_assert(zeros != NULL);
	eng_node *root = eng_tensor_node(eng_sum(eng_from_data(ctx, ENG_F32, 1, n, zeros), NULL, 0, false));
	free(zeros);
	eng_schedule sch;
	ck_assert_msg(eng_schedule_build_on(ctx, &tg, &root, 1, &sch) == ENG_OK, "%s", eng_errmsg(ctx));
	ck_assert_int_eq(sch.n, 1);
	const eng_kernel_ir *ir = &sch.items[0].ir;
	ck_assert_int_gt(ir->group, 1);
	ck_assert_int_gt(ir->split, 1);
	ck_assert_int_eq(ir->nparallel, ir->split);
	eng_schedule_free(&sch);
	dev.ops->destroy(dev.ctx);
	tu_ctx_free(ctx);
}
END_TEST

Suite *reduceacc_suite(void)
{
	Suite *s = suite_create("reduceacc");
	TCase *tc = tcase_create("reduceacc");
	tcase_set_timeout(tc, TU_TIMEOUT);
	tcase_add_test(tc, sum_2048_square_cpu);
	tcase_add_test(tc, sum_2p24_cpu);
	tcase_add_test(tc, max_and_after_cpu);
	tcase_add_test(tc, rows_and_ints_cpu);
	tcase_add_test(tc, same_bits_every_run);
	tcase_add_test(tc, split_over_threads);
	tcase_add_test(tc, split_in_jit_replay);
	tcase_add_test(tc, odd_and_specials_cpu);
	tcase_add_test(tc, sum_2048_square_cl);
	tcase_add_test(tc, sum_2p24_cl);
	tcase_add_test(tc, max_and_after_cl);
	tcase_add_test(tc, split_over_groups_cl);
	tcase_add_test(tc, odd_and_specials_cl);
	suite_add_tcase(s, tc);
	return s;
}
