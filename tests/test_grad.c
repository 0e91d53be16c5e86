/* test_grad.c: autograd. For every differentiable op and Tensor-API function, backward on
 * loss = sum(f(inputs) * W) is checked against central differences of the float64 reference. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"
#include "testutil.h"

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define S(...)	((int64_t[]){__VA_ARGS__})

/* ---- the gradient checker ----
 * Each case builds loss = sum(out * W) with W a fixed random weight of out's shape (so every
 * output element matters), runs eng_backward and keeps a handle on each input's gradient.
 * The expected gradient d loss / d x_i = (L(x + h e_i) - L(x - h e_i)) / 2h comes from the
 * reference evaluator in float64 on the loss graph with x's node overridden, so no device
 * buffer is touched. All gradients of a test are realized together (one schedule, one
 * compile) when it ends. */

#define FD_STEP 1e-3 /* relative step of the central differences */
/* Tolerance of a float32 gradient: rtol * (|want| + max |want|) + GC_ATOL, rtol = GC_RTOL unless
 * a test sets another (float16 inputs). The float32 engine agrees with float64 differences to
 * about 5e-6, so GC_RTOL leaves a wide margin and still catches a gradient 0.1% off. */
#define GC_RTOL 1e-4
#define GC_ATOL 1e-5

typedef struct gc {
	eng_ctx *ctx;
	tu_rng rng;
	tu_batch *batch;
	double rtol;
	char report[4096]; /* failures found while building (reported after the batch) */
	size_t used;
	int nfail;
} gc;

static void gc_init(gc *g, uint64_t seed)
{
	memset(g, 0, sizeof(*g));
	g->ctx = tu_ctx_new();
	g->rng.s = seed;
	g->rtol = GC_RTOL;
	g->batch = tu_batch_new(g->ctx);
}

