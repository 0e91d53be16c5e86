/* beam.c: the search over kernel options (beam.h), tinygrad's BEAM: from the heuristics' choice,
 * each level lowers every one-step change of the beam's choices (a tile, a block, packing, the
 * work-group), compiles them as one batch, times them on the device (beambench.c) and keeps the
 * `width` fastest that compute the heuristic kernel's values; it stops when a level finds
 * nothing faster or the budget is spent. The winner is recorded per kernel and machine. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "beam.h"
#include "beamcache.h"
#include "cache/progcache.h"
#include "cache/progdisk.h"
#include "codegen/lower.h"
#include "codegen/plan.h"
#include "renderer/cstyle.h"
#include "util/hash.h"

#define MAX_LEVELS    6
#define MAX_PER_LEVEL 32 /* candidates lowered, compiled and timed per level */
#define MAX_TRIED     512
#define RUNS	      10
#define MARGIN	      0.97 /* a variant must be this much faster than the best so far to replace it */

typedef struct cand {
	eng_kernel_choice c;
	eng_kernel_ir ir;
	char name[96];
	char *src;
	bk_program *prog;
	double ms;
} cand;

typedef struct search {
	eng_ctx *ctx;
	eng_device *dev;
	eng_sched_item *it;
	eng_beam_bench *bench;
	double deadline;
	eng_kernel_choice tried[MAX_TRIED];
	int ntried;
	uint64_t seen[MAX_TRIED]; /* hashes of the sources lowered so far */
	int nseen;
	int timed;
	double compile_ms; /* estimated compile time of one kernel in a batch */
} search;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The heuristic kernel's stored nodes, read as such by its variants: the same buffers. */
static bool in_bufs(void *arg, const eng_node *n)
{
	const eng_kernel_ir *ir = arg;
	for (int i = 0; i < ir->nbufs; i++)
		if (ir->bufs[i].node == n)
			return true;
	return false;
}

/* Lower it's kernel again with choice c into out (freed by the caller on success): ENG_EINVAL
 * when c does not fit, or the variant would use other buffers than the kernel. */
static eng_status lower_choice(eng_device *dev, const eng_sched_item *it,
			       const eng_kernel_choice *c, eng_kernel_ir *out, char *err,
			       size_t errlen)
{
	eng_lower_opts o = {.is_stored = in_bufs,
			    .arg = (void *)&it->ir,
			    .optimize = true,
			    .target = dev->target,
			    .force = c};
	if (c->group >= 0)
		o.target.reduce_group = c->group;
	const eng_node *must = NULL;
	memset(out, 0, sizeof(*out));
	eng_status s = eng_lower(it->roots, it->nroots, &o, out, &must, err, errlen);
	bool same = !s && out->nbufs == it->ir.nbufs;
	for (int i = 0; same && i < out->nbufs; i++)
		same = out->bufs[i].node == it->ir.bufs[i].node &&
		       out->bufs[i].output == it->ir.bufs[i].output &&
		       out->bufs[i].numel == it->ir.bufs[i].numel;
	if (!s && !same) {
		snprintf(err, errlen, "the variant uses other buffers");
		s = ENG_EINVAL;
	}
	if (s)
		eng_kernel_ir_free(out);
	return s;
}

/* Make ir, name and src it's kernel (taking them; the old ones are freed). */
static void adopt(eng_sched_item *it, eng_kernel_ir *ir, char name[96], char **src,
		  const char *nname, char *nsrc)
{
	eng_kernel_ir_free(&it->ir);
	it->ir = *ir;
	memset(ir, 0, sizeof(*ir));
	free(*src);
	*src = nsrc;
	snprintf(name, 96, "%s", nname);
}

static void cand_free(eng_device *dev, cand *c)
{
	eng_kernel_ir_free(&c->ir);
	free(c->src);
	if (c->prog)
		dev->bk.ops->program_free(dev->bk.ctx, c->prog);
	memset(c, 0, sizeof(*c));
}

