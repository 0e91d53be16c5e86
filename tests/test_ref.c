/* test_ref.c: checks the reference evaluator itself against hand-computed values, on graphs
 * built node by node over a fake in-memory device, so it runs without any backend or realize. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"
#include "testutil.h"

/* ---- a graph over a fake device ---- */

static eng_status fake_copy_out(void *dev, void *handle, size_t off, void *dst, size_t n,
				bk_err *err)
{
	memcpy(dst, (char *)handle + off, n);
	return ENG_OK;
}

static void fake_free(void *dev, void *handle)
{
	free(handle);
}

static const bk_device_ops fake_ops = {
	.abi_version = BK_ABI_VERSION,
	.struct_size = sizeof(bk_device_ops),
	.name = "FAKE",
	.free = fake_free,
	.copy_out = fake_copy_out,
};

typedef struct fx {
	eng_graph *g;
	eng_ctx ctx; /* only what the buffer allocator reads: its counters and no_alloc_cache */
	eng_device dev;
	eng_node *held[256]; /* every node we got a reference to, released at the end */
	int nheld;
	uint32_t next_buf;
} fx;

static void fx_init(fx *f)
{
	memset(f, 0, sizeof(*f));
	f->g = eng_graph_create();
	ck_assert(f->g != NULL);
	f->dev.bk.ops = &fake_ops;
	f->ctx.dopts.no_alloc_cache = true; /* released buffers go to fake_free at once */
	f->dev.ctx = &f->ctx;
}

static void fx_done(fx *f)
{
	for (int i = f->nheld - 1; i >= 0; i--)
		eng_node_unref(f->held[i]);
	ck_assert_uint_eq(eng_graph_destroy(f->g), 0);
}

static eng_node *hold(fx *f, eng_node *n)
{
	ck_assert(n != NULL);
	ck_assert_int_lt(f->nheld, 256);
	f->held[f->nheld++] = n;
	return n;
}

static eng_buffer *fake_buffer(fx *f, eng_dtype dt, int64_t numel, const double *v)
{
	eng_buffer *b = calloc(1, sizeof(*b));
	size_t isz = eng_dtype_size(dt);
	ck_assert(b != NULL);
	b->dev = &f->dev;
	b->dtype = dt;
	b->numel = numel;
	b->nbytes = (size_t)numel * isz;
	b->refs = 1;
	b->id = ++f->next_buf;
	b->handle = malloc(b->nbytes ? b->nbytes : 1);
	ck_assert(b->handle != NULL);
	for (int64_t k = 0; k < numel; k++)
		tu_store(dt, v[k], (char *)b->handle + (size_t)k * isz);
	return b;
}

static int64_t numel_of(int ndim, const int64_t *shape)
{
	int64_t n = 1;
	for (int d = 0; d < ndim; d++)
		n *= shape[d];
	return n;
}

static eng_node *buf(fx *f, eng_dtype dt, int ndim, const int64_t *shape, const double *v)
{
	eng_buffer *b = fake_buffer(f, dt, numel_of(ndim, shape), v);
	eng_node_desc d = {
		.op = ENG_OP_BUFFER, .dtype = dt, .ndim = ndim, .shape = shape, .buf = b};
	eng_node *n = hold(f, eng_node_get(f->g, &d));
	eng_buffer_unref(b);
	return n;
}

/* A 1-d buffer of n values. */
static eng_node *vec(fx *f, eng_dtype dt, int64_t n, const double *v)
{
	return buf(f, dt, 1, &n, v);
}

static eng_node *cnst(fx *f, eng_dtype dt, int ndim, const int64_t *shape, eng_const_value c)
{
	eng_node_desc d = {.op = ENG_OP_CONST, .dtype = dt, .ndim = ndim, .shape = shape, .c = c};
	return hold(f, eng_node_get(f->g, &d));
}

static eng_node *un(fx *f, eng_op op, eng_dtype dt, eng_node *a)
{
	eng_node_desc d = {.op = op, .dtype = dt, .ndim = a->ndim, .shape = a->shape, .src = {a}};
	return hold(f, eng_node_get(f->g, &d));
}

/* Binary node; the result dtype is the operands' unless the op is a comparison. */
static eng_node *bin(fx *f, eng_op op, eng_node *a, eng_node *b)
{
	bool cmp = op == ENG_OP_CMPLT || op == ENG_OP_CMPEQ || op == ENG_OP_CMPNE;
	eng_node_desc d = {.op = op,
			   .dtype = cmp ? ENG_BOOL : a->dtype,
			   .ndim = a->ndim,
			   .shape = a->shape,
			   .src = {a, b}};
	return hold(f, eng_node_get(f->g, &d));
}

