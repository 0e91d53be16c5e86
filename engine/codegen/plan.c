/* plan.c: the lowering's optimisation planners for one kernel, run on its first lowering
 * (lower.c relowers with what they chose): register tiles (plan_tiles), packed sums of products
 * over several reduced axes (plan_packed: convolutions), cache blocking and packing of
 * matmul-shaped kernels (plan_blocks), and split axes (plan_split). Each states its choice in
 * the kernel's opts text. */
#include "plan.h"

#include <stdio.h>
#include <string.h>

#include "linearize.h"

int64_t eng_plan_panel_max(const bk_target *t)
{
	const int64_t most = 128 * 1024;
	return t->cache_l2 > 0 && t->cache_l2 / 8 < most ? t->cache_l2 / 8 : most;
}

/* Output dims a uop depends on, through outer and tile loop vars. */
uint32_t eng_plan_dims_of(const eng_kernel_ir *ir, uint64_t deps)
{
	uint32_t m = 0;
	for (int v = 0; v < ir->nloops; v++)
		if (((deps >> v) & 1) && ir->loops[v].kind != L_REDUCE && ir->loops[v].dim >= 0)
			m |= 1u << ir->loops[v].dim;
	return m;
}

bool eng_plan_packable(const eng_kernel_ir *ir, const eng_node *const *roots, int nroots, const bk_target *t)
{
	if (t->kind != BK_KIND_CPU || t->cache_l1 <= 0 || t->cache_l2 <= 0 || nroots != 1 || roots[0]->op == ENG_OP_ASSIGN ||
	    ir->nphases != 1 || ir->nstores != 1)
		return false;
	const eng_phase *ph = &ir->phases[0];
	if (ph->op != ENG_OP_RSUM || ph->dtype != ENG_F32 || ph->nred < 1)
		return false;
	for (int d = 0; d < ir->ndim; d++)
		if (ir->shape[d] > 1 && !((ph->dims >> d) & 1))
			return false; /* output loops outside the reduction */
	return true;
}

bool eng_plan_blockable(const eng_kernel_ir *ir, const eng_node *const *roots, int nroots, const bk_target *t)
{
	if (!eng_plan_packable(ir, roots, nroots, t))
		return false;
	const eng_phase *ph = &ir->phases[0];
	const eng_uop *v = ir->stores[0].value;
	return v->kind == U_ACC && v->dtype == ph->dtype && roots[0]->dtype == ph->dtype;
}

eng_regtile eng_regtile_of(const bk_target *t)
{
	int64_t bytes = t->vector_bytes >= 4 ? t->vector_bytes : 64, regs = t->vector_regs >= 8 ? t->vector_regs : 32;
	eng_regtile r = {.lanes = bytes / 4};
	r.wide = 2 * r.lanes;
	r.rows = regs * 3 / 4 / 2;
	r.acc = 2 * r.rows;
	return r;
}

/* A tile size for a dim of size n, at most max: max itself or a power of two dividing n, else
 * the largest divisor of n that is at most max (1 if none). */
static int64_t pick_tile(int64_t n, int64_t max)
{
	for (int64_t t = max; t >= 4; t /= 2)
		if (n % t == 0)
			return t;
	for (int64_t t = max; t >= 2; t--)
		if (n % t == 0)
			return t;
	return 1;
}

/* Choose tiles for kernels with reductions: the output dim most often read contiguously gets
 * the wide tile (vector lanes), another dim the narrow one (register reuse). */