static void gc_fail(gc *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void gc_fail(gc *g, const char *fmt, ...)
{
	va_list ap;
	g->nfail++;
	if (g->used >= sizeof(g->report) - 1)
		return;
	va_start(ap, fmt);
	int w = vsnprintf(g->report + g->used, sizeof(g->report) - g->used, fmt, ap);
	va_end(ap);
	size_t room = sizeof(g->report) - g->used;
	if (w > 0)
		g->used += (size_t)w < room ? (size_t)w : room - 1;
}

/* Realize and compare every gradient of the test, then free the context. */
#define gc_done(g) gc_done_at((g), __FILE__, __LINE__)
static void gc_done_at(gc *g, const char *file, int line)
{
	tu_batch_check_at(g->batch, file, line);
	ck_assert_msg(g->nfail == 0, "%s:%d: %d gradient checks failed before realizing:%s", file,
		      line, g->nfail, g->report);
	tu_ctx_free(g->ctx);
}

static int64_t numel_of(int ndim, const int64_t *shape)
{
	int64_t n = 1;
	for (int d = 0; d < ndim; d++)
		n *= shape[d];
	return n;
}

/* How input values are drawn: uniform in [lo, hi]; |x| uniform in [lo, hi] with a random sign
 * (away from the kinks of relu, abs, ...); or distinct values spread over [lo, hi] at least
 * (hi - lo) / (3 n) apart (no ties for max). */
typedef enum draw { UNIFORM, AWAY, DISTINCT } draw;

static void draw_values(gc *g, draw how, int64_t n, double lo, double hi, double *v)
{
	for (int64_t k = 0; k < n; k++) {
		if (how == DISTINCT) {
			double at = (double)k + 0.35 + 0.3 * tu_real(&g->rng, 0, 1);
			v[k] = lo + (hi - lo) * at / (double)n;
		} else {
			v[k] = tu_real(&g->rng, lo, hi);
			if (how == AWAY && tu_next(&g->rng) & 1)
				v[k] = -v[k];
		}
	}
	if (how == DISTINCT) /* shuffle */
		for (int64_t k = n - 1; k > 0; k--) {
			int64_t j = tu_int(&g->rng, 0, k);
			double t = v[k];
			v[k] = v[j];
			v[j] = t;
		}
}

/* A realized input of dtype dt that does not require grad. */
static eng_tensor *input_as(gc *g, eng_dtype dt, draw how, int ndim, const int64_t *shape,
			    double lo, double hi)
{
	int64_t n = numel_of(ndim, shape);
	double *v = malloc((size_t)(n ? n : 1) * sizeof(double));
	ck_assert(v != NULL);
	draw_values(g, how, n, lo, hi, v);
	eng_tensor *t = tu_from_doubles(g->ctx, dt, ndim, shape, v);
	free(v);
	ck_assert_msg(t != NULL, "input: %s", eng_errmsg(g->ctx));
	return t;
}

/* A realized float32 input that does not require grad. */
static eng_tensor *input(gc *g, draw how, int ndim, const int64_t *shape, double lo, double hi)
{
	return input_as(g, ENG_F32, how, ndim, shape, lo, hi);
}

/* The same, requiring grad. */
static eng_tensor *param(gc *g, draw how, int ndim, const int64_t *shape, double lo, double hi)
{
	eng_tensor *t = input(g, how, ndim, shape, lo, hi);
	ck_assert(eng_set_requires_grad(t, true) == ENG_OK);
	return t;
}

/* A realized float32 input holding v, requiring grad. */
static eng_tensor *param_vals(gc *g, int ndim, const int64_t *shape, const double *v)
{
	eng_tensor *t = tu_from_doubles(g->ctx, ENG_F32, ndim, shape, v);
	ck_assert(t != NULL && eng_set_requires_grad(t, true) == ENG_OK);
	return t;
}

/* A realized int32 tensor with values in [lo, hi]. */
static eng_tensor *ints(gc *g, int ndim, const int64_t *shape, int64_t lo, int64_t hi)
{
	eng_tensor *t = tu_rand(g->ctx, &g->rng, ENG_I32, ndim, shape, (double)lo, (double)hi);
	ck_assert(t != NULL);
	return t;
}

/* Random non-zero multiples of 1/32 in [-1, 1] of t's shape: exact in float16 too. */
static eng_tensor *weights(gc *g, const eng_tensor *t)
{
	int nd = eng_ndim(t);
	int64_t n = eng_numel(t);
	double *v = malloc((size_t)(n ? n : 1) * sizeof(double));
	ck_assert(v != NULL);
	for (int64_t k = 0; k < n; k++) {
		int64_t q = tu_int(&g->rng, 1, 32);
		v[k] = (tu_next(&g->rng) & 1 ? q : -q) / 32.0;
	}
	eng_tensor *w = tu_from_doubles(g->ctx, ENG_F32, nd, eng_shape(t), v);
	free(v);
	return w;
}

/* The float64 value of a node, as a malloc'ed array (NULL if the reference cannot). */
static double *ref_values(const eng_node *n, const ref_override *ov, int nov, double *scalar)
{
	ref_opts o = {.f64 = true, .over = ov, .nover = nov};
	ref_array a;
	if (!ref_eval_opts(n, &o, &a))
		return NULL;
	double *v = malloc((size_t)(a.numel ? a.numel : 1) * sizeof(double));
	for (int64_t k = 0; v && k < a.numel; k++)
		v[k] = ref_get(&a, k);
	if (v && scalar)
		*scalar = v[0];
	ref_free(&a);
	return v;
}

/* Central differences of the scalar loss with respect to each element of x (caller frees). */
static double *finite_diff(const eng_tensor *loss, const eng_tensor *x)
{
	const eng_node *ln = eng_tensor_node(loss), *xn = eng_tensor_node(x);
	int64_t n = eng_numel(x);
	double *v = ref_values(xn, NULL, 0, NULL);
	double *fd = malloc((size_t)(n ? n : 1) * sizeof(double));
	ref_override ov = {xn, v};
	bool ok = v && fd;
	for (int64_t k = 0; ok && k < n; k++) {
		double x0 = v[k], h = FD_STEP * fmax(1.0, fabs(x0)), lp = 0, lm = 0;
		v[k] = x0 + h;
		double *rp = ref_values(ln, &ov, 1, &lp);
		v[k] = x0 - h;
		double *rm = ref_values(ln, &ov, 1, &lm);
		v[k] = x0;
		ok = rp && rm;
		fd[k] = (lp - lm) / (2 * h);
		free(rp);
		free(rm);
	}
	free(v);
	if (!ok) {
		free(fd);
		return NULL;
	}
	return fd;
}

/* Queue a gradient (a tensor in the current scope) for comparison with want * scale. */
static void expect_grad(gc *g, eng_tensor *grad, const double *want, int64_t n, double scale,
			const char *label, int i)
{
	double *w = malloc((size_t)(n ? n : 1) * sizeof(double)), mx = 0;
	ck_assert(w != NULL);
	for (int64_t k = 0; k < n; k++) {
		w[k] = want[k] * scale;
		mx = fmax(mx, fabs(w[k]));
	}
	/* a handle of our own in the test's scope: x's gradient may be cleared afterwards */
	eng_tensor *h = eng_keep(eng_cast(grad, eng_tensor_dtype(grad)));
	tu_batch_want(g->batch, h, w, n, g->rtol, g->rtol * mx + GC_ATOL, "%s: d/dx%d", label, i);
	free(w);
}

/* loss = sum(out * W) (built in the current scope); NULL if out is NULL. */
static eng_tensor *weighted_loss(gc *g, const eng_tensor *out)
{
	return out ? eng_sum(eng_mul(out, weights(g, out)), NULL, 0, false) : NULL;
}

/* Check the gradients of sum(out * W) with respect to xs[0..n) (all requiring grad). */
static void check(gc *g, const char *label, eng_tensor *out, int n, eng_tensor *const *xs)
{
	eng_ctx *ctx = g->ctx;
	eng_scope_begin(ctx);
	eng_tensor *loss = weighted_loss(g, out);
	if (!loss) {
		gc_fail(g, "\n  [%s] build failed: %s", label, eng_errmsg(ctx));
		eng_clear_error(ctx);
		eng_scope_end(ctx);
		return;
	}
	for (int i = 0; i < n; i++)
		eng_zero_grad(xs[i]);
	if (eng_backward(loss) != ENG_OK) {
		gc_fail(g, "\n  [%s] backward failed: %s", label, eng_errmsg(ctx));
		eng_clear_error(ctx);
	} else {
		for (int i = 0; i < n; i++) {
			eng_tensor *grad = eng_grad(xs[i]);
			double *fd = finite_diff(loss, xs[i]);
			if (!grad)
				gc_fail(g, "\n  [%s] input %d got no gradient", label, i);
			else if (!fd)
				gc_fail(g,
					"\n  [%s] input %d: the reference cannot evaluate the loss",
					label, i);
			else
				expect_grad(g, grad, fd, eng_numel(xs[i]), 1.0, label, i);
			free(fd);
			eng_zero_grad(xs[i]);
		}
	}
	eng_scope_end(ctx);
}

#define CHECK(g, label, out, ...)                                              \
	check((g), (label), (out), N_OF(((eng_tensor *const[]){__VA_ARGS__})), \
	      (eng_tensor *const[]){__VA_ARGS__})

/* ---- low-level ops ---- */

START_TEST(grad_unary)
{
	gc g;
	gc_init(&g, 11);
	const int64_t *shapes[] = {S(3, 4), S(5), NULL};
	const int ndims[] = {2, 1, 0};
	char l[64];
	for (int s = 0; s < 3; s++) {
		int nd = ndims[s];
		const int64_t *sh = shapes[s];
		eng_tensor *x = param(&g, UNIFORM, nd, sh, -2, 2);
		/* p positive: log2, sqrt, recip */
		eng_tensor *p = param(&g, UNIFORM, nd, sh, 0.5, 3);
		snprintf(l, sizeof(l), "exp2 %dd", nd);
		CHECK(&g, l, eng_exp2(x), x);
		snprintf(l, sizeof(l), "log2 %dd", nd);
		CHECK(&g, l, eng_log2(p), p);
		snprintf(l, sizeof(l), "sin %dd", nd);
		CHECK(&g, l, eng_sin(x), x);
		snprintf(l, sizeof(l), "sqrt %dd", nd);
		CHECK(&g, l, eng_sqrt(p), p);
		snprintf(l, sizeof(l), "recip %dd", nd);
		CHECK(&g, l, eng_recip(p), p);
		snprintf(l, sizeof(l), "neg %dd", nd);
		CHECK(&g, l, eng_neg(x), x);
		snprintf(l, sizeof(l), "cast f32->f16->f32 %dd", nd);
		CHECK(&g, l, eng_cast(eng_cast(x, ENG_F16), ENG_F32), x);
		snprintf(l, sizeof(l), "cast f32->f16 %dd", nd);
		CHECK(&g, l, eng_cast(x, ENG_F16), x);
	}
	/* non-contiguous views of the input: permuted, strided slice, flipped */
	eng_tensor *x = param(&g, UNIFORM, 2, S(3, 4), 0.5, 2);
	CHECK(&g, "log2 of permuted", eng_log2(eng_transpose(x, 0, 1)), x);
	CHECK(&g, "sqrt of strided slice", eng_sqrt(eng_slice(x, 1, 0, 4, 2)), x);
	CHECK(&g, "sin of flip", eng_sin(eng_flip(x, (int[]){0}, 1)), x);
	CHECK(&g, "chain exp2(sin(recip))", eng_exp2(eng_sin(eng_recip(x))), x);
	/* float16 inputs: ops round to float16, the gradient is float16 too */
	eng_tensor *h = input_as(&g, ENG_F16, UNIFORM, 2, S(3, 4), 0.5, 2);
	eng_tensor *hb = input_as(&g, ENG_F16, UNIFORM, 2, S(1, 4), 0.5, 2);
	ck_assert(eng_set_requires_grad(h, true) == ENG_OK &&
		  eng_set_requires_grad(hb, true) == ENG_OK);
	g.rtol = 5e-3;
	CHECK(&g, "float16 log2", eng_log2(h), h);
	CHECK(&g, "float16 mul broadcast", eng_mul(h, hb), h, hb);
	CHECK(&g, "float16 cast to float32", eng_exp2(eng_cast(h, ENG_F32)), h);
	g.rtol = GC_RTOL;
	gc_done(&g);
}
END_TEST

START_TEST(grad_binary)
{
	gc g;
	gc_init(&g, 12);
	/* shapes of (a, b): equal, broadcast both ways, vector against matrix, scalar */
	const struct {
		int na, nb;
		int64_t sa[3], sb[3];
	} sh[] = {
		{2, 2, {3, 4}, {3, 4}},
		{2, 2, {3, 1}, {1, 4}},
		{1, 2, {4}, {3, 4}},
		{0, 3, {0}, {2, 3, 2}},
	};
	char l[64];
	for (int s = 0; s < N_OF(sh); s++) {
		eng_tensor *a = param(&g, UNIFORM, sh[s].na, sh[s].sa, -2, 2);
		eng_tensor *b = param(&g, UNIFORM, sh[s].nb, sh[s].sb, -2, 2);
		eng_tensor *bp = param(&g, AWAY, sh[s].nb, sh[s].sb, 0.5, 2); /* divisor */
		snprintf(l, sizeof(l), "add #%d", s);
		CHECK(&g, l, eng_add(a, b), a, b);
		snprintf(l, sizeof(l), "sub #%d", s);
		CHECK(&g, l, eng_sub(a, b), a, b);
		snprintf(l, sizeof(l), "mul #%d", s);
		CHECK(&g, l, eng_mul(a, b), a, b);
		snprintf(l, sizeof(l), "div #%d", s);
		CHECK(&g, l, eng_div(a, bp), a, bp);
		/* maximum without ties: b shifted by +-0.5 from a everywhere */
		double *av = tu_read(a);
		int64_t na = eng_numel(a), nb = eng_numel(b);
		double *mv = malloc(sizeof(double) * (size_t)nb);
		ck_assert(mv != NULL);
		for (int64_t k = 0; k < nb; k++)
			mv[k] = av[na == nb ? k : 0] + (tu_next(&g.rng) & 1 ? 0.5 : -0.5);
		snprintf(l, sizeof(l), "maximum #%d", s);
		if (na == nb || na == 1) { /* equal shapes or a scalar a: no ties by construction */
			eng_tensor *m = param_vals(&g, sh[s].nb, sh[s].sb, mv);
			CHECK(&g, l, eng_maximum(a, m), a, m);
		}
		free(av);
		free(mv);
		snprintf(l, sizeof(l), "scalar ops #%d", s);
		CHECK(&g, l, eng_rsub_s(2.0, eng_div_s(eng_mul_s(eng_add_s(a, 1.5), 3), 2)), a);
	}
	/* maximum with broadcasting: every pair at least 0.5 apart */
	eng_tensor *a = param_vals(&g, 2, S(3, 1), (double[]){1.5, 0.5, 2.5});
	eng_tensor *b = param_vals(&g, 2, S(1, 4), (double[]){2, 0, 3, 1});
	CHECK(&g, "maximum (3,1) (1,4)", eng_maximum(a, b), a, b);
	/* where: gradient to both branches (broadcast), none to the condition */
	bool cv[12];
	for (int k = 0; k < 12; k++)
		cv[k] = (tu_next(&g.rng) & 1) != 0;
	eng_tensor *c = eng_from_data(g.ctx, ENG_BOOL, 2, S(3, 4), cv);
	eng_tensor *wa = param(&g, UNIFORM, 2, S(3, 4), -2, 2);
	eng_tensor *wb = param(&g, UNIFORM, 2, S(1, 4), -2, 2);
	eng_tensor *wk = param(&g, AWAY, 2, S(3, 4), 0.1, 2);
	CHECK(&g, "where", eng_where(c, wa, wb), wa, wb);
	CHECK(&g, "where(x > 0, x*x, -x)",
	      eng_where(eng_gt(wk, eng_scalar(g.ctx, ENG_F32, 0)), eng_mul(wk, wk), eng_neg(wk)),
	      wk);
	/* a float used by a compare only gets no gradient through it */
	eng_tensor *ref = param(&g, UNIFORM, 2, S(3, 4), -2, 2);
	CHECK(&g, "where with compare", eng_where(eng_lt(ref, wb), wa, wb), wa, wb);
	eng_scope_begin(g.ctx);
	eng_tensor *loss = weighted_loss(&g, eng_where(eng_lt(ref, wb), wa, wb));
	ck_assert(eng_backward(loss) == ENG_OK);
	ck_assert_msg(eng_grad(ref) == NULL, "a tensor used only in a compare got a gradient");
	eng_zero_grad(wa);
	eng_zero_grad(wb);
	eng_scope_end(g.ctx);
	gc_done(&g);
}
END_TEST

START_TEST(grad_reduce)
{
	gc g;
	gc_init(&g, 13);
	const struct {
		int axes[3], naxes; /* naxes 0: all axes */
		bool keep;
	} rd[] = {
		{{0}, 1, false},       {{1}, 1, true},	{{-1}, 1, false}, {{0, 2}, 2, true},
		{{0, 1, 2}, 3, false}, {{0}, 0, false}, {{0}, 0, true},
	};
	char l[64];
	for (int i = 0; i < N_OF(rd); i++) {
		eng_tensor *x = param(&g, UNIFORM, 3, S(2, 3, 4), -2, 2);
		eng_tensor *d = param(&g, DISTINCT, 3, S(2, 3, 4), -3, 3);
		eng_tensor *p = param(&g, AWAY, 3, S(2, 3, 4), 0.6, 1.4);
		snprintf(l, sizeof(l), "sum #%d", i);
		CHECK(&g, l, eng_sum(x, rd[i].axes, rd[i].naxes, rd[i].keep), x);
		snprintf(l, sizeof(l), "max #%d", i);
		CHECK(&g, l, eng_max(d, rd[i].axes, rd[i].naxes, rd[i].keep), d);
		snprintf(l, sizeof(l), "prod #%d", i);
		CHECK(&g, l, eng_prod(p, rd[i].axes, rd[i].naxes, rd[i].keep), p);
		snprintf(l, sizeof(l), "min #%d", i);
		CHECK(&g, l, eng_min(d, rd[i].axes, rd[i].naxes, rd[i].keep), d);
	}
	/* reductions of a non-contiguous view and of a broadcast */
	eng_tensor *x = param(&g, DISTINCT, 2, S(4, 3), -2, 2);
	CHECK(&g, "sum of permuted", eng_sum(eng_transpose(x, 0, 1), (int[]){1}, 1, false), x);
	CHECK(&g, "max of permuted", eng_max(eng_transpose(x, 0, 1), (int[]){1}, 1, true), x);
	eng_tensor *v = param(&g, UNIFORM, 2, S(1, 3), -2, 2);
	CHECK(&g, "sum of expand", eng_sum(eng_expand(v, 2, S(4, 3)), (int[]){1}, 1, false), v);
	gc_done(&g);
}
END_TEST

START_TEST(grad_movement)
{
	gc g;
	gc_init(&g, 14);
	eng_tensor *x = param(&g, UNIFORM, 3, S(2, 3, 4), -2, 2);
	CHECK(&g, "reshape", eng_reshape(x, 2, S(4, 6)), x);
	CHECK(&g, "reshape -1", eng_reshape(x, 3, S(3, -1, 2)), x);
	CHECK(&g, "permute", eng_permute(x, (int[]){2, 0, 1}), x);
	CHECK(&g, "permute of permute",
	      eng_permute(eng_permute(x, (int[]){2, 0, 1}), (int[]){0, 2, 1}), x);
	CHECK(&g, "pad", eng_pad(x, (const int64_t[][2]){{1, 0}, {0, 2}, {1, 1}}), x);
	CHECK(&g, "shrink", eng_shrink(x, (const int64_t[][2]){{1, 2}, {0, 2}, {1, 4}}), x);
	CHECK(&g, "flip", eng_flip(x, (int[]){0, 2}, 2), x);
	CHECK(&g, "flip all", eng_flip(x, (int[]){0, 1, 2}, 3), x);
	CHECK(&g, "contiguous", eng_contiguous(eng_mul_s(x, 3)), x);
	CHECK(&g, "contiguous of permute", eng_contiguous(eng_permute(x, (int[]){1, 2, 0})), x);
	CHECK(&g, "transpose", eng_transpose(x, 0, 2), x);
	CHECK(&g, "flatten", eng_flatten(x, 1, 2), x);
	CHECK(&g, "unsqueeze+squeeze", eng_squeeze(eng_unsqueeze(x, 1), 1), x);
	CHECK(&g, "pad of shrink of permute",
	      eng_pad(eng_shrink(eng_permute(x, (int[]){1, 0, 2}),
				 (const int64_t[][2]){{0, 2}, {1, 2}, {1, 3}}),
		      (const int64_t[][2]){{0, 1}, {2, 0}, {0, 0}}),
	      x);
	/* expand: a (3,1) + b (1,4), and an explicit expand of a size-1 axis */
	eng_tensor *a = param(&g, UNIFORM, 2, S(3, 1), -2, 2);
	eng_tensor *b = param(&g, UNIFORM, 2, S(1, 4), -2, 2);
	CHECK(&g, "broadcast add", eng_add(a, b), a, b);
	CHECK(&g, "expand", eng_expand(a, 2, S(3, 5)), a);
	CHECK(&g, "expand -1", eng_expand(b, 2, S(2, -1)), b);
	/* slices: start/stop/step, negative step */
	eng_tensor *y = param(&g, UNIFORM, 2, S(5, 6), -2, 2);
	CHECK(&g, "slice 1:4", eng_slice(y, 0, 1, 4, 1), y);
	CHECK(&g, "slice ::2", eng_slice(y, 1, 0, INT64_MAX, 2), y);
	CHECK(&g, "slice 1::3", eng_slice(y, 1, 1, INT64_MAX, 3), y);
	CHECK(&g, "slice ::-2", eng_slice(y, 0, INT64_MAX, INT64_MIN, -2), y);
	CHECK(&g, "slice -2:0:-1", eng_slice(y, 1, -2, 0, -1), y);
	CHECK(&g, "slice of slice", eng_slice(eng_slice(y, 0, 1, 5, 2), 1, 4, 0, -2), y);
	/* cat, stack, repeat */
	eng_tensor *c1 = param(&g, UNIFORM, 2, S(2, 3), -2, 2);
	eng_tensor *c2 = param(&g, UNIFORM, 2, S(1, 3), -2, 2);
	eng_tensor *c3 = param(&g, UNIFORM, 2, S(3, 3), -2, 2);
	CHECK(&g, "cat axis 0", eng_cat((eng_tensor *[]){c1, c2, c3}, 3, 0), c1, c2, c3);
	eng_tensor *d1 = param(&g, UNIFORM, 2, S(2, 3), -2, 2);
	eng_tensor *c4 = param(&g, UNIFORM, 2, S(2, 2), -2, 2);
	CHECK(&g, "cat axis 1", eng_cat((eng_tensor *[]){c1, eng_transpose(c4, 0, 1), d1}, 3, 1),
	      c1, c4, d1);
	CHECK(&g, "cat with itself", eng_cat((eng_tensor *[]){c1, c1}, 2, -1), c1);
	CHECK(&g, "stack axis 0", eng_stack((eng_tensor *[]){c1, d1}, 2, 0), c1, d1);
	CHECK(&g, "stack axis -1", eng_stack((eng_tensor *[]){c1, d1, c1}, 3, -1), c1, d1);
	CHECK(&g, "repeat", eng_repeat(c2, S(2, 3)), c2);
	/* a non-leaf view that requires grad itself: the gradient arrives at the view */
	eng_tensor *base = input(&g, UNIFORM, 2, S(3, 4), -2, 2);
	eng_tensor *view = eng_transpose(base, 0, 1);
	ck_assert(eng_set_requires_grad(view, true) == ENG_OK);
	CHECK(&g, "view requiring grad", eng_mul(eng_sin(view), view), view);
	gc_done(&g);
}
END_TEST

/* ---- composite functions ---- */

START_TEST(grad_math)
{
	gc g;
	gc_init(&g, 15);
	const int64_t *sh = S(3, 4);
	eng_tensor *x = param(&g, UNIFORM, 2, sh, -2, 2);
	eng_tensor *p = param(&g, UNIFORM, 2, sh, 0.3, 3);
	eng_tensor *k = param(&g, AWAY, 2, sh, 0.1, 2); /* away from 0 */
	eng_tensor *xb = param(&g, UNIFORM, 2, S(4, 3), -2, 2), *xt = eng_transpose(xb, 0, 1);
	CHECK(&g, "exp", eng_exp(x), x);
	CHECK(&g, "log", eng_log(p), p);
	CHECK(&g, "cos", eng_cos(x), x);
	CHECK(&g, "tan", eng_tan(eng_mul_s(x, 0.5)), x);
	CHECK(&g, "rsqrt", eng_rsqrt(p), p);
	CHECK(&g, "tanh", eng_tanh(x), x);
	CHECK(&g, "sigmoid", eng_sigmoid(x), x);
	CHECK(&g, "relu", eng_relu(k), k);
	CHECK(&g, "leaky_relu", eng_leaky_relu(k, 0.1), k);
	CHECK(&g, "elu", eng_elu(k, 1.5), k);
	CHECK(&g, "gelu", eng_gelu(x), x);
	CHECK(&g, "silu", eng_silu(x), x);
	CHECK(&g, "softplus", eng_softplus(k), k);
	CHECK(&g, "square", eng_square(x), x);
	CHECK(&g, "abs", eng_abs(k), k);
	/* 12 distinct values in [-2, 2] keep 0.1 away from the points -2 + i/3 */
	eng_tensor *d = param(&g, DISTINCT, 2, sh, -2, 2);
	CHECK(&g, "clamp", eng_clamp(d, -1, 1), d);
	CHECK(&g, "clamp lo only", eng_clamp(d, -1.0 / 3, INFINITY), d);
	CHECK(&g, "clamp hi only", eng_clamp(d, -INFINITY, 2.0 / 3), d);
	CHECK(&g, "tanh of permuted", eng_tanh(xt), xb);
	/* piecewise-constant functions pass no gradient: only the direct path counts (values
	 * at least 0.1 from integers, half-integers and 0) */
	eng_tensor *pc = param_vals(
		&g, 2, sh,
		(double[]){-2.3, -1.6, -0.7, -0.2, 0.3, 0.8, 1.4, 1.7, 2.2, 2.6, -2.8, 0.6});
	eng_tensor *steps = eng_add(eng_add(eng_floor(pc), eng_ceil(pc)),
				    eng_add(eng_round(pc), eng_trunc(pc)));
	CHECK(&g, "sign(x)*x + floor + ceil + round + trunc",
	      eng_add(eng_mul(eng_sign(pc), pc), steps), pc);
	/* powers */
	eng_tensor *e = param(&g, UNIFORM, 2, sh, -1.5, 1.5);
	CHECK(&g, "pow tensor", eng_pow(p, e), p, e);
	eng_tensor *e1 = param(&g, UNIFORM, 2, S(1, 4), -1.5, 1.5);
	CHECK(&g, "pow broadcast exponent", eng_pow(p, e1), p, e1);
	const double ps[] = {2, 3, 4, -1, 0.5, -0.5, 2.5, -1.5, 5};
	char l[64];
	for (int i = 0; i < N_OF(ps); i++) {
		snprintf(l, sizeof(l), "pow_s %g", ps[i]);
		CHECK(&g, l, eng_pow_s(p, ps[i]), p);
	}
	CHECK(&g, "pow_s 3 negative base", eng_pow_s(k, 3), k);
	CHECK(&g, "pow_s 5 negative base", eng_pow_s(k, 5), k);
	gc_done(&g);
}
END_TEST

START_TEST(grad_reduce_composite)
{
	gc g;
	gc_init(&g, 16);
	eng_tensor *x = param(&g, UNIFORM, 3, S(2, 3, 4), -2, 2);
	eng_tensor *d = param(&g, DISTINCT, 2, S(3, 5), -2, 2);
	eng_tensor *xb = param(&g, UNIFORM, 2, S(5, 3), -2, 2), *xt = eng_transpose(xb, 0, 1);
	CHECK(&g, "mean all", eng_mean(x, NULL, 0, false), x);
	CHECK(&g, "mean axis 1 keepdim", eng_mean(x, (int[]){1}, 1, true), x);
	CHECK(&g, "mean axes 0,2", eng_mean(x, (int[]){0, 2}, 2, false), x);
	CHECK(&g, "var axis -1", eng_var(x, (int[]){-1}, 1, false, 1), x);
	CHECK(&g, "var all correction 0", eng_var(x, NULL, 0, false, 0), x);
	CHECK(&g, "var axes 0,1 keepdim", eng_var(x, (int[]){0, 1}, 2, true, 1), x);
	CHECK(&g, "std axis 1", eng_std(x, (int[]){1}, 1, false, 1), x);
	CHECK(&g, "std all correction 0", eng_std(x, NULL, 0, true, 0), x);
	CHECK(&g, "logsumexp axis 1", eng_logsumexp(d, 1, false), d);
	CHECK(&g, "logsumexp axis 0 keepdim", eng_logsumexp(d, 0, true), d);
	CHECK(&g, "softmax axis -1", eng_softmax(d, -1), d);
	CHECK(&g, "softmax axis 0", eng_softmax(d, 0), d);
	CHECK(&g, "softmax 3d axis 1", eng_softmax(x, 1), x);
	CHECK(&g, "log_softmax axis 1", eng_log_softmax(d, 1), d);
	CHECK(&g, "log_softmax axis 0", eng_log_softmax(d, 0), d);
	CHECK(&g, "softmax of permuted", eng_softmax(xt, 1), xb);
	CHECK(&g, "log_softmax of permuted", eng_log_softmax(xt, 0), xb);
	gc_done(&g);
}
END_TEST

START_TEST(grad_matmul)
{
	gc g;
	gc_init(&g, 17);
	eng_tensor *a = param(&g, UNIFORM, 2, S(3, 4), -1, 1);
	eng_tensor *b = param(&g, UNIFORM, 2, S(4, 2), -1, 1);
	CHECK(&g, "matmul 2d", eng_matmul(a, b), a, b);
	eng_tensor *v = param(&g, UNIFORM, 1, S(4), -1, 1);
	eng_tensor *u = param(&g, UNIFORM, 1, S(3), -1, 1);
	CHECK(&g, "matmul 2d @ 1d", eng_matmul(a, v), a, v);
	CHECK(&g, "matmul 1d @ 2d", eng_matmul(u, a), u, a);
	CHECK(&g, "matmul 1d @ 1d", eng_matmul(v, v), v);
	eng_tensor *ba = param(&g, UNIFORM, 3, S(2, 3, 4), -1, 1);
	CHECK(&g, "matmul batch @ 2d", eng_matmul(ba, b), ba, b);
	eng_tensor *b4 = param(&g, UNIFORM, 4, S(2, 1, 3, 4), -1, 1);
	eng_tensor *bb = param(&g, UNIFORM, 3, S(3, 4, 2), -1, 1);
	CHECK(&g, "matmul batch broadcast", eng_matmul(b4, bb), b4, bb);
	/* non-contiguous operands: a transposed view on each side */
	eng_tensor *at = param(&g, UNIFORM, 2, S(4, 3), -1, 1);
	eng_tensor *bt = param(&g, UNIFORM, 2, S(2, 4), -1, 1);
	CHECK(&g, "matmul transposed operands",
	      eng_matmul(eng_transpose(at, 0, 1), eng_transpose(bt, 0, 1)), at, bt);
	CHECK(&g, "matmul a @ a.T", eng_matmul(a, eng_transpose(a, 0, 1)), a);
	/* linear */
	eng_tensor *x = param(&g, UNIFORM, 2, S(3, 4), -1, 1);
	eng_tensor *w = param(&g, UNIFORM, 2, S(5, 4), -1, 1);
	eng_tensor *bias = param(&g, UNIFORM, 1, S(5), -1, 1);
	CHECK(&g, "linear", eng_linear(x, w, bias), x, w, bias);
	CHECK(&g, "linear no bias", eng_linear(x, w, NULL), x, w);
	eng_tensor *x3 = param(&g, UNIFORM, 3, S(2, 2, 4), -1, 1);
	CHECK(&g, "linear 3d relu", eng_relu(eng_add_s(eng_linear(x3, w, bias), 5)), x3, w, bias);
	/* a two-layer MLP */
	eng_tensor *w2 = param(&g, UNIFORM, 2, S(2, 5), -1, 1);
	CHECK(&g, "mlp", eng_linear(eng_tanh(eng_linear(x, w, bias)), w2, NULL), x, w, bias, w2);
	gc_done(&g);
}
END_TEST

START_TEST(grad_conv_pool)
{
	gc g;
	gc_init(&g, 18);
	eng_tensor *x = param(&g, UNIFORM, 4, S(2, 2, 4, 4), -1, 1);
	eng_tensor *w = param(&g, UNIFORM, 4, S(3, 2, 2, 2), -1, 1);
	eng_tensor *bias = param(&g, UNIFORM, 1, S(3), -1, 1);
	CHECK(&g, "conv2d", eng_conv2d(x, w, bias, NULL, NULL, NULL, 1), x, w, bias);
	eng_tensor *x2 = param(&g, UNIFORM, 4, S(1, 4, 5, 5), -1, 1);
	eng_tensor *wg = param(&g, UNIFORM, 4, S(4, 2, 3, 3), -1, 1);
	CHECK(&g, "conv2d stride 2 padding 1 groups 2",
	      eng_conv2d(x2, wg, NULL, (int[]){2, 2}, (int[]){1, 1}, NULL, 2), x2, wg);
	CHECK(&g, "conv2d dilation 2 padding (1,2)",
	      eng_conv2d(x2, wg, NULL, NULL, (int[]){1, 2}, (int[]){2, 2}, 2), x2, wg);
	eng_tensor *wd = param(&g, UNIFORM, 4, S(2, 4, 2, 3), -1, 1);
	CHECK(&g, "conv2d stride (2,1) dilation (1,2)",
	      eng_conv2d(x2, wd, NULL, (int[]){2, 1}, NULL, (int[]){1, 2}, 1), x2, wd);
	eng_tensor *xp = param(&g, UNIFORM, 4, S(1, 5, 2, 5), -1, 1); /* permuted to (1,2,5,5) */
	eng_tensor *w1 = param(&g, UNIFORM, 4, S(2, 2, 3, 3), -1, 1);
	CHECK(&g, "conv2d of permuted input",
	      eng_conv2d(eng_transpose(xp, 1, 2), w1, NULL, NULL, NULL, NULL, 1), xp, w1);
	/* conv2d has its own rule (the input gradient is a convolution): rows the stride skips
	 * at the end, padding wider than the kernel, and a conv feeding a conv */
	eng_tensor *x3 = param(&g, UNIFORM, 4, S(2, 2, 7, 6), -1, 1);
	eng_tensor *w3 = param(&g, UNIFORM, 4, S(3, 2, 2, 3), -1, 1);
	CHECK(&g, "conv2d stride 3 (rows left over)",
	      eng_conv2d(x3, w3, NULL, (int[]){3, 3}, NULL, NULL, 1), x3, w3);
	eng_tensor *w4 = param(&g, UNIFORM, 4, S(2, 2, 1, 1), -1, 1);
	CHECK(&g, "conv2d 1x1 padding 2 stride 2",
	      eng_conv2d(x3, w4, NULL, (int[]){2, 2}, (int[]){2, 2}, NULL, 1), x3, w4);
	CHECK(&g, "conv2d of conv2d",
	      eng_conv2d(eng_tanh(eng_conv2d(x3, w4, NULL, NULL, (int[]){1, 1}, NULL, 1)), w3, NULL,
			 (int[]){1, 2}, NULL, (int[]){2, 1}, 1),
	      x3, w4, w3);
	/* pooling: distinct values, so no ties inside a window */
	eng_tensor *d = param(&g, DISTINCT, 4, S(1, 2, 4, 4), -3, 3);
	CHECK(&g, "max_pool2d 2x2", eng_max_pool2d(d, (int[]){2, 2}, NULL, NULL), d);
	CHECK(&g, "max_pool2d 2x2 stride 1 padding 1",
	      eng_max_pool2d(d, (int[]){2, 2}, (int[]){1, 1}, (int[]){1, 1}), d);
	CHECK(&g, "max_pool2d 3x2 stride (1,2)",
	      eng_max_pool2d(d, (int[]){3, 2}, (int[]){1, 2}, NULL), d);
	eng_tensor *d3 = param(&g, DISTINCT, 3, S(2, 5, 5), -3, 3);
	CHECK(&g, "max_pool2d 3d input", eng_max_pool2d(d3, (int[]){2, 2}, NULL, NULL), d3);
	CHECK(&g, "avg_pool2d 2x2", eng_avg_pool2d(x, (int[]){2, 2}, NULL, NULL), x);
	CHECK(&g, "avg_pool2d 3x3 stride 2 padding 1",
	      eng_avg_pool2d(x2, (int[]){3, 3}, (int[]){2, 2}, (int[]){1, 1}), x2);
	CHECK(&g, "avg_pool2d 2x3 stride 1", eng_avg_pool2d(d3, (int[]){2, 3}, (int[]){1, 1}, NULL),
	      d3);
	gc_done(&g);
}
END_TEST

START_TEST(grad_index_nn)
{
	gc g;
	gc_init(&g, 19);
	eng_tensor *a = param(&g, UNIFORM, 2, S(3, 4), -2, 2);
	eng_tensor *i1 = ints(&g, 2, S(3, 5), 0, 3); /* repeats: gradients add up */
	CHECK(&g, "gather axis 1", eng_gather(a, 1, i1), a);
	eng_tensor *i0 = ints(&g, 2, S(2, 4), 0, 2);
	CHECK(&g, "gather axis 0", eng_gather(a, 0, i0), a);
	eng_tensor *i2 = ints(&g, 2, S(2, 2), 0, 3); /* idx smaller than a on the other axis */
	CHECK(&g, "gather axis 1 small idx", eng_gather(a, -1, i2), a);
	eng_tensor *at = param(&g, UNIFORM, 2, S(4, 3), -2, 2);
	CHECK(&g, "gather of permuted", eng_gather(eng_transpose(at, 0, 1), 1, i1), at);
	eng_tensor *table = param(&g, UNIFORM, 2, S(5, 3), -2, 2);
	eng_tensor *ie = ints(&g, 2, S(2, 3), 0, 4);
	CHECK(&g, "embedding", eng_embedding(table, ie), table);
	eng_tensor *ie1 = ints(&g, 1, S(7), 0, 4);
	CHECK(&g, "embedding 1d idx", eng_embedding(table, ie1), table);
	eng_tensor *x = param(&g, UNIFORM, 2, S(3, 5), -2, 2);
	CHECK(&g, "layernorm", eng_layernorm(x, 1e-5), x);
	eng_tensor *x3 = param(&g, UNIFORM, 3, S(2, 2, 4), -2, 2);
	CHECK(&g, "layernorm 3d eps 0.1", eng_layernorm(x3, 0.1), x3);
	eng_tensor *logits = param(&g, UNIFORM, 2, S(4, 5), -2, 2);
	eng_tensor *labels = ints(&g, 1, S(4), 0, 4);
	CHECK(&g, "sparse_cross_entropy", eng_sparse_cross_entropy(logits, labels), logits);
	eng_tensor *lt = param(&g, UNIFORM, 2, S(5, 4), -2, 2);
	CHECK(&g, "sparse_cross_entropy of permuted",
	      eng_sparse_cross_entropy(eng_transpose(lt, 0, 1), labels), lt);
	/* one_hot is a constant of the labels: a product with it routes gradients */
	CHECK(&g, "one_hot product", eng_mul(eng_one_hot(labels, 5), logits), logits);
	gc_done(&g);
}
END_TEST

/* ---- semantics: accumulation, zero_grad, no grad, detach ---- */

START_TEST(grad_accumulate)
{
	gc g;
	gc_init(&g, 20);
	eng_tensor *x = param(&g, UNIFORM, 2, S(3, 4), -1, 1);
	eng_tensor *l1 = weighted_loss(&g, eng_mul(eng_exp(x), x));
	eng_tensor *l2 = weighted_loss(&g, eng_sin(eng_transpose(x, 0, 1)));
	double *f1 = finite_diff(l1, x), *f2 = finite_diff(l2, x), f12[12], f112[12];
	ck_assert(f1 && f2);
	for (int k = 0; k < 12; k++) {
		f12[k] = f1[k] + f2[k];
		f112[k] = 2 * f1[k] + f2[k];
	}
	ck_assert(eng_grad(x) == NULL);
	ck_assert(eng_backward(l1) == ENG_OK);
	expect_grad(&g, eng_grad(x), f1, 12, 1.0, "one backward", 0);
	ck_assert(eng_backward(l1) == ENG_OK);
	expect_grad(&g, eng_grad(x), f1, 12, 2.0, "two backwards accumulate", 0);
	ck_assert(eng_backward(l2) == ENG_OK);
	expect_grad(&g, eng_grad(x), f112, 12, 1.0, "then another loss", 0);
	eng_zero_grad(x);
	ck_assert_msg(eng_grad(x) == NULL, "zero_grad left a gradient");
	ck_assert(eng_backward(l2) == ENG_OK);
	expect_grad(&g, eng_grad(x), f2, 12, 1.0, "after zero_grad", 0);
	ck_assert(eng_backward(l1) == ENG_OK);
	expect_grad(&g, eng_grad(x), f12, 12, 1.0, "l2 then l1", 0);
	/* the realized gradient keeps accumulating lazily */
	eng_zero_grad(x);
	ck_assert(eng_backward(l1) == ENG_OK);
	ck_assert(eng_realize((eng_tensor *[]){eng_grad(x)}, 1) == ENG_OK);
	ck_assert(eng_backward(l1) == ENG_OK);
	expect_grad(&g, eng_grad(x), f1, 12, 2.0, "accumulate onto a realized gradient", 0);
	free(f1);
	free(f2);
	gc_done(&g);
}
END_TEST

START_TEST(grad_no_grad_detach)
{
	gc g;
	gc_init(&g, 21);
	eng_ctx *ctx = g.ctx;
	eng_tensor *x = param(&g, UNIFORM, 2, S(3, 4), -1, 1);
	eng_tensor *c = input(&g, UNIFORM, 2, S(3, 4), -1, 1); /* no requires_grad */
	eng_tensor *y = param(&g, UNIFORM, 2, S(3, 4), -1, 1);
	ck_assert(eng_requires_grad(x) && !eng_requires_grad(c));
	/* x * c: x gets c * W, c gets nothing */
	eng_tensor *W = weights(&g, x);
	eng_tensor *loss = eng_sum(eng_mul(eng_mul(x, c), W), NULL, 0, false);
	ck_assert(eng_backward(loss) == ENG_OK);
	ck_assert_msg(eng_grad(c) == NULL, "a tensor without requires_grad got a gradient");
	ck_assert_msg(eng_grad(y) == NULL, "a tensor the loss does not use got a gradient");
	double *cv = tu_read(c), *wv = tu_read(W), *xv = tu_read(x), want[12];
	for (int k = 0; k < 12; k++)
		want[k] = cv[k] * wv[k];
	expect_grad(&g, eng_grad(x), want, 12, 1.0, "x * const", 0);
	eng_zero_grad(x);
	/* x * detach(x): only the direct path counts; detach(y) passes no gradient to y */
	eng_tensor *out = eng_add(eng_mul(x, eng_detach(x)), eng_detach(eng_exp(y)));
	loss = eng_sum(eng_mul(out, W), NULL, 0, false);
	ck_assert(eng_backward(loss) == ENG_OK);
	ck_assert_msg(eng_grad(y) == NULL, "detach let a gradient through");
	for (int k = 0; k < 12; k++)
		want[k] = xv[k] * wv[k];
	expect_grad(&g, eng_grad(x), want, 12, 1.0, "x * detach(x)", 0);
	eng_zero_grad(x);
	/* requires_grad off again: the tensor leaves the set */
	ck_assert(eng_set_requires_grad(y, false) == ENG_OK);
	ck_assert(!eng_requires_grad(y));
	loss = eng_sum(eng_mul(eng_add(x, y), W), NULL, 0, false);
	ck_assert(eng_backward(loss) == ENG_OK);
	ck_assert(eng_grad(y) == NULL);
	expect_grad(&g, eng_grad(x), wv, 12, 1.0, "x + y, y no longer requiring grad", 0);
	/* gradients of a non-float tensor cannot be asked for */
	eng_tensor *iv = ints(&g, 1, S(3), 0, 3);
	ck_assert(eng_set_requires_grad(iv, true) == ENG_EDTYPE);
	ck_assert(strlen(eng_errmsg(ctx)) > 0);
	eng_clear_error(ctx);
	ck_assert(!eng_requires_grad(iv));
	free(cv);
	free(wv);
	free(xv);
	gc_done(&g);
}
END_TEST

/* eng_backward fails with status want and a message naming backward. */
static void expect_backward_error(eng_ctx *ctx, eng_tensor *loss, eng_status want, const char *what)
{
	eng_status st = eng_backward(loss);
	ck_assert_msg(st == want, "%s: backward returned %s, want %s", what, eng_strerror(st),
		      eng_strerror(want));
	if (want != ENG_EINVAL)
		ck_assert_msg(strstr(eng_errmsg(ctx), "backward") != NULL, "%s: message '%s'", what,
			      eng_errmsg(ctx));
	eng_clear_error(ctx);
}

START_TEST(grad_errors)
{
	gc g;
	gc_init(&g, 22);
	eng_ctx *ctx = g.ctx;
	eng_tensor *x = input(&g, UNIFORM, 2, S(3, 4), -1, 1);
	/* nothing requires grad yet */
	expect_backward_error(ctx, eng_sum(x, NULL, 0, false), ENG_ESTATE, "no grad tensors");
	ck_assert(eng_set_requires_grad(x, true) == ENG_OK);
	expect_backward_error(ctx, eng_exp(x), ENG_ESHAPE, "non-scalar loss");
	expect_backward_error(ctx, eng_sum(x, (int[]){1}, 1, false), ENG_ESHAPE, "vector loss");
	eng_tensor *iv = ints(&g, 1, S(3), 0, 3);
	expect_backward_error(ctx, eng_sum(iv, NULL, 0, false), ENG_EDTYPE, "int loss");
	eng_tensor *other = input(&g, UNIFORM, 1, S(3), -1, 1);
	expect_backward_error(ctx, eng_sum(other, NULL, 0, false), ENG_ESTATE,
			      "loss independent of x");
	expect_backward_error(ctx, eng_sum(eng_detach(x), NULL, 0, false), ENG_ESTATE,
			      "loss through detach");
	expect_backward_error(ctx, NULL, ENG_EINVAL, "NULL loss");
	ck_assert(eng_grad(x) == NULL);
	/* a one-element non-scalar loss is fine */
	eng_tensor *l = eng_sum(x, (int[]){0, 1}, 2, true);
	ck_assert(eng_backward(l) == ENG_OK);
	ck_assert(eng_grad(x) != NULL);
	double ones[12];
	for (int k = 0; k < 12; k++)
		ones[k] = 1;
	expect_grad(&g, eng_grad(x), ones, 12, 1.0, "sum keepdim (1,1) loss", 0);
	gc_done(&g);
}
END_TEST

/* The seed example: x = eye(3) (realized contiguous), y = [[2,0,-2]], z = (y @ x).sum(). */
START_TEST(grad_seed_example)
{
	eng_ctx *ctx = tu_ctx_new();
	eng_tensor *x = eng_contiguous(eng_eye(ctx, ENG_F32, 3));
	ck_assert(eng_realize(&x, 1) == ENG_OK);
	eng_tensor *y = tu_from_doubles(ctx, ENG_F32, 2, S(1, 3), (double[]){2, 0, -2});
	ck_assert(eng_set_requires_grad(x, true) == ENG_OK);
	ck_assert(eng_set_requires_grad(y, true) == ENG_OK);
	eng_tensor *z = eng_sum(eng_matmul(y, x), NULL, 0, false);
	ck_assert(eng_backward(z) == ENG_OK);
	tu_batch *b = tu_batch_new(ctx);
	tu_batch_want(b, eng_grad(x), (double[]){2, 2, 2, 0, 0, 0, -2, -2, -2}, 9, 0, 1e-6,
		      "x.grad");
	tu_batch_want(b, eng_grad(y), (double[]){1, 1, 1}, 3, 0, 1e-6, "y.grad");
	tu_batch_want(b, z, (double[]){0}, 1, 0, 1e-6, "z");
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

Suite *grad_suite(void)
{
	const TTest *const tests[] = {
		grad_unary,	   grad_binary,		  grad_reduce,	       grad_movement,
		grad_math,	   grad_reduce_composite, grad_matmul,	       grad_conv_pool,
		grad_index_nn,	   grad_accumulate,	  grad_no_grad_detach, grad_errors,
		grad_seed_example,
	};
	return tu_suite("grad", tests, N_OF(tests), TU_TIMEOUT);
}