static eng_node *mv(fx *f, eng_node_desc d, eng_node *a, int ndim, const int64_t *shape)
{
	d.dtype = a->dtype;
	d.ndim = ndim;
	d.shape = shape;
	d.src[0] = a;
	return hold(f, eng_node_get(f->g, &d));
}

static eng_node *reduce(fx *f, eng_op op, eng_node *a, uint32_t axes)
{
	int64_t shape[ENG_MAX_DIMS];
	for (int i = 0; i < a->ndim; i++)
		shape[i] = (axes >> i) & 1 ? 1 : a->shape[i];
	eng_node_desc d = {.op = op, .axes = axes};
	return mv(f, d, a, a->ndim, shape);
}

/* Evaluate n and compare with want[0..n) (exact when tol == 0; NaN matches NaN). */
#define expect(n, tol, ...)                                                                        \
	do {                                                                                       \
		const double want_[] = {__VA_ARGS__};                                              \
		expect_at(__LINE__, (n), (tol), want_, (int64_t)(sizeof(want_) / sizeof(double))); \
	} while (0)

static void expect_at(int line, const eng_node *n, double tol, const double *want, int64_t nwant)
{
	ref_array a;
	ck_assert_msg(ref_eval(n, &a), "line %d: ref_eval failed", line);
	ck_assert_msg(a.numel == nwant, "line %d: %lld elements, want %lld", line,
		      (long long)a.numel, (long long)nwant);
	ck_assert_msg(a.dtype == n->dtype && a.ndim == n->ndim, "line %d: dtype or rank", line);
	for (int64_t k = 0; k < nwant; k++) {
		double g = ref_get(&a, k), w = want[k];
		bool ok = isnan(w)   ? isnan(g)
			  : isinf(w) ? g == w
				     : fabs(g - w) <= tol * fabs(w) || g == w;
		if (!ok) {
			ref_free(&a);
			ck_assert_msg(0, "line %d: element %lld: got %.17g, want %.17g", line,
				      (long long)k, g, w);
		}
	}
	/* integer results must also be exact as int64 (no double round trip hiding bits) */
	ref_free(&a);
}

static const double I32MIN = -2147483648.0, I32MAX = 2147483647.0;

/* ---- leaves ---- */

START_TEST(leaf_buffer)
{
	fx f;
	fx_init(&f);
	expect(vec(&f, ENG_BOOL, 3, (double[]){0, 1, 1}), 0, 0, 1, 1);
	expect(vec(&f, ENG_U8, 3, (double[]){0, 255, 7}), 0, 0, 255, 7);
	expect(vec(&f, ENG_I32, 2, (double[]){-5, I32MAX}), 0, -5, I32MAX);
	expect(vec(&f, ENG_I64, 2, (double[]){-1099511627776.0, 3}), 0, -1099511627776.0, 3);
	expect(vec(&f, ENG_F16, 3, (double[]){0.5, -2, 65504}), 0, 0.5, -2, 65504);
	expect(vec(&f, ENG_F32, 2, (double[]){1.5, -0.25}), 0, 1.5, -0.25);
	int64_t s23[2] = {2, 3}, s0[2] = {0, 3};
	expect(buf(&f, ENG_I32, 2, s23, (double[]){1, 2, 3, 4, 5, 6}), 0, 1, 2, 3, 4, 5, 6);
	eng_node *e = buf(&f, ENG_F32, 2, s0, NULL);
	ref_array a;
	ck_assert(ref_eval(e, &a));
	ck_assert_int_eq(a.numel, 0);
	ck_assert_int_eq(a.shape[0], 0);
	ck_assert_int_eq(a.shape[1], 3);
	ref_free(&a);
	expect(buf(&f, ENG_F32, 0, NULL, (double[]){4.5}), 0, 4.5);
	fx_done(&f);
}
END_TEST

