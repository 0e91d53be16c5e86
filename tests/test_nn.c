/* test_nn.c: the neural-network composites of engine.h (matmul, linear, conv2d, pooling, one_hot,
 * gather, embedding, layernorm, cross-entropy) against the reference and direct C loops. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"
#include "testutil.h"

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int64_t prod(int n, const int64_t *s)
{
	int64_t p = 1;
	for (int i = 0; i < n; i++)
		p *= s[i];
	return p;
}

/* ---- matmul ---- */

/* numpy matmul of a and b (row-major doubles) into out; returns the output numel. */
static int64_t direct_matmul(const double *a, int na, const int64_t *sa, const double *b, int nb,
			     const int64_t *sb, double *out)
{
	int64_t as[ENG_MAX_DIMS], bs[ENG_MAX_DIMS];
	int da = na == 1 ? 2 : na, db = nb == 1 ? 2 : nb;
	if (na == 1)
		as[0] = 1, as[1] = sa[0];
	else
		memcpy(as, sa, sizeof(int64_t) * na);
	if (nb == 1)
		bs[0] = sb[0], bs[1] = 1;
	else
		memcpy(bs, sb, sizeof(int64_t) * nb);
	int64_t M = as[da - 2], K = as[da - 1], N = bs[db - 1];
	int nbat = da > db ? da - 2 : db - 2;
	int64_t bshape[ENG_MAX_DIMS], nbatch = 1;
	for (int i = 0; i < nbat; i++) {
		int ia = i - (nbat - (da - 2)), ib = i - (nbat - (db - 2));
		int64_t x = ia >= 0 ? as[ia] : 1, y = ib >= 0 ? bs[ib] : 1;
		bshape[i] = x == 1 ? y : x;
		nbatch *= bshape[i];
	}
	int64_t cnt = 0;
	for (int64_t bi = 0; bi < nbatch; bi++) {
		/* batch index -> offsets in a and b (size-1 and missing dims broadcast) */
		int64_t rem = bi, offa = 0, offb = 0, stra = M * K, strb = K * N;
		for (int i = nbat - 1; i >= 0; i--) {
			int64_t idx = rem % bshape[i];
			rem /= bshape[i];
			int ia = i - (nbat - (da - 2)), ib = i - (nbat - (db - 2));
			if (ia >= 0) {
				offa += (as[ia] == 1 ? 0 : idx) * stra;
				stra *= as[ia];
			}
			if (ib >= 0) {
				offb += (bs[ib] == 1 ? 0 : idx) * strb;
				strb *= bs[ib];
			}
		}
		for (int64_t m = 0; m < M; m++)
			for (int64_t n = 0; n < N; n++) {
				double acc = 0;
				for (int64_t k = 0; k < K; k++)
					acc += a[offa + m * K + k] * b[offb + k * N + n];
				out[cnt++] = acc;
			}
	}
	return cnt;
}

static const struct mm_case {
	int na, nb;
	int64_t a[4], b[4];
} mm_cases[] = {
	{2, 2, {3, 4}, {4, 5}}, {3, 2, {2, 3, 4}, {4, 5}},    {4, 3, {2, 1, 3, 4}, {5, 4, 2}},
	{1, 2, {4}, {4, 5}},	{2, 1, {3, 4}, {4}},	      {1, 1, {4}, {4}},
	{3, 1, {2, 3, 4}, {4}}, {1, 3, {4}, {2, 4, 3}},	      {2, 2, {1, 7}, {7, 1}},
	{2, 2, {3, 0}, {0, 2}}, {3, 3, {1, 2, 3}, {3, 3, 2}},
};

