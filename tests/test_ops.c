/* test_ops.c: every low-level op of engine.h, realized on the CPU backend and compared with the
 * reference evaluator, over all applicable dtypes, broadcast, non-contiguous and edge shapes. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "suites.h"
#include "testutil.h"

static const eng_dtype all_dtypes[] = {ENG_BOOL, ENG_U8, ENG_I32, ENG_I64, ENG_F16, ENG_F32};
#define NDT    ((int)(sizeof(all_dtypes) / sizeof(all_dtypes[0])))
#define DN(dt) eng_dtype_name(dt)

/* What kind of values an input holds. Floats are quantized (multiples of 1/4) so that sums
 * are exact in any order and equal values occur; integers stay clear of accidental overflow
 * except where wrapping is the point. */
typedef enum gen_kind {
	GEN_ANY,     /* bool 0/1, uint8 0..255, int32 +-1000, int64 +-1e6, floats +-8 (f16 +-4) */
	GEN_POS,     /* strictly positive */
	GEN_DIVISOR, /* ints -10..10 (zero included); floats +-[0.5, 4] */
	GEN_SHIFT,   /* 0 .. 2*bits-1 */
	GEN_PROD,    /* small magnitudes whose products stay exact: {-2..2} / {+-0.5, +-1, +-2} */
	GEN_WIDE,    /* the whole range of the dtype (integers), floats +-1e4 */
} gen_kind;

static double gen_value(tu_rng *r, eng_dtype dt, gen_kind kind)
{
	bool fl = eng_dtype_is_float(dt);
	switch (kind) {
	case GEN_POS:
		return fl		? (double)tu_int(r, 1, 256) / 4
		       : dt == ENG_BOOL ? 1
					: (double)tu_int(r, 1, 100);
	case GEN_DIVISOR:
		if (fl)
			return (tu_int(r, 0, 1) ? -1 : 1) * (double)tu_int(r, 2, 16) / 4;
		return dt == ENG_U8	? (double)tu_int(r, 0, 10)
		       : dt == ENG_BOOL ? (double)tu_int(r, 0, 1)
					: (double)tu_int(r, -10, 10);
	case GEN_SHIFT:
		return (double)tu_int(r, 0, 2 * eng_dtype_bits(dt) - 1);
	case GEN_PROD:
		if (fl) {
			static const double p[] = {-2, -1, -0.5, 0.5, 1, 2};
			return p[tu_int(r, 0, 5)];
		}
		return dt == ENG_BOOL ? (double)tu_int(r, 0, 1)
		       : dt == ENG_U8 ? (double)tu_int(r, 0, 3)
				      : (double)tu_int(r, -2, 2);
	case GEN_WIDE:
		switch (dt) {
		case ENG_BOOL:
			return (double)tu_int(r, 0, 1);
		case ENG_U8:
			return (double)tu_int(r, 0, 255);
		case ENG_I32:
			return (double)tu_int(r, INT32_MIN, INT32_MAX);
		case ENG_I64:
			return (double)tu_int(r, -((int64_t)1 << 52), (int64_t)1 << 52);
		default:
			return tu_real(r, -1e4, 1e4);
		}
	default:
		switch (dt) {
		case ENG_BOOL:
			return (double)tu_int(r, 0, 1);
		case ENG_U8:
			return (double)tu_int(r, 0, 255);
		case ENG_I32:
			return (double)tu_int(r, -1000, 1000);
		case ENG_I64:
			return (double)tu_int(r, -1000000, 1000000);
		case ENG_F16:
			return (double)tu_int(r, -16, 16) / 4;
		default:
			return (double)tu_int(r, -32, 32) / 4;
		}
	}
}

static eng_tensor *gen(eng_ctx *ctx, tu_rng *r, eng_dtype dt, int ndim, const int64_t *shape,
		       gen_kind kind)
{
	int64_t n = 1;
	for (int d = 0; d < ndim; d++)
		n *= shape[d];
	double *v = malloc((n ? (size_t)n : 1) * sizeof(double));
	ck_assert(v != NULL);
	for (int64_t k = 0; k < n; k++)
		v[k] = gen_value(r, dt, kind);
	eng_tensor *t = tu_from_doubles(ctx, dt, ndim, shape, v);
	free(v);
	return t;
}

/* Shape pairs for binary ops: equal, broadcast one way and both ways, scalar, empty, odd. */
static const struct shape_pair {
	int na, nb;
	int64_t a[4], b[4];
} pairs[] = {
	{0, 0, {0}, {0}},
	{2, 2, {7, 13}, {7, 13}},
	{2, 1, {7, 13}, {13}},
	{3, 2, {3, 1, 5}, {4, 1}},
	{1, 0, {1}, {0}},
	{2, 1, {0, 5}, {5}},
	{4, 4, {2, 1, 3, 1}, {1, 2, 1, 4}},
};
#define NPAIRS ((int)(sizeof(pairs) / sizeof(pairs[0])))

typedef eng_tensor *(*bin_fn)(const eng_tensor *, const eng_tensor *);
enum { D_BOOL = 1, D_INT = 2, D_FLOAT = 4, D_ALL = 7 };

static const struct bin_op {
	const char *name;
	bin_fn fn;
	unsigned dtypes;
	gen_kind bkind; /* values of the right operand */
} bin_ops[] = {
	{"add", eng_add, D_ALL, GEN_ANY},
	{"sub", eng_sub, D_ALL, GEN_ANY},
	{"mul", eng_mul, D_ALL, GEN_ANY},
	{"maximum", eng_maximum, D_ALL, GEN_ANY},
	{"minimum", eng_minimum, D_ALL, GEN_ANY},
	{"lt", eng_lt, D_ALL, GEN_ANY},
	{"gt", eng_gt, D_ALL, GEN_ANY},
	{"le", eng_le, D_ALL, GEN_ANY},
	{"ge", eng_ge, D_ALL, GEN_ANY},
	{"eq", eng_eq, D_ALL, GEN_ANY},
	{"ne", eng_ne, D_ALL, GEN_ANY},
	{"idiv", eng_idiv, D_INT, GEN_DIVISOR},
	{"mod", eng_mod, D_INT, GEN_DIVISOR},
	{"and", eng_and, D_BOOL | D_INT, GEN_ANY},
	{"or", eng_or, D_BOOL | D_INT, GEN_ANY},
	{"xor", eng_xor, D_BOOL | D_INT, GEN_ANY},
	{"shl", eng_shl, D_INT, GEN_SHIFT},
	{"shr", eng_shr, D_INT, GEN_SHIFT},
	{"div", eng_div, D_FLOAT | D_INT, GEN_DIVISOR},
};

static unsigned dclass(eng_dtype dt)
{
	return dt == ENG_BOOL ? D_BOOL : eng_dtype_is_int(dt) ? D_INT : D_FLOAT;
}