START_TEST(leaf_const_index)
{
	fx f;
	fx_init(&f);
	int64_t s22[2] = {2, 2}, s23[2] = {2, 3};
	expect(cnst(&f, ENG_F32, 2, s22, (eng_const_value){.f = 2.5}), 0, 2.5, 2.5, 2.5, 2.5);
	expect(cnst(&f, ENG_I32, 1, s22, (eng_const_value){.i = -3}), 0, -3, -3);
	expect(cnst(&f, ENG_BOOL, 0, NULL, (eng_const_value){.i = 1}), 0, 1);
	eng_node_desc d = {
		.op = ENG_OP_INDEX, .dtype = ENG_I32, .ndim = 2, .shape = s23, .axis = 1};
	expect(hold(&f, eng_node_get(f.g, &d)), 0, 0, 1, 2, 0, 1, 2);
	d.axis = 0;
	expect(hold(&f, eng_node_get(f.g, &d)), 0, 0, 0, 0, 1, 1, 1);
	d.dtype = ENG_F32;
	expect(hold(&f, eng_node_get(f.g, &d)), 0, 0, 0, 0, 1, 1, 1);
	fx_done(&f);
}
END_TEST

/* ---- unary ---- */

START_TEST(unary_float)
{
	fx f;
	fx_init(&f);
	eng_dtype F = ENG_F32;
	expect(un(&f, ENG_OP_EXP2, F, vec(&f, F, 4, (double[]){0, 1, 3, -1})), 1e-7, 1, 2, 8, 0.5);
	expect(un(&f, ENG_OP_LOG2, F, vec(&f, F, 4, (double[]){1, 2, 8, 0.25})), 1e-7, 0, 1, 3, -2);
	expect(un(&f, ENG_OP_LOG2, F, vec(&f, F, 2, (double[]){0, -1})), 0, -INFINITY, NAN);
	expect(un(&f, ENG_OP_SIN, F, vec(&f, F, 2, (double[]){0, M_PI / 2})), 1e-7, 0, 1);
	expect(un(&f, ENG_OP_SQRT, F, vec(&f, F, 3, (double[]){4, 2.25, 0})), 0, 2, 1.5, 0);
	expect(un(&f, ENG_OP_RECIP, F, vec(&f, F, 3, (double[]){2, -4, 0})), 0, 0.5, -0.25,
	       INFINITY);
	expect(un(&f, ENG_OP_NEG, F, vec(&f, F, 2, (double[]){1, -3.5})), 0, -1, 3.5);
	expect(un(&f, ENG_OP_TRUNC, F, vec(&f, F, 4, (double[]){1.7, -1.7, -0.5, 3})), 0, 1, -1, 0,
	       3);
	/* results are rounded to the dtype: sqrt(2) in float32 and float16 */
	expect(un(&f, ENG_OP_SQRT, F, vec(&f, F, 1, (double[]){2})), 0, 1.41421353816986083984375);
	expect(un(&f, ENG_OP_SQRT, ENG_F16, vec(&f, ENG_F16, 1, (double[]){2})), 0, 1.4140625);
	expect(un(&f, ENG_OP_RECIP, ENG_F16, vec(&f, ENG_F16, 1, (double[]){3})), 0,
	       0.333251953125);
	fx_done(&f);
}
END_TEST

START_TEST(unary_int)
{
	fx f;
	fx_init(&f);
	expect(un(&f, ENG_OP_NEG, ENG_I32, vec(&f, ENG_I32, 3, (double[]){5, -7, I32MIN})), 0, -5,
	       7, I32MIN);
	expect(un(&f, ENG_OP_NEG, ENG_U8, vec(&f, ENG_U8, 3, (double[]){1, 0, 255})), 0, 255, 0, 1);
	expect(un(&f, ENG_OP_NEG, ENG_I64, vec(&f, ENG_I64, 1, (double[]){-9})), 0, 9);
	expect(un(&f, ENG_OP_TRUNC, ENG_I32, vec(&f, ENG_I32, 2, (double[]){5, -7})), 0, 5, -7);
	fx_done(&f);
}
END_TEST

