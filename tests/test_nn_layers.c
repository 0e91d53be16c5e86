/* test_nn_layers.c: the layers, initialisers, parameter list and losses of nn.h, each checked
 * against direct C computations on read-back parameter values, plus their error cases. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <tensord/nn.h>
#include "suites.h"
#include "testutil.h"

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Mean, variance (population), min and max of v[0..n). */
typedef struct stats {
	double mean, var, min, max;
} stats;

static stats stats_of(const double *v, int64_t n)
{
	stats s = {0, 0, INFINITY, -INFINITY};
	for (int64_t i = 0; i < n; i++) {
		s.mean += v[i] / (double)n;
		s.min = fmin(s.min, v[i]);
		s.max = fmax(s.max, v[i]);
	}
	for (int64_t i = 0; i < n; i++)
		s.var += (v[i] - s.mean) * (v[i] - s.mean) / (double)n;
	return s;
}

/* The context error message contains want. */
static void expect_error(eng_ctx *ctx, eng_status code, const char *want)
{
	ck_assert_msg(eng_error(ctx) == code, "expected %s, got %s: %s", eng_strerror(code),
		      eng_strerror(eng_error(ctx)), eng_errmsg(ctx));
	ck_assert_msg(strstr(eng_errmsg(ctx), want), "error '%s' lacks '%s'", eng_errmsg(ctx),
		      want);
	eng_clear_error(ctx);
}

/* Overwrite a parameter's contents with v (through eng_assign, as an optimizer would). */
static void set_param(eng_tensor *p, const double *v)
{
	eng_ctx *ctx = eng_tensor_ctx(p);
	eng_scope_begin(ctx);
	eng_tensor *src = tu_from_doubles(ctx, eng_tensor_dtype(p), eng_ndim(p), eng_shape(p), v);
	ck_assert(eng_assign(p, src) == p);
	ck_assert_msg(eng_realize(&p, 1) == ENG_OK, "%s", eng_errmsg(ctx));
	eng_scope_end(ctx);
}

/* ---- the parameter list ---- */

START_TEST(params_registry)
{
	eng_ctx *ctx = tu_ctx_new();
	eng_params p;
	eng_params_init(&p);
	eng_nn_linear fc;
	eng_nn_batchnorm2d bn;
	eng_nn_layernorm ln;
	ck_assert_int_eq(eng_nn_linear_init(ctx, &fc, 3, 2, true, &p, "fc1"), ENG_OK);
	ck_assert_int_eq(eng_nn_batchnorm2d_init(ctx, &bn, 4, 1e-5, 0.1, true, &p, "bn"), ENG_OK);
	ck_assert_int_eq(eng_nn_layernorm_init(ctx, &ln, 5, 1e-5, false, &p, "ln"), ENG_OK);
	ck_assert_ptr_null(ln.weight);
	static const char *const names[] = {"fc1.weight",
					    "fc1.bias",
					    "bn.weight",
					    "bn.bias",
					    "bn.running_mean",
					    "bn.running_var",
					    "bn.num_batches_tracked"};
	ck_assert_int_eq(p.n, N_OF(names));
	for (int i = 0; i < N_OF(names); i++)
		ck_assert_str_eq(p.items[i].name, names[i]);
	ck_assert_ptr_eq(eng_params_find(&p, "fc1.weight"), fc.weight);
	ck_assert_ptr_eq(eng_params_find(&p, "bn.running_var"), bn.running_var);
	ck_assert_ptr_null(eng_params_find(&p, "fc1"));
	ck_assert_ptr_null(eng_params_find(&p, "ln.weight"));
	int nt = -1;
	eng_tensor **tr = eng_params_trainable(&p, &nt);
	ck_assert_int_eq(nt, 4);
	ck_assert(tr[0] == fc.weight && tr[1] == fc.bias && tr[2] == bn.weight && tr[3] == bn.bias);
	free(tr);
	eng_named *nm = eng_params_named(&p);
	ck_assert_str_eq(nm[6].name, "bn.num_batches_tracked");
	ck_assert_ptr_eq(nm[6].t, bn.num_batches_tracked);
	free(nm);
	/* flags: trainable tensors require grad, buffers do not */
	ck_assert(eng_requires_grad(fc.weight) && eng_requires_grad(bn.bias));
	ck_assert(!eng_requires_grad(bn.running_mean) &&
		  !eng_requires_grad(bn.num_batches_tracked));
	ck_assert_int_eq(eng_tensor_dtype(bn.num_batches_tracked), ENG_I64);
	ck_assert_int_eq(eng_ndim(bn.num_batches_tracked), 0);
	/* an empty prefix gives the bare leaf; a too-long name is refused and changes nothing */
	ck_assert(eng_params_add(&p, "", "w", fc.weight, false));
	ck_assert(eng_params_add(&p, NULL, "v", fc.weight, false));
	ck_assert_str_eq(p.items[7].name, "w");
	ck_assert_str_eq(p.items[8].name, "v");
	char longname[120];
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	ck_assert(!eng_params_add(&p, "m", longname, fc.weight, true));
	expect_error(ctx, ENG_EINVAL, "longer than 95");
	/* add_n is all or nothing */
	const char *leaves[] = {"a", longname};
	eng_tensor *ts[] = {fc.weight, fc.bias};
	const bool trn[] = {true, true};
	ck_assert(!eng_params_add_n(&p, "m", leaves, ts, trn, 2));
	eng_clear_error(ctx);
	ck_assert_int_eq(p.n, 9);
	ck_assert_ptr_null(eng_params_find(&p, "m.a"));
	/* a failed layer init leaves the list as it was */
	eng_nn_linear bad;
	char longprefix[100];
	memset(longprefix, 'p', sizeof(longprefix) - 1);
	longprefix[sizeof(longprefix) - 1] = 0;
	ck_assert_int_eq(eng_nn_linear_init(ctx, &bad, 3, 2, true, &p, longprefix), ENG_EINVAL);
	eng_clear_error(ctx);
	ck_assert_int_eq(p.n, 9);
	ck_assert_ptr_null(bad.weight);
	eng_nn_linear_free(&fc);
	eng_nn_batchnorm2d_free(&bn);
	eng_nn_layernorm_free(&ln);
	eng_params_free(&p);
	ck_assert_int_eq(p.n, 0);
	tu_ctx_free(ctx);
}
END_TEST

/* ---- initialisation ---- */

