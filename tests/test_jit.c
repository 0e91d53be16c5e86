/* test_jit.c: the JIT (capture and replay) and the caches in front of the compiler: replays
 * agree with un-jitted runs over many random inputs, inputs are strict, outputs are never
 * overwritten by later calls, the memory planner never shares live memory, a jitted training
 * step matches the plain one, and the schedule and program caches hit when they should. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensord/jit.h>
#include "jit/memplan.h"
#include <tensord/nn.h>
#include <tensord/optim.h>
#include "testutil.h"

/* ---- a small MLP: in (B, 8) -> 16 (relu) -> 4, softmax ---- */

typedef struct mlp {
	eng_tensor *w1, *b1, *w2;
} mlp;

static void mlp_init(eng_ctx *ctx, mlp *m, uint64_t seed)
{
	tu_rng r = {seed};
	int64_t s1[2] = {8, 16}, sb[1] = {16}, s2[2] = {16, 4};
	m->w1 = eng_keep_root(tu_rand(ctx, &r, ENG_F32, 2, s1, -0.5, 0.5));
	m->b1 = eng_keep_root(tu_rand(ctx, &r, ENG_F32, 1, sb, -0.1, 0.1));
	m->w2 = eng_keep_root(tu_rand(ctx, &r, ENG_F32, 2, s2, -0.5, 0.5));
	ck_assert_int_eq(eng_realize((eng_tensor *[]){m->w1, m->b1, m->w2}, 3), ENG_OK);
}

static eng_tensor *mlp_forward(const mlp *m, const eng_tensor *x)
{
	return eng_softmax(eng_matmul(eng_relu(eng_add(eng_matmul(x, m->w1), m->b1)), m->w2), -1);
}

static eng_status mlp_fn(eng_ctx *ctx, eng_tensor *const *in, int nin, eng_tensor **out, int nout, void *user)
{
	(void)ctx, (void)nin, (void)nout;
	out[0] = mlp_forward(user, in[0]);
	return ENG_OK;
}

static void read_f32(eng_tensor *t, float *dst, size_t n)
{
	ck_assert_msg(t && eng_tensor_read(t, dst, n * sizeof(float)) == ENG_OK, "read failed");
}

static void expect_close(const float *a, const float *b, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(fabsf(a[i] - b[i]) <= 1e-5f + 1e-5f * fabsf(b[i]), "%s: element %zu: %g vs %g", what, i,
			      a[i], b[i]);
}