START_TEST(unary_cast)
{
	fx f;
	fx_init(&f);
	eng_node *x = vec(&f, ENG_F32, 6, (double[]){1.9, -1.9, NAN, 1e10, -1e10, INFINITY});
	expect(un(&f, ENG_OP_CAST, ENG_I32, x), 0, 1, -1, 0, I32MAX, I32MIN, I32MAX);
	expect(un(&f, ENG_OP_CAST, ENG_U8, x), 0, 1, 0, 0, 255, 0, 255);
	expect(un(&f, ENG_OP_CAST, ENG_BOOL, x), 0, 1, 1, 1, 1, 1, 1);
	eng_node *big = vec(&f, ENG_F32, 3, (double[]){1e19, -1e19, -3.5});
	expect(un(&f, ENG_OP_CAST, ENG_I64, big), 0, 9223372036854775807.0, -9223372036854775808.0,
	       -3);
	expect(un(&f, ENG_OP_CAST, ENG_BOOL, vec(&f, ENG_F32, 3, (double[]){0, -0.0, 0.25})), 0, 0,
	       0, 1);
	expect(un(&f, ENG_OP_CAST, ENG_U8, vec(&f, ENG_I32, 3, (double[]){300, -1, 255})), 0, 44,
	       255, 255);
	expect(un(&f, ENG_OP_CAST, ENG_U8, vec(&f, ENG_I64, 1, (double[]){-1})), 0, 255);
	expect(un(&f, ENG_OP_CAST, ENG_I32, vec(&f, ENG_I64, 1, (double[]){4294967301.0})), 0, 5);
	expect(un(&f, ENG_OP_CAST, ENG_I64, vec(&f, ENG_I32, 1, (double[]){-7})), 0, -7);
	expect(un(&f, ENG_OP_CAST, ENG_I32, vec(&f, ENG_U8, 1, (double[]){200})), 0, 200);
	expect(un(&f, ENG_OP_CAST, ENG_BOOL, vec(&f, ENG_I32, 3, (double[]){0, -5, 256})), 0, 0, 1,
	       1);
	expect(un(&f, ENG_OP_CAST, ENG_F32, vec(&f, ENG_BOOL, 2, (double[]){0, 1})), 0, 0, 1);
	expect(un(&f, ENG_OP_CAST, ENG_F32, vec(&f, ENG_I32, 2, (double[]){-3, 16777217})), 0, -3,
	       16777216);
	/* float32 -> float16: overflow to inf, ties to even */
	eng_node *h = vec(&f, ENG_F32, 4, (double[]){65520, 1.00048828125, 1.00146484375, -70000});
	expect(un(&f, ENG_OP_CAST, ENG_F16, h), 0, INFINITY, 1.0, 1.001953125, -INFINITY);
	expect(un(&f, ENG_OP_CAST, ENG_I32, vec(&f, ENG_F16, 2, (double[]){-2.5, 1000})), 0, -2,
	       1000);
	fx_done(&f);
}
END_TEST

START_TEST(unary_bitcast)
{
	fx f;
	fx_init(&f);
	expect(un(&f, ENG_OP_BITCAST, ENG_I32, vec(&f, ENG_F32, 2, (double[]){1.0, -2.0})), 0,
	       1065353216, -1073741824);
	expect(un(&f, ENG_OP_BITCAST, ENG_F32, vec(&f, ENG_I32, 2, (double[]){1078530011, -1})), 0,
	       3.1415927410125732421875, NAN);
	fx_done(&f);
}
END_TEST

/* ---- binary ---- */

START_TEST(binary_int_arith)
{
	fx f;
	fx_init(&f);
	eng_dtype I = ENG_I32;
#define B2(op, dt, n, av, bv) \
	bin(&f, op, vec(&f, dt, n, (double[])av), vec(&f, dt, n, (double[])bv))
#define L(...) {__VA_ARGS__}
	expect(B2(ENG_OP_ADD, I, 2, L(I32MAX, -5), L(1, 3)), 0, I32MIN, -2);
	expect(B2(ENG_OP_ADD, ENG_U8, 1, L(200), L(100)), 0, 44);
	expect(B2(ENG_OP_SUB, ENG_U8, 1, L(3), L(5)), 0, 254);
	expect(B2(ENG_OP_SUB, I, 1, L(I32MIN), L(1)), 0, I32MAX);
	expect(B2(ENG_OP_MUL, I, 2, L(65536, -7), L(65536, 3)), 0, 0, -21);
	expect(B2(ENG_OP_MUL, ENG_I64, 1, L(4294967296.0), L(4294967296.0)), 0, 0);
	expect(B2(ENG_OP_IDIV, I, 6, L(7, -7, 7, -7, 5, I32MIN), L(2, 2, -2, -2, 0, -1)), 0, 3, -3,
	       -3, 3, 0, I32MIN);
	expect(B2(ENG_OP_MOD, I, 6, L(7, -7, 7, -7, 5, I32MIN), L(2, 2, -2, -2, 0, -1)), 0, 1, -1,
	       1, -1, 0, 0);
	expect(B2(ENG_OP_IDIV, ENG_I64, 2, L(-9223372036854775808.0, 9), L(-1, 0)), 0,
	       -9223372036854775808.0, 0);
	expect(B2(ENG_OP_MOD, ENG_I64, 2, L(-9223372036854775808.0, 9), L(-1, 0)), 0, 0, 0);
	expect(B2(ENG_OP_IDIV, ENG_U8, 2, L(250, 9), L(7, 0)), 0, 35, 0);
	expect(B2(ENG_OP_MOD, ENG_U8, 2, L(250, 9), L(7, 0)), 0, 5, 0);
	expect(B2(ENG_OP_MAX, I, 3, L(-3, 5, -1), L(2, 5, -9)), 0, 2, 5, -1);
	expect(B2(ENG_OP_MAX, ENG_U8, 2, L(200, 3), L(100, 4)), 0, 200, 4);
	fx_done(&f);
}
END_TEST

