/* test_optim.c: optimizers against closed forms computed here in double: SGD (momentum,
 * nesterov, weight decay), Adam, AdamW; learning-rate changes; one schedule per step. */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include <tensord/optim.h>
#include "testutil.h"

#define N 6

static const float P0[N] = {0.5f, -1.25f, 2.0f, 0.75f, -0.5f, 1.5f};
static const float C[N] = {1.0f, -2.0f, 0.5f, 3.0f, -0.25f, 1.0f}; /* loss = sum(p * c): grad c */

static eng_tensor *param(eng_ctx *ctx)
{
	int64_t s[1] = {N};
	eng_tensor *p = eng_from_data(ctx, ENG_F32, 1, s, P0);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(eng_set_requires_grad(p, true), ENG_OK);
	return p;
}

/* One step: loss = sum(p * c) (+ 0.5 * sum(p^2) * quad, so the gradient depends on p). */
static void step(eng_ctx *ctx, eng_optim *opt, eng_tensor *p, double quad)
{
	int64_t s[1] = {N};
	eng_scope_begin(ctx);
	eng_tensor *c = eng_from_data(ctx, ENG_F32, 1, s, C);
	eng_tensor *loss = eng_sum(eng_mul(p, c), NULL, 0, false);
	if (quad != 0)
		loss = eng_add(loss, eng_mul_s(eng_sum(eng_mul(p, p), NULL, 0, false), 0.5 * quad));
	ck_assert_int_eq(eng_backward(loss), ENG_OK);
	ck_assert_msg(eng_optim_step(opt, &loss, 1) == ENG_OK, "step: %s", eng_errmsg(ctx));
	ck_assert_ptr_null(eng_grad(p)); /* the step clears gradients */
	eng_scope_end(ctx);
}

static void expect(eng_tensor *p, const double *want, double tol)
{
	float got[N];
	ck_assert_int_eq(eng_tensor_read(p, got, sizeof(got)), ENG_OK);
	for (int i = 0; i < N; i++)
		ck_assert_msg(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i])), "element %d: got %.7g want %.7g", i,
			      got[i], want[i]);
}

static eng_optim *make(eng_ctx *ctx, eng_tensor *p, eng_optim_kind k, double lr, double mom, bool nest, double wd)
{
	eng_optim_opts o;
	eng_optim_opts_default(&o, k);
	o.lr = lr;
	o.momentum = mom;
	o.nesterov = nest;
	o.weight_decay = wd;
	eng_optim *opt = eng_optim_create(ctx, &p, 1, &o);
	ck_assert_msg(opt != NULL, "create: %s", eng_errmsg(ctx));
	return opt;
}

/* SGD in every flavour, with a gradient that depends on p (quad = 0.5). */
START_TEST(test_sgd)
{
	const struct {
		double mom, wd;
		bool nest;
	} cases[] = {{0, 0, false}, {0.9, 0, false}, {0.9, 0, true}, {0.5, 0.1, false}, {0, 0.2, false}};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		eng_ctx *ctx = tu_ctx();
		eng_tensor *p = param(ctx);
		const double lr = 0.1, q = 0.5;
		eng_optim *opt = make(ctx, p, ENG_OPTIM_SGD, lr, cases[k].mom, cases[k].nest, cases[k].wd);
		double w[N], buf[N] = {0};
		for (int i = 0; i < N; i++)
			w[i] = P0[i];
		for (int t = 0; t < 3; t++) {
			step(ctx, opt, p, q);
			for (int i = 0; i < N; i++) {
				double g = C[i] + q * w[i] + cases[k].wd * w[i];
				if (cases[k].mom > 0) {
					buf[i] = cases[k].mom * buf[i] + g;
					g = cases[k].nest ? g + cases[k].mom * buf[i] : buf[i];
				}
				w[i] -= lr * g;
			}
			expect(p, w, 1e-5);
		}
		eng_optim_destroy(opt);
		eng_ctx_destroy(ctx);
	}
}
END_TEST

static void adam_case(eng_optim_kind kind, double wd)
{
	eng_ctx *ctx = tu_ctx();
	eng_tensor *p = param(ctx);
	const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, q = 0.5;
	eng_optim *opt = make(ctx, p, kind, lr, 0, false, wd);
	double w[N], m[N] = {0}, v[N] = {0};
	for (int i = 0; i < N; i++)
		w[i] = P0[i];
	for (int t = 1; t <= 4; t++) {
		step(ctx, opt, p, q);
		for (int i = 0; i < N; i++) {
			double g = C[i] + q * w[i];
			if (kind == ENG_OPTIM_ADAM)
				g += wd * w[i];
			m[i] = b1 * m[i] + (1 - b1) * g;
			v[i] = b2 * v[i] + (1 - b2) * g * g;
			double mh = m[i] / (1 - pow(b1, t)), vh = v[i] / (1 - pow(b2, t));
			if (kind == ENG_OPTIM_ADAMW)
				w[i] *= 1 - lr * wd;
			w[i] -= lr * mh / (sqrt(vh) + eps);
		}
		expect(p, w, 2e-5);
	}
	eng_optim_destroy(opt);
	eng_ctx_destroy(ctx);
}

START_TEST(test_adam) { adam_case(ENG_OPTIM_ADAM, 0); }
END_TEST