/* Add c as a candidate unless it was tried: lowered and rendered, and new as source text. */
static void propose(search *S, const eng_kernel_choice *c, cand *out, int *n)
{
	if (*n >= MAX_PER_LEVEL || S->ntried >= MAX_TRIED)
		return;
	for (int i = 0; i < S->ntried; i++)
		if (eng_choice_equal(&S->tried[i], c))
			return;
	S->tried[S->ntried++] = *c;
	cand *k = &out[*n];
	char err[256];
	memset(k, 0, sizeof(*k));
	k->c = *c;
	if (lower_choice(S->dev, S->it, c, &k->ir, err, sizeof(err)))
		return;
	if (eng_render_kernel(&S->dev->target, &k->ir, k->name, &k->src)) {
		cand_free(S->dev, k);
		return;
	}
	uint64_t h = eng_hash_str(k->src);
	for (int i = 0; i < S->nseen; i++)
		if (S->seen[i] == h) { /* lowers to a kernel tried already */
			cand_free(S->dev, k);
			return;
		}
	if (S->nseen < MAX_TRIED)
		S->seen[S->nseen++] = h;
	k->ms = INFINITY;
	(*n)++;
}

/* The narrow operand's rows packed per block (eng_rpack) in tiles of the target's rows (eng_regtile_of), in blocks of the rows
 * b's blocks have, half and twice as many; or, if b packs them, read in place in tiles of 8. */
static void row_pack_neighbours(search *S, const eng_kernel_choice *b, cand *out, int *n)
{
	const eng_kernel_ir *ir = &S->it->ir;
	int64_t rows = b->mrows ? b->mrows : b->mblock * b->tile[1];
	eng_kernel_choice c = *b;
	const int64_t tr = eng_regtile_of(&S->dev->target).rows;
	if (b->rpack >= 0 && rows % 8 == 0) {
		c.rpack = -1, c.mrows = 0, c.tile[1] = 8, c.mblock = rows / 8;
		propose(S, &c, out, n);
	}
	for (int i = 0; i < ir->nbufs; i++)
		for (int k = 0; k < 3 && !ir->bufs[i].output && ir->bufs[i].dtype == ENG_F32; k++) {
			int64_t r = k == 0 ? rows : k == 1 ? rows / 2 : rows * 2;
			c = *b;
			c.rpack = i, c.tile[1] = tr, c.mblock = (r + tr - 1) / tr;
			c.mrows = c.mblock * tr == r ? 0 : r;
			propose(S, &c, out, n);
		}
}

/* Every one-step change of b: the wide tile (dim and size, or none), the narrow tile, the
 * reduction block, the row block, packing (of a panel, of blocks of rows),
 * the work-group size. The tile sizes tried are powers of two and, around the target's register
 * tile (eng_regtile_of), one vector, two and four vectors wide and its rows, half and 1.5 times
 * them (AVX2: 8, 16, 32 lanes and 3, 6, 9 rows). */