START_TEST(init_statistics)
{
	eng_ctx *ctx = tu_ctx_new();
	eng_manual_seed(ctx, 11);
	/* parameters live in the root scope, whatever scope the layer was made in */
	eng_nn_linear fc;
	eng_scope_begin(ctx);
	ck_assert_int_eq(eng_nn_linear_init(ctx, &fc, 64, 256, true, NULL, NULL), ENG_OK);
	eng_scope_end(ctx);
	ck_assert_int_eq(eng_ndim(fc.weight), 2);
	ck_assert(eng_shape(fc.weight)[0] == 256 && eng_shape(fc.weight)[1] == 64);
	double *w = tu_read(fc.weight), *bias = tu_read(fc.bias);
	stats s = stats_of(w, 256 * 64), sb = stats_of(bias, 256);
	double bound = 1.0 / 8.0; /* 1/sqrt(64) */
	ck_assert_msg(s.min >= -bound * (1 + 1e-6) && s.max <= bound * (1 + 1e-6),
		      "weight outside +-%g: [%g, %g]", bound, s.min, s.max);
	ck_assert_msg(s.min < -0.97 * bound && s.max > 0.97 * bound,
		      "weight does not fill the range");
	ck_assert_msg(fabs(s.mean) < 0.003, "weight mean %g", s.mean);
	ck_assert_msg(fabs(s.var / (bound * bound / 3) - 1) < 0.05, "weight var %g", s.var);
	ck_assert_msg(sb.min >= -bound && sb.max <= bound && sb.max - sb.min > bound,
		      "bias range [%g, %g]", sb.min, sb.max);
	/* determinism per seed, and separate storage for equal initial values */
	eng_nn_linear a, b, c;
	eng_manual_seed(ctx, 5);
	ck_assert_int_eq(eng_nn_linear_init(ctx, &a, 8, 4, true, NULL, NULL), ENG_OK);
	eng_manual_seed(ctx, 5);
	ck_assert_int_eq(eng_nn_linear_init(ctx, &b, 8, 4, true, NULL, NULL), ENG_OK);
	eng_manual_seed(ctx, 6);
	ck_assert_int_eq(eng_nn_linear_init(ctx, &c, 8, 4, true, NULL, NULL), ENG_OK);
	double *wa = tu_read(a.weight), *wb = tu_read(b.weight), *wc = tu_read(c.weight);
	ck_assert(!memcmp(wa, wb, sizeof(double) * 32));
	ck_assert(memcmp(wa, wc, sizeof(double) * 32));
	double zeros[32] = {0};
	set_param(a.weight, zeros);
	double *wb2 = tu_read(b.weight), *wa2 = tu_read(a.weight);
	ck_assert_msg(!memcmp(wb, wb2, sizeof(double) * 32), "assigning a's weight changed b's");
	ck_assert(wa2[0] == 0 && wa2[31] == 0);
	free(wa), free(wb), free(wc), free(wb2), free(wa2);
	/* conv: fan_in = in/groups * kh * kw = 2 * 3 * 3 */
	eng_nn_conv2d cv;
	ck_assert_int_eq(eng_nn_conv2d_init(ctx, &cv, 4, 64, 3, 3, 1, 1, 1, 2, true, NULL, NULL),
			 ENG_OK);
	const int64_t *cs = eng_shape(cv.weight);
	ck_assert(eng_ndim(cv.weight) == 4 && cs[0] == 64 && cs[1] == 2 && cs[2] == 3 &&
		  cs[3] == 3);
	double *cw = tu_read(cv.weight);
	stats sc = stats_of(cw, 64 * 18);
	double cb = 1.0 / sqrt(18.0);
	ck_assert_msg(sc.min >= -cb * (1 + 1e-6) && sc.max <= cb * (1 + 1e-6) && sc.max > 0.9 * cb,
		      "conv weight range [%g, %g], bound %g", sc.min, sc.max, cb);
	/* embedding N(0, 1) */
	eng_nn_embedding em;
	ck_assert_int_eq(eng_nn_embedding_init(ctx, &em, 128, 64, NULL, NULL), ENG_OK);
	double *ev = tu_read(em.weight);
	stats se = stats_of(ev, 128 * 64);
	ck_assert_msg(fabs(se.mean) < 0.05 && fabs(se.var - 1) < 0.08 && se.max > 2.5 &&
			      se.min < -2.5,
		      "embedding mean %g var %g", se.mean, se.var);
	/* glorot and kaiming with an explicit gain */
	int64_t gs[2] = {100, 60};
	eng_tensor *g = eng_init_glorot_uniform(ctx, 2, gs, 60, 100);
	double *gv = tu_read(g), gb = sqrt(6.0 / 160.0);
	stats sg = stats_of(gv, 6000);
	ck_assert(sg.min >= -gb && sg.max <= gb && sg.max > 0.95 * gb && sg.min < -0.95 * gb);
	eng_tensor *k = eng_init_kaiming_uniform(ctx, 2, gs, 60, sqrt(2.0));
	double *kv = tu_read(k), kb = sqrt(2.0) * sqrt(3.0 / 60.0);
	stats sk = stats_of(kv, 6000);
	ck_assert(sk.min >= -kb && sk.max <= kb && sk.max > 0.95 * kb);
	/* layernorm and batchnorm start at weight 1, bias 0, running mean 0, var 1, count 0 */
	eng_nn_layernorm ln;
	eng_nn_batchnorm2d bn;
	ck_assert_int_eq(eng_nn_layernorm_init(ctx, &ln, 3, 1e-5, true, NULL, NULL), ENG_OK);
	ck_assert_int_eq(eng_nn_batchnorm2d_init(ctx, &bn, 2, 1e-5, 0.1, true, NULL, NULL), ENG_OK);
	tu_batch *bt = tu_batch_new(ctx);
	tu_batch_want(bt, ln.weight, (double[]){1, 1, 1}, 3, 0, 0, "ln weight");
	tu_batch_want(bt, ln.bias, (double[]){0, 0, 0}, 3, 0, 0, "ln bias");
	tu_batch_want(bt, bn.weight, (double[]){1, 1}, 2, 0, 0, "bn weight");
	tu_batch_want(bt, bn.bias, (double[]){0, 0}, 2, 0, 0, "bn bias");
	tu_batch_want(bt, bn.running_mean, (double[]){0, 0}, 2, 0, 0, "bn running mean");
	tu_batch_want(bt, bn.running_var, (double[]){1, 1}, 2, 0, 0, "bn running var");
	tu_batch_want(bt, bn.num_batches_tracked, (double[]){0}, 1, 0, 0, "bn count");
	tu_batch_check(bt);
	free(w), free(bias), free(cw), free(ev), free(gv), free(kv);
	eng_nn_linear_free(&fc), eng_nn_linear_free(&a), eng_nn_linear_free(&b),
		eng_nn_linear_free(&c);
	eng_nn_conv2d_free(&cv), eng_nn_embedding_free(&em), eng_nn_layernorm_free(&ln);
	eng_nn_batchnorm2d_free(&bn);
	eng_tensor_free(g), eng_tensor_free(k);
	tu_ctx_free(ctx);
}
END_TEST

/* ---- forward passes ---- */

