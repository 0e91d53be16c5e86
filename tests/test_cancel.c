/* test_cancel.c: stopping computing calls (eng_cancel from another thread, deadlines, the abort
 * hook) in realize and JIT replay, what a cancelled call leaves behind, and the log callback. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <tensord/jit.h>

#include "testutil.h"

/* A chain of n kernels over `numel` floats: each step a contiguous copy of x*1.0001 + 1, so
 * every step is its own kernel. */
static eng_tensor *chain(eng_ctx *ctx, eng_tensor *x, int n)
{
	for (int i = 0; i < n; i++)
		x = eng_contiguous(eng_add_s(eng_mul_s(x, 1.0001), 1.0));
	return x;
}

/* What chain computes for every element of an input of value v. */
static double chain_value(double v, int n)
{
	for (int i = 0; i < n; i++)
		v = (double)((float)((float)v * 1.0001f) + 1.0f);
	return v;
}

START_TEST(deadline_in_the_past_computes_nothing)
{
	eng_ctx *ctx = tu_ctx_new();
	int64_t s[1] = {1000};
	eng_tensor *y = chain(ctx, eng_full(ctx, ENG_F32, 1, s, 2.0), 3);
	eng_stats a, b;
	eng_get_stats(ctx, &a);
	eng_set_deadline(ctx, 1); /* 1 ns after the clock's origin: long past */
	ck_assert_int_eq(eng_realize(&y, 1), ENG_ECANCELED);
	ck_assert_msg(strstr(eng_errmsg(ctx), "deadline"), "%s", eng_errmsg(ctx));
	eng_get_stats(ctx, &b);
	ck_assert_uint_eq(b.kernels, a.kernels);
	ck_assert_uint_eq(b.compiles, a.compiles);
	ck_assert_uint_eq(b.schedules, a.schedules);
	/* the context stays usable: no deadline, and the next call works without clearing */
	eng_set_deadline(ctx, eng_now_ns() + 60ull * 1000000000u);
	float out[1000];
	ck_assert_msg(eng_tensor_read(y, out, sizeof(out)) == ENG_OK, "%s", eng_errmsg(ctx));
	for (int i = 0; i < 1000; i++)
		ck_assert_float_eq_tol(out[i], chain_value(2.0, 3), 1e-4);
	tu_ctx_free(ctx);
}
END_TEST

/* The abort hook is asked at each check: "realizing", the compile batch, then before each
 * launch. Stopping at its k-th answer stops before the (k-2)-th kernel. */
typedef struct hook_state {
	int calls, stop_at;
} hook_state;

static bool stop_at(void *arg)
{
	hook_state *h = arg;
	return ++h->calls >= h->stop_at;
}

START_TEST(abort_hook_stops_between_launches)
{
	eng_ctx *ctx = tu_ctx_new();
	int64_t s[1] = {4096};
	eng_tensor *y = chain(ctx, eng_full(ctx, ENG_F32, 1, s, 1.0), 6);
	hook_state h = {.stop_at = 5}; /* realize, compile, launch 1, launch 2, stop before launch 3 */
	eng_set_abort_hook(ctx, stop_at, &h);
	eng_stats a, b;
	eng_get_stats(ctx, &a);
	ck_assert_int_eq(eng_realize(&y, 1), ENG_ECANCELED);
	eng_get_stats(ctx, &b);
	ck_assert_uint_eq(b.kernels - a.kernels, 2);
	ck_assert_msg(strstr(eng_errmsg(ctx), "before launching") && strstr(eng_errmsg(ctx), "abort hook"), "%s",
		      eng_errmsg(ctx));
	eng_set_abort_hook(ctx, NULL, NULL);
	ck_assert_msg(eng_realize(&y, 1) == ENG_OK, "%s", eng_errmsg(ctx));
	eng_get_stats(ctx, &a);
	ck_assert_uint_eq(a.kernels - b.kernels, 4); /* the two computed values were kept */
	ck_assert_double_eq_tol(eng_item(eng_shrink(y, (const int64_t[][2]){{7, 8}})), chain_value(1.0, 6), 1e-4);
	tu_ctx_free(ctx);
}
END_TEST

/* Counts launches through the log (DEBUG=2 prints one "***" line per kernel). */
typedef struct launch_log {
	atomic_int launched;
} launch_log;

static void count_launches(void *arg, int level, const char *msg)
{
	launch_log *l = arg;
	if (level == 2 && !strncmp(msg, "***", 3))
		atomic_fetch_add(&l->launched, 1);
}