/* All binary ops of one dtype class over all shape pairs, in one batch. */
static void binary_for(eng_dtype dt, uint64_t seed)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {seed};
	tu_batch *b = tu_batch_new(ctx);
	for (size_t o = 0; o < sizeof(bin_ops) / sizeof(bin_ops[0]); o++) {
		const struct bin_op *op = &bin_ops[o];
		if (!(op->dtypes & dclass(dt)))
			continue;
		for (int p = 0; p < NPAIRS; p++) {
			const struct shape_pair *sp = &pairs[p];
			eng_tensor *x = gen(ctx, &r, dt, sp->na, sp->a, GEN_ANY);
			eng_tensor *y = gen(ctx, &r, dt, sp->nb, sp->b, op->bkind);
			double tol =
				tu_tol(eng_dtype_is_float(dt) || op->fn == eng_div ? dt : ENG_I32);
			if (op->fn == eng_div && !eng_dtype_is_float(dt))
				tol = tu_tol(ENG_F32);
			tu_batch_ref(b, op->fn(x, y), tol, 0, "%s %s pair %d", op->name, DN(dt), p);
		}
	}
	tu_batch_check(b);
	tu_ctx_free(ctx);
}

START_TEST(binary_bool)
{
	binary_for(ENG_BOOL, 11);
}
END_TEST
START_TEST(binary_u8)
{
	binary_for(ENG_U8, 12);
}
END_TEST
START_TEST(binary_i32)
{
	binary_for(ENG_I32, 13);
}
END_TEST
START_TEST(binary_i64)
{
	binary_for(ENG_I64, 14);
}
END_TEST
START_TEST(binary_f16)
{
	binary_for(ENG_F16, 15);
}
END_TEST
START_TEST(binary_f32)
{
	binary_for(ENG_F32, 16);
}
END_TEST

/* float16 rounds after every op, exactly as the reference does, even where a compiler would
 * like to fuse the multiply and the add (gcc with AVX512-FP16 and -ffp-contract=fast). */
START_TEST(f16_rounds_every_op)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {31};
	tu_batch *b = tu_batch_new(ctx);
	int64_t s[2] = {9, 31};
	eng_tensor *h = tu_rand(ctx, &r, ENG_F16, 2, s, -4, 4), *g = tu_rand(ctx, &r, ENG_F16, 2, s, -4, 4);
	tu_batch_ref(b, eng_add(eng_mul(h, g), h), 0, 0, "h*g + h");
	tu_batch_ref(b, eng_sub(eng_add(eng_mul(h, g), h), eng_mul_s(g, 0.37)), 0, 0, "h*g + h - 0.37g");
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

/* Wrapping integer arithmetic, mixed-dtype promotion and the scalar helpers. */
START_TEST(binary_wrap_promote_scalar)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {21};
	tu_batch *b = tu_batch_new(ctx);
	int64_t s[2] = {5, 7};
	for (int i = 1; i < NDT; i++) {
		eng_dtype dt = all_dtypes[i];
		if (eng_dtype_is_float(dt))
			continue;
		eng_tensor *x = gen(ctx, &r, dt, 2, s, GEN_WIDE),
			   *y = gen(ctx, &r, dt, 2, s, GEN_WIDE);
		tu_batch_ref(b, eng_add(x, y), 0, 0, "wrap add %s", DN(dt));
		tu_batch_ref(b, eng_sub(x, y), 0, 0, "wrap sub %s", DN(dt));
		tu_batch_ref(b, eng_mul(x, y), 0, 0, "wrap mul %s", DN(dt));
		tu_batch_ref(b, eng_neg(x), 0, 0, "wrap neg %s", DN(dt));
		tu_batch_ref(b, eng_idiv(x, gen(ctx, &r, dt, 2, s, GEN_DIVISOR)), 0, 0,
			     "wide idiv %s", DN(dt));
		tu_batch_ref(b, eng_mod(x, gen(ctx, &r, dt, 2, s, GEN_DIVISOR)), 0, 0,
			     "wide mod %s", DN(dt));
		tu_batch_ref(b, eng_shr(x, gen(ctx, &r, dt, 2, s, GEN_SHIFT)), 0, 0, "wide shr %s",
			     DN(dt));
		tu_batch_ref(b, eng_shl(x, gen(ctx, &r, dt, 2, s, GEN_SHIFT)), 0, 0, "wide shl %s",
			     DN(dt));
	}
	/* INT_MIN / -1 and friends */
	int64_t n4 = 4;
	eng_tensor *mn = tu_from_doubles(ctx, ENG_I32, 1, &n4,
					 (double[]){-2147483648.0, -2147483648.0, 7, -7});
	eng_tensor *m1 = tu_from_doubles(ctx, ENG_I32, 1, &n4, (double[]){-1, 0, 0, -1});
	tu_batch_want(b, eng_idiv(mn, m1), (double[]){-2147483648.0, 0, 0, 7}, 4, 0, 0,
		      "idiv INT_MIN/-1, x/0");
	tu_batch_want(b, eng_mod(mn, m1), (double[]){0, 0, 0, 0}, 4, 0, 0, "mod INT_MIN%%-1, x%%0");
	/* every pair of dtypes promotes to the larger */
	for (int i = 0; i < NDT; i++)
		for (int j = 0; j < NDT; j++) {
			eng_tensor *x = gen(ctx, &r, all_dtypes[i], 2, s, GEN_ANY);
			eng_tensor *y = gen(ctx, &r, all_dtypes[j], 1, &s[1], GEN_ANY);
			eng_tensor *z = eng_add(x, y);
			ck_assert(z != NULL);
			ck_assert_int_eq(eng_tensor_dtype(z),
					 eng_dtype_promote(all_dtypes[i], all_dtypes[j]));
			tu_batch_ref(b, eng_mul(x, y), tu_tol(eng_tensor_dtype(z)), 0,
				     "promote %s*%s", DN(all_dtypes[i]), DN(all_dtypes[j]));
			tu_batch_ref(b, eng_lt(x, y), 0, 0, "promote %s<%s", DN(all_dtypes[i]),
				     DN(all_dtypes[j]));
		}
	/* scalar right-hand sides */
	for (int i = 1; i < NDT; i++) {
		eng_dtype dt = all_dtypes[i];
		eng_tensor *x = gen(ctx, &r, dt, 2, s, GEN_POS);
		double tol = tu_tol(eng_dtype_is_float(dt) ? dt : ENG_F32);
		tu_batch_ref(b, eng_add_s(x, 3), tol, 0, "add_s %s", DN(dt));
		tu_batch_ref(b, eng_add_s(x, 0.5), tol, 0, "add_s 0.5 %s", DN(dt));
		tu_batch_ref(b, eng_sub_s(x, 2), tol, 0, "sub_s %s", DN(dt));
		tu_batch_ref(b, eng_mul_s(x, -3), tol, 0, "mul_s %s", DN(dt));
		tu_batch_ref(b, eng_div_s(x, 4), tol, 0, "div_s %s", DN(dt));
		tu_batch_ref(b, eng_rsub_s(10, x), tol, 0, "rsub_s %s", DN(dt));
		/* negative scalars: x - (-2) must not render as "x--2" */
		tu_batch_ref(b, eng_sub_s(x, -2), tol, 0, "sub_s -2 %s", DN(dt));
		tu_batch_ref(b, eng_add_s(x, -3), tol, 0, "add_s -3 %s", DN(dt));
		tu_batch_ref(b, eng_rsub_s(-1, x), tol, 0, "rsub_s -1 %s", DN(dt));
		tu_batch_ref(b, eng_sub(eng_neg(x), eng_scalar(ctx, dt, -1)), tol, 0,
			     "-x - (-1) %s", DN(dt));
		tu_batch_ref(b, eng_sub(x, eng_neg(eng_scalar(ctx, dt, 4))), tol, 0,
			     "x - neg(4) %s", DN(dt));
		tu_batch_ref(b, eng_lt(x, eng_scalar(ctx, dt, -1)), 0, 0, "x < -1 %s", DN(dt));
	}
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