START_TEST(binary_int_bits)
{
	fx f;
	fx_init(&f);
	eng_dtype I = ENG_I32;
	expect(B2(ENG_OP_AND, I, 2, L(12, -1), L(10, 255)), 0, 8, 255);
	expect(B2(ENG_OP_OR, I, 2, L(12, -256), L(10, 255)), 0, 14, -1);
	expect(B2(ENG_OP_XOR, I, 2, L(12, -1), L(10, 0)), 0, 6, -1);
	expect(B2(ENG_OP_XOR, ENG_U8, 1, L(255), L(15)), 0, 240);
	expect(B2(ENG_OP_SHL, I, 4, L(1, 1, 3, -1), L(31, 32, 33, 4)), 0, I32MIN, 1, 6, -16);
	expect(B2(ENG_OP_SHL, ENG_U8, 2, L(1, 255), L(9, 1)), 0, 2, 254);
	expect(B2(ENG_OP_SHL, ENG_I64, 2, L(1, 1), L(63, 64)), 0, -9223372036854775808.0, 1);
	expect(B2(ENG_OP_SHR, I, 4, L(-8, -1, 256, I32MIN), L(1, 31, 4, 31)), 0, -4, -1, 16, -1);
	expect(B2(ENG_OP_SHR, ENG_U8, 3, L(128, 255, 255), L(7, 8, 12)), 0, 1, 255, 15);
	expect(B2(ENG_OP_SHR, ENG_I64, 1, L(-1099511627776.0), L(40)), 0, -1);
	/* bool arithmetic stays 0/1 */
	expect(B2(ENG_OP_ADD, ENG_BOOL, 4, L(0, 0, 1, 1), L(0, 1, 0, 1)), 0, 0, 1, 1, 1);
	expect(B2(ENG_OP_MUL, ENG_BOOL, 4, L(0, 0, 1, 1), L(0, 1, 0, 1)), 0, 0, 0, 0, 1);
	expect(B2(ENG_OP_XOR, ENG_BOOL, 4, L(0, 0, 1, 1), L(0, 1, 0, 1)), 0, 0, 1, 1, 0);
	expect(B2(ENG_OP_AND, ENG_BOOL, 4, L(0, 0, 1, 1), L(0, 1, 0, 1)), 0, 0, 0, 0, 1);
	expect(B2(ENG_OP_OR, ENG_BOOL, 4, L(0, 0, 1, 1), L(0, 1, 0, 1)), 0, 0, 1, 1, 1);
	expect(B2(ENG_OP_MAX, ENG_BOOL, 4, L(0, 0, 1, 1), L(0, 1, 0, 1)), 0, 0, 1, 1, 1);
	fx_done(&f);
}
END_TEST