typedef struct canceller {
	eng_ctx *ctx;
	launch_log *log;
	int after;        /* cancel once this many kernels ran */
	atomic_int at;    /* how many had run when eng_cancel was called */
} canceller;

static void *cancel_thread(void *arg)
{
	canceller *c = arg;
	while (atomic_load(&c->log->launched) < c->after)
		sched_yield();
	atomic_store(&c->at, atomic_load(&c->log->launched));
	eng_cancel(c->ctx);
	return NULL;
}

START_TEST(cancel_from_another_thread_stops_within_one_kernel)
{
	eng_ctx_opts o;
	char err[256];
	eng_ctx_opts_default(&o);
	o.debug = 2;
	o.no_disk_cache = true;
	eng_ctx *ctx = tu_ctx_track(eng_ctx_create(&o, err, sizeof(err)));
	ck_assert_msg(ctx != NULL, "%s", err);
	launch_log log = {0};
	eng_set_log(ctx, count_launches, &log);
	const int n = 120;
	int64_t s[1] = {1 << 18};
	eng_tensor *y = chain(ctx, eng_full(ctx, ENG_F32, 1, s, 1.0), n);
	canceller c = {.ctx = ctx, .log = &log, .after = 10};
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, cancel_thread, &c), 0);
	eng_status st = eng_realize(&y, 1);
	pthread_join(th, NULL);
	int ran = atomic_load(&log.launched), at = atomic_load(&c.at);
	ck_assert_msg(st == ENG_ECANCELED, "status %d after %d of %d kernels: %s", st, ran, n, eng_errmsg(ctx));
	/* the kernel running when eng_cancel came finishes; no other starts */
	ck_assert_msg(ran - at <= 1, "cancelled after %d kernels, %d ran", at, ran);
	ck_assert_int_lt(ran, n);
	/* the next call computes the rest, correctly (the log still counts: DEBUG=2 stays quiet) */
	ck_assert_msg(eng_realize(&y, 1) == ENG_OK, "%s", eng_errmsg(ctx));
	ck_assert_double_eq_tol(eng_item(eng_shrink(y, (const int64_t[][2]){{5, 6}})), chain_value(1.0, n), 1e-3);
	tu_ctx_free(ctx);
}
END_TEST

/* An in-place update is never half applied: cancelled before the assign's kernel, nothing ran
 * and the update stays pending; once it ran, the realize runs to its end (and the target ends
 * up updated once). */
START_TEST(assigns_run_whole_or_not_at_all)
{
	eng_ctx *ctx = tu_ctx_new();
	int64_t s[1] = {64};
	eng_tensor *w = eng_keep(eng_contiguous(eng_full(ctx, ENG_F32, 1, s, 5.0)));
	ck_assert_int_eq(eng_realize(&w, 1), ENG_OK);
	/* one kernel: the assign (w += 1); stop at its launch check (the 3rd) */
	hook_state h = {.stop_at = 3};
	eng_set_abort_hook(ctx, stop_at, &h);
	eng_tensor *upd = eng_assign(w, eng_add_s(w, 1.0));
	eng_stats a, b;
	eng_get_stats(ctx, &a);
	ck_assert_int_eq(eng_realize(&upd, 1), ENG_ECANCELED);
	eng_get_stats(ctx, &b);
	ck_assert_uint_eq(b.kernels, a.kernels); /* the update is still pending, not applied */
	eng_set_abort_hook(ctx, NULL, NULL);
	/* the assign, then two kernels reading its result; the hook says stop from the second launch
	 * on, after the first (in-place) kernel ran: without the rule this would be cancelled */
	eng_tensor *z = eng_contiguous(eng_mul_s(eng_contiguous(eng_mul_s(upd, 2.0)), 3.0));
	h = (hook_state){.stop_at = 4};
	eng_set_abort_hook(ctx, stop_at, &h);
	eng_get_stats(ctx, &a);
	ck_assert_msg(eng_realize(&z, 1) == ENG_OK, "%s", eng_errmsg(ctx));
	eng_get_stats(ctx, &b);
	eng_set_abort_hook(ctx, NULL, NULL);
	ck_assert_uint_ge(b.kernels - a.kernels, 3); /* all of them, though the hook said stop */
	ck_assert_double_eq(eng_item(eng_shrink(z, (const int64_t[][2]){{0, 1}})), 36.0);
	ck_assert_double_eq(eng_item(eng_shrink(w, (const int64_t[][2]){{0, 1}})), 6.0); /* applied once */
	tu_ctx_free(ctx);
}
END_TEST