void eng_plan_tiles(eng_kernel_ir *ir, const bk_target *t, char *opts, size_t len)
{
	ir->tiledim[0] = ir->tiledim[1] = -1;
	ir->tile[0] = ir->tile[1] = 1;
	if (!ir->nphases)
		return;
	uint32_t D = 0;
	int64_t red = 1;
	for (int p = 0; p < ir->nphases; p++) {
		D |= ir->phases[p].dims;
		int64_t r = 1;
		for (int k = 0; k < ir->phases[p].nred; k++)
			r *= ir->loops[ir->phases[p].red[k]].n;
		if (r > red)
			red = r;
	}
	if (red < 8 || ir->nphases > 4)
		return;
	int64_t rows = 1; /* the iterations a parallel loop over the phases' dims can have */
	for (int d = 0; d < ir->ndim; d++)
		if ((D >> d) & 1)
			rows *= ir->shape[d];
	if (eng_target_groups_rows(t, rows, red))
		return; /* few long rows: a work-group each (linearize.c), not register tiles */
	int score[ENG_MAX_DIMS] = {0}, reuse[ENG_MAX_DIMS] = {0}, nloads = 0;
	for (int p = 0; p < ir->nphases; p++) {
		/* walk loads in the phase value; on a CPU (caches stated) only those that move along the
		 * reduction (the others are read once per row, outside its loop: a batchnorm gradient's
		 * per-channel values put its 32 channels in one tile, one thread) */
		uint64_t redvars = 0;
		for (int k = 0; k < ir->phases[p].nred; k++)
			redvars |= 1ull << ir->phases[p].red[k];
		eng_uop *stack[256];
		int sp = 0;
		stack[sp++] = ir->phases[p].value;
		int guard = 0;
		while (sp && guard++ < 4096) {
			eng_uop *x = stack[--sp];
			if (x->kind == U_LOAD && t->kind == BK_KIND_CPU && !(x->src[0]->deps & redvars))
				continue;
			if (x->kind == U_LOAD) {
				nloads++;
				for (int d = 0; d < ir->ndim; d++) {
					int v = -1;
					for (int l = 0; l < ir->nloops; l++)
						if (ir->loops[l].kind == L_OUTER && ir->loops[l].dim == d)
							v = l;
					if (v < 0)
						continue;
					int64_t co = u_coef_of_var(x->src[0], v);
					if (co == 1)
						score[d] += 2;
					if (!((x->src[0]->deps >> v) & 1))
						reuse[d]++;
				}
				continue;
			}
			for (int i = 0; i < x->nsrc && sp < 256; i++)
				if (x->src[i] && x->src[i]->kind != U_CONST && x->src[i]->kind != U_VAR)
					stack[sp++] = x->src[i];
		}
	}
	int best = -1, second = -1;
	for (int d = 0; d < ir->ndim; d++) {
		if (!((D >> d) & 1) || ir->shape[d] < 2)
			continue;
		if (best < 0 || score[d] > score[best])
			best = d;
	}
	/* no dim read contiguously: a dim that no load depends on (the phases see it only through
	 * index arithmetic, e.g. one_hot's compare against the class index) takes the lanes, each
	 * load then serving the whole tile */
	if (best >= 0 && score[best] == 0) {
		best = -1;
		for (int d = 0; d < ir->ndim; d++)
			if (((D >> d) & 1) && ir->shape[d] >= 2 && nloads > 0 && reuse[d] == nloads &&
			    (best < 0 || ir->shape[d] > ir->shape[best]))
				best = d;
	}
	if (best < 0)
		return;
	/* vector lanes: at most the device's; if the best dim's tile would be no vector width, a
	 * dim whose tile is one (its loads gathered, a constant stride apart) is taken instead, the
	 * one most reused */
	int64_t wmax = t->vector_width > 1 && t->vector_width < 16 ? t->vector_width : 16;
	if (t->vector_width > 1 && !eng_vector_lanes_ok(pick_tile(ir->shape[best], wmax), t->vector_width)) {
		int alt = -1;
		for (int d = 0; d < ir->ndim; d++)
			if (((D >> d) & 1) && eng_vector_lanes_ok(pick_tile(ir->shape[d], wmax), t->vector_width) &&
			    (alt < 0 || reuse[d] > reuse[alt]))
				alt = d;
		if (alt >= 0)
			best = alt;
	}
	/* 16 x 8 accumulators; other sizes fall back to the largest divisor (a 5x5 conv's 20-wide
	 * rows take 10). On a CPU (gcc writes the vectors) a multiple of the register tile's width
	 * takes it, two vectors (AVX-512's 32, AVX2's 16): both FMA ports kept busy through their
	 * latency (measured 1.25x on 256^3 and with plan_blocks' blocking on AVX-512), and the
	 * narrow tile at most the rows whose accumulators fit the registers (eng_regtile_of) */
	const bool cpu = t->kind == BK_KIND_CPU;
	const eng_regtile rt = eng_regtile_of(t);
	ir->tile[0] = pick_tile(ir->shape[best], wmax);
	if (cpu && ir->shape[best] % rt.wide == 0)
		ir->tile[0] = rt.wide;
	if (ir->tile[0] < 2)
		return;
	ir->tiledim[0] = best;
	for (int d = 0; d < ir->ndim; d++) {
		if (d == best || !((D >> d) & 1) || ir->shape[d] < 2)
			continue;
		if (second < 0 || reuse[d] > reuse[second])
			second = d;
	}
	/* rows: 8, or as many as the accumulators of a wide tile of vectors leave room for */
	int64_t nmax = 8, vecs = cpu ? (ir->tile[0] + rt.lanes - 1) / rt.lanes : 1;
	if (cpu && vecs * nmax > rt.acc)
		nmax = rt.acc / vecs;
	if (second >= 0 && reuse[second] > 0 && pick_tile(ir->shape[second], nmax) >= 2) {
		ir->tiledim[1] = second;
		ir->tile[1] = pick_tile(ir->shape[second], nmax);
	}
	snprintf(opts, len, "UPCAST dim %d by %lld%s", best, (long long)ir->tile[0], "");
	if (ir->tiledim[1] >= 0) {
		size_t l = strlen(opts);
		snprintf(opts + l, len - l, ", UPCAST dim %d by %lld", ir->tiledim[1], (long long)ir->tile[1]);
	}
}

