/* test_memory.c: device memory and the caches a long-lived server trims: the caching allocator
 * reuses freed buffers (never a live one), trim gives them back, the context's memory limit
 * fails a graph that needs more before allocating and leaves the context usable, the program
 * cache stays within its bound (schedule-cache entries giving way past it), and a JIT capture keeps working after everything is trimmed. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensord/jit.h>
#include "testutil.h"

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

static eng_ctx *ctx_with(uint64_t limit, uint32_t progs, bool no_sched)
{
	eng_ctx_opts o;
	char err[256];
	eng_ctx_opts_default(&o);
	o.debug = tu_debug();
	o.mem_limit = limit;
	o.prog_cache_max = progs;
	o.no_schedule_cache = no_sched;
	o.no_disk_cache = true; /* programs evicted here must really come back from the compiler */
	eng_ctx *ctx = eng_ctx_create(&o, err, sizeof(err));
	ck_assert_msg(ctx, "%s", err);
	return tu_ctx_track(ctx);
}

static eng_device_stats dstats(eng_ctx *ctx)
{
	eng_device_stats s;
	ck_assert_int_eq(eng_get_device_stats(ctx, 0, &s), ENG_OK);
	return s;
}

/* a (n floats 0..n-1) realized */
static eng_tensor *iota(eng_ctx *ctx, int64_t n)
{
	eng_tensor *t = eng_arange(ctx, ENG_F32, 0, (double)n, 1);
	ck_assert_int_eq(eng_realize(&t, 1), ENG_OK);
	return t;
}

static void expect_affine(eng_tensor *t, int64_t n, double mul, double add, const char *what)
{
	double *v = tu_read(t);
	for (int64_t i = 0; i < n; i++)
		ck_assert_msg(v[i] == i * mul + add, "%s: element %lld is %g, want %g", what, (long long)i, v[i],
			      i * mul + add);
	free(v);
}