START_TEST(test_replay_matches_plain_runs)
{
	eng_ctx *ctx = tu_ctx_new();
	mlp m;
	mlp_init(ctx, &m, 7);
	eng_jit *j = eng_jit_create(ctx, mlp_fn, &m, 1, 1, NULL);
	ck_assert_ptr_nonnull(j);
	tu_rng r = {11};
	int64_t xs[2] = {5, 8};
	for (int call = 0; call < 40; call++) {
		eng_scope_begin(ctx);
		eng_tensor *x = tu_rand(ctx, &r, ENG_F32, 2, xs, -2, 2), *out[1];
		ck_assert_msg(eng_jit_call(j, &x, out) == ENG_OK, "call %d: %s", call, eng_errmsg(ctx));
		float got[20], want[20];
		read_f32(out[0], got, 20);
		read_f32(mlp_forward(&m, x), want, 20);
		expect_close(got, want, 20, "jit vs plain");
		eng_scope_end(ctx);
	}
	/* as many kernels as an un-jitted run launches */
	eng_stats p0, p1;
	eng_scope_begin(ctx);
	eng_tensor *xp = tu_rand(ctx, &r, ENG_F32, 2, xs, -2, 2), *yp = mlp_forward(&m, xp);
	eng_get_stats(ctx, &p0);
	ck_assert_int_eq(eng_realize(&yp, 1), ENG_OK);
	eng_get_stats(ctx, &p1);
	eng_scope_end(ctx);
	eng_jit_info info;
	eng_jit_get_info(j, &info);
	ck_assert_int_eq(info.captures, 1);
	ck_assert_uint_eq(info.replays, 38);
	ck_assert_int_eq(info.kernels, (int)(p1.kernels - p0.kernels));
	/* a replay launches the captured kernels and nothing else */
	eng_stats a, b;
	eng_scope_begin(ctx);
	eng_tensor *x = tu_rand(ctx, &r, ENG_F32, 2, xs, -2, 2), *out[1];
	eng_get_stats(ctx, &a);
	ck_assert_int_eq(eng_jit_call(j, &x, out), ENG_OK);
	eng_get_stats(ctx, &b);
	ck_assert_uint_eq(b.kernels - a.kernels, (uint64_t)info.kernels);
	ck_assert_uint_eq(b.compiles - a.compiles, 0);
	ck_assert_uint_eq((b.schedules + b.schedule_hits) - (a.schedules + a.schedule_hits), 0);
	eng_scope_end(ctx);
	eng_jit_destroy(j);
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(test_inputs_are_strict)
{
	eng_ctx *ctx = tu_ctx_new();
	mlp m;
	mlp_init(ctx, &m, 3);
	eng_jit *j = eng_jit_create(ctx, mlp_fn, &m, 1, 1, NULL);
	tu_rng r = {5};
	int64_t xs[2] = {4, 8}, big[2] = {6, 8};
	eng_scope_begin(ctx);
	for (int call = 0; call < 3; call++) { /* run, capture, replay */
		eng_tensor *x = tu_rand(ctx, &r, ENG_F32, 2, xs, -1, 1), *out[1];
		ck_assert_int_eq(eng_jit_call(j, &x, out), ENG_OK);
	}
	/* tinygrad's TinyJit returns the old output when a contiguous input changes size: here
	 * another batch size is an error naming the shapes, and nothing stale comes back */
	eng_tensor *xb = tu_rand(ctx, &r, ENG_F32, 2, big, -1, 1), *out[1] = {(eng_tensor *)1};
	ck_assert_int_eq(eng_jit_call(j, &xb, out), ENG_ESHAPE);
	ck_assert_ptr_null(out[0]);
	ck_assert_msg(strstr(eng_errmsg(ctx), "(6, 8)") && strstr(eng_errmsg(ctx), "(4, 8)"), "message: %s",
		      eng_errmsg(ctx));
	eng_clear_error(ctx);
	/* another dtype */
	eng_tensor *xi = eng_cast(tu_rand(ctx, &r, ENG_F32, 2, xs, -1, 1), ENG_F16);
	ck_assert_int_eq(eng_jit_call(j, &xi, out), ENG_EDTYPE);
	ck_assert_ptr_null(out[0]);
	eng_clear_error(ctx);
	/* NULL input */
	eng_tensor *none = NULL;
	ck_assert_int_eq(eng_jit_call(j, &none, out), ENG_EINVAL);
	eng_clear_error(ctx);
	/* the jit still serves correct calls afterwards, including a view as input */
	eng_tensor *xt = eng_transpose(tu_rand(ctx, &r, ENG_F32, 2, (int64_t[]){8, 4}, -1, 1), 0, 1);
	ck_assert_int_eq(eng_jit_call(j, &xt, out), ENG_OK);
	float got[16], want[16];
	read_f32(out[0], got, 16);
	read_f32(mlp_forward(&m, xt), want, 16);
	expect_close(got, want, 16, "view input");
	eng_scope_end(ctx);
	eng_jit_destroy(j);
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(test_outputs_are_not_overwritten)
{
	eng_ctx *ctx = tu_ctx_new();
	mlp m;
	mlp_init(ctx, &m, 9);
	eng_jit *j = eng_jit_create(ctx, mlp_fn, &m, 1, 1, NULL);
	tu_rng r = {1};
	int64_t xs[2] = {3, 8};
	eng_scope_begin(ctx);
	eng_tensor *outs[6];
	float want[6][12];
	for (int call = 0; call < 6; call++) {
		eng_tensor *x = tu_rand(ctx, &r, ENG_F32, 2, xs, -3, 3);
		ck_assert_int_eq(eng_jit_call(j, &x, &outs[call]), ENG_OK);
		read_f32(mlp_forward(&m, x), want[call], 12);
	}
	for (int call = 0; call < 6; call++) { /* every earlier result is still its own */
		float got[12];
		read_f32(outs[call], got, 12);
		expect_close(got, want[call], 12, "earlier output");
	}
	eng_scope_end(ctx);
	eng_jit_destroy(j);
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(test_captures_per_batch_size)
{
	eng_ctx *ctx = tu_ctx_new();
	mlp m;
	mlp_init(ctx, &m, 4);
	eng_jit_opts o;
	eng_jit_opts_default(&o);
	o.max_captures = 2;
	eng_jit *j = eng_jit_create(ctx, mlp_fn, &m, 1, 1, &o);
	tu_rng r = {2};
	eng_scope_begin(ctx);
	for (int call = 0; call < 12; call++) {
		int64_t xs[2] = {call % 2 ? 1 : 7, 8};
		eng_tensor *x = tu_rand(ctx, &r, ENG_F32, 2, xs, -1, 1), *out[1];
		ck_assert_msg(eng_jit_call(j, &x, out) == ENG_OK, "%s", eng_errmsg(ctx));
		float got[28], want[28];
		read_f32(out[0], got, xs[0] * 4);
		read_f32(mlp_forward(&m, x), want, xs[0] * 4);
		expect_close(got, want, xs[0] * 4, "batch size");
	}
	eng_jit_info info;
	eng_jit_get_info(j, &info);
	ck_assert_int_eq(info.captures, 2);
	ck_assert_uint_eq(info.replays, 8);
	eng_tensor *x3 = tu_rand(ctx, &r, ENG_F32, 2, (int64_t[]){3, 8}, -1, 1), *out[1];
	ck_assert_int_eq(eng_jit_call(j, &x3, out), ENG_ESHAPE); /* a third size: over the limit */
	eng_clear_error(ctx);
	eng_scope_end(ctx);
	eng_jit_destroy(j);
	tu_ctx_free(ctx);
}
END_TEST

/* ---- memory planning: a chain with many forced intermediates ---- */

static eng_status chain_fn(eng_ctx *ctx, eng_tensor *const *in, int nin, eng_tensor **out, int nout, void *user)
{
	(void)ctx, (void)nin, (void)nout, (void)user;
	eng_tensor *a = eng_contiguous(eng_mul_s(in[0], 1.5));
	eng_tensor *b = eng_contiguous(eng_add(a, in[1]));
	eng_tensor *c = eng_contiguous(eng_exp(eng_neg(eng_square(b))));
	eng_tensor *d = eng_contiguous(eng_sub(c, a)); /* a is still live here */
	eng_tensor *e = eng_contiguous(eng_transpose(eng_mul(d, b), 0, 1));
	eng_tensor *f = eng_contiguous(eng_add_s(e, 0.25));
	out[0] = eng_sum(eng_mul(f, eng_transpose(c, 0, 1)), (int[]){1}, 1, false);
	out[1] = eng_max(d, (int[]){0}, 1, false);
	return ENG_OK;
}

static void run_chain(bool plan, float results[10][2][64], eng_jit_info *info)
{
	eng_ctx *ctx = tu_ctx_new();
	eng_jit_opts o;
	eng_jit_opts_default(&o);
	o.plan_memory = plan;
	eng_jit *j = eng_jit_create(ctx, chain_fn, NULL, 2, 2, &o);
	tu_rng r = {77};
	int64_t s[2] = {64, 64};
	for (int call = 0; call < 10; call++) {
		eng_scope_begin(ctx);
		eng_tensor *in[2] = {tu_rand(ctx, &r, ENG_F32, 2, s, -1, 1), tu_rand(ctx, &r, ENG_F32, 2, s, -1, 1)};
		eng_tensor *out[2];
		ck_assert_msg(eng_jit_call(j, in, out) == ENG_OK, "%s", eng_errmsg(ctx));
		read_f32(out[0], results[call][0], 64);
		read_f32(out[1], results[call][1], 64);
		eng_scope_end(ctx);
	}
	eng_jit_get_info(j, info);
	eng_jit_destroy(j);
	tu_ctx_free(ctx);
}

START_TEST(test_planner_never_aliases_live_buffers)
{
	static float with[10][2][64], without[10][2][64];
	eng_jit_info ip, iu;
	run_chain(true, with, &ip);
	run_chain(false, without, &iu);
	for (int call = 0; call < 10; call++)
		for (int o = 0; o < 2; o++)
			expect_close(with[call][o], without[call][o], 64, "planned vs unplanned");
	ck_assert_int_ge(ip.kernels, 6);
	ck_assert_uint_eq(ip.temp_bytes, iu.temp_bytes);
	ck_assert_uint_eq(iu.planned_bytes, iu.temp_bytes);
	ck_assert_msg(ip.planned_bytes < ip.temp_bytes, "planning saved nothing: %zu of %zu", ip.planned_bytes,
		      ip.temp_bytes);
}
END_TEST

START_TEST(test_memplan_intervals)
{
	tu_rng r = {123};
	for (int round = 0; round < 200; round++) {
		int n = (int)tu_int(&r, 1, 40);
		eng_mp_req req[40];
		size_t bs[40];
		for (int i = 0; i < n; i++) {
			int a = (int)tu_int(&r, 0, 30), b = (int)tu_int(&r, 0, 30);
			req[i] = (eng_mp_req){.nbytes = (size_t)tu_int(&r, 1, 4096), .first = a < b ? a : b,
					      .last = a < b ? b : a};
		}
		int nb = eng_memplan(req, n, bs);
		ck_assert_int_gt(nb, 0);
		ck_assert_int_le(nb, n);
		ck_assert(eng_memplan_valid(req, n, bs, nb));
	}
	/* disjoint lifetimes share one block sized for the largest */
	eng_mp_req seq[3] = {{.nbytes = 10, .first = 0, .last = 1}, {.nbytes = 30, .first = 2, .last = 3},
			     {.nbytes = 20, .first = 4, .last = 4}};
	size_t bs[3];
	ck_assert_int_eq(eng_memplan(seq, 3, bs), 1);
	ck_assert_uint_eq(bs[0], 30);
	/* an invalid plan is caught by the checker */
	seq[0].block = seq[1].block = 0;
	seq[1].first = 1;
	ck_assert(!eng_memplan_valid(seq, 3, bs, 1));
}
END_TEST

/* ---- a jitted training step (forward, backward, SGD with momentum) ---- */

typedef struct trainer {
	eng_tensor *w1, *w2;
	eng_optim *opt;
} trainer;

static void trainer_init(eng_ctx *ctx, trainer *t)
{
	tu_rng r = {31};
	t->w1 = eng_keep_root(tu_rand(ctx, &r, ENG_F32, 2, (int64_t[]){6, 12}, -0.5, 0.5));
	t->w2 = eng_keep_root(tu_rand(ctx, &r, ENG_F32, 2, (int64_t[]){12, 3}, -0.5, 0.5));
	ck_assert_int_eq(eng_realize((eng_tensor *[]){t->w1, t->w2}, 2), ENG_OK);
	eng_set_requires_grad(t->w1, true);
	eng_set_requires_grad(t->w2, true);
	eng_optim_opts o;
	eng_optim_opts_default(&o, ENG_OPTIM_SGD);
	o.lr = 0.1;
	o.momentum = 0.9;
	t->opt = eng_optim_create(ctx, (eng_tensor *[]){t->w1, t->w2}, 2, &o);
	ck_assert_ptr_nonnull(t->opt);
}

static eng_status train_fn(eng_ctx *ctx, eng_tensor *const *in, int nin, eng_tensor **out, int nout, void *user)
{
	(void)ctx, (void)nin, (void)nout;
	trainer *t = user;
	eng_tensor *logits = eng_matmul(eng_tanh(eng_matmul(in[0], t->w1)), t->w2);
	eng_tensor *loss = eng_loss_sparse_cross_entropy(logits, in[1], 0.0, -100);
	eng_optim_zero_grad(t->opt);
	eng_status s = eng_backward(loss);
	if (!s)
		s = eng_optim_step(t->opt, &loss, 1);
	out[0] = loss;
	return s;
}

static void train(bool jit, float *losses, int steps, float *w2_after)
{
	eng_ctx *ctx = tu_ctx_new();
	trainer t;
	trainer_init(ctx, &t);
	eng_jit *j = jit ? eng_jit_create(ctx, train_fn, &t, 2, 1, NULL) : NULL;
	tu_rng r = {8};
	float x[4][60]; /* four fixed batches, fed round-robin as new tensors */
	int32_t y[4][10];
	for (int b = 0; b < 4; b++)
		for (int i = 0; i < 10; i++) {
			for (int k = 0; k < 6; k++)
				x[b][i * 6 + k] = (float)tu_real(&r, -1, 1);
			y[b][i] = x[b][i * 6] + x[b][i * 6 + 1] > 0.3f ? 2 : x[b][i * 6 + 2] > 0 ? 1 : 0;
		}
	for (int s = 0; s < steps; s++) {
		eng_scope_begin(ctx);
		eng_tensor *in[2] = {eng_from_data(ctx, ENG_F32, 2, (int64_t[]){10, 6}, x[s % 4]),
				     eng_from_data(ctx, ENG_I32, 1, (int64_t[]){10}, y[s % 4])};
		eng_tensor *out[1];
		if (jit)
			ck_assert_msg(eng_jit_call(j, in, out) == ENG_OK, "step %d: %s", s, eng_errmsg(ctx));
		else
			ck_assert_msg(train_fn(ctx, in, 2, out, 1, &t) == ENG_OK, "step %d: %s", s, eng_errmsg(ctx));
		losses[s] = (float)eng_item(out[0]);
		eng_scope_end(ctx);
	}
	read_f32(t.w2, w2_after, 36);
	if (jit) {
		eng_jit_info info;
		eng_jit_get_info(j, &info);
		ck_assert_uint_eq(info.replays, (uint64_t)steps - 2);
	}
	eng_jit_destroy(j);
	eng_optim_destroy(t.opt);
	tu_ctx_free(ctx);
}

START_TEST(test_jitted_training_step_matches)
{
	float lj[12], lp[12], wj[36], wp[36];
	train(true, lj, 12, wj);
	train(false, lp, 12, wp);
	expect_close(lj, lp, 12, "loss per step");
	expect_close(wj, wp, 36, "weights after training");
	ck_assert_msg(lj[11] < 0.8f * lj[0], "loss did not fall: %g -> %g", lj[0], lj[11]);
}
END_TEST

static eng_status dropout_fn(eng_ctx *ctx, eng_tensor *const *in, int nin, eng_tensor **out, int nout, void *user)
{
	(void)nin, (void)nout, (void)user;
	out[0] = eng_nn_dropout(in[0], 0.5, true);
	return out[0] ? ENG_OK : eng_error(ctx);
}

/* Dropout's masks (rand) under the JIT: each replay draws a new mask, the same sequence as calls
 * without the JIT from the same seed; and rand's kernel is compiled once, not once a call (its
 * stream's base is read from a buffer, which a replay rewrites). */
START_TEST(test_rand_under_jit_draws_anew)
{
	enum { CALLS = 6, N = 256 };
	float masks[2][CALLS][N];
	int64_t sh[1] = {N};
	for (int jit = 0; jit < 2; jit++) {
		eng_ctx *ctx = tu_ctx();
		eng_manual_seed(ctx, 7);
		eng_jit *j = jit ? eng_jit_create(ctx, dropout_fn, NULL, 1, 1, NULL) : NULL;
		for (int c = 0; c < CALLS; c++) {
			eng_tensor *x = eng_ones(ctx, ENG_F32, 1, sh), *y = NULL;
			if (j)
				ck_assert_msg(eng_jit_call(j, &x, &y) == ENG_OK, "jit call %d: %s", c, eng_errmsg(ctx));
			else
				ck_assert_ptr_nonnull(y = eng_nn_dropout(x, 0.5, true));
			read_f32(y, masks[jit][c], N);
			if (c == 1) /* the first call compiled what the step needs */
				eng_reset_stats(ctx);
		}
		eng_stats st;
		eng_get_stats(ctx, &st);
		ck_assert_msg(st.compiles == 0, "%s: %llu compiles after the second call", jit ? "jit" : "plain",
			      (unsigned long long)st.compiles);
		if (j) {
			eng_jit_info info;
			eng_jit_get_info(j, &info);
			ck_assert_int_ge(info.replays, CALLS - 2);
			eng_jit_destroy(j);
		}
		eng_ctx_destroy(ctx);
	}
	for (int c = 0; c < CALLS; c++) {
		ck_assert_msg(!memcmp(masks[0][c], masks[1][c], sizeof(masks[0][c])), "call %d: the jit's mask differs", c);
		int same = 0;
		for (int i = 0; c > 0 && i < N; i++)
			same += masks[1][c][i] == masks[1][c - 1][i];
		ck_assert_msg(c == 0 || same < N * 3 / 4, "call %d: %d of %d mask values as the call before", c, same, N);
	}
}
END_TEST

/* ---- the caches in front of the compiler ---- */

START_TEST(test_schedule_cache_hits_same_structure)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {6};
	int64_t s[2] = {16, 24};
	eng_stats a, b;
	float first[16];
	for (int round = 0; round < 3; round++) {
		eng_scope_begin(ctx);
		eng_tensor *x = tu_rand(ctx, &r, ENG_F32, 2, s, -1, 1), *y = tu_rand(ctx, &r, ENG_F32, 2, s, -1, 1);
		eng_tensor *z = eng_sum(eng_mul(eng_exp(x), y), (int[]){1}, 1, false);
		eng_get_stats(ctx, &a);
		ck_assert_int_eq(eng_realize(&z, 1), ENG_OK);
		eng_get_stats(ctx, &b);
		ck_assert_uint_eq(b.schedule_hits - a.schedule_hits, round > 0);
		ck_assert_uint_eq(b.schedules - a.schedules, round == 0);
		tu_batch *bt = tu_batch_new(ctx);
		tu_batch_ref(bt, z, 1e-5, 1e-5, "round %d", round);
		tu_batch_check(bt);
		if (round == 0)
			read_f32(z, first, 16);
		eng_scope_end(ctx);
	}
	/* another constant is another structure */
	eng_scope_begin(ctx);
	eng_tensor *x = tu_rand(ctx, &r, ENG_F32, 2, s, -1, 1);
	eng_tensor *z2 = eng_sum(eng_mul_s(eng_exp(x), 3.0), (int[]){1}, 1, false);
	eng_get_stats(ctx, &a);
	ck_assert_int_eq(eng_realize(&z2, 1), ENG_OK);
	eng_get_stats(ctx, &b);
	ck_assert_uint_eq(b.schedule_hits - a.schedule_hits, 0);
	eng_scope_end(ctx);
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(test_schedule_cache_respects_aliasing)
{
	/* x += x.T read in place is not the same graph as y += x.T: the leaf that is also the
	 * target changes what must be stored first */
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {12};
	int64_t s[2] = {8, 8};
	eng_scope_begin(ctx);
	eng_tensor *x = eng_keep(tu_rand(ctx, &r, ENG_F32, 2, s, -1, 1));
	eng_tensor *y = eng_keep(tu_rand(ctx, &r, ENG_F32, 2, s, -1, 1));
	ck_assert_int_eq(eng_realize((eng_tensor *[]){x, y}, 2), ENG_OK);
	double *x0 = tu_read(x), *y0 = tu_read(y);
	eng_tensor *a1 = eng_assign(y, eng_add(y, eng_transpose(x, 0, 1)));
	ck_assert_int_eq(eng_realize(&a1, 1), ENG_OK);
	eng_tensor *a2 = eng_assign(x, eng_add(x, eng_transpose(x, 0, 1)));
	ck_assert_int_eq(eng_realize(&a2, 1), ENG_OK);
	double *y1 = tu_read(a1), *x1 = tu_read(a2);
	for (int i = 0; i < 8; i++)
		for (int k = 0; k < 8; k++) {
			ck_assert_double_eq_tol(y1[i * 8 + k], y0[i * 8 + k] + x0[k * 8 + i], 1e-6);
			ck_assert_double_eq_tol(x1[i * 8 + k], x0[i * 8 + k] + x0[k * 8 + i], 1e-6);
		}
	free(x0), free(y0), free(x1), free(y1);
	eng_scope_end(ctx);
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(test_program_cache_compiles_each_kernel_once)
{
	/* without the schedule cache, a kernel from another graph still hits the program cache */
	eng_ctx_opts o;
	eng_ctx_opts_default(&o);
	o.debug = tu_debug();
	o.no_schedule_cache = true;
	o.no_disk_cache = true;
	char err[256];
	eng_ctx *ctx = tu_ctx_track(eng_ctx_create(&o, err, sizeof(err)));
	ck_assert_ptr_nonnull(ctx);
	tu_rng r = {4};
	int64_t s[1] = {100};
	eng_stats a, b;
	for (int round = 0; round < 3; round++) {
		eng_scope_begin(ctx);
		eng_tensor *x = tu_rand(ctx, &r, ENG_F32, 1, s, -1, 1);
		eng_tensor *z = eng_sqrt(eng_add_s(eng_square(x), 1.0));
		eng_get_stats(ctx, &a);
		ck_assert_int_eq(eng_realize(&z, 1), ENG_OK);
		eng_get_stats(ctx, &b);
		ck_assert_uint_eq(b.schedules - a.schedules, 1);
		ck_assert_uint_eq(b.schedule_hits, 0);
		ck_assert_uint_eq(b.compiles - a.compiles, round == 0);
		eng_scope_end(ctx);
	}
	tu_ctx_free(ctx);
}
END_TEST

/* ---- the disk cache under the program cache ---- */

static eng_ctx *ctx_with_cache(const char *dir, const char *cc)
{
	eng_ctx_opts o;
	eng_ctx_opts_default(&o);
	o.debug = tu_debug();
	o.cache_dir = dir;
	char bopts[300];
	snprintf(bopts, sizeof(bopts), "CPU.cc=%s", cc ? cc : "");
	o.backend_opts = cc ? bopts : NULL; /* NULL: $CC or cc */
	char err[256];
	eng_ctx *ctx = tu_ctx_track(eng_ctx_create(&o, err, sizeof(err)));
	ck_assert_msg(ctx != NULL, "%s", err);
	return ctx;
}

/* Realize a small two-kernel graph (fixed data) in ctx; returns the stats delta. */
static eng_stats run_graph(eng_ctx *ctx, float *out)
{
	eng_stats a, b, d;
	tu_rng r = {99};
	int64_t s[2] = {12, 20};
	eng_scope_begin(ctx);
	eng_tensor *x = tu_rand(ctx, &r, ENG_F32, 2, s, -1, 1);
	eng_tensor *sm = eng_softmax(eng_mul_s(x, 1.7), 1);
	eng_tensor *z = eng_contiguous(eng_add_s(eng_transpose(sm, 0, 1), 0.5));
	eng_get_stats(ctx, &a);
	ck_assert_msg(eng_realize(&z, 1) == ENG_OK, "%s", eng_errmsg(ctx));
	eng_get_stats(ctx, &b);
	read_f32(z, out, 240);
	tu_batch *bt = tu_batch_new(ctx);
	tu_batch_ref(bt, z, 1e-5, 1e-6, "disk-cached graph");
	tu_batch_check(bt);
	eng_scope_end(ctx);
	d.compiles = b.compiles - a.compiles;
	d.disk_loads = b.disk_loads - a.disk_loads;
	d.kernels = b.kernels - a.kernels;
	return d;
}

/* A new directory's name into d (the caller's array: nothing to free when an assertion ends
 * the test early). */
static void temp_dir(char d[32])
{
	snprintf(d, 32, "/tmp/tensord-test-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(d));
}

static void remove_tree(const char *dir)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Apply f to every regular file under dir (two levels: the fan-out folders). */
static int for_each_entry(const char *dir, void (*f)(const char *path))
{
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "find '%s' -type f", dir);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	char line[1024];
	int n = 0;
	while (fgets(line, sizeof(line), p)) {
		line[strcspn(line, "\n")] = 0;
		f(line);
		n++;
	}
	pclose(p);
	return n;
}

static void flip_last_byte(const char *path)
{
	FILE *f = fopen(path, "r+b");
	ck_assert_ptr_nonnull(f);
	fseek(f, -1, SEEK_END);
	int c = fgetc(f);
	fseek(f, -1, SEEK_END);
	fputc(c ^ 0x5a, f);
	fclose(f);
}

START_TEST(test_disk_cache_across_contexts)
{
	char dir[32];
	temp_dir(dir);
	float a[240], b[240], c[240];
	eng_ctx *c1 = ctx_with_cache(dir, NULL);
	eng_stats d1 = run_graph(c1, a);
	ck_assert_uint_eq(d1.compiles, 1);
	ck_assert_uint_eq(d1.disk_loads, 0);
	tu_ctx_free(c1);
	/* a new context (as a new process would) loads every kernel and compiles nothing */
	eng_ctx *c2 = ctx_with_cache(dir, NULL);
	eng_stats d2 = run_graph(c2, b);
	ck_assert_uint_eq(d2.compiles, 0);
	ck_assert_uint_eq(d2.disk_loads, d1.kernels);
	expect_close(b, a, 240, "loaded vs compiled");
	tu_ctx_free(c2);
	/* corrupt every entry: detected, removed, compiled again and rewritten */
	ck_assert_int_gt(for_each_entry(dir, flip_last_byte), 0);
	eng_ctx *c3 = ctx_with_cache(dir, NULL);
	eng_stats d3 = run_graph(c3, c);
	ck_assert_uint_eq(d3.compiles, 1);
	ck_assert_uint_eq(d3.disk_loads, 0);
	expect_close(c, a, 240, "after corruption");
	tu_ctx_free(c3);
	eng_ctx *c4 = ctx_with_cache(dir, NULL);
	eng_stats d4 = run_graph(c4, c);
	ck_assert_uint_eq(d4.compiles, 0);
	tu_ctx_free(c4);
	remove_tree(dir);
}
END_TEST

START_TEST(test_disk_cache_other_compiler_misses)
{
	if (!tu_cc_builds_here("gcc") || !tu_cc_builds_here("clang")) {
		fprintf(stderr, "jit: test_disk_cache_other_compiler_misses SKIPPED (needs gcc and clang building for "
				"this process's architecture)\n");
		return;
	}
	char dir[32];
	temp_dir(dir);
	float a[240], b[240];
	eng_ctx *c1 = ctx_with_cache(dir, "gcc"); /* named: $CC may be clang */
	if (strncmp(eng_device_name(c1, 0), "CPU", 3)) { /* the compiler is the CPU backend's */
		fprintf(stderr, "jit: test_disk_cache_other_compiler_misses SKIPPED on %s\n", eng_device_name(c1, 0));
		tu_ctx_free(c1);
		remove_tree(dir);
		return;
	}
	run_graph(c1, a);
	tu_ctx_free(c1);
	eng_ctx *c2 = ctx_with_cache(dir, "clang"); /* another compiler: another cache_id */
	eng_stats d = run_graph(c2, b);
	ck_assert_uint_eq(d.compiles, 1);
	ck_assert_uint_eq(d.disk_loads, 0);
	expect_close(b, a, 240, "clang vs gcc");
	tu_ctx_free(c2);
	remove_tree(dir);
}
END_TEST

START_TEST(test_disk_cache_unusable_dir)
{
	/* a directory under a regular file cannot exist: compile without the cache, correctly */
	char dir[32], path[600];
	temp_dir(dir);
	snprintf(path, sizeof(path), "%s/file", dir);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/file/cache", dir);
	float a[240];
	eng_ctx *c = ctx_with_cache(path, NULL);
	eng_stats d = run_graph(c, a);
	ck_assert_uint_eq(d.compiles, 1);
	tu_ctx_free(c);
	remove_tree(dir);
}
END_TEST

/* Serving: every batch bucket warmed with one call each, then every call a replay; the
 * captures listed with their shapes and sizes, one dropped and captured again. */
START_TEST(test_warmup_and_captures_for_serving)
{
	eng_ctx *ctx = tu_ctx_new();
	mlp m;
	mlp_init(ctx, &m, 3);
	eng_jit_opts jo;
	eng_jit_opts_default(&jo);
	jo.max_captures = 3;
	eng_jit *j = eng_jit_create(ctx, mlp_fn, &m, 1, 1, &jo);
	ck_assert_ptr_nonnull(j);
	const int64_t buckets[3] = {1, 4, 16};
	for (int b = 0; b < 3; b++) {
		int64_t xs[2] = {buckets[b], 8};
		eng_tensor *z = eng_zeros(ctx, ENG_F32, 2, xs);
		ck_assert_msg(eng_jit_warmup(j, &z) == ENG_OK, "bucket %d: %s", b, eng_errmsg(ctx));
		ck_assert_int_eq(eng_jit_warmup(j, &z), ENG_OK); /* captured already: nothing to do */
	}
	ck_assert_int_eq(eng_jit_signatures(j), 3);
	eng_stats a, c;
	eng_get_stats(ctx, &a);
	tu_rng r = {5};
	for (int b = 0; b < 3; b++) {
		eng_scope_begin(ctx);
		int64_t xs[2] = {buckets[b], 8};
		eng_tensor *x = tu_rand(ctx, &r, ENG_F32, 2, xs, -2, 2), *out[1];
		ck_assert_int_eq(eng_realize(&x, 1), ENG_OK);
		eng_stats before;
		eng_get_stats(ctx, &before);
		ck_assert_msg(eng_jit_call(j, &x, out) == ENG_OK, "%s", eng_errmsg(ctx));
		eng_get_stats(ctx, &c);
		ck_assert_uint_eq(c.schedules, before.schedules); /* a replay: nothing scheduled */
		float got[64], want[64];
		read_f32(out[0], got, (size_t)buckets[b] * 4);
		read_f32(mlp_forward(&m, x), want, (size_t)buckets[b] * 4);
		expect_close(got, want, (size_t)buckets[b] * 4, "warmed replay vs plain");
		eng_scope_end(ctx);
	}
	eng_get_stats(ctx, &c);
	ck_assert_uint_eq(c.compiles, a.compiles);
	for (int i = 0; i < 3; i++) {
		eng_jit_sig_info si;
		int nd = 0;
		ck_assert_int_eq(eng_jit_signature_info(j, i, &si), ENG_OK);
		const int64_t *sh = eng_jit_signature_shape(j, i, 0, &nd);
		ck_assert(si.captured && si.calls == 3 && si.replays == 1 && si.kernels >= 2);
		ck_assert(sh && nd == 2 && sh[0] == buckets[i] && sh[1] == 8);
		ck_assert_uint_ge(si.kept_bytes, (8 * 16 + 16 + 16 * 4) * sizeof(float)); /* the weights */
	}
	ck_assert_int_eq(eng_jit_signature_info(j, 3, &(eng_jit_sig_info){0}), ENG_EINVAL);
	ck_assert_ptr_null(eng_jit_signature_shape(j, 0, 1, NULL));
	/* drop the middle bucket: the last moves down; its shapes start over */
	ck_assert_int_eq(eng_jit_drop(j, 1), ENG_OK);
	ck_assert_int_eq(eng_jit_drop(j, 7), ENG_EINVAL);
	eng_clear_error(ctx);
	ck_assert_int_eq(eng_jit_signatures(j), 2);
	ck_assert_int_eq(eng_jit_signature_shape(j, 1, 0, NULL)[0], 16);
	int64_t xs[2] = {4, 8};
	eng_tensor *z = eng_zeros(ctx, ENG_F32, 2, xs), *out[1];
	ck_assert_int_eq(eng_jit_call(j, &z, out), ENG_OK);
	eng_jit_sig_info si;
	ck_assert_int_eq(eng_jit_signature_info(j, 2, &si), ENG_OK);
	ck_assert(!si.captured && si.calls == 1);
	ck_assert_int_eq(eng_jit_warmup(j, &z), ENG_OK);
	ck_assert_int_eq(eng_jit_signature_info(j, 2, &si), ENG_OK);
	ck_assert(si.captured && si.calls == 2);
	eng_jit_destroy(j);
	tu_ctx_free(ctx);
}
END_TEST

Suite *jit_suite(void)
{
	const TTest *const tests[] = {
		test_replay_matches_plain_runs,
		test_warmup_and_captures_for_serving,
		test_inputs_are_strict,
		test_outputs_are_not_overwritten,
		test_captures_per_batch_size,
		test_planner_never_aliases_live_buffers,
		test_memplan_intervals,
		test_jitted_training_step_matches,
		test_rand_under_jit_draws_anew,
		test_schedule_cache_hits_same_structure,
		test_schedule_cache_respects_aliasing,
		test_program_cache_compiles_each_kernel_once,
		test_disk_cache_across_contexts,
		test_disk_cache_other_compiler_misses,
		test_disk_cache_unusable_dir,
	};
	return tu_suite("jit", tests, (int)(sizeof(tests) / sizeof(tests[0])), TU_TIMEOUT);
}