START_TEST(test_adam_l2) { adam_case(ENG_OPTIM_ADAM, 0.1); }
END_TEST

START_TEST(test_adamw) { adam_case(ENG_OPTIM_ADAMW, 0.1); }
END_TEST

/* The learning rate is data: changing it compiles nothing and takes effect at once. */
START_TEST(test_lr_change_is_data)
{
	eng_ctx *ctx = tu_ctx();
	eng_tensor *p = param(ctx);
	eng_optim *opt = make(ctx, p, ENG_OPTIM_SGD, 0.1, 0, false, 0);
	step(ctx, opt, p, 0);
	eng_stats st;
	eng_get_stats(ctx, &st);
	uint64_t compiles = st.compiles;
	ck_assert_int_eq(eng_optim_set_lr(opt, 0.05), ENG_OK);
	ck_assert(fabs(eng_optim_lr(opt) - 0.05) < 1e-12);
	step(ctx, opt, p, 0);
	eng_get_stats(ctx, &st);
	ck_assert_uint_eq(st.compiles, compiles + 1); /* only set_lr's own tiny assign kernel */
	step(ctx, opt, p, 0);
	eng_get_stats(ctx, &st);
	ck_assert_uint_eq(st.compiles, compiles + 1);
	double w[N];
	for (int i = 0; i < N; i++)
		w[i] = P0[i] - 0.1 * C[i] - 2 * 0.05 * C[i];
	expect(p, w, 1e-5);
	ck_assert_int_eq(eng_optim_set_lr(opt, -1), ENG_EINVAL);
	eng_optim_destroy(opt);
	eng_ctx_destroy(ctx);
}
END_TEST

/* Forward, backward and update of a small MLP are one schedule per step. */
START_TEST(test_one_schedule_per_step)
{
	eng_ctx *ctx = tu_ctx();
	tu_rng r = {3};
	int64_t sx[2] = {8, 5}, sw1[2] = {5, 7}, sw2[2] = {7, 3};
	eng_tensor *x = tu_rand(ctx, &r, ENG_F32, 2, sx, -1, 1);
	eng_tensor *w1 = tu_rand(ctx, &r, ENG_F32, 2, sw1, -1, 1), *w2 = tu_rand(ctx, &r, ENG_F32, 2, sw2, -1, 1);
	eng_set_requires_grad(w1, true);
	eng_set_requires_grad(w2, true);
	eng_tensor *ps[2] = {w1, w2};
	eng_optim_opts o;
	eng_optim_opts_default(&o, ENG_OPTIM_ADAM);
	eng_optim *opt = eng_optim_create(ctx, ps, 2, &o);
	ck_assert_ptr_nonnull(opt);
	double first = 0, last = 0;
	for (int t = 0; t < 5; t++) {
		eng_scope_begin(ctx);
		eng_tensor *loss = eng_mean(eng_square(eng_matmul(eng_tanh(eng_matmul(x, w1)), w2)), NULL, 0, false);
		eng_stats a, b;
		eng_get_stats(ctx, &a);
		ck_assert_int_eq(eng_backward(loss), ENG_OK);
		ck_assert_int_eq(eng_optim_step(opt, &loss, 1), ENG_OK);
		eng_get_stats(ctx, &b);
		/* one schedule per step, and from the third step on the schedule cache has it */
		ck_assert_uint_eq((b.schedules + b.schedule_hits) - (a.schedules + a.schedule_hits), 1);
		if (t >= 2)
			ck_assert_uint_eq(b.schedule_hits - a.schedule_hits, 1);
		last = eng_item(loss);
		if (t == 0)
			first = last;
		eng_scope_end(ctx);
	}
	ck_assert_msg(last < first, "loss did not fall: %g -> %g", first, last);
	eng_optim_destroy(opt);
	eng_ctx_destroy(ctx);
}
END_TEST

START_TEST(test_bad_options)
{
	eng_ctx *ctx = tu_ctx();
	eng_tensor *p = param(ctx);
	eng_optim_opts o;
	eng_optim_opts_default(&o, ENG_OPTIM_SGD);
	o.nesterov = true; /* without momentum */
	ck_assert_ptr_null(eng_optim_create(ctx, &p, 1, &o));
	ck_assert_int_eq(eng_error(ctx), ENG_EINVAL);
	eng_clear_error(ctx);
	eng_optim_opts_default(&o, ENG_OPTIM_ADAM);
	o.beta1 = 1.0;
	ck_assert_ptr_null(eng_optim_create(ctx, &p, 1, &o));
	eng_clear_error(ctx);
	int64_t s[1] = {3};
	eng_tensor *nograd = eng_zeros(ctx, ENG_F32, 1, s);
	eng_optim_opts_default(&o, ENG_OPTIM_SGD);
	ck_assert_ptr_null(eng_optim_create(ctx, &nograd, 1, &o));
	ck_assert_int_eq(eng_error(ctx), ENG_EINVAL);
	eng_ctx_destroy(ctx);
}
END_TEST

Suite *optim_suite(void)
{
	const TTest *const tests[] = {test_sgd, test_adam, test_adam_l2, test_adamw, test_lr_change_is_data,
				       test_one_schedule_per_step, test_bad_options};
	return tu_suite("optim", tests, (int)(sizeof(tests) / sizeof(tests[0])), TU_TIMEOUT);
}