START_TEST(reuse_never_aliases_live_buffers)
{
	eng_ctx *ctx = ctx_with(0, 0, false);
	const int64_t n = 4096;
	eng_tensor *a = iota(ctx, n), *kept[8];
	eng_reset_stats(ctx);
	for (int k = 0; k < 16; k++) { /* every other result stays live, the rest are freed at once */
		eng_tensor *c = eng_add_s(eng_mul_s(a, 2), k);
		ck_assert_int_eq(eng_realize(&c, 1), ENG_OK);
		if (k % 2 == 0)
			kept[k / 2] = c;
		else
			eng_tensor_free(c);
	}
	for (int k = 0; k < 16; k += 2)
		expect_affine(kept[k / 2], n, 2, k, "a result kept while others were freed");
	eng_device_stats s = dstats(ctx);
	eng_stats cs;
	eng_get_stats(ctx, &cs);
	ck_assert_uint_ge(s.allocs, 16);
	ck_assert_msg(s.alloc_hits >= 7, "only %llu of %llu allocations reused a freed buffer",
		      (unsigned long long)s.alloc_hits, (unsigned long long)s.allocs);
	ck_assert_uint_eq(s.backend_allocs + s.alloc_hits, s.allocs);
	ck_assert_uint_eq(cs.alloc_hits, s.alloc_hits);
	ck_assert_uint_ge(s.live_bytes, 9 * n * 4); /* a and the 8 kept */
	ck_assert_uint_ge(s.peak_bytes, s.live_bytes);
	ck_assert_uint_eq(cs.mem_live, s.live_bytes);
	ck_assert_int_eq(eng_get_device_stats(ctx, 1, &s), ENG_EINVAL);
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(trim_gives_cached_buffers_back)
{
	eng_ctx *ctx = ctx_with(0, 0, false);
	const int64_t n = 100000;
	eng_tensor *a = iota(ctx, n);
	for (int k = 0; k < 3; k++) {
		eng_scope_begin(ctx);
		eng_tensor *c = eng_sub_s(a, k);
		ck_assert_int_eq(eng_realize(&c, 1), ENG_OK);
		eng_scope_end(ctx);
	}
	eng_device_stats s = dstats(ctx);
	ck_assert_msg(s.cached_bytes >= n * 4, "freed results not cached: %llu bytes", (unsigned long long)s.cached_bytes);
	uint64_t live = s.live_bytes, frees = s.backend_frees, cached = s.cached_bytes;
	ck_assert_uint_eq(eng_trim(ctx, ENG_TRIM_BUFFERS), cached);
	s = dstats(ctx);
	ck_assert_uint_eq(s.cached_bytes, 0);
	ck_assert_uint_eq(s.live_bytes, live);
	ck_assert_uint_gt(s.backend_frees, frees);
	eng_tensor *c = eng_sub_s(a, 7); /* still computes after the trim */
	expect_affine(c, n, 1, -7, "after trim");
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(limit_fails_before_allocating_and_context_recovers)
{
	const uint64_t limit = 1 << 20;
	eng_ctx *ctx = ctx_with(limit, 0, false);
	const int64_t n = 65536; /* 256 KiB each */
	eng_tensor *a = iota(ctx, n);
	uint64_t live = dstats(ctx).live_bytes, bk = dstats(ctx).backend_allocs;
	/* four 256 KiB results at once next to a: 1.25 MiB > 1 MiB */
	eng_tensor *r[4];
	for (int k = 0; k < 4; k++)
		r[k] = eng_add_s(eng_mul_s(a, k + 2), 1);
	ck_assert_int_eq(eng_realize(r, 4), ENG_ENOMEM);
	const char *msg = eng_errmsg(ctx);
	ck_assert_msg(strstr(msg, "memory limit") && strstr(msg, "1048576") && strstr(msg, "262144"),
		      "message should name the request and the limit: %s", msg);
	/* one buffer larger than the limit on its own: refused before anything is allocated */
	eng_clear_error(ctx);
	uint64_t bk_before = dstats(ctx).backend_allocs;
	eng_tensor *big = eng_empty(ctx, ENG_F32, 1, (int64_t[]){1 << 19});
	ck_assert_ptr_null(big);
	ck_assert_int_eq(eng_error(ctx), ENG_ENOMEM);
	ck_assert_msg(strstr(eng_errmsg(ctx), "2097152"), "%s", eng_errmsg(ctx));
	ck_assert_uint_eq(dstats(ctx).backend_allocs, bk_before);
	eng_clear_error(ctx);
	for (int k = 0; k < 4; k++)
		eng_tensor_free(r[k]);
	/* the context works: a smaller graph realizes and is right */
	eng_tensor *c = eng_add_s(eng_mul_s(a, 3), 1);
	expect_affine(c, n, 3, 1, "after the failed realize");
	eng_tensor_free(c);
	ck_assert_uint_le(dstats(ctx).peak_bytes, limit);
	ck_assert_uint_ge(dstats(ctx).backend_allocs, bk);
	ck_assert_uint_ge(dstats(ctx).live_bytes, live);
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(limit_returns_cached_blocks_to_make_room)
{
	const uint64_t limit = 1 << 20;
	eng_ctx *ctx = ctx_with(limit, 0, false);
	eng_tensor *a = iota(ctx, 100000); /* 400000 bytes, class 409600 */
	eng_scope_begin(ctx);
	eng_tensor *c = eng_mul_s(a, 2);
	ck_assert_int_eq(eng_realize(&c, 1), ENG_OK);
	eng_scope_end(ctx); /* 409600 bytes cached */
	ck_assert_uint_ge(dstats(ctx).cached_bytes, 400000);
	/* 500000 bytes (class 524288): live 409600 + cached 409600 + 524288 > 1 MiB, so the cached
	 * block must go back first; the allocation then succeeds */
	uint64_t frees = dstats(ctx).backend_frees;
	eng_tensor *d = eng_add_s(eng_pad(a, (const int64_t[][2]){{0, 25000}}), 1);
	double *v = NULL;
	ck_assert_int_eq(eng_realize(&d, 1), ENG_OK);
	v = tu_read(d);
	ck_assert(v[99999] == 100000 && v[100000] == 1);
	free(v);
	ck_assert_uint_gt(dstats(ctx).backend_frees, frees);
	eng_stats s;
	eng_get_stats(ctx, &s);
	ck_assert_uint_le(s.mem_live + s.mem_cached, limit);
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(program_cache_stays_within_its_bound)
{
	eng_ctx *ctx = ctx_with(0, 2, true); /* no schedule cache: nothing pins the programs */
	const int64_t n = 256;
	eng_tensor *a = iota(ctx, n);
	for (int k = 0; k < 5; k++) { /* five kernels (the constant is in the source) */
		eng_tensor *c = eng_add_s(a, 100 + k);
		expect_affine(c, n, 1, 100 + k, "bounded cache");
		eng_tensor_free(c);
		ck_assert_uint_le(dstats(ctx).programs, 2);
	}
	ck_assert_uint_ge(dstats(ctx).program_evictions, 3);
	eng_tensor *c = eng_add_s(a, 100); /* evicted long ago: compiled again, right */
	expect_affine(c, n, 1, 100, "an evicted kernel again");
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(schedule_entries_pin_their_programs)
{
	eng_ctx *ctx = ctx_with(0, 8, false);
	const int64_t n = 256;
	eng_tensor *a = iota(ctx, n);
	uint64_t base = dstats(ctx).programs; /* arange's kernel */
	for (int k = 0; k < 3; k++) {
		eng_tensor *c = eng_mul_s(a, 10 + k);
		expect_affine(c, n, 10 + k, 0, "first");
		eng_tensor_free(c);
	}
	ck_assert_uint_eq(dstats(ctx).programs, base + 3);
	eng_trim(ctx, ENG_TRIM_PROGRAMS); /* each is pinned by its schedule-cache entry */
	ck_assert_uint_eq(dstats(ctx).programs, base + 3);
	eng_stats s0, s1;
	eng_get_stats(ctx, &s0);
	eng_tensor *c = eng_mul_s(a, 10); /* a schedule-cache hit launches the pinned program */
	expect_affine(c, n, 10, 0, "schedule hit after a program trim");
	eng_tensor_free(c);
	eng_get_stats(ctx, &s1);
	ck_assert_uint_eq(s1.schedule_hits, s0.schedule_hits + 1);
	eng_trim(ctx, ENG_TRIM_SCHEDULES | ENG_TRIM_PROGRAMS);
	ck_assert_uint_eq(dstats(ctx).programs, 0);
	c = eng_mul_s(a, 11);
	expect_affine(c, n, 11, 0, "after trimming schedules and programs");
	ck_assert_uint_eq(dstats(ctx).programs, 1);
	tu_ctx_free(ctx);
}
END_TEST

/* Past the bound the pins give way: the least recently used schedule-cache entries go with
 * their programs, so the count stays within it, and their graphs are scheduled again. */
START_TEST(schedule_entries_give_way_to_the_bound)
{
	eng_ctx *ctx = ctx_with(0, 2, false);
	const int64_t n = 256;
	eng_tensor *a = iota(ctx, n);
	for (int k = 0; k < 6; k++) {
		eng_tensor *c = eng_mul_s(a, 10 + k);
		expect_affine(c, n, 10 + k, 0, "over the bound");
		eng_tensor_free(c);
		ck_assert_uint_le(dstats(ctx).programs, 2);
	}
	ck_assert_uint_ge(dstats(ctx).program_evictions, 4);
	eng_stats s0, s1;
	eng_get_stats(ctx, &s0);
	eng_tensor *c = eng_mul_s(a, 15); /* the newest entry stays: a hit */
	expect_affine(c, n, 15, 0, "the newest graph again");
	eng_tensor_free(c);
	c = eng_mul_s(a, 10); /* the oldest went: scheduled and compiled again, right */
	expect_affine(c, n, 10, 0, "the oldest graph again");
	eng_tensor_free(c);
	eng_get_stats(ctx, &s1);
	ck_assert_uint_eq(s1.schedule_hits, s0.schedule_hits + 1);
	ck_assert_uint_eq(s1.compiles, s0.compiles + 1);
	ck_assert_uint_le(dstats(ctx).programs, 2);
	tu_ctx_free(ctx);
}
END_TEST

static eng_status step(eng_ctx *ctx, eng_tensor *const *in, int nin, eng_tensor **out, int nout, void *user)
{
	(void)ctx, (void)nin, (void)nout, (void)user;
	eng_tensor *h = eng_contiguous(eng_add_s(eng_mul(in[0], in[0]), 1)); /* an intermediate */
	out[0] = eng_sum(eng_mul_s(h, 0.5), (int[]){1}, 1, false);
	return ENG_OK;
}

START_TEST(jit_capture_survives_trim)
{
	eng_ctx *ctx = ctx_with(0, 1, false);
	eng_jit *j = eng_jit_create(ctx, step, NULL, 1, 1, NULL);
	ck_assert_ptr_nonnull(j);
	int64_t shape[2] = {16, 32};
	tu_rng r = {42};
	for (int call = 0; call < 6; call++) {
		eng_scope_begin(ctx);
		eng_tensor *x = tu_rand(ctx, &r, ENG_F32, 2, shape, -2, 2), *out = NULL;
		double *xv = tu_read(x);
		ck_assert_int_eq(eng_jit_call(j, &x, &out), ENG_OK);
		double *ov = tu_read(out);
		for (int i = 0; i < 16; i++) {
			double want = 0;
			for (int k = 0; k < 32; k++)
				want += 0.5 * (xv[i * 32 + k] * xv[i * 32 + k] + 1);
			ck_assert_msg(fabs(ov[i] - want) <= 1e-4 * (1 + fabs(want)), "call %d row %d: %g vs %g", call, i,
				      ov[i], want);
		}
		free(xv);
		free(ov);
		eng_scope_end(ctx);
		if (call == 2) { /* captured by now: drop everything the context keeps for speed */
			eng_jit_info info;
			eng_jit_get_info(j, &info);
			ck_assert_int_eq(info.captures, 1);
			eng_trim(ctx, ENG_TRIM_ALL);
			ck_assert_uint_eq(dstats(ctx).cached_bytes, 0);
			ck_assert_uint_ge(dstats(ctx).programs, (uint64_t)info.kernels); /* the capture's stay */
		}
	}
	eng_jit_info info;
	eng_jit_get_info(j, &info);
	ck_assert_uint_ge(info.replays, 3);
	eng_jit_destroy(j);
	eng_trim(ctx, ENG_TRIM_ALL); /* with the capture gone its programs can go too */
	ck_assert_uint_eq(dstats(ctx).programs, 0);
	tu_ctx_free(ctx);
}
END_TEST

Suite *memory_suite(void)
{
	const TTest *const tests[] = {
		reuse_never_aliases_live_buffers,	  trim_gives_cached_buffers_back,
		limit_fails_before_allocating_and_context_recovers, limit_returns_cached_blocks_to_make_room,
		program_cache_stays_within_its_bound,	  schedule_entries_pin_their_programs,
		schedule_entries_give_way_to_the_bound, jit_capture_survives_trim,
	};
	return tu_suite("memory", tests, N_OF(tests), TU_TIMEOUT);
}
