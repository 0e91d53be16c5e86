/* test_kernels.c: kernel counts of the fusion cases the engine promises (no more kernels than
 * tinygrad's on each), with each result also checked against the reference evaluator. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tensord/jit.h>
#include <tensord/nn.h>

#include "codegen/plan.h"
#include "device/device.h"
#include "testutil.h"

/* Realize t alone and return how many kernels that launched; checks t against ref_eval. */
static uint64_t kernels_for(eng_ctx *ctx, eng_tensor *const *ts, int n)
{
	eng_stats st;
	for (int i = 0; i < n; i++)
		ck_assert_msg(ts[i] != NULL, "build failed: %s", eng_errmsg(ctx));
	eng_reset_stats(ctx);
	ck_assert_msg(eng_realize(ts, n) == ENG_OK, "realize failed: %s", eng_errmsg(ctx));
	eng_get_stats(ctx, &st);
	tu_batch *b = tu_batch_new(ctx);
	for (int i = 0; i < n; i++)
		tu_batch_ref(b, ts[i], 1e-4, 1e-4, "output %d", i);
	tu_batch_check(b);
	return st.kernels;
}

#define EXPECT_KERNELS(ctx, want, ...)                                                             \
	do {                                                                                       \
		eng_tensor *ts_[] = {__VA_ARGS__};                                                 \
		uint64_t got_ = kernels_for(ctx, ts_, (int)(sizeof(ts_) / sizeof(ts_[0])));        \
		ck_assert_msg(got_ == (want), "expected %d kernels, got %llu", (int)(want),         \
			      (unsigned long long)got_);                                           \
	} while (0)

static eng_tensor *mk(eng_ctx *ctx, tu_rng *r, int ndim, const int64_t *shape)
{
	return tu_rand(ctx, r, ENG_F32, ndim, shape, -1, 1);
}

/* A context without the disk cache, logging at `debug` to fn (the kernels' plans at 3, their
 * source at 4), with backend options opts (NULL: none). */
static eng_ctx *log_ctx(int debug, eng_log_fn fn, void *arg, const char *opts)
{
	eng_ctx_opts o;
	char err[512] = "";
	eng_ctx_opts_default(&o);
	o.debug = debug;
	o.no_disk_cache = true;
	o.backend_opts = opts;
	eng_ctx *ctx = eng_ctx_create(&o, err, sizeof(err));
	ck_assert_msg(ctx != NULL, "eng_ctx_create failed: %s", err);
	eng_set_log(ctx, fn, arg);
	return ctx;
}

START_TEST(test_matmul_fused_vs_forced)
{
	eng_ctx *ctx = tu_ctx();
	tu_rng r = {1};
	int64_t s[2] = {32, 32}, s1[3] = {32, 1, 32}, s2[3] = {1, 32, 32};
	eng_tensor *a = mk(ctx, &r, 2, s), *b = mk(ctx, &r, 2, s);
	int ax = 2;
	eng_tensor *lazy = eng_sum(eng_mul(eng_reshape(a, 3, s1), eng_reshape(eng_transpose(b, 0, 1), 3, s2)), &ax, 1,
				   false);
	EXPECT_KERNELS(ctx, 1, lazy);
	/* fresh inputs, so the forced run cannot reuse the lazy run's cached nodes */
	eng_tensor *a2 = mk(ctx, &r, 2, s), *b2 = mk(ctx, &r, 2, s);
	eng_tensor *p = eng_mul(eng_reshape(a2, 3, s1), eng_reshape(eng_transpose(b2, 0, 1), 3, s2));
	EXPECT_KERNELS(ctx, 1, p);
	EXPECT_KERNELS(ctx, 1, eng_sum(p, &ax, 1, false));
	eng_ctx_destroy(ctx);
}
END_TEST

START_TEST(test_matmul_bias_relu)
{
	eng_ctx *ctx = tu_ctx();
	tu_rng r = {2};
	int64_t sx[2] = {16, 24}, sw[2] = {24, 32}, sb[1] = {32};
	eng_tensor *x = mk(ctx, &r, 2, sx), *w = mk(ctx, &r, 2, sw), *b = mk(ctx, &r, 1, sb);
	EXPECT_KERNELS(ctx, 1, eng_relu(eng_add(eng_matmul(x, w), b)));
	eng_ctx_destroy(ctx);
}
END_TEST

START_TEST(test_mlp_forward)
{
	eng_ctx *ctx = tu_ctx();
	tu_rng r = {3};
	int64_t sx[2] = {8, 784}, s1[2] = {128, 784}, b1[1] = {128}, s2[2] = {10, 128}, b2[1] = {10};
	eng_tensor *x = mk(ctx, &r, 2, sx), *w1 = mk(ctx, &r, 2, s1), *c1 = mk(ctx, &r, 1, b1);
	eng_tensor *w2 = mk(ctx, &r, 2, s2), *c2 = mk(ctx, &r, 1, b2);
	EXPECT_KERNELS(ctx, 2, eng_linear(eng_relu(eng_linear(x, w1, c1)), w2, c2));
	eng_ctx_destroy(ctx);
}
END_TEST

START_TEST(test_softmax_layernorm_argmax)
{
	eng_ctx *ctx = tu_ctx();
	tu_rng r = {4};
	int64_t s[2] = {16, 10}, sl[2] = {16, 48};
	eng_tensor *x = mk(ctx, &r, 2, s), *y = mk(ctx, &r, 2, sl), *z = mk(ctx, &r, 2, s);
	EXPECT_KERNELS(ctx, 1, eng_softmax(x, -1));
	EXPECT_KERNELS(ctx, 1, eng_layernorm(y, 1e-5));
	EXPECT_KERNELS(ctx, 1, eng_argmax(z, -1, false));
	eng_ctx_destroy(ctx);
}
END_TEST

START_TEST(test_sparse_cross_entropy)
{
	eng_ctx *ctx = tu_ctx();
	tu_rng r = {5};
	int64_t s[2] = {16, 10}, sl[1] = {16};
	eng_tensor *x = mk(ctx, &r, 2, s);
	eng_tensor *y = tu_rand(ctx, &r, ENG_I32, 1, sl, 0, 9);
	/* each row's log-sum-exp nested in the batch's mean */
	EXPECT_KERNELS(ctx, 1, eng_sparse_cross_entropy(x, y));
	eng_ctx_destroy(ctx);
}
END_TEST