START_TEST(matmul_all)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {301};
	tu_batch *b = tu_batch_new(ctx);
	double av[128], bv[128], want[256];
	static const eng_dtype dts[] = {ENG_F32, ENG_I32, ENG_F16};
	for (int d = 0; d < N_OF(dts); d++) {
		eng_dtype dt = dts[d];
		double q = dt == ENG_I32 ? 1 : 0.125, tol = dt == ENG_F16 ? 2e-3 : 1e-6;
		for (int c = 0; c < N_OF(mm_cases); c++) {
			const struct mm_case *m = &mm_cases[c];
			eng_tensor *x = tu_quant(ctx, &r, dt, m->na, m->a, -2, 2, q, av);
			eng_tensor *y = tu_quant(ctx, &r, dt, m->nb, m->b, -2, 2, q, bv);
			int64_t n = direct_matmul(av, m->na, m->a, bv, m->nb, m->b, want);
			eng_tensor *z = eng_matmul(x, y);
			tu_batch_want(b, z, want, n, tol, tol, "matmul %s case %d",
				      eng_dtype_name(dt), c);
			tu_batch_ref(b, z, tol, tol, "matmul %s case %d vs ref", eng_dtype_name(dt),
				     c);
		}
	}
	/* known: [[1,2],[3,4]] @ [[5,6],[7,8]]; shapes of the 1-d promotions */
	int64_t s22[2] = {2, 2};
	eng_tensor *p = tu_from_doubles(ctx, ENG_F32, 2, s22, (double[]){1, 2, 3, 4});
	eng_tensor *q = tu_from_doubles(ctx, ENG_F32, 2, s22, (double[]){5, 6, 7, 8});
	tu_batch_want(b, eng_matmul(p, q), (double[]){19, 22, 43, 50}, 4, 0, 0, "matmul known");
	/* mixed dtypes promote; a non-contiguous operand */
	eng_tensor *pi = tu_from_doubles(ctx, ENG_I32, 2, s22, (double[]){1, 2, 3, 4});
	tu_batch_want(b, eng_matmul(pi, q), (double[]){19, 22, 43, 50}, 4, 0, 0,
		      "matmul i32 x f32");
	tu_batch_want(b, eng_matmul(eng_transpose(p, 0, 1), q), (double[]){26, 30, 38, 44}, 4, 0, 0,
		      "matmul transposed operand");
	eng_tensor *v =
		eng_matmul(eng_reshape(p, 1, (int64_t[]){4}), eng_reshape(q, 1, (int64_t[]){4}));
	ck_assert(v && eng_ndim(v) == 0);
	tu_batch_want(b, v, (double[]){70}, 1, 0, 0, "dot");
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

START_TEST(linear_all)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {302};
	tu_batch *b = tu_batch_new(ctx);
	int64_t sx[3] = {2, 3, 4}, sw[2] = {5, 4}, sb[1] = {5};
	double xv[24], wv[20], bv[5], want[64];
	eng_tensor *x = tu_quant(ctx, &r, ENG_F32, 3, sx, -2, 2, 0.125, xv);
	eng_tensor *w = tu_quant(ctx, &r, ENG_F32, 2, sw, -2, 2, 0.125, wv);
	eng_tensor *bias = tu_quant(ctx, &r, ENG_F32, 1, sb, -2, 2, 0.125, bv);
	for (int i = 0; i < 6; i++)
		for (int o = 0; o < 5; o++) {
			double acc = bv[o];
			for (int k = 0; k < 4; k++)
				acc += xv[i * 4 + k] * wv[o * 4 + k];
			want[i * 5 + o] = acc;
		}
	eng_tensor *y = eng_linear(x, w, bias);
	ck_assert(y && eng_ndim(y) == 3 && eng_shape(y)[2] == 5);
	tu_batch_want(b, y, want, 30, 1e-6, 1e-6, "linear with bias");
	for (int i = 0; i < 30; i++)
		want[i] -= bv[i % 5];
	tu_batch_want(b, eng_linear(x, w, NULL), want, 30, 1e-6, 1e-6, "linear without bias");
	eng_tensor *x1 = eng_reshape(eng_shrink(x, (const int64_t[][2]){{0, 1}, {0, 1}, {0, 4}}), 1,
				     (int64_t[]){4});
	tu_batch_want(b, eng_linear(x1, w, NULL), want, 5, 1e-6, 1e-6, "linear 1-d input");
	tu_batch_ref(b, y, 1e-6, 1e-6, "linear vs ref");
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