static eng_status step_fn(eng_ctx *ctx, eng_tensor *const *in, int nin, eng_tensor **out, int nout, void *user)
{
	out[0] = chain(ctx, in[0], 4);
	return out[0] ? ENG_OK : eng_error(ctx);
}

START_TEST(jit_replay_cancelled_then_works)
{
	eng_ctx *ctx = tu_ctx_new();
	eng_jit *j = eng_jit_create(ctx, step_fn, NULL, 1, 1, NULL);
	ck_assert_ptr_nonnull(j);
	int64_t s[1] = {256};
	eng_tensor *out;
	for (int i = 0; i < 3; i++) { /* run, capture, replay */
		eng_tensor *x = eng_full(ctx, ENG_F32, 1, s, (double)i);
		ck_assert_msg(eng_jit_call(j, &x, &out) == ENG_OK, "%s", eng_errmsg(ctx));
	}
	eng_jit_info info;
	eng_jit_get_info(j, &info);
	ck_assert_uint_eq(info.replays, 1);
	eng_tensor *x = eng_full(ctx, ENG_F32, 1, s, 7.0);
	ck_assert_int_eq(eng_realize(&x, 1), ENG_OK);
	eng_stats a, b;
	eng_get_stats(ctx, &a);
	eng_set_deadline(ctx, 1);
	ck_assert_int_eq(eng_jit_call(j, &x, &out), ENG_ECANCELED);
	ck_assert_msg(strstr(eng_errmsg(ctx), "jit") && strstr(eng_errmsg(ctx), "deadline"), "%s", eng_errmsg(ctx));
	ck_assert_ptr_null(out);
	eng_get_stats(ctx, &b);
	ck_assert_uint_eq(b.kernels, a.kernels);
	eng_set_deadline(ctx, 0);
	ck_assert_msg(eng_jit_call(j, &x, &out) == ENG_OK, "%s", eng_errmsg(ctx));
	ck_assert_double_eq_tol(eng_item(eng_shrink(out, (const int64_t[][2]){{3, 4}})), chain_value(7.0, 4), 1e-4);
	eng_jit_get_info(j, &info);
	ck_assert_uint_eq(info.replays, 2);
	eng_jit_destroy(j);
	tu_ctx_free(ctx);
}
END_TEST

/* ---- the log callback ---- */

typedef struct lines {
	int n, levels[64];
	char text[64][160];
} lines;

static void collect(void *arg, int level, const char *msg)
{
	lines *l = arg;
	if (l->n < 64) {
		l->levels[l->n] = level;
		snprintf(l->text[l->n++], sizeof(l->text[0]), "%s", msg);
	}
}

START_TEST(log_callback_gets_debug_lines_and_warnings)
{
	eng_ctx_opts o;
	char err[256];
	eng_ctx_opts_default(&o);
	o.debug = 2;
	o.cache_dir = "/proc/version/not-a-directory"; /* unusable: one warning */
	eng_ctx *ctx = tu_ctx_track(eng_ctx_create(&o, err, sizeof(err)));
	ck_assert_msg(ctx != NULL, "%s", err);
	lines l = {0};
	eng_set_log(ctx, collect, &l);
	int64_t s[1] = {16};
	eng_tensor *y = eng_contiguous(eng_add_s(eng_full(ctx, ENG_F32, 1, s, 1.0), 2.0));
	ck_assert_int_eq(eng_realize(&y, 1), ENG_OK);
	bool sched = false, launch = false, warn = false;
	for (int i = 0; i < l.n; i++) {
		size_t len = strlen(l.text[i]);
		ck_assert_msg(len == 0 || l.text[i][len - 1] != '\n', "trailing newline: %s", l.text[i]);
		sched |= l.levels[i] == 1 && strstr(l.text[i], "scheduled 1 kernels");
		launch |= l.levels[i] == 2 && !strncmp(l.text[i], "***", 3);
		warn |= l.levels[i] == 0 && strstr(l.text[i], "disk cache");
	}
	ck_assert_msg(sched && launch && warn, "scheduled %d launch %d warning %d in %d lines", sched, launch, warn, l.n);
	/* DEBUG=0: warnings only */
	tu_ctx_free(ctx);
}
END_TEST

Suite *cancel_suite(void)
{
	const TTest *const tests[] = {
		deadline_in_the_past_computes_nothing,
		abort_hook_stops_between_launches,
		cancel_from_another_thread_stops_within_one_kernel,
		assigns_run_whole_or_not_at_all,
		jit_replay_cancelled_then_works,
		log_callback_gets_debug_lines_and_warnings,
	};
	return tu_suite("cancel", tests, (int)(sizeof(tests) / sizeof(tests[0])), TU_TIMEOUT);
}