/* Collect the distinct loads under x (at most max) into out; returns how many, or max + 1. */
static int phase_loads(eng_uop *x, eng_uop **out, int n, int max, int depth)
{
	if (n > max || depth > 64 || x->kind == U_CONST || x->kind == U_VAR)
		return n;
	if (x->kind == U_LOAD) {
		for (int i = 0; i < n; i++)
			if (out[i] == x)
				return n;
		if (n < max)
			out[n] = x;
		return n + 1;
	}
	for (int i = 0; i < x->nsrc; i++)
		if (x->src[i])
			n = phase_loads(x->src[i], out, n, max, depth + 1);
	return n;
}

/* The operand of a blocked phase to pack: the one load that moves along the wide tile's dim
 * and the reduction but not the narrow tile's rows (a matmul's right side); NULL if none. */
/* The loads of ph's value (at most 8: *n, more if there are more) and the output loops of the
 * wide and narrow tiles' dims (*wv, *nv; -1 if none), on the first, untiled lowering. */
static void tile_loads(const eng_kernel_ir *ir, const eng_phase *ph, eng_uop **ld, int *n, int *wv, int *nv)
{
	*wv = *nv = -1;
	for (int v = 0; v < ir->nloops; v++)
		if (ir->loops[v].kind == L_OUTER) {
			*wv = ir->loops[v].dim == ir->tiledim[0] ? v : *wv;
			*nv = ir->loops[v].dim == ir->tiledim[1] ? v : *nv;
		}
	*n = phase_loads(ph->value, ld, 0, 8, 0);
}

static const eng_node *pack_operand(const eng_kernel_ir *ir, const eng_phase *ph)
{
	int wv, nv, n;
	eng_uop *ld[8];
	tile_loads(ir, ph, ld, &n, &wv, &nv);
	const eng_node *found = NULL;
	for (int i = 0; i < n && i < 8 && wv >= 0 && nv >= 0; i++) {
		uint64_t d = ld[i]->src[0]->deps;
		if (((d >> wv) & 1) && ((d >> ph->red[0]) & 1) && !((d >> nv) & 1) &&
		    !(ld[i]->nsrc > 1 && ld[i]->src[1])) {
			if (found)
				return NULL;
			found = ir->bufs[ld[i]->arg.buf].node;
		}
	}
	return n <= 8 ? found : NULL;
}

/* The operand of a sum of products that the narrow tile's rows read (its loads are the only ones
 * that move with them, all at one index, moving along the one reduction and not along the wide
 * tile's dim; unguarded), else NULL. */
static const eng_node *row_operand(const eng_kernel_ir *ir, const eng_phase *ph)
{
	int wv, nv, n;
	eng_uop *ld[8];
	tile_loads(ir, ph, ld, &n, &wv, &nv);
	const eng_uop *found = NULL;
	for (int i = 0; i < n && i < 8 && wv >= 0 && nv >= 0 && ph->nred == 1; i++) {
		uint64_t d = ld[i]->src[0]->deps;
		if (!((d >> nv) & 1))
			continue;
		if ((found && found != ld[i]) || ((d >> wv) & 1) || !((d >> ph->red[0]) & 1) ||
		    (ld[i]->nsrc > 1 && ld[i]->src[1]))
			return NULL;
		found = ld[i];
	}
	return n <= 8 && found ? ir->bufs[found->arg.buf].node : NULL;
}

/* For a sum of products whose operands are both read along the reduction (x @ w.T, a linear
 * layer: no output dim is read contiguously, plan_tiles chose none): the wide tile on an output
 * dim only one operand moves along (to be read from its packed panel), the narrow one on a dim
 * only the other moves along. Returns whether tiles were set. */