static void neighbours(search *S, const eng_kernel_choice *b, cand *out, int *n)
{
	const eng_kernel_ir *ir = &S->it->ir;
	uint32_t D = 0;
	for (int p = 0; p < ir->nphases; p++)
		D |= ir->phases[p].dims;
	eng_kernel_choice c;
	const eng_regtile rt = eng_regtile_of(&S->dev->target);
	const int64_t wides[] = {2, 4, 8, 16, 32, rt.lanes, rt.wide, rt.wide * 2 <= 64 ? rt.wide * 2 : 64},
		      narrows[] = {2, 4, 8, rt.rows / 2, rt.rows, rt.rows * 3 / 2 <= 16 ? rt.rows * 3 / 2 : 16};
	static const int64_t kbs[] = {16, 32, 64, 128, 256, 512}, mbs[] = {1, 2, 4, 8, 16};
	for (int d = 0; d < ir->ndim; d++) {
		if (!((D >> d) & 1) || ir->shape[d] < 2)
			continue;
		for (size_t i = 0; i < sizeof(wides) / sizeof(wides[0]); i++) {
			c = *b;
			c.tiledim[0] = d, c.tile[0] = wides[i];
			if (c.tiledim[1] == d) /* the narrow tile moves to the old wide dim */
				c.tiledim[1] = b->tiledim[0],
				c.tile[1] = b->tiledim[0] >= 0 ? b->tile[1] : 1;
			propose(S, &c, out, n);
		}
		for (size_t i = 0; i < sizeof(narrows) / sizeof(narrows[0]) && b->tiledim[0] >= 0;
		     i++) {
			c = *b;
			c.tiledim[1] = d, c.tile[1] = narrows[i];
			propose(S, &c, out, n);
		}
	}
	c = *b; /* no narrow tile, then no tiles at all */
	c.tiledim[1] = -1, c.tile[1] = 1, c.mblock = 1;
	propose(S, &c, out, n);
	c.tiledim[0] = -1, c.tile[0] = 1, c.kblock = 0, c.pack = -1;
	propose(S, &c, out, n);
	if (ir->nphases == 1 && b->tiledim[0] >= 0) {
		/* the heuristic kernel's outermost reduced axis, whole */
		int64_t k = ir->kblock ? ir->kfull : ir->loops[ir->phases[0].red[0]].n;
		for (size_t i = 0; i <= sizeof(kbs) / sizeof(kbs[0]); i++) {
			c = *b;
			c.kblock = i ? kbs[i - 1] : 0;
			if (c.kblock && (k % c.kblock || c.kblock >= k))
				continue;
			if (!c.kblock)
				c.mblock = 1;
			propose(S, &c, out, n);
		}
		for (size_t i = 0;
		     i < sizeof(mbs) / sizeof(mbs[0]) && b->kblock && b->tiledim[1] >= 0; i++) {
			c = *b;
			c.mblock = mbs[i];
			propose(S, &c, out, n);
		}
		for (int i = -1; i < ir->nbufs; i++) /* which operand is packed, if any */
			if (i < 0 || (!ir->bufs[i].output && ir->bufs[i].dtype == ENG_F32)) {
				c = *b;
				c.pack = i;
				propose(S, &c, out, n);
			}
		if (b->kblock && b->tiledim[1] >= 0)
			row_pack_neighbours(S, b, out, n);
	}
	for (int g = S->dev->target.reduce_group; g > 1 && g >= S->dev->target.reduce_group / 4; g /= 2) {
		c = *b;
		c.group = g == S->dev->target.reduce_group ? -1 : g;
		propose(S, &c, out, n);
	}
	if (S->dev->target.reduce_group > 1) {
		c = *b;
		c.group = 0;
		propose(S, &c, out, n);
	}
}

/* Compile the candidates' sources as one batch; a batch that fails is compiled one by one (a
 * candidate that does not compile drops out). */
static void compile_all(search *S, cand *cs, int n)
{
	const char *srcs[MAX_PER_LEVEL], *names[MAX_PER_LEVEL];
	bk_program *progs[MAX_PER_LEVEL] = {0};
	bk_err berr;
	for (int i = 0; i < n; i++)
		srcs[i] = cs[i].src, names[i] = cs[i].name;
	const bk_device_ops *ops = S->dev->bk.ops;
	if (!ops->compile(S->dev->bk.ctx, srcs, n, names, progs, &berr)) {
		for (int i = 0; i < n; i++)
			cs[i].prog = progs[i];
		return;
	}
	for (int i = 0; i < n && now_ms() < S->deadline; i++)
		if (ops->compile(S->dev->bk.ctx, &srcs[i], 1, &names[i], &cs[i].prog, &berr))
			cs[i].prog = NULL;
}

static int by_time(const void *a, const void *b)
{
	double x = ((const cand *)a)->ms, y = ((const cand *)b)->ms;
	return x < y ? -1 : x > y;
}

/* The search proper: best gets the winner (its ir, source and program; c only, ms and no
 * program when the heuristics' kernel wins), from the heuristic kernel timed at heur_ms. */