START_TEST(binary_compare_float)
{
	fx f;
	fx_init(&f);
	expect(B2(ENG_OP_CMPLT, ENG_I32, 3, L(1, 2, 3), L(2, 2, 2)), 0, 1, 0, 0);
	expect(B2(ENG_OP_CMPEQ, ENG_I32, 3, L(1, 2, 3), L(2, 2, 2)), 0, 0, 1, 0);
	expect(B2(ENG_OP_CMPNE, ENG_I32, 3, L(1, 2, 3), L(2, 2, 2)), 0, 1, 0, 1);
	expect(B2(ENG_OP_CMPLT, ENG_U8, 2, L(200, 3), L(100, 4)), 0, 0, 1);
	expect(B2(ENG_OP_CMPLT, ENG_F32, 3, L(NAN, 1, -INFINITY), L(1, NAN, 0)), 0, 0, 0, 1);
	expect(B2(ENG_OP_CMPNE, ENG_F32, 2, L(NAN, 1), L(NAN, 1)), 0, 1, 0);
	expect(B2(ENG_OP_CMPEQ, ENG_F32, 2, L(-0.0, 1), L(0.0, 2)), 0, 1, 0);
	expect(B2(ENG_OP_ADD, ENG_F32, 2, L(1.5, 16777216), L(2.25, 1)), 0, 3.75, 16777216);
	expect(B2(ENG_OP_ADD, ENG_F16, 2, L(2048, 0.5), L(1, 0.25)), 0, 2048, 0.75);
	expect(B2(ENG_OP_SUB, ENG_F32, 1, L(1), L(3.5)), 0, -2.5);
	expect(B2(ENG_OP_MUL, ENG_F32, 2, L(1.5, 3e38), L(-4, 10)), 0, -6, INFINITY);
	expect(B2(ENG_OP_MAX, ENG_F32, 3, L(-1, 2, -INFINITY), L(0, 1, -5)), 0, 0, 2, -5);
	fx_done(&f);
#undef B2
#undef L
}
END_TEST

START_TEST(ternary_where)
{
	fx f;
	fx_init(&f);
	eng_node *c = vec(&f, ENG_BOOL, 3, (double[]){1, 0, 1});
	eng_node *a = vec(&f, ENG_F32, 3, (double[]){1, 2, 3}),
		 *b = vec(&f, ENG_F32, 3, (double[]){10, 20, 30});
	eng_node_desc d = {.op = ENG_OP_WHERE,
			   .dtype = ENG_F32,
			   .ndim = 1,
			   .shape = a->shape,
			   .src = {c, a, b}};
	expect(hold(&f, eng_node_get(f.g, &d)), 0, 1, 20, 3);
	eng_node *ia = vec(&f, ENG_I64, 3, (double[]){-1, -2, -3}),
		 *ib = vec(&f, ENG_I64, 3, (double[]){4, 5, 6});
	eng_node_desc d2 = {.op = ENG_OP_WHERE,
			    .dtype = ENG_I64,
			    .ndim = 1,
			    .shape = a->shape,
			    .src = {c, ia, ib}};
	expect(hold(&f, eng_node_get(f.g, &d2)), 0, -1, 5, -3);
	fx_done(&f);
}
END_TEST

/* ---- reductions ---- */

START_TEST(reduce_ops)
{
	fx f;
	fx_init(&f);
	int64_t s23[2] = {2, 3}, s03[2] = {0, 3};
	eng_node *x = buf(&f, ENG_F32, 2, s23, (double[]){1, 2, 3, 4, 5, 6});
	eng_node *r1 = reduce(&f, ENG_OP_RSUM, x, 2);
	ck_assert_int_eq(r1->shape[0], 2);
	ck_assert_int_eq(r1->shape[1], 1);
	expect(r1, 0, 6, 15);
	expect(reduce(&f, ENG_OP_RSUM, x, 1), 0, 5, 7, 9);
	expect(reduce(&f, ENG_OP_RSUM, x, 3), 0, 21);
	expect(reduce(&f, ENG_OP_RPROD, x, 2), 0, 6, 120);
	expect(reduce(&f, ENG_OP_RMAX, x, 1), 0, 4, 5, 6);
	eng_node *xi = buf(&f, ENG_I32, 2, s23, (double[]){-5, -2, -9, I32MAX, 1, 0});
	expect(reduce(&f, ENG_OP_RMAX, xi, 2), 0, -2, I32MAX);
	expect(reduce(&f, ENG_OP_RSUM, xi, 2), 0, -16, I32MIN);
	expect(reduce(&f, ENG_OP_RPROD, xi, 2), 0, -90, 0);
	expect(reduce(&f, ENG_OP_RSUM, vec(&f, ENG_U8, 2, (double[]){200, 100}), 1), 0, 44);
	expect(reduce(&f, ENG_OP_RMAX, vec(&f, ENG_BOOL, 3, (double[]){0, 1, 0}), 1), 0, 1);
	expect(reduce(&f, ENG_OP_RPROD, vec(&f, ENG_BOOL, 3, (double[]){1, 1, 0}), 1), 0, 0);
	/* empty reductions give the identity */
	expect(reduce(&f, ENG_OP_RMAX, buf(&f, ENG_F32, 2, s03, NULL), 1), 0, -INFINITY, -INFINITY,
	       -INFINITY);
	expect(reduce(&f, ENG_OP_RMAX, buf(&f, ENG_I32, 2, s03, NULL), 1), 0, I32MIN, I32MIN,
	       I32MIN);
	expect(reduce(&f, ENG_OP_RMAX, buf(&f, ENG_I64, 2, s03, NULL), 1), 0,
	       -9223372036854775808.0, -9223372036854775808.0, -9223372036854775808.0);
	expect(reduce(&f, ENG_OP_RMAX, buf(&f, ENG_U8, 2, s03, NULL), 1), 0, 0, 0, 0);
	expect(reduce(&f, ENG_OP_RSUM, buf(&f, ENG_F16, 2, s03, NULL), 1), 0, 0, 0, 0);
	expect(reduce(&f, ENG_OP_RPROD, buf(&f, ENG_I32, 2, s03, NULL), 1), 0, 1, 1, 1);
	/* float sums round once at the end */
	expect(reduce(&f, ENG_OP_RSUM, vec(&f, ENG_F16, 3, (double[]){2048, 1, 1}), 1), 0, 2050);
	fx_done(&f);
}
END_TEST