START_TEST(linear_conv_forward)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {71};
	tu_batch *bt = tu_batch_new(ctx);
	/* linear: x (2, 3, 5) @ W.T + b, W (4, 5), with and without bias */
	eng_nn_linear fc, fn;
	ck_assert_int_eq(eng_nn_linear_init(ctx, &fc, 5, 4, true, NULL, NULL), ENG_OK);
	ck_assert_int_eq(eng_nn_linear_init(ctx, &fn, 5, 4, false, NULL, NULL), ENG_OK);
	ck_assert_ptr_null(fn.bias);
	double xv[30], want[24], want_nb[24];
	eng_tensor *x = tu_quant(ctx, &r, ENG_F32, 3, (int64_t[]){2, 3, 5}, -2, 2, 0.125, xv);
	double *w = tu_read(fc.weight), *b = tu_read(fc.bias), *w2 = tu_read(fn.weight);
	for (int i = 0; i < 6; i++)
		for (int o = 0; o < 4; o++) {
			double acc = b[o], acc2 = 0;
			for (int k = 0; k < 5; k++) {
				acc += xv[i * 5 + k] * w[o * 5 + k];
				acc2 += xv[i * 5 + k] * w2[o * 5 + k];
			}
			want[i * 4 + o] = acc, want_nb[i * 4 + o] = acc2;
		}
	eng_tensor *y = eng_nn_linear_forward(&fc, x);
	ck_assert(y && eng_ndim(y) == 3 && eng_shape(y)[2] == 4);
	tu_batch_want(bt, y, want, 24, 1e-5, 1e-6, "linear");
	tu_batch_want(bt, eng_nn_linear_forward(&fn, x), want_nb, 24, 1e-5, 1e-6, "linear no bias");
	/* conv2d: x (2, 4, 5, 5), 4 -> 6 channels, 3x3, stride 2, padding 1, dilation 1, 2 groups;
	 * and 4 -> 2, 2x2, stride 1, padding 0, dilation 2, 1 group */
	static const struct {
		int out, k, stride, pad, dil, groups;
	} cc[] = {{6, 3, 2, 1, 1, 2}, {2, 2, 1, 0, 2, 1}};
	double cx[200], cwant[2 * 6 * 5 * 5];
	eng_tensor *xc = tu_quant(ctx, &r, ENG_F32, 4, (int64_t[]){2, 4, 5, 5}, -2, 2, 0.125, cx);
	eng_nn_conv2d convs[2];
	for (int c = 0; c < N_OF(cc); c++) {
		eng_nn_conv2d *cv = &convs[c];
		ck_assert_int_eq(eng_nn_conv2d_init(ctx, cv, 4, cc[c].out, cc[c].k, cc[c].k,
						    cc[c].stride, cc[c].pad, cc[c].dil,
						    cc[c].groups, true, NULL, NULL),
				 ENG_OK);
		double *cw = tu_read(cv->weight), *cb = tu_read(cv->bias);
		int K = cc[c].k, cin = 4 / cc[c].groups, opg = cc[c].out / cc[c].groups;
		int ho = (5 + 2 * cc[c].pad - cc[c].dil * (K - 1) - 1) / cc[c].stride + 1, cnt = 0;
		for (int n = 0; n < 2; n++)
			for (int o = 0; o < cc[c].out; o++)
				for (int i = 0; i < ho; i++)
					for (int j = 0; j < ho; j++) {
						double acc = cb[o];
						for (int ci = 0; ci < cin; ci++)
							for (int ky = 0; ky < K; ky++)
								for (int kx = 0; kx < K; kx++) {
									int yy = i * cc[c].stride -
										 cc[c].pad +
										 ky * cc[c].dil;
									int xx = j * cc[c].stride -
										 cc[c].pad +
										 kx * cc[c].dil;
									int ch = (o / opg) * cin +
										 ci;
									if (yy < 0 || yy >= 5 ||
									    xx < 0 || xx >= 5)
										continue;
									acc += cx[((n * 4 + ch) *
											   5 +
										   yy) * 5 +
										  xx] *
									       cw[((o * cin + ci) *
											   K +
										   ky) * K +
										  kx];
								}
						cwant[cnt++] = acc;
					}
		eng_tensor *yc = eng_nn_conv2d_forward(cv, xc);
		ck_assert(yc && eng_shape(yc)[1] == cc[c].out && eng_shape(yc)[2] == ho);
		tu_batch_want(bt, yc, cwant, cnt, 1e-5, 1e-5, "conv case %d", c);
		free(cw), free(cb);
	}
	tu_batch_check(bt);
	free(w), free(b), free(w2);
	eng_nn_linear_free(&fc), eng_nn_linear_free(&fn);
	eng_nn_conv2d_free(&convs[0]), eng_nn_conv2d_free(&convs[1]);
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(layernorm_embedding_forward)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {72};
	tu_batch *bt = tu_batch_new(ctx);
	eng_nn_layernorm ln, lp;
	ck_assert_int_eq(eng_nn_layernorm_init(ctx, &ln, 6, 1e-3, true, NULL, NULL), ENG_OK);
	ck_assert_int_eq(eng_nn_layernorm_init(ctx, &lp, 6, 1e-3, false, NULL, NULL), ENG_OK);
	double gw[6] = {0.5, -1, 2, 1.5, 0.25, 3}, gb[6] = {0, 1, -1, 0.5, 2, -0.25};
	set_param(ln.weight, gw);
	set_param(ln.bias, gb);
	double xv[24], want[24], plain[24];
	eng_tensor *x = tu_quant(ctx, &r, ENG_F32, 3, (int64_t[]){2, 2, 6}, -3, 3, 0.125, xv);
	for (int row = 0; row < 4; row++) {
		double m = 0, v = 0;
		for (int d = 0; d < 6; d++)
			m += xv[row * 6 + d] / 6;
		for (int d = 0; d < 6; d++)
			v += (xv[row * 6 + d] - m) * (xv[row * 6 + d] - m) / 6;
		for (int d = 0; d < 6; d++) {
			plain[row * 6 + d] = (xv[row * 6 + d] - m) / sqrt(v + 1e-3);
			want[row * 6 + d] = plain[row * 6 + d] * gw[d] + gb[d];
		}
	}
	tu_batch_want(bt, eng_nn_layernorm_forward(&ln, x), want, 24, 1e-4, 1e-5,
		      "layernorm affine");
	tu_batch_want(bt, eng_nn_layernorm_forward(&lp, x), plain, 24, 1e-4, 1e-5,
		      "layernorm plain");
	/* embedding: rows of the read-back table; an out-of-range index gives a zero row */
	eng_nn_embedding em;
	ck_assert_int_eq(eng_nn_embedding_init(ctx, &em, 7, 3, NULL, NULL), ENG_OK);
	double *tv = tu_read(em.weight), ew[18];
	int64_t ids[6] = {6, 0, 3, 3, 9, 1};
	eng_tensor *idx =
		tu_from_doubles(ctx, ENG_I64, 2, (int64_t[]){2, 3}, (double[]){6, 0, 3, 3, 9, 1});
	for (int i = 0; i < 6; i++)
		for (int d = 0; d < 3; d++)
			ew[i * 3 + d] = ids[i] < 7 ? tv[ids[i] * 3 + d] : 0;
	eng_tensor *e = eng_nn_embedding_forward(&em, idx);
	ck_assert(e && eng_ndim(e) == 3 && eng_shape(e)[0] == 2 && eng_shape(e)[2] == 3);
	tu_batch_want(bt, e, ew, 18, 0, 0, "embedding");
	tu_batch_check(bt);
	free(tv);
	eng_nn_layernorm_free(&ln), eng_nn_layernorm_free(&lp), eng_nn_embedding_free(&em);
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(dropout)
{
	eng_ctx *ctx = tu_ctx_new();
	int64_t s[2] = {200, 500}, n = 200 * 500;
	eng_tensor *x = eng_ones(ctx, ENG_F32, 2, s);
	eng_manual_seed(ctx, 3);
	eng_tensor *y = eng_nn_dropout(x, 0.3, true);
	eng_manual_seed(ctx, 3);
	eng_tensor *y2 = eng_nn_dropout(x, 0.3, true);
	eng_tensor *y3 = eng_nn_dropout(x, 0.3, true); /* the next mask differs */
	double *v = tu_read(y), *v2 = tu_read(y2), *v3 = tu_read(y3);
	int64_t zeros = 0, other = 0, diff = 0;
	for (int64_t i = 0; i < n; i++) {
		zeros += v[i] == 0;
		other += v[i] != 0 && fabs(v[i] - 1 / 0.7) > 1e-6;
		diff += v[i] != v3[i];
	}
	ck_assert_msg(fabs((double)zeros / (double)n - 0.3) < 0.01, "zeroed fraction %g",
		      (double)zeros / (double)n);
	ck_assert_msg(other == 0, "%lld kept values are not 1/(1-p)", (long long)other);
	ck_assert(!memcmp(v, v2, sizeof(double) * n));
	ck_assert_msg(diff > n / 4, "consecutive masks agree too often (%lld differ)",
		      (long long)diff);
	free(v), free(v2), free(v3);
	/* identity in eval and for p == 0 (values as they were, a new handle) */
	tu_rng r = {9};
	double xv[12];
	eng_tensor *xr = tu_quant(ctx, &r, ENG_F32, 2, (int64_t[]){3, 4}, -2, 2, 0.125, xv);
	eng_tensor *ev = eng_nn_dropout(xr, 0.5, false), *e0 = eng_nn_dropout(xr, 0, true);
	ck_assert(ev && ev != xr && e0 && e0 != xr);
	tu_batch *bt = tu_batch_new(ctx);
	tu_batch_want(bt, ev, xv, 12, 0, 0, "dropout eval");
	tu_batch_want(bt, e0, xv, 12, 0, 0, "dropout p=0");
	tu_batch_check(bt);
	/* bad p and dtype */
	ck_assert_ptr_null(eng_nn_dropout(xr, 1.0, true));
	expect_error(ctx, ENG_EINVAL, "nn_dropout: p must be in [0, 1)");
	ck_assert_ptr_null(eng_nn_dropout(xr, -0.1, false));
	expect_error(ctx, ENG_EINVAL, "nn_dropout");
	ck_assert_ptr_null(eng_nn_dropout(xr, NAN, true));
	expect_error(ctx, ENG_EINVAL, "nn_dropout");
	eng_tensor *xi = eng_ones(ctx, ENG_I32, 1, (int64_t[]){4});
	ck_assert_ptr_null(eng_nn_dropout(xi, 0.5, true));
	expect_error(ctx, ENG_EDTYPE, "nn_dropout: input must be float");
	tu_ctx_free(ctx);
}
END_TEST