START_TEST(test_conv2d_relu)
{
	eng_ctx *ctx = tu_ctx();
	tu_rng r = {6};
	int64_t sx[4] = {2, 1, 12, 12}, sw[4] = {8, 1, 3, 3}, sb[1] = {8};
	eng_tensor *x = mk(ctx, &r, 4, sx), *w = mk(ctx, &r, 4, sw), *b = mk(ctx, &r, 1, sb);
	int one[2] = {1, 1}, zero[2] = {0, 0};
	EXPECT_KERNELS(ctx, 1, eng_relu(eng_conv2d(x, w, b, one, zero, one, 1)));
	eng_ctx_destroy(ctx);
}
END_TEST

START_TEST(test_siblings)
{
	eng_ctx *ctx = tu_ctx();
	tu_rng r = {7};
	int64_t s[2] = {8, 9};
	eng_tensor *x = mk(ctx, &r, 2, s);
	EXPECT_KERNELS(ctx, 1, eng_add_s(x, 1), eng_mul_s(x, 2));
	/* reductions of one input over the same axis share one kernel too */
	int ax = 1;
	eng_tensor *y = mk(ctx, &r, 2, s);
	EXPECT_KERNELS(ctx, 1, eng_sum(y, &ax, 1, true), eng_max(y, &ax, 1, true));
	eng_ctx_destroy(ctx);
}
END_TEST

START_TEST(test_contiguous_forces_store)
{
	eng_ctx *ctx = tu_ctx();
	tu_rng r = {8};
	int64_t s[2] = {8, 9};
	eng_tensor *x = mk(ctx, &r, 2, s);
	EXPECT_KERNELS(ctx, 2, eng_mul_s(eng_contiguous(eng_add_s(x, 1)), 3));
	eng_ctx_destroy(ctx);
}
END_TEST

/* A bag of words (one_hot summed over the tokens: a reduction whose loads do not depend on the
 * class dim, register-tiled along it) is one kernel; so is a stack or cat of reductions, each
 * computed once per row (unguarded under the pad), and a cat along the reductions' own outer
 * axis (where the pad's index leaves the bounds, so the guard stays). */
START_TEST(test_bag_of_words_stacked_reductions)
{
	eng_ctx *ctx = tu_ctx();
	tu_rng r = {9};
	int64_t si[2] = {64, 8}, s[2] = {64, 16};
	eng_tensor *ids = tu_rand(ctx, &r, ENG_I32, 2, si, 0, 40);
	int ax = 1;
	EXPECT_KERNELS(ctx, 1, eng_sum(eng_one_hot(eng_sub(ids, eng_scalar(ctx, ENG_I32, 1)), 32), &ax, 1, false));
	eng_tensor *x[3] = {mk(ctx, &r, 2, s), mk(ctx, &r, 2, s), mk(ctx, &r, 2, s)};
	eng_tensor *am[3], *mx[3];
	for (int k = 0; k < 3; k++) {
		am[k] = eng_argmax(x[k], -1, false);
		mx[k] = eng_max(x[k], &ax, 1, true);
	}
	EXPECT_KERNELS(ctx, 1, eng_stack(am, 3, 1));
	EXPECT_KERNELS(ctx, 1, eng_cat(mx, 3, 1));
	EXPECT_KERNELS(ctx, 1, eng_cat(mx, 3, 0));
	eng_ctx_destroy(ctx);
}
END_TEST

/* A sum whose value is zero but at one index (a one_hot matmul, a gather, an embedding) reads
 * that index instead of looping, so one_hot(ids) @ W summed over the tokens is one kernel, and
 * so is one_hot(argmax(z)) @ W; indices out of range give zeros. */
START_TEST(test_gather_sums)
{
	eng_ctx *ctx = tu_ctx();
	tu_rng r = {10};
	int64_t si[2] = {16, 8}, sw[2] = {32, 24}, sa[2] = {16, 32}, sg[2] = {16, 5};
	eng_tensor *ids = tu_rand(ctx, &r, ENG_I32, 2, si, -3, 36);
	eng_tensor *w = mk(ctx, &r, 2, sw), *a = mk(ctx, &r, 2, sa);
	eng_tensor *gi = tu_rand(ctx, &r, ENG_I32, 2, sg, -2, 34);
	int ax = 1;
	EXPECT_KERNELS(ctx, 1, eng_sum(eng_matmul(eng_one_hot(ids, 32), w), &ax, 1, false));
	EXPECT_KERNELS(ctx, 1, eng_gather(a, 1, gi));
	EXPECT_KERNELS(ctx, 1, eng_relu(eng_embedding(w, ids)));
	/* a greedy decode step: the argmax's one-hot row times a table, no matmul loop */
	int64_t sz[2] = {16, 32}, sc[2] = {16, 24};
	eng_tensor *z = mk(ctx, &r, 2, sz), *c = mk(ctx, &r, 2, sc);
	EXPECT_KERNELS(ctx, 1, eng_relu(eng_add(c, eng_matmul(eng_one_hot(eng_argmax(z, -1, false), 32), w))));
	/* a class index that wraps (uint8 over 300 classes) matches several rows: no gather */
	int64_t sl[2] = {16, 1}, sh[2] = {16, 300}, sv[2] = {300, 4};
	eng_tensor *lab = tu_rand(ctx, &r, ENG_U8, 2, sl, 0, 255), *v = mk(ctx, &r, 2, sv);
	eng_tensor *hot = eng_cast(eng_eq(lab, eng_index(ctx, ENG_U8, 2, sh, 1)), ENG_F32);
	EXPECT_KERNELS(ctx, 1, eng_matmul(hot, v));
	eng_ctx_destroy(ctx);
}
END_TEST

/* Counts the kernels whose DEBUG=3 line names the cache blocking (and the packed operand). */
typedef struct blocked_log {
	int blocked, packed, rows; /* rows: the narrow operand's blocks packed too (RPACK) */
	int unblocked;             /* planned blocks dropped by the lowering (lower.c) */
	char rpack[512];           /* the last DEBUG=3 line of a kernel with packed rows */
} blocked_log;

static void blocked_log_fn(void *arg, int level, const char *msg)
{
	blocked_log *l = arg;
	l->blocked += level == 3 && strstr(msg, "BLOCK reduce") != NULL;
	l->packed += level == 3 && strstr(msg, "PACK") != NULL;
	l->rows += level == 3 && strstr(msg, "RPACK") != NULL;
	l->unblocked += level == 3 && strstr(msg, "(unblocked)") != NULL;
	if (level == 3 && strstr(msg, "RPACK"))
		snprintf(l->rpack, sizeof(l->rpack), "%s", msg);
}

/* A context on a CPU stated to have small caches (so small shapes block), counting the kernels
 * blocked and packed into lg. */