typedef eng_tensor *(*un_fn)(const eng_tensor *);
static const struct un_op {
	const char *name;
	un_fn fn;
	gen_kind kind;
	double ftol; /* relative tolerance for float32 results (float16 uses tu_tol) */
} un_ops[] = {
	{"exp2", eng_exp2, GEN_ANY, 2e-6},    {"log2", eng_log2, GEN_POS, 2e-6},
	{"sin", eng_sin, GEN_ANY, 2e-6},      {"sqrt", eng_sqrt, GEN_POS, 0},
	{"recip", eng_recip, GEN_DIVISOR, 0}, {"neg", eng_neg, GEN_ANY, 0},
	{"trunc", eng_trunc, GEN_ANY, 0},
};

static const struct {
	int n;
	int64_t s[4];
} un_shapes[] = {{0, {0}}, {2, {7, 13}}, {2, {0, 3}}, {3, {1, 1, 5}}};

START_TEST(unary_all)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {31};
	tu_batch *b = tu_batch_new(ctx);
	for (int i = 0; i < NDT; i++) {
		eng_dtype dt = all_dtypes[i];
		for (size_t o = 0; o < sizeof(un_ops) / sizeof(un_ops[0]); o++) {
			const struct un_op *op = &un_ops[o];
			if (op->fn == eng_neg && dt == ENG_BOOL)
				continue;
			for (size_t k = 0; k < sizeof(un_shapes) / sizeof(un_shapes[0]); k++) {
				eng_tensor *x =
					gen(ctx, &r, dt, un_shapes[k].n, un_shapes[k].s, op->kind);
				eng_tensor *y = op->fn(x);
				double tol =
					eng_tensor_dtype(y) == ENG_F16 ? tu_tol(ENG_F16) : op->ftol;
				tu_batch_ref(b, y, tol, 0, "%s %s shape %zu", op->name, DN(dt), k);
			}
		}
	}
	/* special values: inf, nan, signed zero, large arguments */
	int64_t n8 = 8;
	double sv[8] = {INFINITY, -INFINITY, NAN, 0.0, -0.0, 1e30, -1e-30, 100};
	for (int i = 4; i < NDT; i++) {
		eng_dtype dt = all_dtypes[i];
		eng_tensor *x = tu_from_doubles(ctx, dt, 1, &n8, sv);
		double tol = tu_tol(dt) * 2;
		tu_batch_ref(b, eng_exp2(x), tol, 0, "exp2 special %s", DN(dt));
		tu_batch_ref(b, eng_log2(x), tol, 0, "log2 special %s", DN(dt));
		tu_batch_ref(b, eng_sqrt(x), tol, 0, "sqrt special %s", DN(dt));
		tu_batch_ref(b, eng_recip(x), tol, 0, "recip special %s", DN(dt));
		tu_batch_ref(b, eng_neg(x), 0, 0, "neg special %s", DN(dt));
		tu_batch_ref(b, eng_trunc(x), 0, 0, "trunc special %s", DN(dt));
	}
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

/* |got - want| in units in the last place of want as a float (want's ulp at the smallest normal
 * exponent below it). */
static double ulps(float got, double want)
{
	int e;
	frexp(want, &e);
	double ulp = ldexp(1.0, (e - 24 < -149 ? -149 : e - 24));
	return fabs((double)got - want) / ulp;
}

/* exp2 and log2 densely over float32's range against libm's double, the results' specials
 * exact: the CPU renders both as its own polynomials (backends/cpu/dialect.c), and every device
 * must stay within a few ulps (OpenCL's full profile allows 3 for either). */
START_TEST(exp2_log2_dense)
{
	eng_ctx *ctx = tu_ctx_new();
	enum { N = 1 << 18 };
	static float x[N], y[N], lx[N], ly[N];
	for (int i = 0; i < N; i++) {
		x[i] = (float)(-155.0 + 285.0 * i / (N - 1)); /* exp2: from below the subnormals to overflow */
		float u = (float)i / N; /* log2: every binade, each across its mantissas */
		lx[i] = (float)ldexp(1.0 + u, (int)(i % 277) - 149);
	}
	x[0] = NAN, x[1] = INFINITY, x[2] = -INFINITY, x[3] = 0.0f, x[4] = -0.0f, x[5] = 128.0f, x[6] = 1.0f;
	lx[0] = NAN, lx[1] = INFINITY, lx[2] = 0.0f, lx[3] = -0.0f, lx[4] = -1.0f, lx[5] = 1.0f, lx[6] = 2.0f;
	int64_t n = N;
	eng_tensor *a = eng_from_data(ctx, ENG_F32, 1, &n, x), *la = eng_from_data(ctx, ENG_F32, 1, &n, lx);
	ck_assert(eng_tensor_read(eng_exp2(a), y, sizeof(y)) == ENG_OK);
	ck_assert(eng_tensor_read(eng_log2(la), ly, sizeof(ly)) == ENG_OK);
	ck_assert(isnan(y[0]) && y[1] == INFINITY && y[2] == 0.0f && y[3] == 1.0f && y[4] == 1.0f);
	ck_assert(y[5] == INFINITY);
	ck_assert(isnan(ly[0]) && ly[1] == INFINITY && ly[2] == -INFINITY && ly[3] == -INFINITY && isnan(ly[4]));
	ck_assert(ly[5] == 0.0f);
	/* subnormals only on the CPU: an OpenCL device may flush them (CL_FP_DENORM is optional) */
	const char *dev = getenv("DEV");
	bool sub = !dev || !strcmp(dev, "CPU");
	for (int i = 7; i < N; i++) {
		double e = exp2((double)x[i]), l = log2((double)lx[i]);
		if (e > FLT_MAX)
			ck_assert_msg(y[i] == INFINITY, "exp2(%.9g) = %.9g, want inf", x[i], y[i]);
		else if (sub || e >= FLT_MIN)
			ck_assert_msg(ulps(y[i], e) <= 3, "exp2(%.9g) = %.9g, want %.9g", x[i], y[i], e);
		if (sub || lx[i] >= FLT_MIN)
			ck_assert_msg(ulps(ly[i], l) <= 3, "log2(%.9g) = %.9g, want %.9g", lx[i], ly[i], l);
	}
	tu_ctx_free(ctx);
}
END_TEST

/* Values exercising every conversion rule: rounding, truncation, saturation, NaN, wrapping. */
static const double cast_f32[] = {0,	     -0.0, 0.5,	  -0.5,	 1.5,  -1.9, 2.5,   100.7,
				  255.9,     256,  -129,  3e9,	 -3e9, 1e20, -1e20, INFINITY,
				  -INFINITY, NAN,  65504, 65520, 1e-8, 70000};
static const double cast_f16[] = {0,	 -0.0,	 0.5,	   -1.9,      255.5, 256,   -129,
				  65504, -65504, INFINITY, -INFINITY, NAN,   1000.5};