static bool tile_for_packing(eng_kernel_ir *ir, const eng_phase *ph, const bk_target *t)
{
	const eng_regtile rt = eng_regtile_of(t);
	const int64_t nmax = rt.rows < 8 ? rt.rows : 8;
	eng_uop *ld[8];
	if (phase_loads(ph->value, ld, 0, 8, 0) != 2)
		return false;
	uint64_t dep[2];
	for (int i = 0; i < 2; i++) {
		if ((ld[i]->nsrc > 1 && ld[i]->src[1]) || !((ld[i]->src[0]->deps >> ph->red[0]) & 1))
			return false;
		dep[i] = ld[i]->src[0]->deps;
	}
	for (int w = ir->nloops - 1; w >= 0; w--) /* the innermost dims first: stores contiguous */
		for (int n = 0; n < ir->nloops; n++) {
			const eng_loop *lw = &ir->loops[w], *ln = &ir->loops[n];
			if (lw->kind != L_OUTER || ln->kind != L_OUTER || lw->n % rt.wide || pick_tile(ln->n, nmax) < 2)
				continue;
			int b = (dep[1] >> w) & 1; /* the wide operand */
			if (((dep[b] >> w) & 1) && !((dep[!b] >> w) & 1) && ((dep[!b] >> n) & 1) && !((dep[b] >> n) & 1)) {
				ir->tiledim[0] = lw->dim, ir->tile[0] = rt.wide;
				ir->tiledim[1] = ln->dim, ir->tile[1] = pick_tile(ln->n, nmax);
				return true;
			}
		}
	return false;
}

/* A packed kernel's narrow tile at most this wide, and at most the register tile's vector
 * accumulators (eng_regtile_of) in the tile; its panel at most eng_plan_panel_max bytes (it
 * lives on the stack of the thread running the kernel). */
#define PACK_NARROW_MAX 12
/* A packed tile stored a stride apart needs a reduction at least this long. */
#define PACK_SCATTER_ROWS 128

/* The largest divisor of n that is at most max. */
static int64_t largest_divisor(int64_t n, int64_t max)
{
	for (int64_t t = max < n ? max : n; t > 1; t--)
		if (n % t == 0)
			return t;
	return 1;
}

/* How many times a packed kernel copies its panel: linearize.c opens the parallel loop (the first
 * output loop of at least par iterations, else the longest) and then the others in dim order,
 * and copies the panel as soon as every loop its operand moves along (pdeps: dims) is open: once
 * per iteration of the loops up to there, or once per thread (before the parallel loop) if it
 * moves along none of them. Dims tdim[k] (tiled) loop shape / tile[k] times. */
static double pack_copies(const eng_kernel_ir *ir, const int tdim[2], const int64_t tile[2], uint32_t pdeps, int par)
{
	int64_t trips[ENG_MAX_DIMS];
	int dims[ENG_MAX_DIMS], nd = 0, pi = -1;
	for (int d = 0; d < ir->ndim; d++) {
		int64_t n = ir->shape[d];
		for (int k = 0; k < 2; k++)
			if (tdim[k] == d)
				n /= tile[k];
		if (n > 1)
			trips[nd] = n, dims[nd++] = d;
	}
	for (int i = 0; i < nd && (pi < 0 || trips[pi] < par); i++)
		if (pi < 0 || trips[i] >= par || trips[i] > trips[pi])
			pi = i;
	if (pi < 0)
		return 1;
	/* the loops in linearize.c's order: the parallel one first */
	int order[ENG_MAX_DIMS], no = 0, last = -1;
	order[no++] = pi;
	for (int i = 0; i < nd; i++)
		if (i != pi)
			order[no++] = i;
	for (int i = 0; i < no; i++)
		if ((pdeps >> dims[order[i]]) & 1)
			last = i;
	if (last < 0)
		return trips[pi] < par ? (double)trips[pi] : par;
	double copies = 1;
	for (int i = 0; i <= last; i++)
		copies *= (double)trips[order[i]];
	return copies;
}

/* A choice of plan_packed: operand p packed, the wide tile of wt lanes on loop w, the narrow tile
 * of nt rows on loop n, and its estimated time (cycles). */
typedef struct pack_choice {
	int p, w, n;
	int64_t wt, nt;
	double est;
} pack_choice;

/* The best choice for packing operand load ld[p] (the other, ld[1-p], is broadcast) of phase ph:
 * c->w < 0 if there is none. See plan_packed for the estimate. */