static eng_ctx *cache_ctx(blocked_log *lg, const char *backend_opts)
{
	return log_ctx(3, blocked_log_fn, lg, backend_opts);
}

static eng_ctx *small_cache_ctx(blocked_log *lg)
{
	return cache_ctx(lg, "CPU.cache_l1=16384,CPU.cache_l2=262144,CPU.threads=2");
}

/* The register tile (codegen/plan.h) kernels on the default device are planned with: AVX-512's
 * 32 x 12, AVX2's 16 x 6, NEON's 8 x 12. Cases whose plan turns on the tile are stated in its
 * terms, so every target meets the same ones. */
static eng_regtile default_regtile(void)
{
	eng_ctx *ctx = tu_ctx_new();
	eng_regtile rt = eng_regtile_of(&ctx->devs[0]->target);
	tu_ctx_free(ctx);
	return rt;
}

/* Reductions of products blocked for the caches (small caches stated, so small shapes block):
 * still one kernel each and the reference's result, whichever operand is packed, with batch
 * dims, a transposed right side, and a kernel that must not block (a bias after the sum). */
START_TEST(test_blocked_reductions)
{
	blocked_log lg = {0};
	eng_ctx *ctx = small_cache_ctx(&lg);
	tu_rng r = {11};
	int64_t sa[2] = {64, 512}, sb[2] = {512, 96}, sbt[2] = {96, 512}, s3a[3] = {3, 64, 512}, s3b[3] = {3, 512, 96},
		sbias[1] = {96};
	eng_tensor *a = mk(ctx, &r, 2, sa), *b = mk(ctx, &r, 2, sb), *bt = mk(ctx, &r, 2, sbt);
	eng_tensor *a3 = mk(ctx, &r, 3, s3a), *b3 = mk(ctx, &r, 3, s3b), *bias = mk(ctx, &r, 1, sbias);
	EXPECT_KERNELS(ctx, 1, eng_matmul(a, b));
	EXPECT_KERNELS(ctx, 1, eng_matmul(a, eng_transpose(bt, 0, 1)));
	EXPECT_KERNELS(ctx, 1, eng_matmul(a3, b3));
	EXPECT_KERNELS(ctx, 1, eng_matmul(a3, b));
	const char *dev = getenv("DEV");
	if (!dev || !strcmp(dev, "CPU")) {
		/* a3 @ b reuses b over the batch: its narrow tile is the batch dim, too few rows to pack */
		ck_assert_int_eq(lg.blocked, 4);
		ck_assert_int_eq(lg.packed, 3);
	}
	EXPECT_KERNELS(ctx, 1, eng_add(eng_matmul(a, b), bias));
	ck_assert_int_le(lg.blocked, 4);
	eng_ctx_destroy(ctx);
}
END_TEST

static eng_status matmul_step(eng_ctx *ctx, eng_tensor *const *in, int nin, eng_tensor **out, int nout, void *user)
{
	(void)nin, (void)nout, (void)user;
	out[0] = eng_matmul(in[0], in[1]);
	return out[0] ? ENG_OK : eng_error(ctx);
}

/* A blocked matmul's left side packed per block of rows in 12-row tiles (plan.c's
 * plan_row_pack; small caches stated): the reference's result with blocks that are a multiple of
 * the tile (240 rows: blocks of 120), blocks whose last tile overhangs them (256 rows: blocks of
 * 128, 11 tiles; 100 rows: blocks of 50), a leading dim of one, and through a JIT replay on
 * fresh inputs, and more blocks than threads; not with batch dims, a bias added after the sum or
 * 64 columns; rows it cannot pack with a last tile that overhangs: no blocks. */
START_TEST(test_row_packed_matmul)
{
	blocked_log lg = {0};
	eng_ctx *ctx = small_cache_ctx(&lg);
	tu_rng r = {14};
	int64_t sa[2] = {240, 512}, sa2[2] = {256, 512}, sa3[2] = {100, 512}, sa1[3] = {1, 256, 512}, sb[2] = {512, 384};
	eng_tensor *b = mk(ctx, &r, 2, sb);
	EXPECT_KERNELS(ctx, 1, eng_matmul(mk(ctx, &r, 2, sa), b));
	EXPECT_KERNELS(ctx, 1, eng_matmul(mk(ctx, &r, 2, sa2), b));
	EXPECT_KERNELS(ctx, 1, eng_matmul(mk(ctx, &r, 2, sa3), b));
	EXPECT_KERNELS(ctx, 1, eng_matmul(mk(ctx, &r, 3, sa1), b));
	const char *dev = getenv("DEV");
	bool cpu = !dev || !strcmp(dev, "CPU");
	if (cpu)
		ck_assert_int_eq(lg.rows, 4);
	int64_t s3a[3] = {2, 128, 512}, sbias[1] = {384},
		sn[2] = {512, 16 * default_regtile().lanes};
	EXPECT_KERNELS(ctx, 1, eng_matmul(mk(ctx, &r, 3, s3a), b));
	EXPECT_KERNELS(ctx, 1, eng_add(eng_matmul(mk(ctx, &r, 2, sa2), b), mk(ctx, &r, 1, sbias)));
	/* nor with too few columns to pay for the copy (under RPACK_MIN_LANES, 20, vectors' lanes:
	 * 256 with AVX-512's 16 lanes, 64 with NEON's 4) */
	EXPECT_KERNELS(ctx, 1, eng_matmul(mk(ctx, &r, 2, sa2), mk(ctx, &r, 2, sn)));
	if (cpu)
		ck_assert_int_eq(lg.rows, 4);
	/* rows the packed block cannot read (256 of them from a permuted [16,512,16]: the row index
	 * is a div/mod of the tile's) with a last tile that overhangs the block (128 rows): lowered
	 * again without blocks, never a read past the operand */
	int64_t sx[3] = {16, 512, 16}, sr[2] = {256, 512};
	int perm[3] = {0, 2, 1};
	EXPECT_KERNELS(ctx, 1, eng_matmul(eng_reshape(eng_permute(mk(ctx, &r, 3, sx), perm), 2, sr), b));
	ck_assert_int_eq(lg.unblocked, cpu ? 1 : 0);
	/* more blocks than threads (L2 stated 64 KiB, 2 threads): each call packs its blocks one
	 * after another into its one block of scratch, a block's rows x the reduction block, not one
	 * per block. L1 stated 4 KiB, so the reduction's block is 64 with every register tile */
	blocked_log lg4 = {0};
	eng_ctx *ctx4 = cache_ctx(&lg4, "CPU.cache_l1=4096,CPU.cache_l2=65536,CPU.threads=2");
	int64_t s4a[2] = {1200, 256}, s4b[2] = {256, 384};
	EXPECT_KERNELS(ctx4, 1, eng_matmul(mk(ctx4, &r, 2, s4a), mk(ctx4, &r, 2, s4b)));
	if (cpu) {
		const char *by = strstr(lg4.rpack, "BLOCK reduce by "), *par = strstr(lg4.rpack, "| 1 phases, 1 outputs, parallel ");
		long long kc = 0, rows = 0, blocks = 0, scratch = 0;
		ck_assert_msg(by && par && sscanf(by, "BLOCK reduce by %lld, dim 0 by %lld", &kc, &rows) == 2 &&
				      sscanf(par, "| 1 phases, 1 outputs, parallel %lld, scratch %lld bytes", &blocks, &scratch) == 2,
			      "the packed rows' kernel: %s", lg4.rpack);
		ck_assert_msg(blocks > 2 && blocks * rows == 1200 && scratch == rows * kc * 4, "%s", lg4.rpack);
	}
	eng_ctx_destroy(ctx4);
	/* one thread (a robot pinning the daemon to a core): 256 rows that no tile divides form one
	 * block, and a loop of one iteration is none: blocks of at least two, or no packed rows,
	 * never a lowering that fails (CPU.threads=1 failed every 256^3 matmul at x86-64-v3) */
	blocked_log lg1 = {0};
	eng_ctx *ctx1 = cache_ctx(&lg1, "CPU.cache_l1=16384,CPU.cache_l2=262144,CPU.threads=1");
	int64_t s1[2] = {256, 512};
	EXPECT_KERNELS(ctx1, 1, eng_matmul(mk(ctx1, &r, 2, s1), mk(ctx1, &r, 2, sb)));
	if (cpu)
		ck_assert_int_eq(lg1.rows, 1);
	eng_ctx_destroy(ctx1);
	/* a captured step replayed on new inputs writes the new product */
	eng_jit *j = eng_jit_create(ctx, matmul_step, NULL, 2, 1, NULL);
	ck_assert_ptr_nonnull(j);
	for (int call = 0; call < 4; call++) {
		eng_tensor *in[2] = {mk(ctx, &r, 2, sa2), b}, *y = NULL;
		ck_assert_msg(eng_jit_call(j, in, &y) == ENG_OK, "jit call: %s", eng_errmsg(ctx));
		tu_batch *t = tu_batch_new(ctx);
		tu_batch_ref(t, y, 1e-4, 1e-4, "call %d", call);
		tu_batch_check(t);
	}
	eng_jit_info info;
	eng_jit_get_info(j, &info);
	ck_assert_int_ge(info.replays, 1);
	eng_jit_destroy(j);
	eng_ctx_destroy(ctx);
}
END_TEST