static const double cast_i64[] = {
	0,    1,     -1,   255, 256, -129, 2147483648.0, -2147483649.0, 1099511627779.0,
	1e15, -1e15, 2048, 2049};
static const double cast_i32[] = {0,	    1,	   -1,	  255, 256, -129, 2147483647, -2147483648.0,
				  16777217, 70000, -70000};
static const double cast_u8[] = {0, 1, 127, 128, 255};
static const double cast_b[] = {0, 1};

START_TEST(cast_all_pairs)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_batch *b = tu_batch_new(ctx);
	static const struct {
		eng_dtype dt;
		const double *v;
		int64_t n;
	} src[] = {
		{ENG_F32, cast_f32, sizeof(cast_f32) / sizeof(double)},
		{ENG_F16, cast_f16, sizeof(cast_f16) / sizeof(double)},
		{ENG_I64, cast_i64, sizeof(cast_i64) / sizeof(double)},
		{ENG_I32, cast_i32, sizeof(cast_i32) / sizeof(double)},
		{ENG_U8, cast_u8, sizeof(cast_u8) / sizeof(double)},
		{ENG_BOOL, cast_b, sizeof(cast_b) / sizeof(double)},
	};
	for (size_t i = 0; i < sizeof(src) / sizeof(src[0]); i++) {
		eng_tensor *x = tu_from_doubles(ctx, src[i].dt, 1, &src[i].n, src[i].v);
		for (int j = 0; j < NDT; j++)
			tu_batch_ref(b, eng_cast(x, all_dtypes[j]), 0, 0, "cast %s->%s",
				     DN(src[i].dt), DN(all_dtypes[j]));
		/* a cast of a non-contiguous view: flipped */
		int ax = 0;
		tu_batch_ref(b, eng_cast(eng_flip(x, &ax, 1), ENG_F32), 0, 0, "cast flip %s->f32",
			     DN(src[i].dt));
	}
	/* a cast of a constant follows the same rules as a cast of data (constants may be folded) */
	for (size_t i = 0; i < 3; i++) {
		for (int64_t k = 0; k < src[i].n; k++) {
			int64_t one = 1;
			eng_tensor *xb = tu_from_doubles(ctx, src[i].dt, 1, &one, &src[i].v[k]);
			eng_tensor *xc = eng_full(ctx, src[i].dt, 1, &one, src[i].v[k]);
			for (int j = 0; j < NDT; j++) {
				ref_array w;
				ck_assert(ref_tensor(eng_cast(xb, all_dtypes[j]), &w));
				double want = ref_get(&w, 0);
				ref_free(&w);
				tu_batch_want(b, eng_cast(xc, all_dtypes[j]), &want, 1, 0, 0,
					      "cast const %s %g->%s", DN(src[i].dt), src[i].v[k],
					      DN(all_dtypes[j]));
			}
		}
	}
	/* bitcasts between the 4-byte types, both ways, on random bits */
	tu_rng r = {41};
	int64_t n = 64;
	eng_tensor *xi = gen(ctx, &r, ENG_I32, 1, &n, GEN_WIDE);
	eng_tensor *xf = gen(ctx, &r, ENG_F32, 1, &n, GEN_WIDE);
	tu_batch_ref(b, eng_bitcast(xi, ENG_F32), 0, 0, "bitcast i32->f32");
	tu_batch_ref(b, eng_bitcast(xf, ENG_I32), 0, 0, "bitcast f32->i32");
	tu_batch_ref(b, eng_bitcast(eng_add(xi, xi), ENG_F32), 0, 0, "bitcast (i32+i32)->f32");
	tu_batch_want(
		b,
		eng_bitcast(tu_from_doubles(ctx, ENG_F32, 1, (int64_t[]){2}, (double[]){1, -2}),
			    ENG_I32),
		(double[]){1065353216, -1073741824}, 2, 0, 0, "bitcast known");
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(where_all)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {51};
	tu_batch *b = tu_batch_new(ctx);
	int64_t sc[2] = {7, 1}, sa[2] = {1, 13}, s3[3] = {2, 3, 4}, s34[2] = {3, 4};
	for (int i = 0; i < NDT; i++) {
		eng_dtype dt = all_dtypes[i];
		eng_tensor *c = gen(ctx, &r, ENG_BOOL, 2, sc, GEN_ANY);
		eng_tensor *a = gen(ctx, &r, dt, 2, sa, GEN_ANY);
		eng_tensor *s = eng_scalar(ctx, dt, 1);
		tu_batch_ref(b, eng_where(c, a, s), 0, 0, "where bcast %s", DN(dt));
		eng_tensor *c3 = gen(ctx, &r, ENG_BOOL, 3, s3, GEN_ANY);
		eng_tensor *x3 = gen(ctx, &r, dt, 3, s3, GEN_ANY),
			   *y2 = gen(ctx, &r, dt, 2, s34, GEN_ANY);
		tu_batch_ref(b, eng_where(c3, x3, y2), 0, 0, "where 3d %s", DN(dt));
		/* a non-bool condition is cast to bool; mixed value dtypes promote */
		tu_batch_ref(b, eng_where(x3, y2, eng_scalar(ctx, ENG_I32, -1)), 0, 0,
			     "where cond %s", DN(dt));
		tu_batch_ref(b, eng_where(eng_lt(x3, y2), x3, y2), 0, 0, "where lt %s", DN(dt));
	}
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

/* ---- reductions ---- */

static const struct {
	int n;
	int64_t s[4];
} red_shapes[] = {{2, {7, 13}}, {4, {2, 3, 4, 5}}, {2, {0, 4}},
		  {0, {0}},	{2, {1, 1}},	   {3, {3, 1, 6}}};

typedef eng_tensor *(*red_fn)(const eng_tensor *, const int *, int, bool);

static void reduce_for(eng_dtype dt, uint64_t seed)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {seed};
	tu_batch *b = tu_batch_new(ctx);
	static const struct {
		const char *name;
		red_fn fn;
		gen_kind kind;
	} ops[] = {
		{"sum", eng_sum, GEN_ANY}, {"max", eng_max, GEN_ANY}, {"prod", eng_prod, GEN_PROD}};
	for (size_t o = 0; o < 3; o++) {
		for (size_t k = 0; k < sizeof(red_shapes) / sizeof(red_shapes[0]); k++) {
			int nd = red_shapes[k].n;
			eng_tensor *x = gen(ctx, &r, dt, nd, red_shapes[k].s, ops[o].kind);
			/* all axes, each axis, first+last, negative axis */
			tu_batch_ref(b, ops[o].fn(x, NULL, 0, false), 0, 0, "%s all %s shape %zu",
				     ops[o].name, DN(dt), k);
			for (int a = 0; a < nd; a++) {
				bool keep = (a + k) % 2;
				tu_batch_ref(b, ops[o].fn(x, &a, 1, keep), 0, 0,
					     "%s axis %d keep %d %s shape %zu", ops[o].name, a,
					     keep, DN(dt), k);
			}
			if (nd >= 2) {
				int ax[2] = {0, -1};
				tu_batch_ref(b, ops[o].fn(x, ax, 2, true), 0, 0,
					     "%s axes 0,-1 %s shape %zu", ops[o].name, DN(dt), k);
			}
		}
	}
	/* wrapping sums and products of wide integers */
	if (!eng_dtype_is_float(dt) && dt != ENG_BOOL) {
		int64_t s[2] = {4, 9};
		eng_tensor *w = gen(ctx, &r, dt, 2, s, GEN_WIDE);
		int ax = 1;
		tu_batch_ref(b, eng_sum(w, &ax, 1, false), 0, 0, "wide sum %s", DN(dt));
		tu_batch_ref(b, eng_prod(w, &ax, 1, false), 0, 0, "wide prod %s", DN(dt));
		tu_batch_ref(b, eng_max(w, NULL, 0, false), 0, 0, "wide max %s", DN(dt));
	}
	/* a reduce of a reduce, and of a non-contiguous view */
	int64_t s3[3] = {4, 5, 6};
	eng_tensor *x = gen(ctx, &r, dt, 3, s3, GEN_ANY);
	int a0 = 0, a2 = 2, perm[3] = {2, 0, 1};
	tu_batch_ref(b, eng_max(eng_sum(x, &a2, 1, true), &a0, 1, false), 0, 0, "max(sum) %s",
		     DN(dt));
	tu_batch_ref(b, eng_sum(eng_flip(eng_permute(x, perm), &a0, 1), &a2, 1, false), 0, 0,
		     "sum(flip(permute)) %s", DN(dt));
	tu_batch_check(b);
	tu_ctx_free(ctx);
}