/* ---- batchnorm ---- */

/* Per-channel mean and biased variance of x (N, C, H, W) into mean[C], var[C]. */
static void channel_stats(const double *x, int N, int C, int HW, double *mean, double *var)
{
	for (int c = 0; c < C; c++) {
		double m = 0, v = 0;
		for (int n = 0; n < N; n++)
			for (int k = 0; k < HW; k++)
				m += x[(n * C + c) * HW + k] / (N * HW);
		for (int n = 0; n < N; n++)
			for (int k = 0; k < HW; k++)
				v += pow(x[(n * C + c) * HW + k] - m, 2) / (N * HW);
		mean[c] = m, var[c] = v;
	}
}

/* y = (x - mean) / sqrt(var + eps) * w + b per channel. */
static void bn_apply(const double *x, int N, int C, int HW, const double *mean, const double *var,
		     double eps, const double *w, const double *b, double *y)
{
	for (int n = 0; n < N; n++)
		for (int c = 0; c < C; c++)
			for (int k = 0; k < HW; k++) {
				int i = (n * C + c) * HW + k;
				y[i] = (x[i] - mean[c]) / sqrt(var[c] + eps) * w[c] + b[c];
			}
}

START_TEST(batchnorm_train_eval)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {73};
	const int N = 4, C = 3, HW = 6;
	const double eps = 1e-5, mom = 0.2;
	int64_t xs[4] = {N, C, 2, 3};
	eng_nn_batchnorm2d bn;
	ck_assert_int_eq(eng_nn_batchnorm2d_init(ctx, &bn, C, eps, mom, true, NULL, NULL), ENG_OK);
	ck_assert(bn.training);
	double w[3] = {1.5, -0.5, 2}, b[3] = {0.25, 1, -1};
	set_param(bn.weight, w);
	set_param(bn.bias, b);
	double x1[72], x2[72], want[72], m1[3], v1[3], m2[3], v2[3], rm[3], rv[3];
	eng_tensor *t1 = tu_quant(ctx, &r, ENG_F32, 4, xs, -3, 3, 0.125, x1);
	eng_tensor *t2 = tu_quant(ctx, &r, ENG_F32, 4, xs, -1, 5, 0.125, x2);
	channel_stats(x1, N, C, HW, m1, v1);
	channel_stats(x2, N, C, HW, m2, v2);
	double unb = (double)(N * HW) / (N * HW - 1);
	/* batch 1: output from the batch statistics, realized together with the running ones */
	eng_tensor *y1 = eng_nn_batchnorm2d_forward(&bn, t1);
	ck_assert_msg(y1 != NULL, "%s", eng_errmsg(ctx));
	bn_apply(x1, N, C, HW, m1, v1, eps, w, b, want);
	tu_batch *bt = tu_batch_new(ctx);
	tu_batch_want(bt, y1, want, 72, 1e-4, 1e-5, "train output 1");
	for (int c = 0; c < C; c++) {
		rm[c] = (1 - mom) * 0 + mom * m1[c];
		rv[c] = (1 - mom) * 1 + mom * v1[c] * unb;
	}
	tu_batch_want(bt, bn.running_mean, rm, 3, 1e-5, 1e-6, "running mean 1");
	tu_batch_want(bt, bn.running_var, rv, 3, 1e-5, 1e-6, "running var 1");
	tu_batch_want(bt, bn.num_batches_tracked, (double[]){1}, 1, 0, 0, "count 1");
	tu_batch_check(bt);
	/* batch 2: the output alone, the running statistics realized later */
	eng_tensor *y2 = eng_nn_batchnorm2d_forward(&bn, t2);
	bn_apply(x2, N, C, HW, m2, v2, eps, w, b, want);
	bt = tu_batch_new(ctx);
	tu_batch_want(bt, y2, want, 72, 1e-4, 1e-5, "train output 2");
	tu_batch_check(bt);
	for (int c = 0; c < C; c++) {
		rm[c] = (1 - mom) * rm[c] + mom * m2[c];
		rv[c] = (1 - mom) * rv[c] + mom * v2[c] * unb;
	}
	bt = tu_batch_new(ctx);
	tu_batch_want(bt, bn.running_mean, rm, 3, 1e-5, 1e-6, "running mean 2");
	tu_batch_want(bt, bn.running_var, rv, 3, 1e-5, 1e-6, "running var 2");
	tu_batch_want(bt, bn.num_batches_tracked, (double[]){2}, 1, 0, 0, "count 2");
	tu_batch_check(bt);
	/* eval: the running statistics, which stay unchanged */
	bn.training = false;
	bn_apply(x1, N, C, HW, rm, rv, eps, w, b, want);
	bt = tu_batch_new(ctx);
	tu_batch_want(bt, eng_nn_batchnorm2d_forward(&bn, t1), want, 72, 1e-4, 1e-5, "eval output");
	tu_batch_check(bt);
	bt = tu_batch_new(ctx);
	tu_batch_want(bt, bn.running_mean, rm, 3, 1e-5, 1e-6, "running mean after eval");
	tu_batch_want(bt, bn.num_batches_tracked, (double[]){2}, 1, 0, 0, "count after eval");
	tu_batch_check(bt);
	/* without affine: plain normalisation; eval accepts one value per channel */
	eng_nn_batchnorm2d pb;
	ck_assert_int_eq(eng_nn_batchnorm2d_init(ctx, &pb, C, eps, 0.1, false, NULL, NULL), ENG_OK);
	ck_assert(pb.weight == NULL && pb.bias == NULL);
	double one[3] = {1, 1, 1}, zero[3] = {0, 0, 0};
	bn_apply(x1, N, C, HW, m1, v1, eps, one, zero, want);
	bt = tu_batch_new(ctx);
	tu_batch_want(bt, eng_nn_batchnorm2d_forward(&pb, t1), want, 72, 1e-4, 1e-5, "plain train");
	tu_batch_check(bt);
	eng_tensor *single = eng_ones(ctx, ENG_F32, 4, (int64_t[]){1, C, 1, 1});
	ck_assert_ptr_null(eng_nn_batchnorm2d_forward(&pb, single));
	expect_error(ctx, ENG_ESHAPE, "more than 1 value per channel");
	pb.training = false;
	ck_assert_ptr_nonnull(eng_nn_batchnorm2d_forward(&pb, single));
	eng_nn_batchnorm2d_free(&bn);
	eng_nn_batchnorm2d_free(&pb);
	tu_ctx_free(ctx);
}
END_TEST