/* Convolutions and their gradients as packed sums of products (plan.c's plan_packed; small
 * caches stated, so the weight gradient's reduction is blocked): the reference's results, with a
 * panel packed for each of the three kernels. The weight gradient's panel (its 400 reduction
 * steps by the wide tile) blocks past an eighth of L2: L2 is stated in proportion to the wide
 * tile, 256 KiB for AVX-512's 32 columns, 64 KiB for NEON's 8. */
START_TEST(test_packed_convolutions)
{
	blocked_log lg = {0};
	char opts[96];
	snprintf(opts, sizeof(opts), "CPU.cache_l1=16384,CPU.cache_l2=%lld,CPU.threads=2",
		 (long long)(8192 * default_regtile().wide));
	eng_ctx *ctx = cache_ctx(&lg, opts);
	tu_rng r = {12};
	int64_t sx[4] = {4, 16, 12, 12}, sw[4] = {32, 16, 3, 3}, sg[4] = {4, 32, 10, 10};
	eng_tensor *x = mk(ctx, &r, 4, sx), *w = mk(ctx, &r, 4, sw), *g = mk(ctx, &r, 4, sg);
	int one[2] = {1, 1}, zero[2] = {0, 0};
	ck_assert_int_eq(eng_set_requires_grad(x, true), ENG_OK);
	ck_assert_int_eq(eng_set_requires_grad(w, true), ENG_OK);
	eng_tensor *y = eng_conv2d(x, w, NULL, one, zero, one, 1);
	EXPECT_KERNELS(ctx, 1, y);
	/* d(sum(y * g)) / dy = g */
	eng_tensor *loss = eng_sum(eng_mul(y, g), NULL, 0, false);
	ck_assert_msg(eng_backward(loss) == ENG_OK, "backward: %s", eng_errmsg(ctx));
	eng_tensor *gs[2] = {eng_grad(x), eng_grad(w)};
	ck_assert_msg(eng_realize(gs, 2) == ENG_OK, "realize: %s", eng_errmsg(ctx));
	tu_batch *b = tu_batch_new(ctx);
	tu_batch_ref(b, gs[0], 1e-4, 1e-4, "input gradient");
	tu_batch_ref(b, gs[1], 1e-4, 1e-4, "weight gradient");
	tu_batch_check(b);
	const char *dev = getenv("DEV");
	if (!dev || !strcmp(dev, "CPU")) {
		ck_assert_int_ge(lg.packed, 3);
		ck_assert_int_ge(lg.blocked, 1);
	}
	eng_ctx_destroy(ctx);
}
END_TEST

/* Counts the kernels whose source (DEBUG=4) has a loop reducing into two accumulators at once. */
static void shared_log_fn(void *arg, int level, const char *msg)
{
	int *n = arg;
	*n += level == 4 && strstr(msg, "acc0) reduction(+:") != NULL; /* acc<p>, or a blocked sum's bacc<p> */
}

/* Sums over the same axes share one loop nest (lower.c's shared_loops) where neither reads the
 * other: a sum and a sum of squares read x once (also to a scalar); a variance's second sum
 * reads the mean, so it runs after the first; each the reference's result. */