static void pack_candidates(const eng_kernel_ir *ir, const eng_phase *ph, eng_uop *const *ld, int p,
			    const bk_target *t, double macs, double rows, pack_choice *c)
{
	const eng_regtile rt = eng_regtile_of(t);
	const int par = t->parallelism;
	const eng_uop *pi = ld[p]->src[0], *bi = ld[1 - p]->src[0];
	int64_t coef;
	if (ld[p]->nsrc > 1 && ld[p]->src[1])
		return; /* a masked load is not packed */
	for (int k = 0; k < ph->nred; k++)
		if (!u_linear_in_var(pi, ph->red[k], &coef) || !coef)
			return;
	uint32_t pdeps = eng_plan_dims_of(ir, pi->deps);
	for (int w = 0; w < ir->nloops; w++) {
		const eng_loop *lw = &ir->loops[w];
		if (lw->kind != L_OUTER || lw->n % rt.lanes || !((pi->deps >> w) & 1) || ((bi->deps >> w) & 1) ||
		    !u_linear_in_var(pi, w, &coef))
			continue;
		int64_t wt = lw->n % rt.wide ? rt.lanes : rt.wide, wv = wt / rt.lanes, nmax = rt.acc / wv;
		for (int n = 0; n < ir->nloops; n++) {
			const eng_loop *ln = &ir->loops[n];
			if (ln->kind != L_OUTER || n == w || !((bi->deps >> n) & 1) || ((pi->deps >> n) & 1))
				continue;
			int64_t nt = largest_divisor(ln->n, nmax < PACK_NARROW_MAX ? nmax : PACK_NARROW_MAX);
			if (nt < 2)
				continue;
			const int tdim[2] = {lw->dim, ln->dim};
			const int64_t tile[2] = {wt, nt};
			double loads = 0.5 * (double)(nt + wv) / (double)(nt * wv);
			double est = macs / (double)rt.lanes * (loads > 0.5 ? loads : 0.5) +
				     pack_copies(ir, tdim, tile, pdeps, par) * rows * wt;
			/* narrow rows a stride apart: a tile's broadcasts touch as many cache lines (and rows a
			 * power of two apart share their sets) */
			if (u_coef_of_var(bi, n) != 1)
				est *= 1.25;
			if (c->w < 0 || est < c->est)
				*c = (pack_choice){.p = p, .w = w, .n = n, .wt = wt, .nt = nt, .est = est};
		}
	}
}

/* For a float32 sum of products over several reduced axes (a convolution and its input and weight
 * gradients, as they lower): the wide tile (16 or 32 lanes) goes on an output dim only one operand
 * P moves along, and P is packed (eng_pack): its panel over the whole reduction (or a block of
 * the outermost reduced axis), copied contiguous and read by every row; the narrow tile goes on a
 * dim only the other operand moves along, each of its loads then a broadcast. Of the choices, the
 * one with the least estimated time: a vector FMA takes half a cycle (two ports), or longer where
 * the tile's loads (a broadcast per narrow row, a vector per 16 lanes) outnumber two per cycle,
 * plus a cycle per panel element copied (pack_copies times the panel), and a quarter more where
 * the narrow rows are not adjacent in memory (measured: 3x slower, a 5x5 convolution's rows
 * 8 images apart against 10 adjacent pixels). The panel must fit pack_budget: else the outermost
 * reduced axis is blocked (the kernel then stores the sum as it is: partial sums go through the
 * output). Needs the CPU's caches (no GPU work-groups). Returns whether it planned. */