/* ---- losses ---- */

/* log_softmax of one row of C logits into out. */
static void log_softmax_row(const double *l, int C, double *out)
{
	double mx = -INFINITY, se = 0;
	for (int c = 0; c < C; c++)
		mx = fmax(mx, l[c]);
	for (int c = 0; c < C; c++)
		se += exp(l[c] - mx);
	for (int c = 0; c < C; c++)
		out[c] = l[c] - mx - log(se);
}

/* PyTorch's cross_entropy with label smoothing and ignore_index, by hand; a label outside
 * [0, C) that is not ignored makes it NaN, as the engine's loss does for lazy labels. */
static double sparse_ce(const double *logits, const int64_t *labels, int N, int C, double ls,
			int64_t ignore)
{
	double sum = 0, lp[16];
	int cnt = 0;
	for (int i = 0; i < N; i++) {
		if (labels[i] == ignore)
			continue;
		log_softmax_row(logits + i * C, C, lp);
		double nll = labels[i] >= 0 && labels[i] < C ? -lp[labels[i]] : NAN, smooth = 0;
		for (int c = 0; c < C; c++)
			smooth += -lp[c] / C;
		sum += (1 - ls) * nll + ls * smooth;
		cnt++;
	}
	return sum / (cnt ? cnt : 1);
}

/* Realize t alone and return the kernel launches it took. */
static uint64_t kernels_of(eng_ctx *ctx, eng_tensor *t)
{
	eng_stats st;
	ck_assert_msg(t != NULL, "%s", eng_errmsg(ctx));
	eng_reset_stats(ctx);
	ck_assert_msg(eng_realize(&t, 1) == ENG_OK, "%s", eng_errmsg(ctx));
	eng_get_stats(ctx, &st);
	return st.kernels;
}