START_TEST(test_shared_reduction_loops)
{
	int shared = 0;
	eng_ctx *ctx = log_ctx(4, shared_log_fn, &shared, NULL);
	tu_rng r = {13};
	int64_t sx[3] = {16, 24, 20};
	int axes[2] = {1, 2};
	eng_tensor *x = mk(ctx, &r, 3, sx);
	eng_tensor *s1 = eng_sum(x, axes, 2, false), *s2 = eng_sum(eng_mul(x, x), axes, 2, false);
	EXPECT_KERNELS(ctx, 1, s1, s2);
	const char *dev = getenv("DEV");
	if (!dev || !strcmp(dev, "CPU"))
		ck_assert_int_eq(shared, 1);
	/* to a scalar, long enough to be split over the threads: one nest for both sums still */
	int64_t sl[2] = {512, 640};
	eng_tensor *z = mk(ctx, &r, 2, sl);
	EXPECT_KERNELS(ctx, 1, eng_sum(z, NULL, 0, false), eng_sum(eng_mul(z, z), NULL, 0, false));
	eng_tensor *y = mk(ctx, &r, 3, sx);
	eng_tensor *mean = eng_mean(y, axes, 2, true);
	eng_tensor *d = eng_sub(y, mean);
	EXPECT_KERNELS(ctx, 1, eng_sum(eng_mul(d, d), axes, 2, false));
	if (!dev || !strcmp(dev, "CPU"))
		ck_assert_int_eq(shared, 2);
	eng_ctx_destroy(ctx);
}
END_TEST

/* The name of the last kernel a DEBUG=3 line announced (its loops' sizes: r_<out>_<reduce...>). */
static void name_log_fn(void *arg, int level, const char *msg)
{
	char *name = arg;
	const char *end = strstr(msg, " opts:");
	if (level == 3 && end && (msg[0] == 'r' || msg[0] == 'E') && msg[1] == '_')
		snprintf(name, 128, "%.*s", (int)(end - msg), msg);
}

/* The innermost reduced axes run as one loop where every operand reads them as one (lower.c's
 * mergeable_axes): a batchnorm's sum over (batch, h, w) loops batch and h*w, contiguous; where
 * an operand reads them apart (a pooled value upsampled, a transposed view, a pad) they loop one
 * by one; each the reference's result. */
START_TEST(test_merged_reduce_axes)
{
	const char *dev = getenv("DEV");
	if (dev && strcmp(dev, "CPU"))
		return; /* the names checked are the CPU's loops (a GPU's reduce groups name others) */
	char name[128] = "";
	eng_ctx *ctx = log_ctx(3, name_log_fn, name, NULL);
	tu_rng r = {15};
	int64_t sx[4] = {16, 8, 6, 6}, sp[4] = {16, 8, 3, 3}, s6[6] = {16, 8, 3, 1, 3, 1}, e6[6] = {16, 8, 3, 2, 3, 2};
	int axes[3] = {0, 2, 3};
	eng_tensor *x = mk(ctx, &r, 4, sx);
	EXPECT_KERNELS(ctx, 1, eng_sum(x, axes, 3, false));
	ck_assert_msg(!strncmp(name, "r_8_16_36_", 10), "contiguous sum: kernel %s", name);
	eng_tensor *d = eng_sub(x, eng_mean(x, axes, 3, true));
	EXPECT_KERNELS(ctx, 1, eng_sum(eng_mul(d, d), axes, 3, false));
	ck_assert_msg(!strncmp(name, "r_8_16_36_", 10), "variance: kernel %s", name);
	/* all reduced: one loop of 16 * 8 * 36 */
	EXPECT_KERNELS(ctx, 1, eng_sum(x, NULL, 0, false));
	ck_assert_msg(strstr(name, "_4608_") != NULL, "sum of all: kernel %s", name);
	/* a pooled value read at (i / 2, j / 2): h and w loop apart */
	eng_tensor *p = mk(ctx, &r, 4, sp);
	eng_tensor *up = eng_reshape(eng_expand(eng_reshape(p, 6, s6), 6, e6), 4, sx);
	EXPECT_KERNELS(ctx, 1, eng_sum(eng_mul(x, up), axes, 3, false));
	ck_assert_msg(!strncmp(name, "r_8_16_6_6_", 11), "pooled operand: kernel %s", name);
	/* h and w transposed: apart */
	int perm[4] = {0, 1, 3, 2};
	EXPECT_KERNELS(ctx, 1, eng_sum(eng_add(x, eng_permute(eng_contiguous(x), perm)), axes, 3, false));
	ck_assert_msg(!strncmp(name, "r_8_16_6_6_", 11), "transposed operand: kernel %s", name);
	/* padded by one on each side of w: apart */
	const int64_t pads[4][2] = {{0, 0}, {0, 0}, {0, 0}, {1, 1}};
	eng_tensor *xp = eng_pad(eng_contiguous(mk(ctx, &r, 4, (int64_t[4]){16, 8, 6, 4})), pads);
	EXPECT_KERNELS(ctx, 1, eng_sum(xp, axes, 3, false));
	ck_assert_msg(!strncmp(name, "r_8_16_6_6_", 11), "padded operand: kernel %s", name);
	eng_ctx_destroy(ctx);
}
END_TEST

/* Counts the generated kernels (DEBUG=4) whose innermost loop is rendered in versions. */
static void versioned_log_fn(void *arg, int level, const char *msg)
{
	int *n = arg;
	*n += level == 4 && strstr(msg, "void E_") && strstr(msg, "} else if (") && strstr(msg, "} else {");
}

/* A concatenation of two computed halves: the innermost loop's loads are guarded by which half
 * a row is in, which does not change in the loop, so the CPU renders the loop once per half
 * (cstyle.c's render_versioned: plain loads gcc vectorizes); the values still as the
 * reference's. */
START_TEST(test_versioned_guarded_loop)
{
	const char *dev = getenv("DEV");
	if (dev && strcmp(dev, "CPU"))
		return; /* C loops: the CPU's dialect */
	int versioned = 0;
	eng_ctx *ctx = log_ctx(4, versioned_log_fn, &versioned, NULL);
	tu_rng r = {17};
	int64_t s[2] = {8, 40};
	eng_tensor *a = mk(ctx, &r, 2, s), *b = mk(ctx, &r, 2, s);
	eng_tensor *halves[2] = {eng_sigmoid(eng_add(a, b)), eng_mul(eng_sigmoid(a), b)};
	EXPECT_KERNELS(ctx, 1, eng_cat(halves, 2, 0));
	ck_assert_int_eq(versioned, 1);
	eng_ctx_destroy(ctx);
}
END_TEST

/* Counts the generated kernels (DEBUG=4) with a loop from a computed bound (clamp.c: "for
 * (int64_t vN = xM; ..."). */
static void clamp_log_fn(void *arg, int level, const char *msg)
{
	int *n = arg;
	const char *p = msg;
	if (level != 4 || !strstr(msg, "void r_"))
		return;
	while ((p = strstr(p, "for (int64_t v")) != NULL) {
		p += strlen("for (int64_t v");
		while (*p >= '0' && *p <= '9')
			p++;
		if (!strncmp(p, " = x", 4)) {
			++*n;
			return;
		}
	}
}

