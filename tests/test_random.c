/* test_random.c: seeded random graphs (movement, elementwise and reduce chains on random shapes),
 * realized in batches and compared with the reference; a failure names the graph's seed. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"
#include "testutil.h"

#define MAX_NUMEL 4096
#ifndef GRAPHS_PER_TEST
#define GRAPHS_PER_TEST 60 /* four tests: 240 graphs */
#endif
#define BATCH 30 /* graphs realized together */

typedef struct gen {
	eng_ctx *ctx;
	tu_rng r;
	char desc[1024]; /* the ops applied, for failure messages */
	size_t dlen;
	int nreduce;
} gen;

static void note(gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(gen *g, const char *fmt, ...)
{
	va_list ap;
	if (g->dlen >= sizeof(g->desc) - 1)
		return;
	va_start(ap, fmt);
	int w = vsnprintf(g->desc + g->dlen, sizeof(g->desc) - g->dlen, fmt, ap);
	va_end(ap);
	if (w > 0)
		g->dlen += (size_t)w;
	if (g->dlen > sizeof(g->desc) - 1)
		g->dlen = sizeof(g->desc) - 1;
}

static int rnd(gen *g, int lo, int hi)
{
	return (int)tu_int(&g->r, lo, hi);
}

static int64_t numel_of(int nd, const int64_t *s)
{
	int64_t n = 1;
	for (int i = 0; i < nd; i++)
		n *= s[i];
	return n;
}

static bool is_int(const eng_tensor *t)
{
	return !eng_dtype_is_float(eng_tensor_dtype(t));
}

/* A fresh leaf of dtype dt and the given shape: data (multiples of 1/8 for floats), a constant
 * or an index. */
static eng_tensor *leaf(gen *g, eng_dtype dt, int nd, const int64_t *s)
{
	bool fl = eng_dtype_is_float(dt);
	int kind = rnd(g, 0, 19);
	if (kind == 0) {
		double v = fl ? rnd(g, -16, 16) / 8.0 : dt == ENG_U8 ? rnd(g, 0, 9) : rnd(g, -5, 5);
		note(g, " full(%g)", v);
		return eng_full(g->ctx, dt, nd, s, v);
	}
	if (kind <= 2 && nd > 0) {
		int ax = rnd(g, 0, nd - 1);
		note(g, " index(ax %d)", ax);
		return eng_index(g->ctx, dt, nd, s, ax);
	}
	note(g, " %s data", eng_dtype_name(dt));
	if (fl)
		return tu_quant(g->ctx, &g->r, dt, nd, s, -4, 4, 0.125, NULL);
	return tu_quant(g->ctx, &g->r, dt, nd, s, dt == ENG_U8 ? 0 : -20, dt == ENG_U8 ? 255 : 20,
			1, NULL);
}

/* Random shape of the same numel as n (n > 0) with 1..4 dims. */
static int factor_shape(gen *g, int64_t n, int64_t *s)
{
	int nd = rnd(g, 1, 4);
	for (int i = 0; i < nd; i++)
		s[i] = 1;
	for (int64_t p = 2; n > 1; p++)
		while (n % p == 0) {
			s[rnd(g, 0, nd - 1)] *= p;
			n /= p;
		}
	return nd;
}

static eng_tensor *op_movement(gen *g, eng_tensor *x)
{
	int nd = eng_ndim(x);
	const int64_t *sh = eng_shape(x);
	int64_t s[ENG_MAX_DIMS], pairs[ENG_MAX_DIMS][2];
	switch (rnd(g, 0, 5)) {
	case 0: { /* reshape */
		int64_t n = numel_of(nd, sh);
		int k;
		if (n == 0) {
			k = rnd(g, 1, 3);
			for (int i = 0; i < k; i++)
				s[i] = rnd(g, 1, 4);
			s[rnd(g, 0, k - 1)] = 0;
		} else {
			k = factor_shape(g, n, s);
		}
		note(g, " reshape(");
		for (int i = 0; i < k; i++)
			note(g, "%s%lld", i ? "," : "", (long long)s[i]);
		note(g, ")");
		return eng_reshape(x, k, s);
	}
	case 1: { /* permute */
		int p[ENG_MAX_DIMS];
		for (int i = 0; i < nd; i++)
			p[i] = i;
		for (int i = nd - 1; i > 0; i--) {
			int j = rnd(g, 0, i), t = p[i];
			p[i] = p[j];
			p[j] = t;
		}
		note(g, " permute(");
		for (int i = 0; i < nd; i++)
			note(g, "%s%d", i ? "," : "", p[i]);
		note(g, ")");
		return eng_permute(x, p);
	}
	case 2: { /* expand, inserting a unit axis first when there is none */
		int k = nd;
		memcpy(s, sh, sizeof(int64_t) * nd);
		bool has1 = false;
		for (int i = 0; i < nd; i++)
			has1 |= s[i] == 1;
		eng_tensor *base = x;
		if ((!has1 || rnd(g, 0, 1)) && nd < 4) {
			int at = rnd(g, 0, nd);
			memmove(s + at + 1, s + at, sizeof(int64_t) * (nd - at));
			s[at] = 1;
			k = nd + 1;
			note(g, " reshape(unit at %d)", at);
			base = eng_reshape(x, k, s);
		}
		int64_t n = numel_of(k, s);
		for (int i = 0; i < k; i++)
			if (s[i] == 1 && rnd(g, 0, 2)) {
				int64_t e = rnd(g, 2, 5);
				if (n * e <= MAX_NUMEL) {
					s[i] = e;
					n *= e;
				}
			}
		note(g, " expand(");
		for (int i = 0; i < k; i++)
			note(g, "%s%lld", i ? "," : "", (long long)s[i]);
		note(g, ")");
		return eng_expand(base, k, s);
	}
	case 3: { /* pad */
		int64_t n = 1;
		for (int i = 0; i < nd; i++) {
			pairs[i][0] = rnd(g, 0, 3) ? 0 : rnd(g, 1, 2);
			pairs[i][1] = rnd(g, 0, 2) ? 0 : rnd(g, 1, 2);
			n *= sh[i] + pairs[i][0] + pairs[i][1];
		}
		if (n > MAX_NUMEL)
			return eng_contiguous(x);
		note(g, " pad(");
		for (int i = 0; i < nd; i++)
			note(g, "%s%lld:%lld", i ? "," : "", (long long)pairs[i][0],
			     (long long)pairs[i][1]);
		note(g, ")");
		return eng_pad(x, pairs);
	}
	case 4: { /* shrink, rarely to empty */
		for (int i = 0; i < nd; i++) {
			if (sh[i] == 0 || rnd(g, 0, 1)) {
				pairs[i][0] = 0, pairs[i][1] = sh[i];
				continue;
			}
			pairs[i][0] = rnd(g, 0, (int)sh[i] - 1);
			pairs[i][1] = rnd(g, (int)pairs[i][0] + 1, (int)sh[i]);
			if (rnd(g, 0, 40) == 0)
				pairs[i][1] = pairs[i][0];
		}
		note(g, " shrink(");
		for (int i = 0; i < nd; i++)
			note(g, "%s%lld:%lld", i ? "," : "", (long long)pairs[i][0],
			     (long long)pairs[i][1]);
		note(g, ")");
		return eng_shrink(x, pairs);
	}
	default: { /* flip */
		int axes[ENG_MAX_DIMS], na = 0;
		for (int i = 0; i < nd; i++)
			if (rnd(g, 0, 1))
				axes[na++] = i;
		if (!na)
			return eng_contiguous(x);
		note(g, " flip(%d axes)", na);
		return eng_flip(x, axes, na);
	}
	}
}

static eng_tensor *op_unary(gen *g, eng_tensor *x)
{
	if (is_int(x)) {
		switch (rnd(g, 0, 7)) {
		case 0:
			note(g, " neg");
			return eng_neg(x);
		case 1:
			note(g, " *3");
			return eng_mul_s(x, 3);
		case 2:
			note(g, " &255");
			return eng_and(x, eng_scalar(g->ctx, ENG_I32, 255));
		case 3:
			note(g, " >>1");
			return eng_shr(x, eng_scalar(g->ctx, ENG_I32, 1));
		case 4:
			note(g, " %%7");
			return eng_mod(x, eng_scalar(g->ctx, ENG_I32, 7));
		case 5:
			note(g, " idiv 3");
			return eng_idiv(x, eng_scalar(g->ctx, ENG_I32, 3));
		case 6:
			note(g, " <<2");
			return eng_shl(x, eng_scalar(g->ctx, ENG_I32, 2));
		default:
			note(g, " cast f32");
			return eng_cast(x, ENG_F32);
		}
	}
	switch (rnd(g, 0, 5)) {
	case 0:
		note(g, " neg");
		return eng_neg(x);
	case 1:
		note(g, " sin");
		return eng_sin(x);
	case 2:
		note(g, " exp2(sin)");
		return eng_exp2(eng_sin(x));
	case 3:
		note(g, " sqrt(x*x)");
		return eng_sqrt(eng_mul(x, x));
	case 4:
		note(g, " recip(1+x*x)");
		return eng_recip(eng_add_s(eng_mul(x, x), 1));
	default:
		note(g, " log2(1+x*x)");
		return eng_log2(eng_add_s(eng_mul(x, x), 1));
	}
}

/* Binary op with a fresh leaf broadcast against x, or with a flipped view of x itself. */
static eng_tensor *op_binary(gen *g, eng_tensor *x)
{
	int nd = eng_ndim(x);
	int64_t s[ENG_MAX_DIMS];
	eng_tensor *y;
	if (rnd(g, 0, 3) == 0 && nd > 0) {
		int ax = rnd(g, 0, nd - 1);
		note(g, " [with flip(self, %d)]", ax);
		y = eng_flip(x, &ax, 1);
	} else {
		int drop = nd ? rnd(g, 0, 1) * rnd(g, 0, nd - 1) : 0;
		for (int i = drop; i < nd; i++)
			s[i - drop] = rnd(g, 0, 2) ? eng_shape(x)[i] : 1;
		note(g, " [with leaf of %d dims", nd - drop);
		y = leaf(g, eng_tensor_dtype(x), nd - drop, s);
		note(g, "]");
	}
	if (is_int(x)) {
		switch (rnd(g, 0, 9)) {
		case 0:
			note(g, " add");
			return eng_add(x, y);
		case 1:
			note(g, " sub");
			return eng_sub(x, y);
		case 2:
			note(g, " mul");
			return eng_mul(x, y);
		case 3:
			note(g, " maximum");
			return eng_maximum(x, y);
		case 4:
			note(g, " minimum");
			return eng_minimum(x, y);
		case 5:
			note(g, " idiv");
			return eng_idiv(x, y);
		case 6:
			note(g, " mod");
			return eng_mod(x, y);
		case 7:
			note(g, " xor");
			return eng_xor(x, y);
		case 8:
			note(g, " where(x<y)");
			return eng_where(eng_lt(x, y), x, y);
		default:
			note(g, " shr(y&15)");
			return eng_shr(x, eng_and(y, eng_scalar(g->ctx, ENG_I32, 15)));
		}
	}
	switch (rnd(g, 0, 4)) {
	case 0:
		note(g, " add");
		return eng_add(x, y);
	case 1:
		note(g, " sub");
		return eng_sub(x, y);
	case 2:
		note(g, " mul");
		return eng_mul(x, y);
	case 3:
		note(g, " maximum");
		return eng_maximum(x, y);
	default:
		note(g, " where(y<0)");
		return eng_where(eng_lt(y, eng_scalar(g->ctx, eng_tensor_dtype(y), 0)), x, y);
	}
}

static eng_tensor *op_reduce(gen *g, eng_tensor *x)
{
	int nd = eng_ndim(x), axes[ENG_MAX_DIMS], na = 0;
	if (nd == 0 || g->nreduce >= 2)
		return op_unary(g, x);
	g->nreduce++;
	for (int i = 0; i < nd; i++)
		if (rnd(g, 0, 1))
			axes[na++] = i;
	if (!na)
		axes[na++] = rnd(g, 0, nd - 1);
	bool keep = rnd(g, 0, 1);
	int which = rnd(g, 0, is_int(x) ? 2 : 1);
	note(g, " %s(%d axes, keep %d)",
	     which == 0	  ? "sum"
	     : which == 1 ? "max"
			  : "prod",
	     na, keep);
	if (which == 0)
		return eng_sum(x, axes, na, keep);
	if (which == 1)
		return eng_max(x, axes, na, keep);
	return eng_prod(x, axes, na, keep);
}

/* The graph for a seed; all tensors belong to ctx's current scope. */
static eng_tensor *random_graph(gen *g, eng_ctx *ctx, uint64_t seed)
{
	memset(g, 0, sizeof(*g));
	g->ctx = ctx;
	g->r.s = seed * 0x9e3779b97f4a7c15ull + 1;
	int nd = rnd(g, 0, 4);
	int64_t s[ENG_MAX_DIMS];
	for (int i = 0; i < nd; i++)
		s[i] = rnd(g, 1, 7);
	note(g, "%d-d", nd);
	static const eng_dtype dts[10] = {ENG_F32, ENG_F32, ENG_F32, ENG_F32, ENG_F32,
					  ENG_I32, ENG_I32, ENG_F16, ENG_I64, ENG_U8};
	eng_tensor *x = leaf(g, dts[rnd(g, 0, 9)], nd, s);
	int nops = rnd(g, 3, 10);
	for (int i = 0; i < nops && x; i++) {
		int kind = rnd(g, 0, 9);
		if (kind < 4)
			x = op_movement(g, x);
		else if (kind < 6)
			x = op_unary(g, x);
		else if (kind < 8)
			x = op_binary(g, x);
		else if (kind < 9)
			x = op_reduce(g, x);
		else {
			note(g, " contiguous");
			x = eng_contiguous(x);
		}
	}
	return x;
}

/* Compare got with want normwise: max|got - want| <= tol * max(1, max|want|) for floats, tol 1e-4
 * (float16: 1e-2); NaN and inf must match exactly in place; integers exactly. */
static bool close_normwise(const ref_array *got, const ref_array *want, char *msg, size_t len)
{
	if (!want->f)
		return ref_match(got, want, 0, 0, msg, len);
	double scale = 1;
	for (int64_t k = 0; k < want->numel; k++)
		if (isfinite(want->f[k]))
			scale = fmax(scale, fabs(want->f[k]));
	return ref_match(got, want, 0, (want->dtype == ENG_F16 ? 1e-2 : 1e-4) * scale, msg, len);
}

/* Realize n graphs of a context together and compare each; failures are appended to report. */
static int check_graphs(eng_ctx *ctx, eng_tensor **ts, gen *gens, const uint64_t *seeds, int n,
			char *report, size_t cap)
{
	int fails = 0;
	ref_array *want = calloc((size_t)n, sizeof(*want));
	ck_assert(want != NULL);
	for (int i = 0; i < n; i++)
		ck_assert_msg(ts[i] && ref_tensor(ts[i], &want[i]),
			      "seed %llu: build or reference failed: %s (%s)",
			      (unsigned long long)seeds[i], eng_errmsg(ctx), gens[i].desc);
	eng_status st = eng_realize(ts, n);
	for (int i = 0; i < n; i++) {
		char sub[512] = "";
		bool ok = false;
		if (st == ENG_OK) {
			size_t nb =
				(size_t)eng_numel(ts[i]) * eng_dtype_size(eng_tensor_dtype(ts[i]));
			void *raw = malloc(nb ? nb : 1);
			ref_array got = {0};
			ck_assert(raw != NULL);
			if (eng_tensor_read(ts[i], raw, nb) != ENG_OK)
				snprintf(sub, sizeof(sub), "read failed: %s", eng_errmsg(ctx));
			else if (ref_decode(eng_tensor_dtype(ts[i]), eng_ndim(ts[i]),
					    eng_shape(ts[i]), raw, &got))
				ok = close_normwise(&got, &want[i], sub, sizeof(sub));
			ref_free(&got);
			free(raw);
		} else {
			snprintf(sub, sizeof(sub), "batch realize failed: %s", eng_errmsg(ctx));
		}
		if (!ok) {
			size_t used = strlen(report);
			if (fails < 8 && used < cap)
				snprintf(report + used, cap - used,
					 "\n  seed %llu: %s\n    graph: %s",
					 (unsigned long long)seeds[i], sub, gens[i].desc);
			fails++;
		}
	}
	for (int i = 0; i < n; i++)
		ref_free(&want[i]);
	free(want);
	return fails;
}

/* Run graphs first .. first+count-1 in batches; on a failed batch, re-run its graphs one by one in
 * fresh contexts so the report names the seeds that fail on their own. */
static void run_graphs(uint64_t first, int count)
{
	char report[8192];
	gen gens[BATCH];
	int fails = 0;
	report[0] = 0;
	for (int at = 0; at < count; at += BATCH) {
		int n = count - at < BATCH ? count - at : BATCH;
		uint64_t seeds[BATCH];
		eng_tensor *ts[BATCH];
		eng_ctx *ctx = tu_ctx_new();
		for (int i = 0; i < n; i++) {
			seeds[i] = first + (uint64_t)(at + i);
			ts[i] = random_graph(&gens[i], ctx, seeds[i]);
		}
		char tmp[8192] = "";
		int bf = check_graphs(ctx, ts, gens, seeds, n, tmp, sizeof(tmp));
		tu_ctx_free(ctx);
		if (!bf)
			continue;
		int alone = 0;
		for (int i = 0; i < n; i++) { /* isolate */
			eng_ctx *c1 = tu_ctx_new();
			eng_tensor *t = random_graph(&gens[i], c1, seeds[i]);
			size_t used = strlen(report);
			alone += check_graphs(c1, &t, &gens[i], &seeds[i], 1, report + used,
					      sizeof(report) - used);
			tu_ctx_free(c1);
		}
		if (!alone) { /* fails only when batched together */
			size_t used = strlen(report);
			snprintf(report + used, sizeof(report) - used,
				 "\n  (batch from seed %llu fails only as a batch)%.3000s",
				 (unsigned long long)seeds[0], tmp);
			alone = bf;
		}
		fails += alone;
	}
	ck_assert_msg(fails == 0, "%d random graphs failed (rerun one with TENSORD_SEED=<seed>):%s",
		      fails, report);
}

START_TEST(random_graphs_a)
{
	run_graphs(1000, GRAPHS_PER_TEST);
}
END_TEST
START_TEST(random_graphs_b)
{
	run_graphs(2000, GRAPHS_PER_TEST);
}
END_TEST
START_TEST(random_graphs_c)
{
	run_graphs(3000, GRAPHS_PER_TEST);
}
END_TEST
START_TEST(random_graphs_d)
{
	run_graphs(4000, GRAPHS_PER_TEST);
}
END_TEST

/* TENSORD_SEED=<n> runs that one graph alone and prints it (DEBUG from the environment). */
START_TEST(random_graph_env_seed)
{
	const char *e = getenv("TENSORD_SEED");
	if (!e || !*e)
		return;
	uint64_t seed = strtoull(e, NULL, 10);
	eng_ctx_opts o;
	eng_ctx_opts_default(&o);
	eng_ctx *ctx = tu_ctx_track(eng_ctx_create(&o, NULL, 0));
	ck_assert(ctx != NULL);
	gen g;
	eng_tensor *t = random_graph(&g, ctx, seed);
	fprintf(stderr, "seed %llu: %s\n", (unsigned long long)seed, g.desc);
	if (t)
		eng_tensor_dump_graph(t);
	char report[4096] = "";
	int fails = check_graphs(ctx, &t, &g, &seed, 1, report, sizeof(report));
	tu_ctx_free(ctx);
	ck_assert_msg(fails == 0, "%s", report);
}
END_TEST

Suite *random_suite(void)
{
	const TTest *const tests[] = {random_graphs_a, random_graphs_b, random_graphs_c,
				      random_graphs_d, random_graph_env_seed};
	return tu_suite("random", tests, (int)(sizeof(tests) / sizeof(tests[0])), TU_TIMEOUT);
}