START_TEST(sparse_cross_entropy)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {74};
	const int N = 6, C = 5;
	double lv[30], want;
	eng_tensor *logits = tu_quant(ctx, &r, ENG_F32, 2, (int64_t[]){N, C}, -4, 4, 0.125, lv);
	int64_t lab[6] = {0, 4, 2, 2, 1, 3}, lab_ign[6] = {0, -100, 2, -100, 1, 4};
	int64_t all_ign[6] = {-100, -100, -100, -100, -100, -100};
	double ld[6], ldi[6], lda[6];
	for (int i = 0; i < N; i++)
		ld[i] = (double)lab[i], ldi[i] = (double)lab_ign[i], lda[i] = (double)all_ign[i];
	eng_tensor *labels = tu_from_doubles(ctx, ENG_I64, 1, (int64_t[]){N}, ld);
	eng_tensor *lab_i = tu_from_doubles(ctx, ENG_I32, 1, (int64_t[]){N}, ldi);
	eng_tensor *lab_a = tu_from_doubles(ctx, ENG_I64, 1, (int64_t[]){N}, lda);
	eng_tensor *lab_u8 = tu_from_doubles(ctx, ENG_U8, 1, (int64_t[]){N}, ld);
	tu_batch *bt = tu_batch_new(ctx);
	static const double smooth[] = {0, 0.1, 0.35};
	for (int k = 0; k < N_OF(smooth); k++) {
		want = sparse_ce(lv, lab, N, C, smooth[k], -100);
		tu_batch_want(bt, eng_loss_sparse_cross_entropy(logits, labels, smooth[k], -100),
			      &want, 1, 1e-5, 1e-6, "smoothing %g", smooth[k]);
		want = sparse_ce(lv, lab_ign, N, C, smooth[k], -100);
		tu_batch_want(bt, eng_loss_sparse_cross_entropy(logits, lab_i, smooth[k], -100),
			      &want, 1, 1e-5, 1e-6, "smoothing %g with ignored rows", smooth[k]);
	}
	/* ignore_index that is a valid class, every row ignored, labels that cannot hold -100 */
	want = sparse_ce(lv, lab, N, C, 0.2, 2);
	tu_batch_want(bt, eng_loss_sparse_cross_entropy(logits, labels, 0.2, 2), &want, 1, 1e-5,
		      1e-6, "ignore class 2");
	tu_batch_want(bt, eng_loss_sparse_cross_entropy(logits, lab_a, 0.1, -100), (double[]){0}, 1,
		      0, 0, "all ignored");
	want = sparse_ce(lv, lab, N, C, 0, -100);
	/* uint8 labels cannot hold these, whether converted by wrapping or saturating (to 0) */
	static const int64_t unrepresentable[] = {-100, -1, 256};
	for (int k = 0; k < N_OF(unrepresentable); k++)
		tu_batch_want(bt,
			      eng_loss_sparse_cross_entropy(logits, lab_u8, 0, unrepresentable[k]),
			      &want, 1, 1e-5, 1e-6, "uint8 labels, ignore_index %lld",
			      (long long)unrepresentable[k]);
	tu_batch_want(bt, eng_sparse_cross_entropy(logits, labels), &want, 1, 1e-5, 1e-6,
		      "engine's sparse CE agrees");
	tu_batch_check(bt);
	/* one kernel each, plain and smoothed (each row's log-sum-exp and class sum nested in
	 * the batch's mean) */
	tu_rng r2 = {75};
	int64_t ls[2] = {32, 10};
	eng_tensor *fresh = tu_rand(ctx, &r2, ENG_F32, 2, ls, -3, 3);
	eng_tensor *flab = tu_rand(ctx, &r2, ENG_I32, 1, ls, 0, 9);
	uint64_t k0 = kernels_of(ctx, eng_loss_sparse_cross_entropy(fresh, flab, 0, -100));
	ck_assert_msg(k0 == 1, "plain sparse CE took %llu kernels", (unsigned long long)k0);
	eng_tensor *fresh2 = tu_rand(ctx, &r2, ENG_F32, 2, ls, -3, 3);
	uint64_t k1 = kernels_of(ctx, eng_loss_sparse_cross_entropy(fresh2, flab, 0.1, -100));
	ck_assert_msg(k1 == 1, "smoothed sparse CE took %llu kernels", (unsigned long long)k1);
	/* errors */
	ck_assert_ptr_null(eng_loss_sparse_cross_entropy(logits, labels, 1.0, -100));
	expect_error(ctx, ENG_EINVAL, "loss_sparse_cross_entropy: label_smoothing");
	ck_assert_ptr_null(eng_loss_sparse_cross_entropy(logits, labels, -0.1, -100));
	expect_error(ctx, ENG_EINVAL, "label_smoothing");
	ck_assert_ptr_null(eng_loss_sparse_cross_entropy(logits, logits, 0, -100));
	expect_error(ctx, ENG_EDTYPE, "labels must be integers");
	eng_tensor *short_lab = eng_zeros(ctx, ENG_I32, 1, (int64_t[]){N - 1});
	ck_assert_ptr_null(eng_loss_sparse_cross_entropy(logits, short_lab, 0, -100));
	expect_error(ctx, ENG_ESHAPE, "loss_sparse_cross_entropy");
	tu_ctx_free(ctx);
}
END_TEST

/* A label outside [0, C) that is not the ignore index: an error naming the row when the labels
 * are realized, a NaN loss when they are lazy; the same through both entry points. */