/* Sums over a zero-padded value loop only where its terms can be nonzero: a padded
 * convolution (the pad a guard in its kernel) and its input gradient (the padded output
 * gradient stored, its zero border known from its graph) cut their kernel-row loops; a max
 * over a padded value and a sum of a padded value plus one must not be cut (their padded
 * terms count); each value the reference's. */
START_TEST(test_clamped_padded_sums)
{
	int clamped = 0;
	eng_ctx *ctx = log_ctx(4, clamp_log_fn, &clamped, NULL);
	const char *dev = getenv("DEV");
	const bool cpu = !dev || !strcmp(dev, "CPU");
	tu_rng r = {23};
	int64_t sx[4] = {2, 3, 9, 9}, sw[4] = {4, 3, 3, 3}, sg[4] = {2, 4, 9, 9};
	eng_tensor *x = mk(ctx, &r, 4, sx), *w = mk(ctx, &r, 4, sw), *g = mk(ctx, &r, 4, sg);
	int one[2] = {1, 1}, pad1[2] = {1, 1}, zero[2] = {0, 0};
	EXPECT_KERNELS(ctx, 1, eng_conv2d(x, w, NULL, one, pad1, one, 1));
	if (cpu)
		ck_assert_int_eq(clamped, 1);

	/* the input gradient of an unpadded 3x3 convolution reads the output gradient padded by 2 */
	clamped = 0;
	ck_assert_int_eq(eng_set_requires_grad(x, true), ENG_OK);
	eng_tensor *y = eng_conv2d(x, w, NULL, one, zero, one, 1);
	int64_t sy[4] = {2, 4, 7, 7};
	eng_tensor *gy = mk(ctx, &r, 4, sy);
	ck_assert_msg(eng_backward(eng_sum(eng_mul(y, gy), NULL, 0, false)) == ENG_OK, "backward: %s", eng_errmsg(ctx));
	eng_tensor *dx = eng_grad(x);
	kernels_for(ctx, &dx, 1);
	if (cpu)
		ck_assert_int_ge(clamped, 1);

	/* not sums of products with the padding: every padded term counts */
	clamped = 0;
	int64_t pads[4][2] = {{0, 0}, {0, 0}, {2, 2}, {2, 2}};
	eng_tensor *neg = eng_sub(eng_abs(g), eng_scalar(ctx, ENG_F32, 2)); /* all < 0: the pad's 0 is the max */
	int ax[2] = {2, 3};
	EXPECT_KERNELS(ctx, 1, eng_max(eng_pad(neg, (const int64_t(*)[2])pads), ax, 2, false));
	EXPECT_KERNELS(ctx, 1, eng_sum(eng_add(eng_pad(g, (const int64_t(*)[2])pads), eng_scalar(ctx, ENG_F32, 1)), ax, 2, false));
	ck_assert_int_eq(clamped, 0);
	eng_ctx_destroy(ctx);
}
END_TEST

/* Counts the kernels whose DEBUG=3 line names a split axis (plan.c's plan_split). */
static void split_log_fn(void *arg, int level, const char *msg)
{
	int *n = arg;
	*n += level == 3 && strstr(msg, "SPLIT") != NULL;
}

/* Values at a pooled size read at the full size's i / 2 (as a max-pool's gradient reads its
 * pooled max, gradient and tie counts): the innermost axis is split (i / 2, i % 2), in a sum and
 * in an elementwise kernel; each the reference's result. */
START_TEST(test_split_pooled_axis)
{
	int split = 0;
	eng_ctx *ctx = log_ctx(3, split_log_fn, &split, NULL);
	tu_rng r = {14};
	int64_t sx[4] = {4, 8, 16, 24}, sp[4] = {4, 8, 8, 12}, s6[6] = {4, 8, 8, 1, 12, 1}, e6[6] = {4, 8, 8, 2, 12, 2};
	eng_tensor *x = mk(ctx, &r, 4, sx), *p = mk(ctx, &r, 4, sp);
	/* p and a value of it upsampled 2x2: element (i, j) is their (i / 2, j / 2) */
	eng_tensor *q = eng_add(p, eng_scalar(ctx, ENG_F32, 2));
	eng_tensor *up = eng_reshape(eng_expand(eng_reshape(p, 6, s6), 6, e6), 4, sx);
	eng_tensor *uq = eng_reshape(eng_expand(eng_reshape(q, 6, s6), 6, e6), 4, sx);
	eng_tensor *g = eng_mul(eng_cast(eng_lt(x, up), ENG_F32), eng_div(up, uq));
	int axes[3] = {0, 2, 3};
	EXPECT_KERNELS(ctx, 1, eng_sum(eng_mul(g, x), axes, 3, false));
	EXPECT_KERNELS(ctx, 1, eng_add(eng_mul(g, x), x));
	const char *dev = getenv("DEV");
	if (!dev || !strcmp(dev, "CPU"))
		ck_assert_int_eq(split, 2);
	eng_ctx_destroy(ctx);
}
END_TEST

/* Nested reductions: an elementwise function of one reduction feeding another over a different
 * axis runs as one kernel (the inner reduction's loop inside the outer one's, its result never
 * stored), at two and three levels, with the inner one's siblings (a variance's mean) beside it,
 * and the row sums of relu(a @ w.T) (a linear layer: both operands read along the inner loop). */
START_TEST(test_nested_reductions)
{
	eng_ctx *ctx = tu_ctx();
	tu_rng r = {12};
	int64_t s3[3] = {6, 10, 12}, s4[4] = {3, 4, 5, 6}, sa[2] = {16, 24}, sb[2] = {32, 24};
	eng_tensor *x = mk(ctx, &r, 3, s3), *y = mk(ctx, &r, 4, s4), *a = mk(ctx, &r, 2, sa), *b = mk(ctx, &r, 2, sb);
	int ax1 = 1, ax2 = 2, ax3 = 3;
	EXPECT_KERNELS(ctx, 1, eng_sum(eng_sum(x, &ax2, 1, false), &ax1, 1, false));
	EXPECT_KERNELS(ctx, 1, eng_sum(eng_max(x, &ax2, 1, false), &ax1, 1, false));
	EXPECT_KERNELS(ctx, 1, eng_max(eng_exp(eng_sum(mk(ctx, &r, 3, s3), &ax2, 1, true)), &ax1, 1, true));
	EXPECT_KERNELS(ctx, 1, eng_sum(eng_relu(eng_matmul(a, eng_transpose(b, 0, 1))), &ax1, 1, false));
	EXPECT_KERNELS(ctx, 1, eng_mean(eng_var(x, &ax2, 1, false, 1), &ax1, 1, false));
	EXPECT_KERNELS(ctx, 1, eng_sum(eng_sum(eng_sum(y, &ax3, 1, false), &ax2, 1, false), &ax1, 1, false));
	eng_ctx_destroy(ctx);
}
END_TEST