/* ---- convolution and pooling ---- */

typedef struct conv_case {
	int64_t x[4], w[4];
	int stride[2], pad[2], dil[2], groups;
	bool bias;
} conv_case;

static int64_t direct_conv(const conv_case *c, const double *x, const double *w, const double *bias,
			   double *out, int64_t *oshape)
{
	int64_t N = c->x[0], Cin = c->x[1], H = c->x[2], W = c->x[3];
	int64_t Cout = c->w[0], Cg = c->w[1], KH = c->w[2], KW = c->w[3];
	int64_t OH = (H + 2 * c->pad[0] - c->dil[0] * (KH - 1) - 1) / c->stride[0] + 1;
	int64_t OW = (W + 2 * c->pad[1] - c->dil[1] * (KW - 1) - 1) / c->stride[1] + 1;
	int64_t og = Cout / c->groups, cnt = 0;
	(void)Cin;
	oshape[0] = N, oshape[1] = Cout, oshape[2] = OH, oshape[3] = OW;
	for (int64_t n = 0; n < N; n++)
		for (int64_t co = 0; co < Cout; co++)
			for (int64_t oh = 0; oh < OH; oh++)
				for (int64_t ow = 0; ow < OW; ow++) {
					double acc = bias ? bias[co] : 0;
					int64_t g = co / og;
					for (int64_t ci = 0; ci < Cg; ci++)
						for (int64_t kh = 0; kh < KH; kh++)
							for (int64_t kw = 0; kw < KW; kw++) {
								int64_t ih = oh * c->stride[0] -
									     c->pad[0] +
									     kh * c->dil[0];
								int64_t iw = ow * c->stride[1] -
									     c->pad[1] +
									     kw * c->dil[1];
								if (ih < 0 || ih >= H || iw < 0 ||
								    iw >= W)
									continue;
								int64_t cin = g * Cg + ci;
								acc += x[((n * c->x[1] + cin) * H +
									  ih) * W +
									 iw] *
								       w[((co * Cg + ci) * KH +
									  kh) * KW +
									 kw];
							}
					out[cnt++] = acc;
				}
	return cnt;
}