START_TEST(sparse_cross_entropy_out_of_range)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {76};
	const int N = 4, C = 5;
	double lv[20];
	eng_tensor *logits = tu_quant(ctx, &r, ENG_F32, 2, (int64_t[]){N, C}, -4, 4, 0.125, lv);
	static const double too_big[4] = {0, 1, 5, 2}, negative[4] = {3, -1, 0, 4};
	static const double ignored[4] = {0, -100, 4, 1};
	eng_tensor *known_big = tu_from_doubles(ctx, ENG_I64, 1, (int64_t[]){N}, too_big);
	eng_tensor *known_neg = tu_from_doubles(ctx, ENG_I32, 1, (int64_t[]){N}, negative);
	eng_tensor *known_ign = tu_from_doubles(ctx, ENG_I64, 1, (int64_t[]){N}, ignored);
	/* realized labels: checked when the loss is built */
	ck_assert_ptr_null(eng_sparse_cross_entropy(logits, known_big));
	expect_error(ctx, ENG_EINVAL, "sparse_cross_entropy: label 5 in row 2 is outside [0, 5)");
	ck_assert_ptr_null(eng_loss_sparse_cross_entropy(logits, known_big, 0.1, -100));
	expect_error(ctx, ENG_EINVAL, "loss_sparse_cross_entropy: label 5 in row 2");
	ck_assert_ptr_null(eng_loss_sparse_cross_entropy(logits, known_neg, 0, -100));
	expect_error(ctx, ENG_EINVAL, "label -1 in row 1");
	/* -100 is only the nn loss's ignore index: the engine's loss ignores nothing */
	ck_assert_ptr_null(eng_sparse_cross_entropy(logits, known_ign));
	expect_error(ctx, ENG_EINVAL, "label -100 in row 1");
	ck_assert_ptr_null(eng_loss_sparse_cross_entropy(logits, known_ign, 0, -7));
	expect_error(ctx, ENG_EINVAL, "label -100 in row 1");
	eng_tensor *ok = eng_loss_sparse_cross_entropy(logits, known_ign, 0, -100);
	ck_assert_msg(ok != NULL, "%s", eng_errmsg(ctx));
	/* lazy labels (a cast of realized ones): not read at build time; the loss is NaN */
	eng_tensor *lazy_big = eng_cast(known_big, ENG_I32);
	eng_tensor *lazy_neg = eng_cast(known_neg, ENG_I64);
	eng_tensor *lazy_u8 = eng_cast(known_big, ENG_U8); /* unsigned: only the upper bound */
	eng_tensor *lazy_ign = eng_cast(known_ign, ENG_I32);
	ck_assert(eng_tensor_node(lazy_big)->buf == NULL && eng_tensor_node(lazy_u8)->buf == NULL);
	eng_tensor *nan_losses[] = {
		eng_sparse_cross_entropy(logits, lazy_big),
		eng_sparse_cross_entropy(logits, lazy_neg),
		eng_sparse_cross_entropy(logits, lazy_u8),
		eng_sparse_cross_entropy(logits, lazy_ign),
		eng_loss_sparse_cross_entropy(logits, lazy_big, 0, -100),
		eng_loss_sparse_cross_entropy(logits, lazy_neg, 0.1, -100),
		eng_loss_sparse_cross_entropy(logits, lazy_u8, 0.1, -100),
		eng_loss_sparse_cross_entropy(logits, lazy_ign, 0, 3), /* -100 not ignored here */
	};
	for (int k = 0; k < N_OF(nan_losses); k++) {
		ck_assert_msg(nan_losses[k] != NULL, "lazy case %d: %s", k, eng_errmsg(ctx));
		double v = eng_item(nan_losses[k]);
		ck_assert_msg(isnan(v), "lazy case %d: loss %g, want NaN", k, v);
	}
	/* an ignored row stays out of the mean, lazy or not, with or without smoothing */
	tu_batch *bt = tu_batch_new(ctx);
	int64_t lab_ign[4] = {0, -100, 4, 1};
	for (int ls = 0; ls < 2; ls++) {
		double want = sparse_ce(lv, lab_ign, N, C, 0.2 * ls, -100);
		tu_batch_want(bt, eng_loss_sparse_cross_entropy(logits, lazy_ign, 0.2 * ls, -100),
			      &want, 1, 1e-5, 1e-6, "lazy labels, ignored row, smoothing %g",
			      0.2 * ls);
		tu_batch_want(bt, eng_loss_sparse_cross_entropy(logits, known_ign, 0.2 * ls, -100),
			      &want, 1, 1e-5, 1e-6, "realized labels, ignored row, smoothing %g",
			      0.2 * ls);
	}
	tu_batch_check(bt);
	/* the NaN guard costs no kernel: lazy labels are still one (rows nested in the batch) */
	tu_rng r2 = {77};
	eng_tensor *fresh = tu_rand(ctx, &r2, ENG_F32, 2, (int64_t[]){32, 10}, -3, 3);
	eng_tensor *flab = tu_rand(ctx, &r2, ENG_I64, 1, (int64_t[]){32}, 0, 9);
	uint64_t k0 = kernels_of(ctx, eng_sparse_cross_entropy(fresh, eng_cast(flab, ENG_I32)));
	ck_assert_msg(k0 == 1, "sparse CE of lazy labels took %llu kernels",
		      (unsigned long long)k0);
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(dense_losses)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {76};
	tu_batch *bt = tu_batch_new(ctx);
	/* cross-entropy against probabilities */
	double lv[12], tv[12], lp[4], want = 0;
	eng_tensor *logits = tu_quant(ctx, &r, ENG_F32, 2, (int64_t[]){3, 4}, -3, 3, 0.125, lv);
	for (int i = 0; i < 12; i++)
		tv[i] = (double)tu_int(&r, 0, 8) / 8.0;
	eng_tensor *target = tu_from_doubles(ctx, ENG_F32, 2, (int64_t[]){3, 4}, tv);
	for (int i = 0; i < 3; i++) {
		log_softmax_row(lv + i * 4, 4, lp);
		for (int c = 0; c < 4; c++)
			want -= tv[i * 4 + c] * lp[c] / 3;
	}
	tu_batch_want(bt, eng_loss_cross_entropy(logits, target), &want, 1, 1e-5, 1e-6, "dense CE");
	/* mse */
	double pv[12], mse = 0;
	eng_tensor *pred = tu_quant(ctx, &r, ENG_F32, 2, (int64_t[]){3, 4}, -3, 3, 0.125, pv);
	for (int i = 0; i < 12; i++)
		mse += (pv[i] - tv[i]) * (pv[i] - tv[i]) / 12;
	tu_batch_want(bt, eng_loss_mse(pred, target), &mse, 1, 1e-6, 0, "mse");
	/* bce on probabilities, including 0 and 1 (logs clamped at -100) */
	double prob[6] = {0.1, 0.5, 0.875, 0, 1, 0.25}, pt[6] = {0, 1, 1, 1, 0, 0.5}, bce = 0;
	for (int i = 0; i < 6; i++)
		bce -= (pt[i] * fmax(log(prob[i]), -100) +
			(1 - pt[i]) * fmax(log(1 - prob[i]), -100)) /
		       6;
	eng_tensor *pp = tu_from_doubles(ctx, ENG_F32, 1, (int64_t[]){6}, prob);
	eng_tensor *ptt = tu_from_doubles(ctx, ENG_F32, 1, (int64_t[]){6}, pt);
	tu_batch_want(bt, eng_loss_bce(pp, ptt), &bce, 1, 1e-5, 0, "bce");
	/* bce with logits, stable for large |x| */
	double xl[6] = {-2, 0.5, 3, 60, -60, 0}, bl = 0;
	for (int i = 0; i < 6; i++)
		bl += (fmax(xl[i], 0) - xl[i] * pt[i] + log1p(exp(-fabs(xl[i])))) / 6;
	eng_tensor *xt = tu_from_doubles(ctx, ENG_F32, 1, (int64_t[]){6}, xl);
	tu_batch_want(bt, eng_loss_bce_with_logits(xt, ptt), &bl, 1, 1e-5, 0, "bce with logits");
	tu_batch_check(bt);
	/* shape mismatches */
	ck_assert_ptr_null(eng_loss_mse(pred, pp));
	expect_error(ctx, ENG_ESHAPE, "loss_mse: shapes differ");
	ck_assert_ptr_null(eng_loss_bce(pp, target));
	expect_error(ctx, ENG_ESHAPE, "loss_bce");
	ck_assert_ptr_null(eng_loss_bce_with_logits(xt, target));
	expect_error(ctx, ENG_ESHAPE, "loss_bce_with_logits");
	ck_assert_ptr_null(eng_loss_cross_entropy(logits, pp));
	expect_error(ctx, ENG_ESHAPE, "loss_cross_entropy");
	ck_assert_ptr_null(eng_loss_cross_entropy(pp, ptt));
	expect_error(ctx, ENG_ESHAPE, "loss_cross_entropy: need logits");
	tu_ctx_free(ctx);
}
END_TEST

/* ---- errors ---- */