START_TEST(reduce_bool)
{
	reduce_for(ENG_BOOL, 61);
}
END_TEST
START_TEST(reduce_u8)
{
	reduce_for(ENG_U8, 62);
}
END_TEST
START_TEST(reduce_i32)
{
	reduce_for(ENG_I32, 63);
}
END_TEST
START_TEST(reduce_i64)
{
	reduce_for(ENG_I64, 64);
}
END_TEST
START_TEST(reduce_f16)
{
	reduce_for(ENG_F16, 65);
}
END_TEST
START_TEST(reduce_f32)
{
	reduce_for(ENG_F32, 66);
}
END_TEST

/* ---- movement ---- */

/* Views of a realized (3,4,5) buffer, alone and chained, then made contiguous or combined. */
static void movement_views(tu_batch *b, eng_ctx *ctx, tu_rng *r, eng_dtype dt)
{
	int64_t s[3] = {3, 4, 5};
	eng_tensor *x = gen(ctx, r, dt, 3, s, GEN_ANY);
	int p201[3] = {2, 0, 1}, p102[3] = {1, 0, 2}, f02[2] = {0, 2}, f1 = 1;
	int64_t pads[3][2] = {{0, 1}, {2, 0}, {1, 1}}, rng[3][2] = {{1, 3}, {0, 4}, {2, 3}};
	int64_t s512[2] = {5, 12}, s60[1] = {60}, s2_30[2] = {2, 30}, s315[3] = {3, 1, 5};
	int64_t s2345[4] = {2, 3, 4, 5}, s14_1[3] = {1, 4, 1};
	const char *n = DN(dt);
	tu_batch_ref(b, eng_reshape(x, 2, s512), 0, 0, "reshape %s", n);
	tu_batch_ref(b, eng_reshape(x, 1, s60), 0, 0, "reshape flat %s", n);
	tu_batch_ref(b, eng_permute(x, p201), 0, 0, "permute %s", n);
	tu_batch_ref(b, eng_pad(x, pads), 0, 0, "pad %s", n);
	tu_batch_ref(b, eng_shrink(x, rng), 0, 0, "shrink %s", n);
	tu_batch_ref(b, eng_flip(x, f02, 2), 0, 0, "flip %s", n);
	eng_tensor *x315 = gen(ctx, r, dt, 3, s315, GEN_ANY);
	tu_batch_ref(b, eng_expand(x315, 3, s), 0, 0, "expand %s", n);
	tu_batch_ref(b, eng_expand(gen(ctx, r, dt, 3, s14_1, GEN_ANY), 4, s2345), 0, 0,
		     "expand+rank %s", n);
	/* chains */
	eng_tensor *pf = eng_permute(eng_flip(eng_pad(x, pads), &f1, 1), p102);
	tu_batch_ref(b, pf, 0, 0, "permute(flip(pad)) %s", n);
	tu_batch_ref(b, eng_reshape(eng_permute(x, p201), 2, s2_30), 0, 0, "reshape(permute) %s",
		     n);
	tu_batch_ref(b, eng_pad(eng_flip(eng_shrink(x, rng), f02, 2), pads), 0, 0,
		     "pad(flip(shrink)) %s", n);
	int64_t back[3][2] = {{0, 3}, {2, 6}, {1, 6}};
	tu_batch_ref(b, eng_shrink(eng_pad(x, pads), back), 0, 0, "shrink(pad) identity %s", n);
	int64_t part[3][2] = {{2, 4}, {0, 3}, {0, 7}};
	tu_batch_ref(b, eng_shrink(eng_pad(x, pads), part), 0, 0, "shrink(pad) partial %s", n);
	tu_batch_ref(b, eng_reshape(eng_pad(x, pads), 2, (int64_t[]){4, 42}), 0, 0,
		     "reshape(pad) %s", n);
	int64_t r1[3][2] = {{1, 2}, {0, 4}, {0, 5}};
	tu_batch_ref(b, eng_expand(eng_shrink(x, r1), 3, s), 0, 0, "expand(shrink) %s", n);
	tu_batch_ref(b, eng_contiguous(eng_permute(x, p201)), 0, 0, "contiguous(permute) %s", n);
	tu_batch_ref(b, eng_reshape(eng_contiguous(eng_flip(x, &f1, 1)), 1, s60), 0, 0,
		     "reshape(contiguous(flip)) %s", n);
	/* elementwise ops on views: the ops read through the index transforms */
	if (dt != ENG_BOOL) {
		tu_batch_ref(b, eng_add(eng_flip(x, f02, 2), eng_expand(x315, 3, s)), tu_tol(dt), 0,
			     "flip + expand %s", n);
		tu_batch_ref(b, eng_mul(eng_permute(x, p102), eng_permute(x, p102)), tu_tol(dt), 0,
			     "permute * permute %s", n);
		tu_batch_ref(b, eng_neg(eng_pad(x, pads)), 0, 0, "neg(pad) %s", n);
	}
	tu_batch_ref(b, eng_cast(eng_shrink(x, rng), ENG_F32), 0, 0, "cast(shrink) %s", n);
	tu_batch_ref(b, eng_maximum(eng_pad(x, pads), eng_flip(eng_pad(x, pads), f02, 2)), 0, 0,
		     "max(pad, flip(pad)) %s", n);
}

START_TEST(movement_all)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {71};
	tu_batch *b = tu_batch_new(ctx);
	for (int i = 0; i < NDT; i++)
		movement_views(b, ctx, &r, all_dtypes[i]);
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