bool eng_plan_packed(eng_kernel_ir *ir, const eng_node *const *roots, int nroots, const bk_target *t, char *opts,
			size_t len)
{
	if (!eng_plan_packable(ir, roots, nroots, t) || ir->phases[0].nred < 2)
		return false;
	const eng_phase *ph = &ir->phases[0];
	eng_uop *ld[8];
	if (phase_loads(ph->value, ld, 0, 8, 0) != 2)
		return false;
	double rows = 1, macs = 1;
	for (int k = 0; k < ph->nred; k++)
		rows *= (double)ir->loops[ph->red[k]].n;
	for (int d = 0; d < ir->ndim; d++)
		macs *= (double)ir->shape[d];
	macs *= rows;
	pack_choice c = {.w = -1};
	for (int p = 0; p < 2; p++)
		pack_candidates(ir, ph, ld, p, t, macs, rows, &c);
	if (c.w < 0)
		return false;
	/* a short reduction (a one-channel convolution's 25 steps) into a tile whose lanes are
	 * stored a stride apart spends as long scattering the tile as computing it: plain tiles */
	int64_t st[ENG_MAX_DIMS];
	eng_contiguous_strides(ir->ndim, ir->shape, st);
	if (rows < PACK_SCATTER_ROWS && st[ir->loops[c.w].dim] != 1)
		return false;
	int64_t es = eng_dtype_size(ph->dtype), budget = eng_plan_panel_max(t);
	int64_t k0 = ir->loops[ph->red[0]].n, kb = k0, inner = (int64_t)rows / k0;
	if ((int64_t)rows * c.wt * es > budget) {
		if (!eng_plan_blockable(ir, roots, nroots, t))
			return false; /* partial sums would go through an output that is not the sum */
		for (kb = k0 - 1; kb >= 1 && (k0 % kb || kb * inner * c.wt * es > budget); kb--)
			;
		if (kb < 1)
			return false;
	}
	ir->tiledim[0] = ir->loops[c.w].dim, ir->tile[0] = c.wt;
	ir->tiledim[1] = ir->loops[c.n].dim, ir->tile[1] = c.nt;
	ir->kblock = kb < k0 ? kb : 0;
	ir->kfull = kb < k0 ? k0 : 0;
	ir->mblock = 0;
	ir->pack.node = ir->bufs[ld[c.p]->arg.buf].node;
	snprintf(opts, len, "UPCAST dim %d by %lld, UPCAST dim %d by %lld, PACK", ir->tiledim[0], (long long)c.wt,
		 ir->tiledim[1], (long long)c.nt);
	if (ir->kblock) {
		size_t l = strlen(opts);
		snprintf(opts + l, len - l, ", BLOCK reduce by %lld", (long long)kb);
	}
	return true;
}

/* Rows are packed (plan_row_pack) where the wide dim has at least this many vectors' lanes of
 * columns: the copy (about a cycle per element) against the sum's FMAs per element (half a cycle
 * per vector of columns, two FMA ports) stays under a tenth: 320 columns with AVX-512's 16 lanes,
 * 160 with AVX2's 8. The search found 1024x4096 @ 4096x256 1.06x faster without the packed rows
 * on AVX-512 (paired calls); at 384 and 512 columns it kept them. */
#define RPACK_MIN_LANES 20

/* Whether blocks of `rows` rows of the narrow tile's dim can each be packed by one parallel
 * iteration: they divide the dim, give every thread one, and are the kernel's parallel loop (no
 * output dim before theirs but of size one). Two blocks at least, one thread or many: a loop of
 * one iteration is no loop (linearize.c), and the blocks must have theirs. */
static bool row_blocks_ok(const eng_kernel_ir *ir, const bk_target *t, int64_t rows)
{
	int nd = ir->tiledim[1];
	const int64_t blocks = t->parallelism > 2 ? t->parallelism : 2;
	if (nd < 0 || ir->tiledim[0] < 0 || rows < 1 || ir->shape[nd] % rows || ir->shape[nd] / rows < blocks ||
	    ir->phases[0].nred != 1)
		return false;
	for (int d = 0; d < nd; d++)
		if (ir->shape[d] != 1)
			return false;
	return true;
}

const eng_node *eng_plan_row_pack_operand(const eng_kernel_ir *ir, const bk_target *t, int64_t rows)
{
	return row_blocks_ok(ir, t, rows) ? row_operand(ir, &ir->phases[0]) : NULL;
}

/* Pack the narrow operand of a blocked, packed matmul (plan_blocks) in tiles of the register tile's rows
 * (eng_rpack), in blocks of as many rows as leave every thread one, up to a packed block of twice
 * L2 (each wide panel, packed once per block of rows, then serves more rows; the block's tiles
 * stream through L2): the most rows dividing the dim, or the most that are a multiple of the tile
 * if at least half as many (else the last tile of each block overhangs it: mrows), where
 * eng_plan_row_pack_operand allows. Chosen with hand-written variants paired with OpenBLAS call
 * by call on the Xeon (blocks of a quarter, half and twice L2); bench/compare_blas.sh against the
 * build before it: 2048 1.07-1.16x of OpenBLAS's time -> 1.03-1.07x, 4096 1.14-1.22x -> 1.00-1.07x. */