START_TEST(layer_errors)
{
	eng_ctx *ctx = tu_ctx_new();
	eng_nn_linear fc;
	eng_nn_conv2d cv;
	eng_nn_layernorm ln;
	eng_nn_embedding em;
	eng_nn_batchnorm2d bn;
	/* bad init arguments leave the layer zeroed */
	ck_assert_int_eq(eng_nn_linear_init(ctx, &fc, 0, 3, true, NULL, NULL), ENG_EINVAL);
	ck_assert_ptr_null(fc.weight);
	expect_error(ctx, ENG_EINVAL, "nn_linear_init");
	ck_assert_int_eq(eng_nn_conv2d_init(ctx, &cv, 3, 4, 3, 3, 1, 0, 1, 2, true, NULL, NULL),
			 ENG_EINVAL);
	expect_error(ctx, ENG_EINVAL, "divisible by groups 2");
	ck_assert_int_eq(eng_nn_conv2d_init(ctx, &cv, 4, 4, 3, 3, 0, 0, 1, 1, true, NULL, NULL),
			 ENG_EINVAL);
	expect_error(ctx, ENG_EINVAL, "nn_conv2d_init");
	ck_assert_int_eq(eng_nn_layernorm_init(ctx, &ln, 4, -1, true, NULL, NULL), ENG_EINVAL);
	expect_error(ctx, ENG_EINVAL, "nn_layernorm_init");
	ck_assert_int_eq(eng_nn_embedding_init(ctx, &em, 0, 4, NULL, NULL), ENG_EINVAL);
	expect_error(ctx, ENG_EINVAL, "nn_embedding_init");
	ck_assert_int_eq(eng_nn_batchnorm2d_init(ctx, &bn, 4, 1e-5, 1.5, true, NULL, NULL),
			 ENG_EINVAL);
	expect_error(ctx, ENG_EINVAL, "momentum");
	int64_t gs[1] = {4};
	ck_assert_ptr_null(eng_init_kaiming_uniform(ctx, 1, gs, 0, 1));
	expect_error(ctx, ENG_EINVAL, "init_kaiming_uniform");
	ck_assert_ptr_null(eng_init_glorot_uniform(ctx, 1, gs, 0, 0));
	expect_error(ctx, ENG_EINVAL, "init_glorot_uniform");
	/* an uninitialised (zeroed) layer */
	eng_tensor *x = eng_ones(ctx, ENG_F32, 2, (int64_t[]){2, 3});
	ck_assert_ptr_null(eng_nn_linear_forward(&fc, x));
	expect_error(ctx, ENG_ESTATE, "nn_linear: layer is not initialised");
	/* wrong feature counts and shapes */
	ck_assert_int_eq(eng_nn_linear_init(ctx, &fc, 5, 2, true, NULL, NULL), ENG_OK);
	ck_assert_ptr_null(eng_nn_linear_forward(&fc, x));
	expect_error(ctx, ENG_ESHAPE, "nn_linear: input has 3 features, layer expects 5");
	ck_assert_int_eq(eng_nn_conv2d_init(ctx, &cv, 4, 2, 3, 3, 1, 1, 1, 2, false, NULL, NULL),
			 ENG_OK);
	eng_tensor *img = eng_ones(ctx, ENG_F32, 4, (int64_t[]){1, 3, 5, 5});
	ck_assert_ptr_null(eng_nn_conv2d_forward(&cv, img));
	expect_error(ctx, ENG_ESHAPE, "nn_conv2d: input must be (N, 4, H, W)");
	ck_assert_ptr_null(eng_nn_conv2d_forward(&cv, x));
	expect_error(ctx, ENG_ESHAPE, "nn_conv2d");
	ck_assert_int_eq(eng_nn_layernorm_init(ctx, &ln, 4, 1e-5, true, NULL, NULL), ENG_OK);
	ck_assert_ptr_null(eng_nn_layernorm_forward(&ln, x));
	expect_error(ctx, ENG_ESHAPE, "nn_layernorm: input's last dim is 3, layer expects 4");
	ck_assert_int_eq(eng_nn_batchnorm2d_init(ctx, &bn, 4, 1e-5, 0.1, true, NULL, NULL), ENG_OK);
	ck_assert_ptr_null(eng_nn_batchnorm2d_forward(&bn, img));
	expect_error(ctx, ENG_ESHAPE, "nn_batchnorm2d: input must be (N, 4, H, W)");
	ck_assert_int_eq(eng_nn_embedding_init(ctx, &em, 4, 2, NULL, NULL), ENG_OK);
	ck_assert_ptr_null(eng_nn_embedding_forward(&em, x));
	expect_error(ctx, ENG_EDTYPE, "nn_embedding: indices must be integers");
	/* NULL propagates without replacing the first error */
	ck_assert_ptr_null(eng_nn_linear_forward(&fc, x));
	ck_assert_ptr_null(eng_nn_linear_forward(&fc, NULL));
	ck_assert_ptr_null(eng_nn_conv2d_forward(&cv, NULL));
	ck_assert_ptr_null(eng_nn_layernorm_forward(&ln, NULL));
	ck_assert_ptr_null(eng_nn_batchnorm2d_forward(&bn, NULL));
	ck_assert_ptr_null(eng_nn_embedding_forward(&em, NULL));
	ck_assert_ptr_null(eng_nn_dropout(NULL, 0.5, true));
	ck_assert_ptr_null(eng_loss_sparse_cross_entropy(NULL, NULL, 0, -100));
	ck_assert_ptr_null(eng_loss_cross_entropy(x, NULL));
	ck_assert_ptr_null(eng_loss_mse(NULL, x));
	ck_assert_ptr_null(eng_loss_bce(NULL, x));
	ck_assert_ptr_null(eng_loss_bce_with_logits(x, NULL));
	expect_error(ctx, ENG_ESHAPE, "nn_linear: input has 3 features");
	/* a failed training forward queues no running-statistic update */
	ck_assert_ptr_null(eng_nn_batchnorm2d_forward(&bn, img));
	eng_clear_error(ctx);
	tu_batch *bt = tu_batch_new(ctx);
	tu_batch_want(bt, bn.num_batches_tracked, (double[]){0}, 1, 0, 0, "count untouched");
	tu_batch_check(bt);
	eng_nn_linear_free(&fc), eng_nn_conv2d_free(&cv), eng_nn_layernorm_free(&ln);
	eng_nn_embedding_free(&em), eng_nn_batchnorm2d_free(&bn);
	eng_nn_linear_free(&fc); /* freeing twice is harmless: the layer was zeroed */
	tu_ctx_free(ctx);
}
END_TEST

Suite *nnlayers_suite(void)
{
	const TTest *const tests[] = {
		params_registry,
		init_statistics,
		linear_conv_forward,
		layernorm_embedding_forward,
		dropout,
		batchnorm_train_eval,
		sparse_cross_entropy,
		sparse_cross_entropy_out_of_range,
		dense_losses,
		layer_errors,
	};
	return tu_suite("nnlayers", tests, N_OF(tests), TU_TIMEOUT);
}