/* 0-d scalars, size-1 axes, empty tensors, odd sizes. */
START_TEST(edge_shapes)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {81};
	tu_batch *b = tu_batch_new(ctx);
	for (int i = 0; i < NDT; i++) {
		eng_dtype dt = all_dtypes[i];
		const char *n = DN(dt);
		eng_tensor *s = gen(ctx, &r, dt, 0, NULL, GEN_ANY);
		int64_t s111[3] = {1, 1, 1}, s23[2] = {2, 3}, s03[2] = {0, 3}, s713[2] = {7, 13};
		tu_batch_ref(b, eng_reshape(s, 3, s111), 0, 0, "scalar reshape %s", n);
		tu_batch_ref(b, eng_expand(s, 2, s23), 0, 0, "scalar expand %s", n);
		tu_batch_ref(b, eng_max(s, NULL, 0, false), 0, 0, "scalar max %s", n);
		tu_batch_ref(b, eng_contiguous(eng_expand(s, 2, s23)), 0, 0,
			     "scalar expand contiguous %s", n);
		eng_tensor *e = gen(ctx, &r, dt, 2, s03, GEN_ANY);
		int64_t pe[2][2] = {{1, 1}, {0, 2}};
		tu_batch_ref(b, eng_pad(e, pe), 0, 0, "pad of empty %s", n);
		tu_batch_ref(b, eng_reshape(e, 3, (int64_t[]){3, 0, 5}), 0, 0, "reshape empty %s",
			     n);
		int ax0 = 0;
		tu_batch_ref(b, eng_sum(e, &ax0, 1, false), 0, 0, "sum over empty axis %s", n);
		tu_batch_ref(b, eng_max(e, &ax0, 1, true), 0, 0, "max over empty axis %s", n);
		tu_batch_ref(b, eng_prod(e, NULL, 0, false), 0, 0, "prod of empty %s", n);
		eng_tensor *o = gen(ctx, &r, dt, 2, s713, GEN_ANY);
		int64_t to_empty[2][2] = {{3, 3}, {0, 13}};
		tu_batch_ref(b, eng_shrink(o, to_empty), 0, 0, "shrink to empty %s", n);
		tu_batch_ref(b, eng_sum(eng_shrink(o, to_empty), NULL, 0, false), 0, 0,
			     "sum of shrunk empty %s", n);
		int64_t s1171[4] = {1, 1, 7, 1};
		eng_tensor *u = gen(ctx, &r, dt, 4, s1171, GEN_ANY);
		int perm[4] = {3, 2, 1, 0};
		tu_batch_ref(b, eng_permute(u, perm), 0, 0, "permute size-1 axes %s", n);
		tu_batch_ref(b, eng_maximum(u, eng_reshape(o, 4, (int64_t[]){7, 1, 1, 13})), 0, 0,
			     "broadcast size-1 %s", n);
	}
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

/* Creation functions against known values. */
START_TEST(creation)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_batch *b = tu_batch_new(ctx);
	int64_t s23[2] = {2, 3};
	for (int i = 0; i < NDT; i++) {
		eng_dtype dt = all_dtypes[i];
		tu_batch_want(b, eng_full(ctx, dt, 2, s23, 1), (double[]){1, 1, 1, 1, 1, 1}, 6, 0,
			      0, "full %s", DN(dt));
		tu_batch_want(b, eng_zeros(ctx, dt, 2, s23), (double[]){0, 0, 0, 0, 0, 0}, 6, 0, 0,
			      "zeros %s", DN(dt));
		tu_batch_want(b, eng_ones(ctx, dt, 1, s23), (double[]){1, 1}, 2, 0, 0, "ones %s",
			      DN(dt));
		tu_batch_want(b, eng_scalar(ctx, dt, 1), (double[]){1}, 1, 0, 0, "scalar %s",
			      DN(dt));
		tu_batch_want(b, eng_eye(ctx, dt, 3), (double[]){1, 0, 0, 0, 1, 0, 0, 0, 1}, 9, 0,
			      0, "eye %s", DN(dt));
		if (dt == ENG_BOOL)
			continue;
		tu_batch_want(b, eng_index(ctx, dt, 2, s23, 1), (double[]){0, 1, 2, 0, 1, 2}, 6, 0,
			      0, "index %s", DN(dt));
		tu_batch_want(b, eng_index(ctx, dt, 2, s23, -2), (double[]){0, 0, 0, 1, 1, 1}, 6, 0,
			      0, "index -2 %s", DN(dt));
		tu_batch_want(b, eng_arange(ctx, dt, 2, 11, 3), (double[]){2, 5, 8}, 3, 0, 0,
			      "arange %s", DN(dt));
		tu_batch_want(b, eng_full_like(eng_zeros(ctx, dt, 1, s23), 7), (double[]){7, 7}, 2,
			      0, 0, "full_like %s", DN(dt));
	}
	tu_batch_want(b, eng_arange(ctx, ENG_F32, 0, 1, 0.25), (double[]){0, 0.25, 0.5, 0.75}, 4, 0,
		      0, "arange frac");
	tu_batch_want(b, eng_arange(ctx, ENG_I32, 5, 0, -2), (double[]){5, 3, 1}, 3, 0, 0,
		      "arange down");
	tu_batch_want(b, eng_full(ctx, ENG_I32, 1, (int64_t[]){2}, -7), (double[]){-7, -7}, 2, 0, 0,
		      "full -7");
	tu_batch_want(b, eng_full(ctx, ENG_F16, 1, (int64_t[]){1}, 0.1),
		      (double[]){0.0999755859375}, 1, 0, 0, "full f16 rounds");
	eng_tensor *a0 = eng_arange(ctx, ENG_F32, 3, 3, 1);
	ck_assert(a0 != NULL);
	ck_assert_int_eq(eng_numel(a0), 0);
	eng_tensor *x = eng_empty(ctx, ENG_F32, 2, s23);
	ck_assert(x != NULL);
	ck_assert_int_eq(eng_numel(x), 6);
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

/* rand/randn: reproducible per seed, in range, plausible moments. */
START_TEST(random_creation)
{
	eng_ctx *ctx = tu_ctx_new();
	int64_t n = 4096;
	eng_manual_seed(ctx, 42);
	eng_tensor *u1 = eng_rand(ctx, ENG_F32, 1, &n), *g1 = eng_randn(ctx, ENG_F32, 1, &n);
	eng_manual_seed(ctx, 42);
	eng_tensor *u2 = eng_rand(ctx, ENG_F32, 1, &n);
	eng_tensor *u3 = eng_rand(ctx, ENG_F32, 1, &n); /* the counter moved on: different */
	eng_tensor *h = eng_rand(ctx, ENG_F16, 2, (int64_t[]){8, 8});
	eng_tensor *all[5] = {u1, g1, u2, u3, h};
	tu_batch *b = tu_batch_new(ctx);
	for (int i = 0; i < 5; i++)
		tu_batch_ref(b, all[i], 1e-6, 1e-6, "rand %d", i);
	tu_batch_check(b);
	double *a = tu_read(u1), *c = tu_read(u2), *d = tu_read(u3), *g = tu_read(g1);
	double sum = 0, gsum = 0, gsq = 0;
	int same = 0;
	for (int64_t k = 0; k < n; k++) {
		ck_assert(a[k] >= 0 && a[k] < 1);
		ck_assert(a[k] == c[k]);
		same += a[k] == d[k];
		sum += a[k];
		gsum += g[k];
		gsq += g[k] * g[k];
		ck_assert(isfinite(g[k]));
	}
	ck_assert_int_lt(same, 10);
	ck_assert(fabs(sum / n - 0.5) < 0.03);
	ck_assert(fabs(gsum / n) < 0.08);
	ck_assert(fabs(gsq / n - 1) < 0.1);
	free(a);
	free(c);
	free(d);
	free(g);
	tu_ctx_free(ctx);
}
END_TEST