static void plan_row_pack(eng_kernel_ir *ir, const eng_phase *ph, const bk_target *t)
{
	const int64_t tr = eng_regtile_of(t).rows;
	int64_t kc = ir->kblock, es = eng_dtype_size(ph->dtype);
	int64_t most = 0, exact = 0;
	const eng_node *rp = ir->shape[ir->tiledim[0]] >= RPACK_MIN_LANES * eng_regtile_of(t).lanes ? row_operand(ir, ph) : NULL;
	for (int64_t b = 2 * t->cache_l2 / (kc * es); rp && b >= tr && !exact; b--)
		if (row_blocks_ok(ir, t, b)) {
			most = most ? most : b;
			exact = b % tr == 0 ? b : 0;
		}
	int64_t rows = exact >= most / 2 ? exact : most;
	int64_t tiles = (rows + tr - 1) / tr;
	if (!rp || tiles < 2)
		return;
	ir->tile[1] = tr;
	ir->mblock = tiles;
	ir->mrows = tiles * tr == rows ? 0 : rows;
	ir->rpack.node = rp;
}

/* Cache blocking of a tiled sum of one reduction stored as it is (a matmul, batched matmul, a
 * linear layer or a convolution as they lower), when one tile row's operands over the whole
 * reduction (its narrow tile's rows and all the wide dim's) overflow half of L2, or when the
 * wide operand is not contiguous along its dim (it must then be packed): the reduction runs in
 * blocks (the block loop outside the output loops, partial sums kept in the output) as long as
 * one narrow tile's rows of a block fit half of L1 and the wide tile's panel an eighth of L2 (512
 * here: each block reads and writes the output once more; 1.25x at 2048 and 4096 against blocks
 * of 128), a gathered panel (x @ w.T) half of L1, and the narrow tile's dim in blocks of tiles whose rows of one
 * reduction block fit a quarter of L2 (looped innermost of the output loops), so each wide panel,
 * packed contiguous once per block (eng_pack), serves a whole block of rows. Sizes come from the
 * target's caches. */
void eng_plan_blocks(eng_kernel_ir *ir, const eng_node *const *roots, int nroots, const bk_target *t, char *opts,
			size_t len)
{
	ir->kblock = ir->kfull = ir->mblock = ir->mrows = 0;
	ir->pack.node = ir->rpack.node = NULL;
	if (!eng_plan_blockable(ir, roots, nroots, t) || ir->phases[0].nred != 1 ||
	    (ir->tiledim[0] >= 0 && ir->tiledim[1] < 0))
		return;
	const eng_phase *ph = &ir->phases[0];
	const bool strided = ir->tiledim[0] < 0;
	if (strided && !tile_for_packing(ir, ph, t))
		return;
	int64_t k = ir->loops[ph->red[0]].n, es = eng_dtype_size(ph->dtype);
	int64_t narrow = ir->tile[1], wide = ir->shape[ir->tiledim[0]], kc = 0;
	int64_t kmax = t->cache_l1 / 2 / (narrow * es), kmax2 = eng_plan_panel_max(t) / (ir->tile[0] * es);
	kmax = kmax < kmax2 ? kmax : kmax2;
	if (strided) /* a gathered panel (x @ w.T) stays in half of L1 (measured 1.3x on 256x784x128) */
		kmax = t->cache_l1 / 2 / (ir->tile[0] * es);
	/* a wide tile's row of under two cache lines (AVX2's 16 floats: 64 bytes) read along the
	 * reduction from the unpacked operand starves the FMAs: it is packed (in blocks) whatever
	 * the caches hold. Measured on an AMD EPYC Zen 4 (x86-64-v3 kernels): 256^3 0.555 ms
	 * unpacked, 0.25 ms packed; with AVX-512's 32 floats (128 bytes) 0.185 ms unpacked against
	 * 0.204 packed. */
	const bool short_rows = ir->tile[0] * es < 128;
	if (strided || short_rows || (narrow + wide) * k * es > t->cache_l2 / 2) {
		for (int64_t b = 512; b >= 32 && !kc; b /= 2)
			if (k % b == 0 && k > b && b <= kmax)
				kc = b;
		for (int64_t b = k < kmax ? k : kmax; b >= 16 && !kc && (strided || short_rows); b--)
			if (k % b == 0 && b < k)
				kc = b;
	}
	/* the rows' block: a quarter of L2 */
	int64_t tiles = ir->shape[ir->tiledim[1]] / narrow, mb = 1;
	for (int64_t m = 2; kc && m <= tiles; m++)
		if (tiles % m == 0 && m * narrow * kc * es <= t->cache_l2 / 4 && tiles / m >= t->parallelism)
			mb = m;
	const eng_node *pk = mb >= 4 ? pack_operand(ir, ph) : NULL;
	if (!kc || (strided && !pk)) {
		if (strided) { /* tiles without a packed panel would gather: none */
			ir->tiledim[0] = ir->tiledim[1] = -1;
			ir->tile[0] = ir->tile[1] = 1;
		}
		return;
	}
	ir->kblock = kc;
	ir->kfull = k;
	ir->mblock = mb;
	ir->pack.node = pk;
	if (pk && !strided)
		plan_row_pack(ir, ph, t);
	snprintf(opts, len, "UPCAST dim %d by %lld, UPCAST dim %d by %lld, BLOCK reduce by %lld, dim %d by %lld%s%s",
		 ir->tiledim[0], (long long)ir->tile[0], ir->tiledim[1], (long long)ir->tile[1], (long long)kc,
		 ir->tiledim[1], (long long)(ir->mrows ? ir->mrows : ir->mblock * ir->tile[1]), pk ? ", PACK" : "",
		 ir->rpack.node ? ", RPACK" : "");
}