static eng_status run_levels(search *S, const eng_kernel_choice *heur, double heur_ms, cand *best)
{
	eng_kernel_choice beam[64];
	int nbeam = 1;
	beam[0] = *heur;
	best->c = *heur;
	best->ms = heur_ms;
	cand *cs = calloc(MAX_PER_LEVEL, sizeof(*cs));
	if (!cs)
		return ENG_OK;
	eng_status s = ENG_OK;
	for (int level = 0; level < MAX_LEVELS && now_ms() < S->deadline; level++) {
		int n = 0;
		for (int b = 0; b < nbeam; b++)
			neighbours(S, &beam[b], cs, &n);
		/* as many as the budget left can compile (the budget is checked between steps) */
		double left = (S->deadline - now_ms()) / (S->compile_ms > 1 ? S->compile_ms : 1);
		int fit = left < MAX_PER_LEVEL ? (int)left : MAX_PER_LEVEL;
		fit = level == 0 && fit < 4 ? 4 : fit; /* the first level tries a few at least */
		for (int i = fit > 1 ? fit : 1; i < n; i++)
			cand_free(S->dev, &cs[i]);
		n = fit < n ? (fit > 1 ? fit : 1) : n;
		if (!n)
			break;
		double tc = now_ms();
		compile_all(S, cs, n);
		S->compile_ms = (now_ms() - tc) / n;
		for (int i = 0; i < n && !s; i++) {
			if (!cs[i].prog || now_ms() >= S->deadline)
				continue;
			if ((s = eng_cancel_point(S->ctx, "searching kernel options for ",
						  S->it->ir.name)))
				break;
			char err[512];
			eng_status r =
				eng_beam_bench_run(S->bench, cs[i].prog, &cs[i].ir, RUNS,
						   2 * best->ms, &cs[i].ms, err, sizeof(err));
			S->timed++;
			char text[160];
			eng_choice_format(&cs[i].c, text, sizeof(text));
			if (r) {
				cs[i].ms = INFINITY;
				eng_logmsg(S->ctx, 3, "beam: %s (%s) dropped: %s", cs[i].name, text,
					   err);
			} else {
				eng_logmsg(S->ctx, 4, "beam: %s (%s): %.3f ms", cs[i].name, text,
					   cs[i].ms);
			}
		}
		qsort(cs, n, sizeof(*cs), by_time);
		bool better = !s && cs[0].ms < MARGIN * best->ms;
		if (better) {
			cand_free(S->dev, best);
			*best = cs[0];
			memset(&cs[0], 0, sizeof(cs[0]));
			nbeam = 0;
			beam[nbeam++] = best->c;
			for (int i = 1; i < n && nbeam < S->ctx->beam && isfinite(cs[i].ms); i++)
				beam[nbeam++] = cs[i].c;
		}
		for (int i = 0; i < n; i++)
			cand_free(S->dev, &cs[i]);
		if (!better)
			break;
	}
	free(cs);
	return s;
}