/* Nested reductions that stay two kernels: the inner result is an output too (stored once,
 * read by the outer kernel), or fusing would compute the inner reduction again for every value
 * of an output dim (an MLP's second layer) or of another reduced axis, or twice (a softmax's
 * max and sum of a matmul), or the inner one reads with a stride (the row sums of relu(a @ b),
 * b row-major: stored, the matmul gets register tiles along b's rows). */
START_TEST(test_nested_reductions_stored)
{
	eng_ctx *ctx = tu_ctx();
	tu_rng r = {13};
	int64_t s3[3] = {6, 10, 12}, sw[3] = {1, 10, 7}, se[3] = {6, 10, 5};
	eng_tensor *x = mk(ctx, &r, 3, s3), *w = mk(ctx, &r, 3, sw);
	int ax1 = 1, ax2 = 2, ax12[2] = {1, 2};
	eng_tensor *inner = eng_sum(x, &ax2, 1, true);
	EXPECT_KERNELS(ctx, 2, inner, eng_sum(eng_relu(inner), &ax1, 1, false));
	/* relu(a @ b) read by two reductions of its rows (a softmax's max and sum): fused, each
	 * would compute the matmul again */
	int64_t sa[2] = {16, 24}, sb[2] = {24, 32}, sbt[2] = {32, 24};
	eng_tensor *h = eng_relu(eng_matmul(mk(ctx, &r, 2, sa), eng_transpose(mk(ctx, &r, 2, sbt), 0, 1)));
	EXPECT_KERNELS(ctx, 2, eng_sum(eng_sub(h, eng_max(h, &ax1, 1, true)), &ax1, 1, false));
	EXPECT_KERNELS(ctx, 2, eng_sum(eng_relu(eng_matmul(mk(ctx, &r, 2, sa), mk(ctx, &r, 2, sb))), &ax1, 1, false));
	/* (6, 10, 1) expanded over 7 columns, times w, summed over the 10: once per column */
	int64_t s7[3] = {6, 10, 7};
	eng_tensor *m = eng_max(x, &ax2, 1, true);
	EXPECT_KERNELS(ctx, 2, eng_sum(eng_mul(eng_expand(m, 3, s7), w), &ax1, 1, false));
	/* summed over the 10 and an axis of 5 the inner one does not depend on: once per 5 */
	eng_tensor *e = mk(ctx, &r, 3, se), *x2 = mk(ctx, &r, 3, s3);
	EXPECT_KERNELS(ctx, 2, eng_sum(eng_mul(eng_expand(eng_sum(x2, &ax2, 1, true), 3, se), e), ax12, 2, false));
	eng_ctx_destroy(ctx);
}
END_TEST

/* Autograd through nested reductions: a bias's gradient under relu(linear(x, w, b)) is the
 * column sum of relu' of the matmul, one kernel. The gradient of (x.max(2).sum(1))^2 stays three: the
 * max is read by the forward's sum and by the gradient's mask (stored), the row sums by every
 * element of the gradient (stored, as the cost guard says), then the gradient. */
START_TEST(test_nested_reductions_backward)
{
	eng_ctx *ctx = tu_ctx();
	tu_rng r = {14};
	int64_t sx[2] = {16, 24}, sw[2] = {32, 24}, sb[1] = {32}, s3[3] = {4, 6, 8};
	eng_tensor *x = mk(ctx, &r, 2, sx), *w = mk(ctx, &r, 2, sw), *b = mk(ctx, &r, 1, sb);
	ck_assert(eng_realize(&b, 1) == ENG_OK && eng_set_requires_grad(b, true) == ENG_OK);
	eng_tensor *loss = eng_sum(eng_relu(eng_linear(x, w, b)), NULL, 0, false);
	ck_assert_msg(eng_backward(loss) == ENG_OK, "backward: %s", eng_errmsg(ctx));
	EXPECT_KERNELS(ctx, 1, eng_grad(b));
	eng_tensor *z = mk(ctx, &r, 3, s3);
	ck_assert(eng_realize(&z, 1) == ENG_OK && eng_set_requires_grad(z, true) == ENG_OK);
	int ax1 = 1, ax2 = 2;
	eng_tensor *l2 = eng_sum(eng_square(eng_sum(eng_max(z, &ax2, 1, false), &ax1, 1, false)), NULL, 0, false);
	ck_assert_msg(eng_backward(l2) == ENG_OK, "backward: %s", eng_errmsg(ctx));
	EXPECT_KERNELS(ctx, 3, eng_grad(z));
	eng_ctx_destroy(ctx);
}
END_TEST

/* A CPU context with the given thread count (the target's parallelism). */
static eng_ctx *cpu_ctx(const char *threads)
{
	eng_ctx_opts o;
	char err[512] = "", opts[64];
	eng_ctx_opts_default(&o);
	o.device = "CPU";
	o.no_disk_cache = true;
	snprintf(opts, sizeof(opts), "CPU.threads=%s", threads);
	o.backend_opts = opts;
	eng_ctx *ctx = eng_ctx_create(&o, err, sizeof(err));
	ck_assert_msg(ctx != NULL, "eng_ctx_create failed: %s", err);
	return ctx;
}

/* A long nested chain down to one number is not fused where its outer loop would run on one
 * of several threads while the inner results could be computed on all of them; on one thread,
 * or with an output row per thread, it is. */
START_TEST(test_nested_reductions_parallelism)
{
	int64_t s[3] = {1, 256, 512}, s8[3] = {8, 64, 512};
	int ax1 = 1, ax2 = 2;
	const char *threads[2] = {"8", "1"};
	for (int k = 0; k < 2; k++) {
		eng_ctx *ctx = cpu_ctx(threads[k]);
		tu_rng r = {15};
		eng_tensor *x = mk(ctx, &r, 3, s), *y = mk(ctx, &r, 3, s8);
		EXPECT_KERNELS(ctx, k == 0 ? 2 : 1, eng_sum(eng_max(x, &ax2, 1, false), &ax1, 1, false));
		EXPECT_KERNELS(ctx, 1, eng_sum(eng_max(y, &ax2, 1, false), &ax1, 1, false));
		eng_ctx_destroy(ctx);
	}
}
END_TEST

/* The kernels of a conv net's training step (fashion_mnist's layers, small): its gradients,
 * checked against the reference. */