/* assign: value written into the target's buffer, with views of the target on the right. */
START_TEST(assign_ops)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {91};
	int64_t s[2] = {4, 4}, s4[1] = {4};
	for (int i = 1; i < NDT; i++) {
		eng_dtype dt = all_dtypes[i];
		tu_batch *b = tu_batch_new(ctx);
		eng_tensor *x = gen(ctx, &r, dt, 2, s, GEN_ANY);
		eng_tensor *y = gen(ctx, &r, dt, 2, s, GEN_ANY);
		eng_tensor *z = gen(ctx, &r, dt, 2, s, GEN_ANY);
		eng_tensor *w = gen(ctx, &r, dt, 2, s, GEN_ANY);
		int f0 = 0, p10[2] = {1, 0};
		ck_assert(eng_assign(x, eng_add(x, eng_scalar(ctx, dt, 1))) == x);
		tu_batch_ref(b, x, tu_tol(dt), 0, "assign x+1 %s", DN(dt));
		ck_assert(eng_assign(y, eng_flip(y, &f0, 1)) == y);
		tu_batch_ref(b, y, 0, 0, "assign flip(y) %s", DN(dt));
		ck_assert(eng_assign(z, eng_permute(z, p10)) == z);
		tu_batch_ref(b, z, 0, 0, "assign transpose(z) %s", DN(dt));
		ck_assert(eng_assign(w, gen(ctx, &r, dt, 1, s4, GEN_ANY)) ==
			  w); /* broadcast value */
		tu_batch_ref(b, w, 0, 0, "assign broadcast %s", DN(dt));
		/* a tensor built on the assigned x, realized in the same batch */
		tu_batch_ref(b, eng_mul(x, eng_scalar(ctx, dt, 2)), tu_tol(dt), 0,
			     "use of assigned %s", DN(dt));
		tu_batch_check(b);
		/* the assigned buffer now holds the value: a second assign builds on it */
		double *before = tu_read(x);
		ck_assert(eng_assign(x, eng_sub(x, eng_scalar(ctx, dt, 1))) == x);
		double *after = tu_read(x);
		for (int k = 0; k < 16; k++) {
			double want = before[k] - 1;
			if (dt == ENG_U8) /* wraps */
				want = (double)(uint8_t)((int64_t)before[k] - 1);
			ck_assert_msg(after[k] == want,
				      "%s: second assign element %d: got %g, want %g", DN(dt), k,
				      after[k], want);
		}
		free(before);
		free(after);
	}
	tu_ctx_free(ctx);
}
END_TEST

/* Several outputs sharing inputs realized together, and realizing twice is stable. */
START_TEST(realize_shared)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {101};
	int64_t s[2] = {6, 5};
	eng_tensor *x = gen(ctx, &r, ENG_F32, 2, s, GEN_ANY),
		   *y = gen(ctx, &r, ENG_F32, 2, s, GEN_ANY);
	eng_tensor *xy = eng_mul(x, y);
	int a1 = 1;
	eng_tensor *outs[4] = {eng_add(xy, x), eng_sum(xy, &a1, 1, true),
			       eng_max(eng_sub(xy, y), NULL, 0, false), eng_contiguous(xy)};
	tu_batch *b = tu_batch_new(ctx);
	for (int i = 0; i < 4; i++)
		tu_batch_ref(b, outs[i], 1e-6, 1e-6, "shared output %d", i);
	tu_batch_check(b);
	/* already realized: reading again gives the same, and builds on realized values work */
	b = tu_batch_new(ctx);
	tu_batch_ref(b, outs[0], 1e-6, 1e-6, "again");
	tu_batch_ref(b, eng_add(outs[1], outs[2]), 1e-6, 1e-6, "on realized");
	tu_batch_check(b);
	double v = eng_item(eng_sum(x, NULL, 0, false));
	ck_assert(isfinite(v));
	/* the inputs' handles are freed before realizing: the graph keeps their nodes alive */
	eng_tensor *p = gen(ctx, &r, ENG_F32, 2, s, GEN_ANY),
		   *q = gen(ctx, &r, ENG_I32, 2, s, GEN_ANY);
	eng_tensor *pq = eng_add(eng_mul(p, q), eng_flip(p, (int[]){1}, 1));
	b = tu_batch_new(ctx);
	tu_batch_ref(b, pq, 1e-6, 1e-6, "sources freed");
	tu_batch_ref(b, eng_sum(pq, NULL, 0, false), 1e-6, 1e-6, "sources freed, sum");
	eng_tensor_free(p);
	eng_tensor_free(q);
	/* the same tensor twice in one realize */
	tu_batch_ref(b, pq, 1e-6, 1e-6, "listed twice");
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

/* Kernels of the same structure with different constants, shapes, dtypes and buffers, realized
 * one after another in one context: a compiled-kernel cache must not confuse them. */
START_TEST(kernel_reuse)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {131};
	int64_t s1[2] = {7, 13}, s2[2] = {13, 7}, s3[2] = {7, 14};
	eng_tensor *x = gen(ctx, &r, ENG_F32, 2, s1, GEN_ANY),
		   *x2 = gen(ctx, &r, ENG_F32, 2, s1, GEN_ANY);
	eng_tensor *y = gen(ctx, &r, ENG_F32, 2, s2, GEN_ANY),
		   *z = gen(ctx, &r, ENG_F32, 2, s3, GEN_ANY);
	eng_tensor *xi = gen(ctx, &r, ENG_I32, 2, s1, GEN_ANY);
	for (int k = 1; k <= 3; k++) {
		eng_tensor *outs[] = {
			eng_add_s(x, k),  eng_add_s(x2, k),
			eng_add_s(y, k),  eng_add_s(z, k),
			eng_add_s(xi, k), eng_sum(eng_add_s(x, k), (int[]){1}, 1, false)};
		for (int i = 0; i < 6; i++) { /* one realize each */
			tu_batch *b = tu_batch_new(ctx);
			tu_batch_ref(b, outs[i], 0, 0, "reuse k %d output %d", k, i);
			tu_batch_check(b);
		}
	}
	tu_ctx_free(ctx);
}
END_TEST

/* float16 results round to float16 after every op, fused or not: the answer must not depend on
 * how the kernel keeps intermediates. */