/* Search it's kernel (rendered under the heuristics as *src) on dev; see eng_beam_item. */
static eng_status search_item(eng_ctx *ctx, eng_device *dev, eng_sched_item *it, char name[96],
			      char **src)
{
	search *S = calloc(1, sizeof(*S));
	if (!S)
		return ENG_OK;
	double t0 = now_ms();
	S->ctx = ctx, S->dev = dev, S->it = it;
	S->deadline = t0 + ctx->beam_budget * 1e3;
	ctx->stats.searches++;
	char err[512] = "";
	eng_status s = ENG_OK;
	const bk_device_ops *ops = dev->bk.ops;
	bk_program *hprog = eng_progcache_get(dev->progs, *src);
	bool owned = false;
	cand best = {0};
	double hms = INFINITY;
	if (!(S->bench = eng_beam_bench_create(dev, &it->ir, eng_hash_str(*src), err, sizeof(err))))
		goto out;
	S->compile_ms = 50;
	if (!hprog) {
		double tc = now_ms();
		bk_err berr;
		const char *srcs[1] = {*src}, *names[1] = {name};
		if (ops->compile(dev->bk.ctx, srcs, 1, names, &hprog, &berr)) {
			snprintf(err, sizeof(err), "compiling: %.400s", berr.msg);
			hprog = NULL;
			goto out;
		}
		owned = true;
		/* a batch shares the compiler's start-up: guess a quarter per kernel until one is timed */
		S->compile_ms = (now_ms() - tc) / 4;
	}
	if (eng_beam_bench_run(S->bench, hprog, &it->ir, RUNS, INFINITY, &hms, err, sizeof(err)))
		goto out;
	S->tried[S->ntried++] = eng_choice_of(&it->ir);
	S->seen[S->nseen++] = eng_hash_str(*src);
	eng_kernel_choice heur = S->tried[0];
	s = run_levels(S, &heur, hms, &best);
	if (s)
		goto out;
	if (best.src) { /* the winner against the heuristics once more, in turns: noise is not a win */
		double h = INFINITY, w = INFINITY, t;
		for (int r = 0; r < 4; r++) {
			if (!eng_beam_bench_run(S->bench, hprog, &it->ir, 2, INFINITY, &t, err,
						sizeof(err)))
				h = t < h ? t : h;
			if (!eng_beam_bench_run(S->bench, best.prog, &best.ir, 2, INFINITY, &t, err,
						sizeof(err)))
				w = t < w ? t : w;
		}
		err[0] = 0;
		hms = h;
		best.ms = w;
		if (!(w < MARGIN * h)) {
			eng_kernel_choice c = best.c;
			cand_free(dev, &best);
			best.c = heur;
			best.ms = h;
			char text[160];
			eng_choice_format(&c, text, sizeof(text));
			eng_logmsg(ctx, 3, "beam: %s: %s was no faster on a second look", name,
				   text);
		}
	}
	eng_beamcache_put(dev, *src, &best.c);
	char text[160];
	eng_choice_format(&best.c, text, sizeof(text));
	eng_logmsg(ctx, 2, "beam: %s: %d variants timed in %.0f ms, %s: %.3f ms -> %.3f ms (%.2fx)",
		   name, S->timed, now_ms() - t0, text, hms, best.ms,
		   best.ms > 0 ? hms / best.ms : 1.0);
	if (best.src) {
		/* the winner's program joins the caches, so realize does not compile it again */
		const char *bs = best.src;
		if (eng_progcache_put(dev->progs, best.src, best.prog)) {
			eng_progdisk_store(dev, &bs, &best.prog, 1);
			best.prog = NULL;
		}
		char bname[96];
		memcpy(bname, best.name, sizeof(bname));
		char *bsrc = best.src;
		best.src = NULL;
		adopt(it, &best.ir, name, src, bname, bsrc);
	} else if (owned && eng_progcache_put(dev->progs, *src, hprog)) {
		const char *hs = *src;
		eng_progdisk_store(dev, &hs, &hprog, 1);
		owned = false;
	}
out:
	if (err[0])
		eng_logmsg(ctx, 1, "beam: %s: no search (%s); the heuristics' kernel runs", name,
			   err);
	cand_free(dev, &best);
	if (owned && hprog)
		ops->program_free(dev->bk.ctx, hprog);
	eng_beam_bench_destroy(S->bench);
	free(S);
	return s;
}

eng_status eng_beam_item(eng_ctx *ctx, eng_device *dev, eng_sched_item *it, char name[96],
			 char **src)
{
	if (ctx->beam <= 0 || !it->ir.nphases || dev->failed)
		return ENG_OK;
	eng_kernel_choice c;
	if (eng_beamcache_get(dev, *src, &c)) {
		eng_kernel_choice h = eng_choice_of(&it->ir);
		if (eng_choice_equal(&c, &h)) {
			ctx->stats.search_hits++;
			return ENG_OK;
		}
		eng_kernel_ir ir;
		char err[256], nname[96], *nsrc = NULL;
		if (!lower_choice(dev, it, &c, &ir, err, sizeof(err))) {
			if (!eng_render_kernel(&dev->target, &ir, nname, &nsrc)) {
				adopt(it, &ir, name, src, nname, nsrc);
				ctx->stats.search_hits++;
				eng_logmsg(ctx, 3, "beam: %s: the recorded choice", name);
				return ENG_OK;
			}
			eng_kernel_ir_free(&ir);
			snprintf(err, sizeof(err), "it does not render");
		}
		eng_logmsg(ctx, 1,
			   "beam: %s: the recorded choice no longer applies (%s): searching again",
			   name, err);
		eng_beamcache_forget(dev, *src);
	}
	return search_item(ctx, dev, it, name, src);
}