/* ---- movement ---- */

START_TEST(movement_ops)
{
	fx f;
	fx_init(&f);
	int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s13[2] = {1, 3}, s21[2] = {2, 1}, s22[2] = {2, 2};
	int64_t s33[2] = {3, 3};
	eng_node *x = buf(&f, ENG_I32, 2, s23, (double[]){0, 1, 2, 3, 4, 5});
	expect(mv(&f, (eng_node_desc){.op = ENG_OP_RESHAPE}, x, 2, s32), 0, 0, 1, 2, 3, 4, 5);
	eng_node_desc p = {.op = ENG_OP_PERMUTE, .perm = (int8_t[]){1, 0}};
	expect(mv(&f, p, x, 2, s32), 0, 0, 3, 1, 4, 2, 5);
	eng_node_desc e = {.op = ENG_OP_EXPAND};
	expect(mv(&f, e, buf(&f, ENG_I32, 2, s13, (double[]){1, 2, 3}), 2, s23), 0, 1, 2, 3, 1, 2,
	       3);
	expect(mv(&f, e, buf(&f, ENG_I32, 2, s21, (double[]){1, 2}), 2, s23), 0, 1, 1, 1, 2, 2, 2);
	eng_node_desc pad = {.op = ENG_OP_PAD, .pairs = (const int64_t[][2]){{1, 0}, {0, 1}}};
	expect(mv(&f, pad, buf(&f, ENG_F32, 2, s22, (double[]){1, 2, 3, 4}), 2, s33), 0, 0, 0, 0, 1,
	       2, 0, 3, 4, 0);
	eng_node_desc sh = {.op = ENG_OP_SHRINK, .pairs = (const int64_t[][2]){{1, 3}, {0, 2}}};
	eng_node *x33 = buf(&f, ENG_F32, 2, s33, (double[]){0, 1, 2, 3, 4, 5, 6, 7, 8});
	expect(mv(&f, sh, x33, 2, s22), 0, 3, 4, 6, 7);
	expect(mv(&f, (eng_node_desc){.op = ENG_OP_FLIP, .axes = 2}, x, 2, s23), 0, 2, 1, 0, 5, 4,
	       3);
	expect(mv(&f, (eng_node_desc){.op = ENG_OP_FLIP, .axes = 3}, x, 2, s23), 0, 5, 4, 3, 2, 1,
	       0);
	expect(mv(&f, (eng_node_desc){.op = ENG_OP_FLIP, .axes = 1}, x, 2, s23), 0, 3, 4, 5, 0, 1,
	       2);
	/* a 3-d permute checked against its definition: out[i][j][k] = src[j][k][i] */
	int64_t s234[3] = {2, 3, 4}, s423[3] = {4, 2, 3};
	double v[24];
	for (int k = 0; k < 24; k++)
		v[k] = k;
	eng_node_desc p3 = {.op = ENG_OP_PERMUTE, .perm = (int8_t[]){2, 0, 1}};
	eng_node *y = mv(&f, p3, buf(&f, ENG_I64, 3, s234, v), 3, s423);
	ref_array a;
	ck_assert(ref_eval(y, &a));
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 2; j++)
			for (int k = 0; k < 3; k++)
				ck_assert_int_eq(a.i[(i * 2 + j) * 3 + k], j * 12 + k * 4 + i);
	ref_free(&a);
	fx_done(&f);
}
END_TEST