/* A division of loop variable var (an index divided by a constant c of 2..8 that moves with
 * var one for one, a pooling window's i / 2) under x, looking at most *budget uops deep: its c,
 * or 0. */
static int64_t var_divisor(const eng_uop *x, int var, int *budget)
{
	int64_t coef;
	if (--*budget < 0 || !x || !((x->deps >> var) & 1) || x->kind == U_CONST || x->kind == U_VAR)
		return 0;
	if (x->kind == U_ALU && x->op == ENG_OP_IDIV && x->dtype == ENG_I64 && u_is_const(x->src[1]) &&
	    x->src[1]->arg.c.i >= 2 && x->src[1]->arg.c.i <= 8 && u_linear_in_var(x->src[0], var, &coef) && coef == 1)
		return x->src[1]->arg.c.i;
	for (int i = 0; i < x->nsrc; i++) {
		int64_t c = var_divisor(x->src[i], var, budget);
		if (c)
			return c;
	}
	return 0;
}

/* Split the innermost axis read as i / c (a pooling gradient's pooled operands, read at i / 2 of
 * the full-resolution index i) into (i / c, i % c): those loads then run along the outer part, a
 * vector's lanes, instead of gathering every lane, and the full-resolution ones read c-strided
 * lanes; the inner part is unrolled. The axis: a reduction's innermost one (its phase's last
 * loop), or for a kernel without reductions its innermost output axis (as a narrow tile of c).
 * Untiled CPU kernels only (where gcc writes the vectors). Measured 2.6x (a prototype) on a batchnorm
 * gradient's sums over a max-pool's gradient. */
void eng_plan_split(eng_kernel_ir *ir, const bk_target *t, char *opts, size_t len)
{
	ir->vsplit = ir->vsplit_n = 0;
	ir->vsplit_dim = -1;
	if (t->kind != BK_KIND_CPU || ir->tiledim[0] >= 0 || ir->tiledim[1] >= 0)
		return;
	int64_t c = 0;
	int var = -1;
	for (int p = 0; p < ir->nphases && !c; p++) {
		const eng_phase *ph = &ir->phases[p];
		int budget = 4096;
		var = ph->nred ? ph->red[ph->nred - 1] : -1;
		c = var >= 0 ? var_divisor(ph->value, var, &budget) : 0;
	}
	if (!ir->nphases) {
		for (int v = 0; v < ir->nloops; v++)
			if (ir->loops[v].kind == L_OUTER && ir->loops[v].n > 1)
				var = v;
		for (int k = 0, budget = 4096; k < ir->nstores && var >= 0 && !c; k++)
			c = var_divisor(ir->stores[k].value, var, &budget);
	}
	if (!c || ir->loops[var].n % c || ir->loops[var].n / c < 4)
		return;
	ir->vsplit = c;
	ir->vsplit_n = ir->loops[var].n;
	if (!ir->nphases) {
		ir->vsplit_dim = ir->loops[var].dim;
		ir->tiledim[1] = ir->vsplit_dim;
		ir->tile[1] = c;
	}
	size_t l = strlen(opts);
	if (ir->vsplit_dim >= 0)
		snprintf(opts + l, len - l, "%sSPLIT dim %d by %lld", l ? ", " : "", ir->vsplit_dim, (long long)c);
	else
		snprintf(opts + l, len - l, "%sSPLIT reduce by %lld", l ? ", " : "", (long long)c);
}