static uint64_t conv_net_kernels(eng_ctx *ctx)
{
	tu_rng r = {16};
	eng_params ps;
	eng_params_init(&ps);
	eng_nn_conv2d c1, c2, c3, c4;
	eng_nn_batchnorm2d bn1, bn2;
	eng_nn_linear fc;
	ck_assert(!eng_nn_conv2d_init(ctx, &c1, 1, 4, 3, 3, 1, 0, 1, 1, true, &ps, "c1") &&
		  !eng_nn_conv2d_init(ctx, &c2, 4, 4, 3, 3, 1, 0, 1, 1, true, &ps, "c2") &&
		  !eng_nn_batchnorm2d_init(ctx, &bn1, 4, 1e-5, 0.1, true, &ps, "bn1") &&
		  !eng_nn_conv2d_init(ctx, &c3, 4, 8, 3, 3, 1, 0, 1, 1, true, &ps, "c3") &&
		  !eng_nn_conv2d_init(ctx, &c4, 8, 8, 3, 3, 1, 0, 1, 1, true, &ps, "c4") &&
		  !eng_nn_batchnorm2d_init(ctx, &bn2, 8, 1e-5, 0.1, true, &ps, "bn2") &&
		  !eng_nn_linear_init(ctx, &fc, 8, 10, true, &ps, "fc"));
	int64_t sx[4] = {4, 1, 16, 16}, sy[1] = {4};
	eng_tensor *x = mk(ctx, &r, 4, sx), *y = tu_rand(ctx, &r, ENG_I32, 1, sy, 0, 9);
	int k2[2] = {2, 2};
	eng_tensor *h = eng_relu(eng_nn_conv2d_forward(&c1, x));
	h = eng_relu(eng_nn_conv2d_forward(&c2, h));
	h = eng_max_pool2d(eng_nn_batchnorm2d_forward(&bn1, h), k2, NULL, NULL);
	h = eng_relu(eng_nn_conv2d_forward(&c3, h));
	h = eng_relu(eng_nn_conv2d_forward(&c4, h));
	h = eng_max_pool2d(eng_nn_batchnorm2d_forward(&bn2, h), k2, NULL, NULL);
	eng_tensor *loss = eng_sparse_cross_entropy(eng_nn_linear_forward(&fc, eng_flatten(h, 1, -1)), y);
	ck_assert_msg(eng_backward(loss) == ENG_OK, "backward: %s", eng_errmsg(ctx));
	int n = 0;
	eng_tensor **params = eng_params_trainable(&ps, &n), *grads[16];
	ck_assert(params != NULL && n == 14);
	for (int i = 0; i < n; i++)
		grads[i] = eng_grad(params[i]);
	uint64_t got = kernels_for(ctx, grads, n);
	free(params);
	eng_nn_conv2d_free(&c1);
	eng_nn_conv2d_free(&c2);
	eng_nn_conv2d_free(&c3);
	eng_nn_conv2d_free(&c4);
	eng_nn_batchnorm2d_free(&bn1);
	eng_nn_batchnorm2d_free(&bn2);
	eng_nn_linear_free(&fc);
	eng_params_free(&ps);
	return got;
}

/* The conv net's backward kernels nest reductions three deep; where nesting would take a kernel
 * past the loop limit, or where a kernel's nesting is refused (on 64 threads, or OpenCL's
 * work-items, more of it is), the first nested reduction is stored, as before nesting: no more
 * kernels than then (51 each; storing the offending phase instead gave 52 on 64 threads). */
START_TEST(test_nested_reductions_conv_net)
{
	const char *threads[2] = {NULL, "64"};
	for (int k = 0; k < 2; k++) {
		eng_ctx *ctx = threads[k] ? cpu_ctx(threads[k]) : tu_ctx();
		uint64_t got = conv_net_kernels(ctx);
		ck_assert_msg(got <= 51, "%s: %llu kernels", threads[k] ? threads[k] : "default", (unsigned long long)got);
		eng_ctx_destroy(ctx);
	}
}
END_TEST

/* The broadcast guard (lower.c): a computed value broadcast into a reduction is stored where it
 * costs more than 16 ops per element and repeats 4 times or more (a chain of 20 before a matmul:
 * computed once, not once per column); a cheap one stays fused (a scale and shift), and so does
 * an expensive one broadcast into an elementwise kernel (each element computed once per use
 * there is no repeat of a reduction's loop). Values checked against the reference. */
START_TEST(test_broadcast_guard)
{
	eng_ctx *ctx = tu_ctx_new();
	tu_rng r = {21};
	int64_t sx[2] = {64, 96}, sw[2] = {96, 48}, sb[2] = {64, 1}, se[2] = {64, 48};
	eng_tensor *x = mk(ctx, &r, 2, sx), *w = mk(ctx, &r, 2, sw);
	eng_tensor *chain = x;
	for (int i = 0; i < 10; i++)
		chain = eng_add_s(eng_mul_s(chain, 1.01), 0.01);
	EXPECT_KERNELS(ctx, 2, eng_matmul(chain, w));
	EXPECT_KERNELS(ctx, 1, eng_matmul(eng_add_s(eng_mul_s(x, 1.5), 0.5), w));
	eng_tensor *rowv = mk(ctx, &r, 2, sb), *rc = rowv;
	for (int i = 0; i < 10; i++)
		rc = eng_add_s(eng_mul_s(rc, 1.01), 0.01);
	EXPECT_KERNELS(ctx, 1, eng_mul(eng_expand(rc, 2, se), mk(ctx, &r, 2, se)));
	tu_ctx_free(ctx);
}
END_TEST

Suite *kernels_suite(void)
{
	const TTest *const tests[] = {
		test_matmul_fused_vs_forced, test_matmul_bias_relu, test_mlp_forward, test_softmax_layernorm_argmax,
		test_sparse_cross_entropy,   test_conv2d_relu,      test_siblings,    test_contiguous_forces_store,
		test_bag_of_words_stacked_reductions, test_gather_sums, test_blocked_reductions, test_row_packed_matmul, test_packed_convolutions,
		test_shared_reduction_loops, test_merged_reduce_axes, test_versioned_guarded_loop, test_clamped_padded_sums, test_split_pooled_axis, test_nested_reductions, test_nested_reductions_stored,
		test_nested_reductions_backward, test_nested_reductions_parallelism, test_nested_reductions_conv_net,
		test_broadcast_guard,
	};
	return tu_suite("kernels", tests, (int)(sizeof(tests) / sizeof(tests[0])), TU_TIMEOUT);
}