START_TEST(float16_rounding)
{
	eng_ctx *ctx = tu_ctx_new();
	int64_t n2 = 2;
	eng_tensor *a = tu_from_doubles(ctx, ENG_F16, 1, &n2, (double[]){2048, 482});
	eng_tensor *one = eng_scalar(ctx, ENG_F16, 1);
	tu_batch *b = tu_batch_new(ctx);
	tu_batch_want(b, eng_sub(eng_add(a, one), a), (double[]){0, 1}, 2, 0, 0, "(a + 1) - a");
	tu_batch_want(b, eng_sqrt(eng_mul(a, a)), (double[]){INFINITY, INFINITY}, 2, 0, 0,
		      "sqrt(a*a) overflows");
	int ax = 0;
	tu_batch_want(b, eng_sum(eng_mul_s(a, 40), &ax, 1, false), (double[]){INFINITY}, 1, 0, 0,
		      "sum of overflowed products");
	tu_batch_ref(b, eng_mul_s(eng_mul_s(a, 1.0 / 3), 3), 0, 0, "(a/3)*3");
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

/* Scopes free their tensors' handles; kept tensors and graphs built on freed handles live on. */
START_TEST(scopes)
{
	eng_ctx *ctx = tu_ctx_new();
	int64_t s[1] = {4};
	size_t live0 = eng_graph_live_nodes(ctx->graph);
	eng_scope_begin(ctx);
	eng_tensor *x = tu_from_doubles(ctx, ENG_F32, 1, s, (double[]){1, 2, 3, 4});
	eng_tensor *kept = eng_keep(eng_mul_s(eng_add_s(x, 1), 2));
	eng_scope_begin(ctx);
	for (int i = 0; i < 10; i++)
		eng_exp(eng_add_s(x, i)); /* garbage */
	eng_scope_end(ctx);
	eng_scope_end(ctx);
	tu_batch *b = tu_batch_new(ctx);
	tu_batch_want(b, kept, (double[]){4, 6, 8, 10}, 4, 0, 0, "kept tensor");
	tu_batch_check(b);
	eng_tensor_free(kept);
	ck_assert_uint_eq(eng_graph_live_nodes(ctx->graph), live0);
	tu_ctx_free(ctx);
}
END_TEST

/* Sizes large enough to be split across threads (more threads than cores), odd extents. */
START_TEST(large_shapes)
{
	eng_ctx_opts o;
	char err[256];
	eng_ctx_opts_default(&o);
	o.debug = tu_debug();
	o.backend_opts = "CPU.threads=3";
	eng_ctx *ctx = tu_ctx_track(eng_ctx_create(&o, err, sizeof(err)));
	ck_assert_msg(ctx != NULL, "%s", err);
	tu_rng r = {111};
	tu_batch *b = tu_batch_new(ctx);
	int64_t s[2] = {513, 1031}, si[2] = {600, 701}, sl[2] = {1000, 999}, sh[2] = {300, 301};
	eng_tensor *x = gen(ctx, &r, ENG_F32, 2, s, GEN_ANY),
		   *y = gen(ctx, &r, ENG_F32, 1, &s[1], GEN_ANY);
	int a0 = 0, a1 = 1, p10[2] = {1, 0};
	tu_batch_ref(b, eng_add(x, y), 0, 0, "large broadcast add");
	tu_batch_ref(b, eng_sum(x, &a0, 1, false), 1e-6, 1e-6, "large sum axis 0");
	tu_batch_ref(b, eng_sum(x, &a1, 1, true), 1e-6, 1e-6, "large sum axis 1");
	tu_batch_ref(b, eng_sum(x, NULL, 0, false), 1e-6, 1e-3, "large sum all");
	tu_batch_ref(b, eng_max(eng_mul(x, y), NULL, 0, false), 0, 0, "large max all");
	tu_batch_ref(b, eng_contiguous(eng_permute(x, p10)), 0, 0, "large transpose");
	eng_tensor *xi = gen(ctx, &r, ENG_I32, 2, si, GEN_ANY);
	tu_batch_ref(b, eng_sum(xi, &a1, 1, false), 0, 0, "large int32 sum");
	tu_batch_ref(b, eng_max(gen(ctx, &r, ENG_I64, 2, sl, GEN_WIDE), &a0, 1, false), 0, 0,
		     "large int64 max");
	eng_tensor *h = gen(ctx, &r, ENG_F16, 2, sh, GEN_ANY);
	tu_batch_ref(b, eng_add(h, eng_flip(h, &a0, 1)), 0, 0, "large f16 add flip");
	/* a matmul-shaped broadcast product and reduction */
	int64_t sa[3] = {64, 1, 128}, sb[3] = {1, 96, 128};
	eng_tensor *ma = gen(ctx, &r, ENG_F32, 3, sa, GEN_ANY),
		   *mb = gen(ctx, &r, ENG_F32, 3, sb, GEN_ANY);
	int a2 = 2;
	tu_batch_ref(b, eng_sum(eng_mul(ma, mb), &a2, 1, false), 1e-6, 1e-6, "large matmul-like");
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

/* Long fused chains and many inputs in one kernel. */
START_TEST(long_chains)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {121};
	tu_batch *b = tu_batch_new(ctx);
	int64_t s[2] = {9, 11};
	eng_tensor *acc = gen(ctx, &r, ENG_F32, 2, s, GEN_ANY);
	for (int i = 0; i < 40; i++) { /* 40 different inputs added in */
		eng_tensor *in = gen(ctx, &r, ENG_F32, 2, s, GEN_ANY);
		acc = i % 3 ? eng_add(acc, in) : eng_maximum(acc, in);
	}
	tu_batch_ref(b, acc, 1e-6, 1e-6, "40 inputs");
	eng_tensor *c = gen(ctx, &r, ENG_F32, 2, s, GEN_ANY);
	for (int i = 0; i < 200; i++) /* a 200-op chain of one input */
		c = i % 2 ? eng_sin(c) : eng_add_s(c, 0.5);
	tu_batch_ref(b, c, 1e-5, 1e-5, "200-op chain");
	eng_tensor *ic = gen(ctx, &r, ENG_I64, 2, s, GEN_WIDE);
	for (int i = 0; i < 10; i++)
		ic = eng_xor(eng_mul_s(ic, 3), eng_shr(ic, eng_scalar(ctx, ENG_I64, 7)));
	tu_batch_ref(b, ic, 0, 0, "int64 hash chain");
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST


/* c = c + c, 60 times: a chain of diamonds with 2^60 paths. Lowering visits each node once,
 * not once per path; done per path it would never finish and the test's timeout fails it
 * (no wall-clock assertion: the machine's speed does not decide the result). */
START_TEST(shared_subgraph_depth)
{
	eng_ctx *ctx = tu_ctx_new();
	int64_t s[2] = {3, 5};
	eng_tensor *c = eng_contiguous(eng_ones(ctx, ENG_F32, 2, s));
	for (int i = 0; i < 60; i++)
		c = eng_add(c, c);
	ck_assert_int_eq(eng_realize(&c, 1), ENG_OK);
	double want[15];
	for (int k = 0; k < 15; k++)
		want[k] = 1152921504606846976.0; /* 2^60, exact in float32 */
	tu_batch *b = tu_batch_new(ctx);
	tu_batch_want(b, c, want, 15, 0, 0, "2^60");
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

Suite *ops_suite(void)
{
	const TTest *const tests[] = {
		binary_bool,
		binary_u8,
		binary_i32,
		binary_i64,
		binary_f16,
		binary_f32, f16_rounds_every_op,
		binary_wrap_promote_scalar,
		unary_all, exp2_log2_dense,
		cast_all_pairs,
		where_all,
		reduce_bool,
		reduce_u8,
		reduce_i32,
		reduce_i64,
		reduce_f16,
		reduce_f32,
		movement_all,
		edge_shapes,
		creation,
		random_creation,
		assign_ops,
		realize_shared,
		large_shapes,
		long_chains,
		shared_subgraph_depth,
		kernel_reuse,
		scopes,
		float16_rounding,
	};
	return tu_suite("ops", tests, (int)(sizeof(tests) / sizeof(tests[0])), TU_TIMEOUT);
}