static const conv_case conv_cases[] = {
	{{1, 1, 5, 5}, {1, 1, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, false},
	{{2, 4, 7, 6}, {6, 2, 3, 3}, {2, 1}, {1, 2}, {1, 2}, 2, true},
	{{1, 3, 5, 5}, {2, 3, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true},
	{{1, 3, 6, 6}, {3, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 3, false},
	{{1, 2, 9, 9}, {4, 2, 3, 3}, {1, 2}, {0, 1}, {2, 3}, 1, true},
	{{2, 2, 4, 4}, {2, 2, 2, 2}, {2, 2}, {0, 0}, {1, 1}, 1, false},
	{{1, 1, 4, 4}, {1, 1, 4, 4}, {1, 1}, {2, 2}, {1, 1}, 1, false},
	{{1, 1, 3, 3}, {1, 1, 1, 1}, {1, 1}, {2, 1}, {1, 1}, 1, false}, /* padding wider than kernel */
	{{1, 2, 7, 8}, {3, 2, 2, 2}, {3, 3}, {0, 0}, {1, 1}, 1, true},  /* stride > kernel */
	{{1, 1, 8, 8}, {1, 1, 3, 2}, {3, 2}, {1, 1}, {2, 1}, 1, false}, /* dilated and strided */
	{{2, 1, 5, 5}, {1, 1, 5, 5}, {1, 1}, {0, 0}, {1, 1}, 1, false}, /* kernel = input */
	{{1, 4, 5, 6}, {4, 1, 2, 3}, {1, 3}, {1, 0}, {3, 2}, 4, true},  /* depthwise, dilated */
};

START_TEST(conv2d_all)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {311};
	tu_batch *b = tu_batch_new(ctx);
	double xv[1024], wv[512], bv[16], want[2048];
	for (int c = 0; c < N_OF(conv_cases); c++) {
		const conv_case *cc = &conv_cases[c];
		eng_tensor *x = tu_quant(ctx, &r, ENG_F32, 4, cc->x, -2, 2, 0.125, xv);
		eng_tensor *w = tu_quant(ctx, &r, ENG_F32, 4, cc->w, -2, 2, 0.125, wv);
		eng_tensor *bias =
			cc->bias ? tu_quant(ctx, &r, ENG_F32, 1, cc->w, -2, 2, 0.125, bv) : NULL;
		int64_t os[4], n = direct_conv(cc, xv, wv, cc->bias ? bv : NULL, want, os);
		eng_tensor *y = eng_conv2d(x, w, bias, cc->stride, cc->pad, cc->dil, cc->groups);
		if (y)
			for (int d = 0; d < 4; d++)
				ck_assert_msg(eng_shape(y)[d] == os[d],
					      "conv case %d: dim %d is %lld, want %lld", c, d,
					      (long long)eng_shape(y)[d], (long long)os[d]);
		tu_batch_want(b, y, want, n, 1e-6, 1e-6, "conv2d case %d", c);
		tu_batch_ref(b, y, 1e-6, 1e-6, "conv2d case %d vs ref", c);
	}
	/* known 3x3 example: 1..9 with a 2x2 kernel of ones, then a 3x3 one with padding 1 */
	int64_t sx[4] = {1, 1, 3, 3}, sw2[4] = {1, 1, 2, 2}, sw3[4] = {1, 1, 3, 3};
	double nine[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
	eng_tensor *x9 = tu_from_doubles(ctx, ENG_F32, 4, sx, nine);
	const int one[2] = {1, 1}, zero[2] = {0, 0};
	tu_batch_want(b, eng_conv2d(x9, eng_ones(ctx, ENG_F32, 4, sw2), NULL, one, zero, one, 1),
		      (double[]){12, 16, 24, 28}, 4, 0, 0, "conv2d known 2x2");
	tu_batch_want(b, eng_conv2d(x9, eng_ones(ctx, ENG_F32, 4, sw3), NULL, one, one, one, 1),
		      (double[]){12, 21, 16, 27, 45, 33, 24, 39, 28}, 9, 0, 0,
		      "conv2d known 3x3 pad 1");
	eng_tensor *bias1 = tu_from_doubles(ctx, ENG_F32, 1, (int64_t[]){1}, (double[]){-1});
	tu_batch_want(b, eng_conv2d(x9, eng_ones(ctx, ENG_F32, 4, sw2), bias1, one, zero, one, 1),
		      (double[]){11, 15, 23, 27}, 4, 0, 0, "conv2d known with bias");
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

/* Pooling over the last two axes of x (lead dims flattened to L); max pads with -inf. */
static int64_t direct_pool(bool is_max, int64_t L, int64_t H, int64_t W, const double *x,
			   const int *k, const int *s, const int *p, double *out)
{
	int64_t OH = (H + 2 * p[0] - k[0]) / s[0] + 1, OW = (W + 2 * p[1] - k[1]) / s[1] + 1,
		cnt = 0;
	for (int64_t l = 0; l < L; l++)
		for (int64_t oh = 0; oh < OH; oh++)
			for (int64_t ow = 0; ow < OW; ow++) {
				double acc = is_max ? -INFINITY : 0;
				for (int kh = 0; kh < k[0]; kh++)
					for (int kw = 0; kw < k[1]; kw++) {
						int64_t ih = oh * s[0] - p[0] + kh,
							iw = ow * s[1] - p[1] + kw;
						if (ih < 0 || ih >= H || iw < 0 || iw >= W)
							continue;
						double v = x[(l * H + ih) * W + iw];
						acc = is_max ? fmax(acc, v) : acc + v;
					}
				out[cnt++] = is_max ? acc : acc / (k[0] * k[1]);
			}
	return cnt;
}

START_TEST(pool_all)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {321};
	tu_batch *b = tu_batch_new(ctx);
	double xv[1024], want[1024];
	static const struct {
		int nd;
		int64_t s[4];
		int k[2], st[2], p[2];
		bool null_stride, null_pad;
	} cases[] = {
		{4, {2, 3, 7, 6}, {3, 3}, {2, 2}, {1, 1}, false, false},
		{4, {1, 2, 4, 4}, {2, 2}, {2, 2}, {0, 0}, true, true},
		{3, {3, 8, 5}, {2, 3}, {1, 2}, {0, 0}, false, true},
		{2, {5, 7}, {3, 2}, {1, 1}, {1, 1}, false, false},
		{4, {1, 1, 6, 6}, {2, 2}, {3, 3}, {0, 0}, false, false},
		{3, {2, 7, 7}, {2, 2}, {3, 3}, {1, 1}, false, false},
		{4, {1, 2, 5, 9}, {1, 3}, {2, 2}, {0, 1}, false, false},
		{2, {4, 4}, {4, 4}, {1, 1}, {2, 2}, false, false},
	};
	for (int c = 0; c < N_OF(cases); c++) {
		int nd = cases[c].nd;
		eng_tensor *x = tu_quant(ctx, &r, ENG_F32, nd, cases[c].s, -4, 4, 0.125, xv);
		int64_t L = prod(nd - 2, cases[c].s), H = cases[c].s[nd - 2],
			W = cases[c].s[nd - 1];
		const int *st = cases[c].null_stride ? cases[c].k : cases[c].st;
		for (int m = 0; m < 2; m++) {
			int64_t n =
				direct_pool(m == 0, L, H, W, xv, cases[c].k, st, cases[c].p, want);
			const int *sarg = cases[c].null_stride ? NULL : cases[c].st;
			const int *parg = cases[c].null_pad ? NULL : cases[c].p;
			eng_tensor *y = m == 0 ? eng_max_pool2d(x, cases[c].k, sarg, parg)
					       : eng_avg_pool2d(x, cases[c].k, sarg, parg);
			tu_batch_want(b, y, want, n, 1e-6, 1e-6, "%s case %d",
				      m ? "avg_pool" : "max_pool", c);
			tu_batch_ref(b, y, 1e-6, 1e-6, "%s case %d vs ref",
				     m ? "avg_pool" : "max_pool", c);
		}
	}
	/* known: 4x4 of 0..15, 2x2 windows */
	double v16[16];
	for (int i = 0; i < 16; i++)
		v16[i] = i;
	eng_tensor *x16 = tu_from_doubles(ctx, ENG_F32, 2, (int64_t[]){4, 4}, v16);
	const int k2[2] = {2, 2};
	tu_batch_want(b, eng_max_pool2d(x16, k2, NULL, NULL), (double[]){5, 7, 13, 15}, 4, 0, 0,
		      "max_pool known");
	tu_batch_want(b, eng_avg_pool2d(x16, k2, NULL, NULL), (double[]){2.5, 4.5, 10.5, 12.5}, 4,
		      0, 0, "avg_pool known");
	/* integer max pooling keeps the dtype */
	eng_tensor *xi = tu_from_doubles(ctx, ENG_I32, 2, (int64_t[]){4, 4}, v16);
	tu_batch_want(b, eng_max_pool2d(eng_neg(xi), k2, NULL, NULL), (double[]){0, -2, -8, -10}, 4,
		      0, 0, "max_pool int32 negative");
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

/* ---- indexing ---- */

START_TEST(one_hot_gather_embedding)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {331};
	tu_batch *b = tu_batch_new(ctx);
	double want[512];
	/* one_hot of labels with a few out of range (a zero row) */
	double lab[6] = {0, 4, 2, -1, 5, 3};
	static const eng_dtype ldts[] = {ENG_I32, ENG_I64, ENG_U8};
	for (int d = 0; d < N_OF(ldts); d++) {
		double l2[6];
		for (int i = 0; i < 6; i++)
			l2[i] = ldts[d] == ENG_U8 && lab[i] < 0 ? 7 : lab[i];
		eng_tensor *lt = tu_from_doubles(ctx, ldts[d], 2, (int64_t[]){2, 3}, l2);
		for (int i = 0; i < 6; i++)
			for (int c = 0; c < 5; c++)
				want[i * 5 + c] = l2[i] == c;
		eng_tensor *oh = eng_one_hot(lt, 5);
		ck_assert(oh && eng_tensor_dtype(oh) == ENG_F32 && eng_ndim(oh) == 3 &&
			  eng_shape(oh)[2] == 5);
		tu_batch_want(b, oh, want, 30, 0, 0, "one_hot %s", eng_dtype_name(ldts[d]));
	}
	/* gather along each axis */
	static const struct {
		int nd;
		int64_t a[3], idx[3];
		int axis;
		eng_dtype idt;
	} gc[] = {
		{2, {3, 5}, {3, 4}, 1, ENG_I32},
		{2, {3, 5}, {2, 5}, 0, ENG_I64},
		{3, {2, 3, 4}, {2, 3, 2}, -1, ENG_I32},
		{3, {2, 3, 4}, {2, 5, 4}, 1, ENG_U8},
	};
	for (int c = 0; c < N_OF(gc); c++) {
		double av[64], iv[64];
		int nd = gc[c].nd, ax = gc[c].axis < 0 ? gc[c].axis + nd : gc[c].axis;
		eng_tensor *a = tu_quant(ctx, &r, ENG_F32, nd, gc[c].a, -4, 4, 0.125, av);
		eng_tensor *idx = tu_quant(ctx, &r, gc[c].idt, nd, gc[c].idx, 0,
					   (double)gc[c].a[ax] - 1, 1, iv);
		int64_t n = prod(nd, gc[c].idx), pos[3];
		for (int64_t k = 0; k < n; k++) {
			int64_t rem = k, src = 0;
			for (int d = nd - 1; d >= 0; d--) {
				pos[d] = rem % gc[c].idx[d];
				rem /= gc[c].idx[d];
			}
			pos[ax] = (int64_t)iv[k];
			for (int d = 0; d < nd; d++)
				src = src * gc[c].a[d] + pos[d];
			want[k] = av[src];
		}
		eng_tensor *g = eng_gather(a, gc[c].axis, idx);
		tu_batch_want(b, g, want, n, 0, 0, "gather case %d", c);
		tu_batch_ref(b, g, 0, 0, "gather case %d vs ref", c);
	}
	/* embedding rows */
	double tv[24], iv[6];
	eng_tensor *table = tu_quant(ctx, &r, ENG_F32, 2, (int64_t[]){6, 4}, -4, 4, 0.125, tv);
	eng_tensor *ids = tu_quant(ctx, &r, ENG_I32, 2, (int64_t[]){2, 3}, 0, 5, 1, iv);
	for (int i = 0; i < 6; i++)
		for (int d = 0; d < 4; d++)
			want[i * 4 + d] = tv[(int)iv[i] * 4 + d];
	eng_tensor *e = eng_embedding(table, ids);
	ck_assert(e && eng_ndim(e) == 3 && eng_shape(e)[2] == 4);
	tu_batch_want(b, e, want, 24, 0, 0, "embedding");
	eng_tensor *ids1 = tu_from_doubles(ctx, ENG_I64, 1, (int64_t[]){3}, (double[]){5, 0, 5});
	for (int d = 0; d < 4; d++) {
		want[d] = tv[20 + d];
		want[4 + d] = tv[d];
		want[8 + d] = tv[20 + d];
	}
	tu_batch_want(b, eng_embedding(table, ids1), want, 12, 0, 0, "embedding 1-d ids");
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

/* ---- normalisation and loss ---- */

START_TEST(layernorm_cross_entropy)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {341};
	tu_batch *b = tu_batch_new(ctx);
	double xv[64], want[64];
	static const struct {
		int nd;
		int64_t s[3];
		double eps;
	} ln[] = {{2, {3, 8}, 1e-5}, {3, {2, 2, 5}, 1e-3}, {1, {7}, 0}};
	for (int c = 0; c < N_OF(ln); c++) {
		eng_tensor *x = tu_quant(ctx, &r, ENG_F32, ln[c].nd, ln[c].s, -4, 4, 0.125, xv);
		int64_t D = ln[c].s[ln[c].nd - 1], rows = prod(ln[c].nd, ln[c].s) / D;
		for (int64_t i = 0; i < rows; i++) {
			double m = 0, v = 0;
			for (int64_t d = 0; d < D; d++)
				m += xv[i * D + d] / D;
			for (int64_t d = 0; d < D; d++)
				v += (xv[i * D + d] - m) * (xv[i * D + d] - m) / D;
			for (int64_t d = 0; d < D; d++)
				want[i * D + d] = (xv[i * D + d] - m) / sqrt(v + ln[c].eps);
		}
		eng_tensor *y = eng_layernorm(x, ln[c].eps);
		tu_batch_want(b, y, want, rows * D, 1e-4, 1e-5, "layernorm case %d", c);
		tu_batch_ref(b, y, 1e-5, 1e-6, "layernorm case %d vs ref", c);
	}
	eng_tensor *l4 = tu_from_doubles(ctx, ENG_F32, 1, (int64_t[]){4}, (double[]){1, 2, 3, 4});
	tu_batch_want(b, eng_layernorm(l4, 0),
		      (double[]){-1.3416407865, -0.4472135955, 0.4472135955, 1.3416407865}, 4, 1e-5,
		      0, "layernorm known");
	/* cross-entropy */
	double lv[20], labv[4];
	eng_tensor *logits = tu_quant(ctx, &r, ENG_F32, 2, (int64_t[]){4, 5}, -4, 4, 0.125, lv);
	eng_tensor *labels = tu_quant(ctx, &r, ENG_I32, 1, (int64_t[]){4}, 0, 4, 1, labv);
	double loss = 0;
	for (int i = 0; i < 4; i++) {
		double mx = -INFINITY, se = 0;
		for (int c = 0; c < 5; c++)
			mx = fmax(mx, lv[i * 5 + c]);
		for (int c = 0; c < 5; c++)
			se += exp(lv[i * 5 + c] - mx);
		loss += -(lv[i * 5 + (int)labv[i]] - mx - log(se)) / 4;
	}
	eng_tensor *ce = eng_sparse_cross_entropy(logits, labels);
	ck_assert(ce && eng_numel(ce) == 1);
	tu_batch_want(b, ce, &loss, 1, 1e-5, 1e-6, "cross entropy");
	tu_batch_ref(b, ce, 1e-6, 1e-6, "cross entropy vs ref");
	eng_tensor *z2 = eng_zeros(ctx, ENG_F32, 2, (int64_t[]){1, 2});
	eng_tensor *l0 = eng_zeros(ctx, ENG_I64, 1, (int64_t[]){1});
	tu_batch_want(b, eng_sparse_cross_entropy(z2, l0), (double[]){0.6931471806}, 1, 1e-6, 0,
		      "cross entropy known");
	tu_batch_check(b);
	tu_ctx_free(ctx);
}
END_TEST

Suite *nn_suite(void)
{
	const TTest *const tests[] = {
		matmul_all,
		linear_all,
		conv2d_all,
		pool_all,
		one_hot_gather_embedding,
		layernorm_cross_entropy,
	};
	return tu_suite("nn", tests, N_OF(tests), TU_TIMEOUT);
}
