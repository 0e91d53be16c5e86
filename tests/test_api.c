/* test_api.c: the composite math, activation, reduction and movement functions of engine.h,
 * checked against the reference evaluator and against direct double-precision loops in C. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"
#include "testutil.h"

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Direct (C) tolerance for float32 composites. */
#define DRTOL 2e-5
#define DATOL 2e-6

typedef eng_tensor *(*un_fn)(const eng_tensor *);
typedef double (*dfn)(double);

static double d_sign(double x)
{
	return x > 0 ? 1 : x < 0 ? -1 : 0;
}
static double d_square(double x)
{
	return x * x;
}
static double d_rsqrt(double x)
{
	return 1 / sqrt(x);
}
static double d_relu(double x)
{
	return x > 0 ? x : 0;
}
static double d_sigmoid(double x)
{
	return 1 / (1 + exp(-x));
}
static double d_gelu(double x)
{
	return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
static double d_silu(double x)
{
	return x * d_sigmoid(x);
}
static double d_softplus(double x)
{
	return log1p(exp(x));
}
static double d_not(double x)
{
	return x == 0;
}

static eng_tensor *leaky01(const eng_tensor *a)
{
	return eng_leaky_relu(a, 0.1);
}
static double d_leaky01(double x)
{
	return x > 0 ? x : 0.1 * x;
}
static eng_tensor *elu1(const eng_tensor *a)
{
	return eng_elu(a, 1.0);
}
static double d_elu1(double x)
{
	return x > 0 ? x : exp(x) - 1;
}
static eng_tensor *elu05(const eng_tensor *a)
{
	return eng_elu(a, 0.5);
}
static double d_elu05(double x)
{
	return x > 0 ? x : 0.5 * (exp(x) - 1);
}
static eng_tensor *clamp_m1_2(const eng_tensor *a)
{
	return eng_clamp(a, -1, 2);
}
static double d_clamp(double x)
{
	return x < -1 ? -1 : x > 2 ? 2 : x;
}
static eng_tensor *pow2(const eng_tensor *a)
{
	return eng_pow_s(a, 2);
}
static double d_pow2(double x)
{
	return x * x;
}
static eng_tensor *pow3(const eng_tensor *a)
{
	return eng_pow_s(a, 3);
}
static double d_pow3(double x)
{
	return x * x * x;
}
static eng_tensor *pow_half(const eng_tensor *a)
{
	return eng_pow_s(a, 0.5);
}
static eng_tensor *pow_m1(const eng_tensor *a)
{
	return eng_pow_s(a, -1);
}
static double d_recip(double x)
{
	return 1 / x;
}
static eng_tensor *pow_mhalf(const eng_tensor *a)
{
	return eng_pow_s(a, -0.5);
}
static eng_tensor *pow_17(const eng_tensor *a)
{
	return eng_pow_s(a, 1.7);
}
static double d_pow17(double x)
{
	return pow(x, 1.7);
}

static const struct math_op {
	const char *name;
	un_fn fn;
	dfn ref;
	double lo, hi; /* input range (multiples of 1/8) */
} math_ops[] = {
	{"exp", eng_exp, exp, -5, 5},
	{"log", eng_log, log, 0.125, 50},
	{"cos", eng_cos, cos, -6, 6},
	{"tan", eng_tan, tan, -1.25, 1.25},
	{"abs", eng_abs, fabs, -5, 5},
	{"sign", eng_sign, d_sign, -3, 3},
	{"square", eng_square, d_square, -5, 5},
	{"rsqrt", eng_rsqrt, d_rsqrt, 0.125, 50},
	{"floor", eng_floor, floor, -5, 5},
	{"ceil", eng_ceil, ceil, -5, 5},
	{"round", eng_round, nearbyint, -5, 5},
	{"logical_not", eng_logical_not, d_not, -2, 2},
	{"relu", eng_relu, d_relu, -5, 5},
	{"leaky_relu", leaky01, d_leaky01, -5, 5},
	{"sigmoid", eng_sigmoid, d_sigmoid, -8, 8},
	{"tanh", eng_tanh, tanh, -5, 5},
	{"gelu", eng_gelu, d_gelu, -5, 5},
	{"silu", eng_silu, d_silu, -8, 8},
	{"softplus", eng_softplus, d_softplus, -20, 20},
	{"elu1", elu1, d_elu1, -5, 5},
	{"elu0.5", elu05, d_elu05, -5, 5},
	{"clamp", clamp_m1_2, d_clamp, -5, 5},
	{"pow_s 2", pow2, d_pow2, -5, 5},
	{"pow_s 3", pow3, d_pow3, -4, 4},
	{"pow_s 0.5", pow_half, sqrt, 0, 50},
	{"pow_s -1", pow_m1, d_recip, 0.125, 8},
	{"pow_s -0.5", pow_mhalf, d_rsqrt, 0.125, 8},
	{"pow_s 1.7", pow_17, d_pow17, 0, 8},
};

START_TEST(math_float32)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {201};
	tu_batch *b = tu_batch_new(ctx);
	int64_t s[2] = {5, 9};
	double xv[45], want[45];
	for (int o = 0; o < N_OF(math_ops); o++) {
		const struct math_op *m = &math_ops[o];
		eng_tensor *x = tu_quant(ctx, &r, ENG_F32, 2, s, m->lo, m->hi, 0.125, xv);
		eng_tensor *y = m->fn(x);
		for (int k = 0; k < 45; k++)
			want[k] = m->ref(xv[k]);
		tu_batch_ref(b, y, 1e-6, 1e-6, "%s vs ref", m->name);
		tu_batch_want(b, y, want, 45, DRTOL, DATOL, "%s vs C", m->name);
	}
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

/* The same functions on other input dtypes (integer inputs promote or keep their dtype). */
START_TEST(math_other_dtypes)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {202};
	tu_batch *b = tu_batch_new(ctx);
	int64_t s[2] = {3, 7};
	static const eng_dtype dts[] = {ENG_F16, ENG_I32, ENG_U8, ENG_I64, ENG_BOOL};
	for (int d = 0; d < N_OF(dts); d++) {
		eng_dtype dt = dts[d];
		for (int o = 0; o < N_OF(math_ops); o++) {
			const struct math_op *m = &math_ops[o];
			double lo = m->lo, hi = m->hi, q = eng_dtype_is_float(dt) ? 0.125 : 1;
			if (dt == ENG_U8 || dt == ENG_BOOL)
				lo = lo < 0 ? 0 : lo;
			if (!eng_dtype_is_float(dt) && hi < 1)
				continue;
			if (!eng_dtype_is_float(dt) && lo > 0)
				lo = 1;
			eng_tensor *y = m->fn(tu_quant(ctx, &r, dt, 2, s, lo, hi, q, NULL));
			double tol = eng_tensor_dtype(y) == ENG_F16 ? 1e-2 : 1e-5;
			tu_batch_ref(b, y, tol, tol, "%s %s", m->name, eng_dtype_name(dt));
		}
	}
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(pow_tensor)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {203};
	tu_batch *b = tu_batch_new(ctx);
	int64_t s[2] = {4, 6};
	double av[24], bv[24], want[24];
	eng_tensor *a = tu_quant(ctx, &r, ENG_F32, 2, s, 0.25, 4, 0.125, av);
	eng_tensor *e = tu_quant(ctx, &r, ENG_F32, 2, s, -2, 2, 0.125, bv);
	for (int k = 0; k < 24; k++)
		want[k] = pow(av[k], bv[k]);
	tu_batch_want(b, eng_pow(a, e), want, 24, DRTOL, DATOL, "pow positive base");
	tu_batch_ref(b, eng_pow(a, e), 1e-6, 0, "pow positive base vs ref");
	/* negative bases with integer exponents */
	eng_tensor *an = tu_quant(ctx, &r, ENG_F32, 2, s, -4, -0.25, 0.125, av);
	eng_tensor *en = tu_quant(ctx, &r, ENG_F32, 2, s, -3, 3, 1, bv);
	for (int k = 0; k < 24; k++)
		want[k] = pow(av[k], bv[k]);
	tu_batch_want(b, eng_pow(an, en), want, 24, DRTOL, DATOL,
		      "pow negative base, integer exponent");
	/* broadcast exponent row */
	double rowv[6];
	eng_tensor *row = tu_quant(ctx, &r, ENG_F32, 1, &s[1], 0, 3, 1, rowv);
	eng_tensor *ap = tu_quant(ctx, &r, ENG_F32, 2, s, 0.5, 2, 0.125, av);
	for (int k = 0; k < 24; k++)
		want[k] = pow(av[k], rowv[k % 6]);
	tu_batch_want(b, eng_pow(ap, row), want, 24, DRTOL, DATOL, "pow broadcast");
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

/* ---- reductions ---- */

/* Split shape around axis ax: outer * n * inner. */
static void axis_dims(int ndim, const int64_t *shape, int ax, int64_t *outer, int64_t *n,
		      int64_t *inner)
{
	*outer = *inner = 1;
	for (int d = 0; d < ndim; d++) {
		if (d < ax)
			*outer *= shape[d];
		else if (d > ax)
			*inner *= shape[d];
	}
	*n = shape[ax];
}

enum red_kind {
	R_MIN,
	R_MEAN,
	R_VAR0,
	R_VAR1,
	R_STD1,
	R_LSE,
	R_ARGMAX,
	R_ARGMIN,
	R_SOFTMAX,
	R_LOGSOFTMAX
};
static const char *const red_names[] = {"min",	     "mean",   "var0",	 "var1",    "std1",
					"logsumexp", "argmax", "argmin", "softmax", "log_softmax"};

/* Direct value of reduction k over x[o, :, i]; for softmax kinds element j. */
static double direct_reduce(enum red_kind k, const double *x, int64_t n, int64_t inner, int64_t j)
{
	double mn = INFINITY, mx = -INFINITY, sum = 0;
	int64_t amax = 0, amin = 0;
	for (int64_t t = 0; t < n; t++) {
		double v = x[t * inner];
		if (v > mx)
			mx = v, amax = t;
		if (v < mn)
			mn = v, amin = t;
		sum += v;
	}
	double mean = sum / n, ss = 0, se = 0;
	for (int64_t t = 0; t < n; t++) {
		ss += (x[t * inner] - mean) * (x[t * inner] - mean);
		se += exp(x[t * inner] - mx);
	}
	switch (k) {
	case R_MIN:
		return mn;
	case R_MEAN:
		return mean;
	case R_VAR0:
		return ss / n;
	case R_VAR1:
		return ss / (n - 1);
	case R_STD1:
		return sqrt(ss / (n - 1));
	case R_LSE:
		return mx + log(se);
	case R_ARGMAX:
		return (double)amax;
	case R_ARGMIN:
		return (double)amin;
	case R_SOFTMAX:
		return exp(x[j * inner] - mx) / se;
	default:
		return x[j * inner] - mx - log(se);
	}
}

static eng_tensor *build_reduce(enum red_kind k, eng_tensor *x, int ax, bool keep)
{
	switch (k) {
	case R_MIN:
		return eng_min(x, &ax, 1, keep);
	case R_MEAN:
		return eng_mean(x, &ax, 1, keep);
	case R_VAR0:
		return eng_var(x, &ax, 1, keep, 0);
	case R_VAR1:
		return eng_var(x, &ax, 1, keep, 1);
	case R_STD1:
		return eng_std(x, &ax, 1, keep, 1);
	case R_LSE:
		return eng_logsumexp(x, ax, keep);
	case R_ARGMAX:
		return eng_argmax(x, ax, keep);
	case R_ARGMIN:
		return eng_argmin(x, ax, keep);
	case R_SOFTMAX:
		return eng_softmax(x, ax);
	default:
		return eng_log_softmax(x, ax);
	}
}

static void check_reductions(tu_batch *b, eng_ctx *ctx, tu_rng *r, int ndim, const int64_t *shape,
			     double q)
{
	double xv[256], want[256];
	eng_tensor *x = tu_quant(ctx, r, ENG_F32, ndim, shape, -3, 3, q, xv);
	for (int ax = -1; ax < ndim; ax++) {
		int a = ax < 0 ? ndim - 1 : ax;
		int64_t outer, n, inner;
		axis_dims(ndim, shape, a, &outer, &n, &inner);
		for (int k = R_MIN; k <= R_LOGSOFTMAX; k++) {
			bool keep = (k + ax) % 2 == 0;
			eng_tensor *y = build_reduce((enum red_kind)k, x, ax, keep);
			bool full = k >= R_SOFTMAX;
			int64_t cnt = 0;
			for (int64_t o = 0; o < outer; o++)
				for (int64_t j = 0; j < (full ? n : 1); j++)
					for (int64_t i = 0; i < inner; i++)
						want[cnt++] = direct_reduce((enum red_kind)k,
									    xv + o * n * inner + i,
									    n, inner, j);
			if (y) { /* the result's rank says whether keepdim was honoured */
				int want_nd = full || keep ? ndim : ndim - 1;
				ck_assert_msg(eng_ndim(y) == want_nd,
					      "%s axis %d keep %d: rank %d, want %d", red_names[k],
					      ax, keep, eng_ndim(y), want_nd);
				if (k == R_ARGMAX || k == R_ARGMIN)
					ck_assert_int_eq(eng_tensor_dtype(y), ENG_I32);
			}
			tu_batch_want(b, y, want, cnt, 1e-5, 1e-5,
				      "%s axis %d keep %d ndim %d q %g", red_names[k], ax, keep,
				      ndim, q);
			tu_batch_ref(b, y, 1e-6, 1e-6, "%s axis %d vs ref", red_names[k], ax);
		}
	}
}

START_TEST(reductions_direct)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {211};
	tu_batch *b = tu_batch_new(ctx);
	int64_t s47[2] = {4, 7}, s234[3] = {2, 3, 4};
	check_reductions(b, ctx, &r, 2, s47, 0.125);
	check_reductions(b, ctx, &r, 3, s234, 0.125);
	check_reductions(b, ctx, &r, 2, s47, 1); /* coarse values: many ties for argmax/argmin */
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

/* Multi-axis and all-axes forms, other dtypes (ref only), and numerically large inputs. */
START_TEST(reductions_more)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {212};
	tu_batch *b = tu_batch_new(ctx);
	int64_t s[3] = {3, 4, 5};
	double xv[60];
	eng_tensor *x = tu_quant(ctx, &r, ENG_F32, 3, s, -3, 3, 0.125, xv);
	int ax02[2] = {0, 2};
	double mn = INFINITY, sum = 0, ss = 0;
	for (int k = 0; k < 60; k++) {
		mn = fmin(mn, xv[k]);
		sum += xv[k];
	}
	for (int k = 0; k < 60; k++)
		ss += (xv[k] - sum / 60) * (xv[k] - sum / 60);
	tu_batch_want(b, eng_min(x, NULL, 0, false), &mn, 1, 0, 0, "min all");
	double mean = sum / 60, var = ss / 59, sd = sqrt(ss / 60);
	tu_batch_want(b, eng_mean(x, NULL, 0, false), &mean, 1, 1e-6, 1e-6, "mean all");
	tu_batch_want(b, eng_var(x, NULL, 0, false, 1), &var, 1, 1e-5, 1e-6, "var all");
	tu_batch_want(b, eng_std(x, NULL, 0, true, 0), &sd, 1, 1e-5, 1e-6, "std all keepdim");
	double w4[4];
	for (int j = 0; j < 4; j++) {
		double acc = 0;
		for (int i = 0; i < 3; i++)
			for (int k = 0; k < 5; k++)
				acc += xv[(i * 4 + j) * 5 + k];
		w4[j] = acc / 15;
	}
	tu_batch_want(b, eng_mean(x, ax02, 2, false), w4, 4, 1e-6, 1e-6, "mean axes 0,2");
	tu_batch_ref(b, eng_var(x, ax02, 2, true, 1), 1e-5, 1e-6, "var axes 0,2");
	/* large logits: softmax and logsumexp must not overflow */
	double big[4] = {1000, 1001, 1002, -1000}, lse = 1002 + log(exp(-2) + exp(-1) + 1 + 0);
	eng_tensor *bt = tu_from_doubles(ctx, ENG_F32, 1, (int64_t[]){4}, big);
	double sm[4] = {exp(-2) / exp(lse - 1002), exp(-1) / exp(lse - 1002), 1 / exp(lse - 1002),
			0};
	tu_batch_want(b, eng_logsumexp(bt, 0, false), &lse, 1, 1e-6, 1e-4, "logsumexp large");
	tu_batch_want(b, eng_softmax(bt, 0), sm, 4, 1e-5, 1e-7, "softmax large");
	/* other dtypes through the reference */
	static const eng_dtype dts[] = {ENG_F16, ENG_I32, ENG_U8};
	for (int d = 0; d < N_OF(dts); d++) {
		eng_dtype dt = dts[d];
		double lo = dt == ENG_U8 ? 0 : -3, q = eng_dtype_is_float(dt) ? 0.125 : 1;
		eng_tensor *y = tu_quant(ctx, &r, dt, 3, s, lo, 3, q, NULL);
		for (int k = R_MIN; k <= R_LOGSOFTMAX; k++)
			tu_batch_ref(b, build_reduce((enum red_kind)k, y, 1, true), 1e-2, 1e-2,
				     "%s %s", red_names[k], eng_dtype_name(dt));
	}
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

/* ---- movement ---- */

static void iota(double *v, int n)
{
	for (int k = 0; k < n; k++)
		v[k] = k;
}

/* Python's slice.indices: the elements of range(n)[start:stop:step] into out; returns count. */
static int64_t py_slice(int64_t n, int64_t start, int64_t stop, int64_t step, int64_t *out)
{
	int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? n : n - 1, cnt = 0;
	if (start < 0)
		start = start < -n ? lo : start + n;
	if (stop < 0)
		stop = stop < -n ? lo : stop + n;
	start = start < lo ? lo : start > hi ? hi : start;
	stop = stop < lo ? lo : stop > hi ? hi : stop;
	for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
		out[cnt++] = i;
	return cnt;
}

START_TEST(movement_direct)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_batch *b = tu_batch_new(ctx);
	double v[64], want[256];
	iota(v, 64);
	int64_t s234[3] = {2, 3, 4};
	eng_tensor *x = tu_from_doubles(ctx, ENG_F32, 3, s234, v);
	/* transpose(0, 2): (4, 3, 2) */
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 3; j++)
			for (int k = 0; k < 2; k++)
				want[(i * 3 + j) * 2 + k] = v[(k * 3 + j) * 4 + i];
	eng_tensor *t = eng_transpose(x, 0, -1);
	tu_batch_want(b, t, want, 24, 0, 0, "transpose 0,-1");
	ck_assert(t && eng_shape(t)[0] == 4 && eng_shape(t)[2] == 2);
	eng_tensor *fl = eng_flatten(x, 1, 2), *fa = eng_flatten(x, 0, -1);
	ck_assert(fl && eng_ndim(fl) == 2 && eng_shape(fl)[1] == 12);
	ck_assert(fa && eng_ndim(fa) == 1);
	tu_batch_want(b, fl, v, 24, 0, 0, "flatten 1,2");
	tu_batch_want(b, fa, v, 24, 0, 0, "flatten all");
	int64_t s213[3] = {2, 1, 3};
	eng_tensor *y = tu_from_doubles(ctx, ENG_I32, 3, s213, v);
	eng_tensor *sq = eng_squeeze(y, 1), *us = eng_unsqueeze(y, -1), *u0 = eng_unsqueeze(y, 0);
	ck_assert(sq && eng_ndim(sq) == 2 && eng_shape(sq)[1] == 3);
	ck_assert(us && eng_ndim(us) == 4 && eng_shape(us)[3] == 1);
	ck_assert(u0 && eng_ndim(u0) == 4 && eng_shape(u0)[0] == 1 && eng_shape(u0)[3] == 3);
	tu_batch_want(b, sq, v, 6, 0, 0, "squeeze");
	tu_batch_want(b, us, v, 6, 0, 0, "unsqueeze -1");
	/* slices along axis 1 of a (3, 10) tensor */
	int64_t s310[2] = {3, 10};
	eng_tensor *z = tu_from_doubles(ctx, ENG_I64, 2, s310, v);
	static const int64_t sl[][3] = {
		{2, 7, 1},     {0, 10, 3},
		{8, 1, -3},    {-3, INT64_MAX, 1},
		{-1, -11, -1}, {-100, 100, 2},
		{5, 5, 1},     {9, -100, -4},
		{3, -2, 2},    {INT64_MIN, INT64_MAX, 1},
	};
	for (int c = 0; c < N_OF(sl); c++) {
		int64_t idx[16], cnt = py_slice(10, sl[c][0], sl[c][1], sl[c][2], idx);
		for (int rr = 0; rr < 3; rr++)
			for (int64_t i = 0; i < cnt; i++)
				want[rr * cnt + i] = v[rr * 10 + idx[i]];
		eng_tensor *s = eng_slice(z, 1, sl[c][0], sl[c][1], sl[c][2]);
		if (s)
			ck_assert_msg(eng_shape(s)[1] == cnt, "slice %d: size %lld, want %lld", c,
				      (long long)eng_shape(s)[1], (long long)cnt);
		tu_batch_want(b, s, want, 3 * cnt, 0, 0, "slice [%lld:%lld:%lld]",
			      (long long)sl[c][0], (long long)sl[c][1], (long long)sl[c][2]);
	}
	{ /* slice on axis 0 with a negative axis number */
		int64_t idx[16], cnt = py_slice(3, -1, -4, -2, idx);
		for (int64_t i = 0; i < cnt; i++)
			for (int c = 0; c < 10; c++)
				want[i * 10 + c] = v[idx[i] * 10 + c];
		tu_batch_want(b, eng_slice(z, -2, -1, -4, -2), want, cnt * 10, 0, 0,
			      "slice axis -2");
	}
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(cat_stack_repeat)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_batch *b = tu_batch_new(ctx);
	double v[64], want[256];
	iota(v, 64);
	int64_t s23[2] = {2, 3}, s13[2] = {1, 3}, s43[2] = {4, 3}, s21[2] = {2, 1}, s03[2] = {0, 3};
	eng_tensor *a = tu_from_doubles(ctx, ENG_F32, 2, s23, v),
		   *c1 = tu_from_doubles(ctx, ENG_F32, 2, s13, v + 10);
	eng_tensor *c4 = tu_from_doubles(ctx, ENG_F32, 2, s43, v + 20),
		   *e = eng_zeros(ctx, ENG_F32, 2, s03);
	eng_tensor *c21 = tu_from_doubles(ctx, ENG_F32, 2, s21, v + 40);
	/* cat axis 0: rows of a, c1, e (empty), c4 */
	eng_tensor *l0[4] = {a, c1, e, c4};
	int n = 0;
	for (int k = 0; k < 6; k++)
		want[n++] = v[k];
	for (int k = 0; k < 3; k++)
		want[n++] = v[10 + k];
	for (int k = 0; k < 12; k++)
		want[n++] = v[20 + k];
	eng_tensor *cat0 = eng_cat(l0, 4, 0);
	ck_assert(cat0 && eng_shape(cat0)[0] == 7);
	tu_batch_want(b, cat0, want, n, 0, 0, "cat axis 0");
	/* cat axis -1: a | c21 | a */
	eng_tensor *l1[3] = {a, c21, a};
	n = 0;
	for (int r = 0; r < 2; r++) {
		for (int k = 0; k < 3; k++)
			want[n++] = v[r * 3 + k];
		want[n++] = v[40 + r];
		for (int k = 0; k < 3; k++)
			want[n++] = v[r * 3 + k];
	}
	tu_batch_want(b, eng_cat(l1, 3, -1), want, n, 0, 0, "cat axis -1");
	tu_batch_want(b, eng_cat(&a, 1, 0), v, 6, 0, 0, "cat of one");
	/* stack three (2,3) tensors on axes 0, 1, 2 */
	eng_tensor *p = tu_from_doubles(ctx, ENG_F32, 2, s23, v + 6),
		   *q = tu_from_doubles(ctx, ENG_F32, 2, s23, v + 12);
	eng_tensor *st[3] = {a, p, q};
	for (int ax = 0; ax < 3; ax++) {
		n = 0;
		for (int i0 = 0; i0 < (ax == 0 ? 3 : 2); i0++)
			for (int i1 = 0; i1 < (ax == 0 ? 2 : ax == 1 ? 3 : 3); i1++)
				for (int i2 = 0; i2 < (ax == 2 ? 3 : 3); i2++) {
					int which, rr, cc;
					if (ax == 0)
						which = i0, rr = i1, cc = i2;
					else if (ax == 1)
						which = i1, rr = i0, cc = i2;
					else
						which = i2, rr = i0, cc = i1;
					want[n++] = v[which * 6 + rr * 3 + cc];
				}
		eng_tensor *sk = eng_stack(st, 3, ax == 2 ? -1 : ax);
		ck_assert(sk && eng_ndim(sk) == 3 && eng_shape(sk)[ax] == 3);
		tu_batch_want(b, sk, want, n, 0, 0, "stack axis %d", ax);
	}
	/* repeat (tile) */
	int64_t rp[2] = {2, 3};
	n = 0;
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 9; j++)
			want[n++] = v[(i % 2) * 3 + j % 3];
	eng_tensor *rpt = eng_repeat(a, rp);
	ck_assert(rpt && eng_shape(rpt)[0] == 4 && eng_shape(rpt)[1] == 9);
	tu_batch_want(b, rpt, want, n, 0, 0, "repeat 2,3");
	int64_t rp1[2] = {1, 1};
	tu_batch_want(b, eng_repeat(a, rp1), v, 6, 0, 0, "repeat 1,1");
	int64_t rp0[2] = {0, 2};
	eng_tensor *r0 = eng_repeat(a, rp0);
	ck_assert(r0 && eng_numel(r0) == 0);
	/* other dtypes through the reference */
	static const eng_dtype dts[] = {ENG_BOOL, ENG_U8, ENG_I64, ENG_F16};
	tu_rng r = {221};
	for (int d = 0; d < N_OF(dts); d++) {
		eng_tensor *x = tu_quant(ctx, &r, dts[d], 2, s23, 0, 5, 1, NULL);
		eng_tensor *y = tu_quant(ctx, &r, dts[d], 2, s13, 0, 5, 1, NULL);
		eng_tensor *l[2] = {x, y}, *l2[2] = {x, x};
		tu_batch_ref(b, eng_cat(l, 2, 0), 0, 0, "cat %s", eng_dtype_name(dts[d]));
		tu_batch_ref(b, eng_stack(l2, 2, 1), 0, 0, "stack %s", eng_dtype_name(dts[d]));
		tu_batch_ref(b, eng_repeat(y, rp), 0, 0, "repeat %s", eng_dtype_name(dts[d]));
	}
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