/* ---- buffer ops, sharing and the realized-cache rule ---- */

START_TEST(bufferops_and_graph)
{
	fx f;
	fx_init(&f);
	eng_node *x = vec(&f, ENG_F32, 2, (double[]){1, 2});
	expect(un(&f, ENG_OP_CONTIGUOUS, ENG_F32, x), 0, 1, 2);
	eng_node_desc cp = {
		.op = ENG_OP_COPY, .dtype = ENG_F32, .ndim = 1, .shape = x->shape, .src = {x}};
	expect(hold(&f, eng_node_get(f.g, &cp)), 0, 1, 2);
	eng_node *v = vec(&f, ENG_F32, 2, (double[]){5, 6});
	expect(bin(&f, ENG_OP_ASSIGN, x, v), 0, 5, 6);
	/* x + x shares one source; a diamond computes the shared part once and right */
	eng_node *xx = bin(&f, ENG_OP_ADD, x, x);
	expect(xx, 0, 2, 4);
	expect(bin(&f, ENG_OP_MUL, xx, bin(&f, ENG_OP_SUB, xx, x)), 0, 2, 8);
	/* a long chain: ((x + 1) + 1) ... 150 times */
	eng_node *one = cnst(&f, ENG_F32, 1, x->shape, (eng_const_value){.f = 1});
	eng_node *c = x;
	for (int i = 0; i < 150; i++)
		c = bin(&f, ENG_OP_ADD, c, one);
	expect(c, 0, 151, 152);
	/* a realized value cached on a non-BUFFER node is ignored */
	eng_node *neg = un(&f, ENG_OP_NEG, ENG_F32, x);
	neg->buf = fake_buffer(&f, ENG_F32, 2, (double[]){99, 99});
	expect(neg, 0, -1, -2);
	eng_buffer_unref(neg->buf);
	neg->buf = NULL;
	fx_done(&f);
}
END_TEST

/* ---- the comparison helpers ---- */

START_TEST(match_rules)
{
	int64_t s3[1] = {3};
	ref_array w, g;
	char msg[256];
	float wv[3] = {1, NAN, INFINITY}, gv[3] = {1.0005f, NAN, INFINITY};
	ck_assert(ref_decode(ENG_F32, 1, s3, wv, &w));
	ck_assert(ref_decode(ENG_F32, 1, s3, gv, &g));
	ck_assert(ref_match(&g, &w, 1e-3, 0, msg, sizeof(msg)));
	ck_assert(!ref_match(&g, &w, 1e-4, 0, msg, sizeof(msg)));
	ck_assert_msg(strstr(msg, "flat 0") && strstr(msg, "[0]"), "message: %s", msg);
	g.f[1] = 0;
	ck_assert(!ref_match(&g, &w, 1, 1, msg, sizeof(msg)));
	ck_assert_msg(strstr(msg, "flat 1"), "message: %s", msg);
	g.f[1] = NAN;
	g.f[2] = -INFINITY;
	ck_assert(!ref_match(&g, &w, 1, 1, msg, sizeof(msg)));
	ref_free(&g);
	ref_free(&w);
	int32_t a[3] = {1, 2, 3}, b[3] = {1, 2, 4};
	ck_assert(ref_decode(ENG_I32, 1, s3, a, &w));
	ck_assert(ref_decode(ENG_I32, 1, s3, b, &g));
	ck_assert(!ref_match(&g, &w, 1, 1, msg,
			     sizeof(msg))); /* ints are exact whatever the tolerance */
	ck_assert_msg(strstr(msg, "got 4") && strstr(msg, "want 3"), "message: %s", msg);
	ref_free(&g);
	int64_t s13[2] = {1, 3};
	ck_assert(ref_decode(ENG_I32, 2, s13, a, &g));
	ck_assert(!ref_match(&g, &w, 0, 0, msg, sizeof(msg))); /* shapes differ */
	ref_free(&g);
	ref_free(&w);
}
END_TEST

Suite *ref_suite(void)
{
	const TTest *const tests[] = {
		leaf_buffer,	      leaf_const_index, unary_float,	  unary_int,
		unary_cast,	      unary_bitcast,	binary_int_arith, binary_int_bits,
		binary_compare_float, ternary_where,	reduce_ops,	  movement_ops,
		bufferops_and_graph,  match_rules,
	};
	return tu_suite("ref", tests, (int)(sizeof(tests) / sizeof(tests[0])), 30);
}
