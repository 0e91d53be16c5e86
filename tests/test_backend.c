/* test_backend.c: the CPU backend behind the engine: compiler failures become errors with the
 * compiler's message, results do not depend on the thread count, equal kernels compile once. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static eng_ctx *ctx_with(const char *cc, int nthreads)
{
	eng_ctx_opts o;
	char err[256];
	char bopts[512];
	eng_ctx_opts_default(&o);
	o.debug = tu_debug();
	if (cc)
		snprintf(bopts, sizeof(bopts), "CPU.cc=%s,CPU.threads=%d", cc, nthreads);
	else
		snprintf(bopts, sizeof(bopts), "CPU.threads=%d", nthreads);
	o.backend_opts = bopts;
	eng_ctx *ctx = eng_ctx_create(&o, err, sizeof(err));
	ck_assert_msg(ctx != NULL, "context: %s", err);
	return ctx;
}

/* A compiler that states the target's macros (cc -dM -E) but compiles nothing. */
static const char refusing_cc[] = "#!/bin/sh\ncase \" $* \" in *\" -dM \"*) exec cc \"$@\";; esac\n"
				  "echo 'tensord-test-cc: refusing to compile' >&2\nexit 1\n";

START_TEST(test_compiler_failure_is_an_error)
{
	char dir[] = "/tmp/tensord-cc-XXXXXX", path[64];
	ck_assert(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/refusing-cc", dir);
	FILE *f = fopen(path, "w");
	ck_assert(f && fputs(refusing_cc, f) >= 0 && fclose(f) == 0 && chmod(path, 0700) == 0);
	eng_ctx *ctx = ctx_with(path, 1);
	int64_t s[1] = {4};
	eng_tensor *x = eng_add_s(eng_ones(ctx, ENG_F32, 1, s), 1);
	eng_status st = eng_realize(&x, 1);
	ck_assert_int_eq(st, ENG_ECOMPILE);
	ck_assert_msg(strstr(eng_errmsg(ctx), "refusing to compile") != NULL, "message: %s", eng_errmsg(ctx));
	eng_ctx_destroy(ctx);
	unlink(path);
	rmdir(dir);

	/* a compiler that fails even to state the target's macros: an error when the context opens */
	eng_ctx_opts o;
	char err[512] = "";
	eng_ctx_opts_default(&o);
	o.backend_opts = "CPU.cc=false";
	ck_assert_ptr_null(eng_ctx_create(&o, err, sizeof(err)));
	ck_assert_msg(strstr(err, "'false -march=native -mtune=generic' fails"), "%s", err);

	/* one that cannot be started: the context opens, the first compile names it */
	ctx = ctx_with("/nonexistent/tensord-cc", 1);
	x = eng_add_s(eng_ones(ctx, ENG_F32, 1, s), 1);
	ck_assert_int_eq(eng_realize(&x, 1), ENG_ECOMPILE);
	ck_assert_msg(strstr(eng_errmsg(ctx), "tensord-cc") != NULL, "message: %s", eng_errmsg(ctx));
	eng_ctx_destroy(ctx);
}
END_TEST

START_TEST(test_unknown_device_is_an_error)
{
	eng_ctx_opts o;
	char err[256] = "";
	eng_ctx_opts_default(&o);
	o.device = "TPU:7";
	ck_assert_ptr_null(eng_ctx_create(&o, err, sizeof(err)));
	ck_assert_msg(strstr(err, "TPU:7") != NULL, "message: %s", err);
}
END_TEST

/* One graph with a reduction, a tiled matmul and an elementwise tail, on 1 and 3 threads. */
static double *run_with_threads(int nthreads, int64_t *n_out)
{
	eng_ctx *ctx = ctx_with(NULL, nthreads);
	tu_rng r = {99};
	int64_t sa[2] = {48, 40}, sb[2] = {40, 64};
	eng_tensor *a = tu_rand(ctx, &r, ENG_F32, 2, sa, -1, 1), *b = tu_rand(ctx, &r, ENG_F32, 2, sb, -1, 1);
	eng_tensor *c = eng_softmax(eng_matmul(a, b), -1);
	double *v = tu_read(c);
	*n_out = eng_numel(c);
	eng_ctx_destroy(ctx);
	return v;
}

START_TEST(test_thread_count_does_not_change_results)
{
	int64_t n1, n3;
	double *v1 = run_with_threads(1, &n1), *v3 = run_with_threads(3, &n3);
	ck_assert_int_eq(n1, n3);
	for (int64_t i = 0; i < n1; i++)
		ck_assert_msg(v1[i] == v3[i], "element %lld: %g vs %g", (long long)i, v1[i], v3[i]);
	free(v1);
	free(v3);
}
END_TEST

START_TEST(test_equal_kernels_compile_once)
{
	eng_ctx *ctx = ctx_with(NULL, 0);
	tu_rng r = {5};
	int64_t s[2] = {16, 16};
	eng_tensor *a = tu_rand(ctx, &r, ENG_F32, 2, s, -1, 1), *b = tu_rand(ctx, &r, ENG_F32, 2, s, -1, 1);
	eng_stats st;
	eng_tensor *x = eng_exp(eng_mul_s(a, 0.5));
	ck_assert_int_eq(eng_realize(&x, 1), ENG_OK);
	eng_get_stats(ctx, &st);
	uint64_t compiles = st.compiles;
	/* the same kernel over other buffers: found in the program cache */
	eng_tensor *y = eng_exp(eng_mul_s(b, 0.5));
	ck_assert_int_eq(eng_realize(&y, 1), ENG_OK);
	eng_get_stats(ctx, &st);
	ck_assert_uint_eq(st.compiles, compiles);
	/* the same expression over the same buffer is not even recomputed */
	uint64_t kernels = st.kernels;
	eng_tensor *z = eng_exp(eng_mul_s(a, 0.5));
	ck_assert_int_eq(eng_realize(&z, 1), ENG_OK);
	eng_get_stats(ctx, &st);
	ck_assert_uint_eq(st.kernels, kernels);
	eng_ctx_destroy(ctx);
}
END_TEST

START_TEST(test_empty_and_scalar_tensors)
{
	eng_ctx *ctx = ctx_with(NULL, 0);
	int64_t s[2] = {0, 5};
	eng_tensor *e = eng_add_s(eng_ones(ctx, ENG_F32, 2, s), 1);
	ck_assert_int_eq(eng_realize(&e, 1), ENG_OK);
	ck_assert_int_eq(eng_tensor_read(e, NULL, 0), ENG_OK);
	int ax = 0;
	eng_tensor *sum = eng_sum(eng_ones(ctx, ENG_F32, 2, s), &ax, 1, false); /* empty reduction: 0 */
	double *v = tu_read(sum);
	for (int i = 0; i < 5; i++)
		ck_assert(v[i] == 0.0);
	free(v);
	eng_tensor *sc = eng_mul_s(eng_scalar(ctx, ENG_F32, 3), 2);
	ck_assert(eng_item(sc) == 6.0);
	eng_ctx_destroy(ctx);
}
END_TEST

Suite *backend_suite(void)
{
	const TTest *const tests[] = {
		test_compiler_failure_is_an_error, test_unknown_device_is_an_error, test_thread_count_does_not_change_results,
		test_equal_kernels_compile_once,   test_empty_and_scalar_tensors,
	};
	return tu_suite("backend", tests, (int)(sizeof(tests) / sizeof(tests[0])), TU_TIMEOUT);
}