/* Values computed by hand, independent of any code: a bug shared by the graph builders and the
 * reference cannot hide here. */
START_TEST(known_values)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_batch *b = tu_batch_new(ctx);
	int64_t n3 = 3, n4 = 4, n7 = 7;
	eng_tensor *v123 = tu_from_doubles(ctx, ENG_F32, 1, &n3, (double[]){1, 2, 3});
	tu_batch_want(b, eng_softmax(v123, 0), (double[]){0.0900305732, 0.2447284711, 0.6652409558},
		      3, 1e-6, 0, "softmax [1,2,3]");
	tu_batch_want(b, eng_log_softmax(v123, -1),
		      (double[]){-2.4076059644, -1.4076059644, -0.4076059644}, 3, 1e-6, 0,
		      "log_softmax [1,2,3]");
	tu_batch_want(b, eng_logsumexp(v123, 0, false), (double[]){3.4076059644}, 1, 1e-6, 0,
		      "logsumexp [1,2,3]");
	eng_tensor *tie = tu_from_doubles(ctx, ENG_F32, 1, &n4, (double[]){1, 3, 3, 2});
	tu_batch_want(b, eng_argmax(tie, 0, false), (double[]){1}, 1, 0, 0,
		      "argmax ties pick the first");
	eng_tensor *tie2 = tu_from_doubles(ctx, ENG_I32, 1, &n4, (double[]){2, 0, 5, 0});
	tu_batch_want(b, eng_argmin(tie2, 0, false), (double[]){1}, 1, 0, 0,
		      "argmin ties pick the first");
	eng_tensor *v1234 = tu_from_doubles(ctx, ENG_F32, 1, &n4, (double[]){1, 2, 3, 4});
	tu_batch_want(b, eng_mean(v1234, NULL, 0, false), (double[]){2.5}, 1, 0, 0, "mean");
	tu_batch_want(b, eng_var(v1234, NULL, 0, false, 1), (double[]){1.6666666667}, 1, 1e-6, 0,
		      "var corr 1");
	tu_batch_want(b, eng_var(v1234, NULL, 0, false, 0), (double[]){1.25}, 1, 1e-6, 0,
		      "var corr 0");
	tu_batch_want(b, eng_std(v1234, NULL, 0, false, 1), (double[]){1.2909944487}, 1, 1e-6, 0,
		      "std");
	tu_batch_want(b, eng_min(v1234, NULL, 0, false), (double[]){1}, 1, 0, 0, "min");
	eng_tensor *rv = tu_from_doubles(ctx, ENG_F32, 1, &n7,
					 (double[]){0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6});
	tu_batch_want(b, eng_round(rv), (double[]){0, 2, 2, -0.0, -2, 2, -3}, 7, 0, 0,
		      "round half even");
	tu_batch_want(b, eng_floor(rv), (double[]){0, 1, 2, -1, -2, 2, -3}, 7, 0, 0, "floor");
	tu_batch_want(b, eng_ceil(rv), (double[]){1, 2, 3, -0.0, -1, 3, -2}, 7, 0, 0, "ceil");
	eng_tensor *sg = tu_from_doubles(ctx, ENG_F32, 1, &n3, (double[]){-3, 0, 2});
	tu_batch_want(b, eng_sign(sg), (double[]){-1, 0, 1}, 3, 0, 0, "sign");
	tu_batch_want(b, eng_abs(sg), (double[]){3, 0, 2}, 3, 0, 0, "abs");
	tu_batch_want(b, eng_relu(sg), (double[]){0, 0, 2}, 3, 0, 0, "relu");
	eng_tensor *one = eng_scalar(ctx, ENG_F32, 1), *zero = eng_scalar(ctx, ENG_F32, 0);
	eng_tensor *m1 = eng_scalar(ctx, ENG_F32, -1);
	tu_batch_want(b, eng_gelu(one), (double[]){0.8411919906}, 1, 1e-6, 0, "gelu(1)");
	tu_batch_want(b, eng_sigmoid(zero), (double[]){0.5}, 1, 1e-7, 0, "sigmoid(0)");
	tu_batch_want(b, eng_softplus(zero), (double[]){0.6931471806}, 1, 1e-6, 0, "softplus(0)");
	tu_batch_want(b, eng_elu(m1, 1.0), (double[]){-0.6321205588}, 1, 1e-6, 0, "elu(-1)");
	tu_batch_want(b, eng_silu(one), (double[]){0.7310585786}, 1, 1e-6, 0, "silu(1)");
	tu_batch_want(b, eng_tanh(one), (double[]){0.7615941560}, 1, 1e-6, 0, "tanh(1)");
	tu_batch_want(b, eng_exp(one), (double[]){2.7182818285}, 1, 1e-6, 0, "exp(1)");
	tu_batch_want(b, eng_log(eng_scalar(ctx, ENG_F32, 10)), (double[]){2.302585093}, 1, 1e-6, 0,
		      "log(10)");
	tu_batch_want(b, eng_pow_s(eng_scalar(ctx, ENG_F32, -2), 3), (double[]){-8}, 1, 1e-6, 0,
		      "(-2)^3");
	tu_batch_want(b, eng_clamp(sg, -1, 1), (double[]){-1, 0, 1}, 3, 0, 0, "clamp");
	int64_t n10 = 10;
	double t10[10];
	iota(t10, 10);
	eng_tensor *ten = tu_from_doubles(ctx, ENG_I32, 1, &n10, t10);
	tu_batch_want(b, eng_slice(ten, 0, 8, 1, -3), (double[]){8, 5, 2}, 3, 0, 0,
		      "slice [8:1:-3]");
	tu_batch_want(b, eng_slice(ten, 0, -3, 100, 1), (double[]){7, 8, 9}, 3, 0, 0,
		      "slice [-3:100]");
	eng_tensor *p12 = tu_from_doubles(ctx, ENG_I32, 1, (int64_t[]){2}, (double[]){1, 2});
	tu_batch_want(b, eng_repeat(p12, (int64_t[]){3}), (double[]){1, 2, 1, 2, 1, 2}, 6, 0, 0,
		      "repeat [1,2]x3");
	eng_tensor *pair[2] = {p12, p12};
	tu_batch_want(b, eng_stack(pair, 2, 1), (double[]){1, 1, 2, 2}, 4, 0, 0, "stack axis 1");
	tu_batch_want(b, eng_cat(pair, 2, 0), (double[]){1, 2, 1, 2}, 4, 0, 0, "cat");
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

Suite *api_suite(void)
{
	const TTest *const tests[] = {
		math_float32,	 math_other_dtypes, pow_tensor,	      reductions_direct,
		reductions_more, movement_direct,   cat_stack_repeat, known_values,
	};
	return tu_suite("api", tests, N_OF(tests), TU_TIMEOUT);
}
