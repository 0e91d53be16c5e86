/* cstyle.c: the C-family renderer: one statement per loop-IR entry, every defined
 * uop a const temporary, integer semantics (wrapping, safe division) spelled out; long float
 * sums in compensated blocks, and split reductions as their chunks plus <name>_fin. */
#include "cstyle.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* How a split reduction's kernel (eng_kernel_ir.split) is being written: not split, its
 * chunks' partial results (the kernel proper), or what follows them (<name>_fin). */
enum { SPLIT_NONE, SPLIT_PART, SPLIT_FIN };

/* A long float32 sum adds blocks of at most this many iterations of its innermost loop into a
 * fresh accumulator, then each block's sum into the total with compensation (Kahan), so the
 * error stays that of a block: with the simd hint each vector lane of a block sums 512/lanes
 * values (64 with AVX2's 8, 32 with AVX-512's 16; blocks of 256 cost ~15% more time from
 * memory), without it a thread sums 64 one after the other. */
#define BLOCK_SIMD 512
#define BLOCK_SEQ 64

/* One rendering: the output, the kernel, the dialect and its types. */
typedef struct rk {
	eng_strbuf *b;
	const eng_kernel_ir *ir;
	const bk_dialect *d;
	const bk_ctypes *t;
	bool one_group;               /* a work-group runs the kernel or each parallel iteration */
	bool grouped;                 /* ... and its reductions are split over the group's threads */
	bool rows;                    /* ... one group per parallel iteration */
	uint32_t phase_dims;          /* output dims some phase depends on */
	int strided_at;               /* rows: depth of the store loop strided over the group, or -1 */
	int closes[ENG_MAX_LOOPS + 2]; /* grouped: phase whose partials meet when depth returns here */
	bool nobrace[ENG_MAX_LOOPS + 2]; /* the loop opened at this depth has no block of its own */
	int lanes;                    /* the wide tile as vectors of this many lanes; 0: scalars */
	int split_mode;               /* SPLIT_NONE, SPLIT_PART, SPLIT_FIN */
	int cur_phase, phase_depth;   /* the phase whose ACC_INIT came last, at that depth (-1: none) */
	uint32_t cur_group;           /* ... with the phases initialised right before it (one nest) */
	int skip_depth;               /* SPLIT_FIN: a phase's loops being left out, opened here (-1) */
	uint32_t blk_close[ENG_MAX_LOOPS + 2]; /* blocked sums' loop opened at this depth: their phases */
	bool blk_outer[ENG_MAX_LOOPS + 2]; /* ... inside a loop over its blocks */
} rk;

/* compute type */
static const char *ctype(const rk *r, eng_dtype dt) { return r->t->compute[dt]; }

/* storage type */
static const char *stype(const rk *r, eng_dtype dt) { return r->t->storage[dt]; }

static const char *utype(const rk *r, eng_dtype dt) { return dt == ENG_I64 ? r->t->u64 : r->t->u32; }

/* A vector value: float32 along the wide tile, or a lane mask (bool along it; see
 * eng_render_vector_lanes). */
static bool is_vec(const rk *r, const eng_uop *x)
{
	return r->lanes && (x->dtype == ENG_F32 || x->dtype == ENG_BOOL) && ((x->deps >> r->ir->tilevar[0]) & 1);
}

/* The type of a defined value: compute type, or its vector. */
static void put_type(const rk *r, const eng_uop *x)
{
	if (is_vec(r, x))
		eng_strbuf_printf(r->b, "%s%d", ctype(r, x->dtype == ENG_BOOL ? ENG_I32 : (eng_dtype)x->dtype), r->lanes);
	else
		eng_strbuf_puts(r->b, ctype(r, (eng_dtype)x->dtype));
}

/* the suffix of prelude helpers for dt: C's fixed-width names in every dialect */
static const char *hname(eng_dtype dt)
{
	static const char *const fixed[ENG_DTYPE_COUNT] = {[ENG_BOOL] = "_Bool", [ENG_U8] = "uint8_t",
		[ENG_I32] = "int32_t", [ENG_I64] = "int64_t", [ENG_F16] = "float", [ENG_F32] = "float"};
	return fixed[dt];
}

static void render_const(const rk *r, eng_dtype dt, eng_const_value c)
{
	eng_strbuf *b = r->b;
	if (eng_dtype_is_float(dt)) {
		double v = c.f;
		if (isnan(v))
			eng_strbuf_puts(b, r->d->nan);
		else if (isinf(v))
			eng_strbuf_printf(b, v > 0 ? "%s" : "(-%s)", r->d->inf);
		else {
			char tmp[64];
			snprintf(tmp, sizeof(tmp), "%.9g", v);
			if (!strpbrk(tmp, ".eEn"))
				strcat(tmp, ".0");
			eng_strbuf_printf(b, v < 0 ? "(%sf)" : "%sf", tmp);
		}
		return;
	}
	switch (dt) {
	case ENG_BOOL:
		eng_strbuf_printf(b, "%d", c.i ? 1 : 0);
		break;
	case ENG_I64:
		if (c.i == INT64_MIN)
			eng_strbuf_puts(b, "(INT64_MIN)");
		else
			eng_strbuf_printf(b, c.i < 0 ? "(INT64_C(%lld))" : "INT64_C(%lld)", (long long)c.i);
		break;
	case ENG_I32:
		if (c.i == INT32_MIN)
			eng_strbuf_puts(b, "(INT32_MIN)");
		else
			eng_strbuf_printf(b, c.i < 0 ? "(%lld)" : "%lld", (long long)c.i);
		break;
	default:
		eng_strbuf_printf(b, c.i < 0 ? "(%lld)" : "%lld", (long long)c.i);
		break;
	}
}

static void ref(const rk *r, const eng_uop *x);

static void render_acc(const rk *r, const eng_uop *x)
{
	eng_strbuf_printf(r->b, "acc%d", x->arg.acc);
	if (r->lanes) { /* a row of vectors */
		eng_strbuf_puts(r->b, "[");
		ref(r, x->src[0]);
		eng_strbuf_puts(r->b, "]");
	} else if (r->ir->tiledim[0] >= 0) {
		eng_strbuf_puts(r->b, "[");
		ref(r, x->src[0]);
		eng_strbuf_puts(r->b, "][");
		ref(r, x->src[1]);
		eng_strbuf_puts(r->b, "]");
	}
}

static void ref(const rk *r, const eng_uop *x)
{
	switch (x->kind) {
	case U_CONST:
		render_const(r, (eng_dtype)x->dtype, x->arg.c);
		return;
	case U_VAR:
		eng_strbuf_printf(r->b, "v%d", x->arg.var);
		return;
	case U_ACC:
		render_acc(r, x);
		return;
	default:
		eng_strbuf_printf(r->b, "x%u", x->id);
		return;
	}
}

/* integer ops are plain C when the bounds prove no overflow, wrapping otherwise */
static bool no_overflow(const eng_uop *x)
{
	if (x->dtype == ENG_I64)
		return x->vmin > INT64_MIN && x->vmax < INT64_MAX;
	if (x->dtype == ENG_I32)
		return x->vmin > INT32_MIN && x->vmax < INT32_MAX;
	return false;
}

/* The opening of "round the following parenthesised float to float16". */
static void f16_round_open(const rk *r)
{
	eng_strbuf_printf(r->b, "%s(", r->d->f16_round);
}

static void f16_round_close(const rk *r) { eng_strbuf_puts(r->b, ")"); }

static void render_alu(const rk *r, const eng_uop *x)
{
	eng_strbuf *b = r->b;
	eng_dtype dt = (eng_dtype)x->dtype;
	eng_dtype sdt = (eng_dtype)x->src[0]->dtype;
	const eng_uop *A = x->src[0], *B = x->src[1], *C = x->src[2];
	bool fl = eng_dtype_is_float(dt);
	const char *sym = NULL;
#define R(u) ref(r, u)
	switch ((eng_op)x->op) {
	case ENG_OP_EXP2: eng_strbuf_puts(b, "exp2f("); R(A); eng_strbuf_puts(b, ")"); return;
	case ENG_OP_LOG2: eng_strbuf_puts(b, "log2f("); R(A); eng_strbuf_puts(b, ")"); return;
	case ENG_OP_SIN: eng_strbuf_puts(b, "sinf("); R(A); eng_strbuf_puts(b, ")"); return;
	case ENG_OP_SQRT: eng_strbuf_puts(b, "sqrtf("); R(A); eng_strbuf_puts(b, ")"); return;
	case ENG_OP_RECIP: eng_strbuf_puts(b, "(1.0f/"); R(A); eng_strbuf_puts(b, ")"); return;
	case ENG_OP_TRUNC: eng_strbuf_puts(b, fl ? "truncf(" : "("); R(A); eng_strbuf_puts(b, ")"); return;
	case ENG_OP_NEG:
		if (fl || no_overflow(x)) {
			eng_strbuf_puts(b, "(-"); R(A); eng_strbuf_puts(b, ")");
		} else if (dt == ENG_U8) {
			eng_strbuf_printf(b, "(%s)(0u-", ctype(r, dt)); R(A); eng_strbuf_puts(b, ")");
		} else {
			eng_strbuf_printf(b, "(%s)((%s)0-(%s)", ctype(r, dt), utype(r, dt), utype(r, dt)); R(A); eng_strbuf_puts(b, ")");
		}
		return;
	case ENG_OP_CAST:
		if (is_vec(r, x)) { /* a lane mask (-1 or 0) to 1.0f or 0.0f */
			eng_strbuf_printf(b, "convert_float%d(-(", r->lanes); R(A); eng_strbuf_puts(b, "))");
			return;
		}
		if (dt == ENG_BOOL) {
			eng_strbuf_puts(b, "("); R(A); eng_strbuf_puts(b, "!=0)");
		} else if (sdt == ENG_BOOL && dt != ENG_F16) {
			/* a select, not a conversion: gcc vectorizes no _Bool-to-float conversion (the
			 * one_hot compare summed in a register tile ran 11x slower as a cast) */
			eng_strbuf_puts(b, "("); R(A);
			eng_strbuf_printf(b, "?(%s)1:(%s)0)", ctype(r, dt), ctype(r, dt));
		} else if (eng_dtype_is_float(sdt) && !fl) {
			eng_strbuf_printf(b, "eng_f2i_%s(", hname(dt)); R(A); eng_strbuf_puts(b, ")");
		} else if (dt == ENG_F16) {
			f16_round_open(r); eng_strbuf_puts(b, "("); R(A); eng_strbuf_puts(b, ")"); f16_round_close(r);
		} else {
			eng_strbuf_printf(b, "(%s)(", ctype(r, dt)); R(A); eng_strbuf_puts(b, ")");
		}
		return;
	case ENG_OP_BITCAST:
		eng_strbuf_printf(b, "eng_as_%s(", fl ? "float" : "int32_t"); R(A); eng_strbuf_puts(b, ")");
		return;
	case ENG_OP_ADD: sym = "+"; break;
	case ENG_OP_SUB: sym = "-"; break;
	case ENG_OP_MUL: sym = "*"; break;
	case ENG_OP_IDIV:
	case ENG_OP_MOD:
		if (dt == ENG_I64 && u_is_const(B) && B->arg.c.i > 0 && A->vmin >= 0) {
			eng_strbuf_puts(b, "("); R(A); eng_strbuf_puts(b, x->op == ENG_OP_IDIV ? "/" : "%"); R(B); eng_strbuf_puts(b, ")");
		} else {
			eng_strbuf_printf(b, "eng_%s_%s(", x->op == ENG_OP_IDIV ? "idiv" : "mod", hname(dt)); R(A);
			eng_strbuf_puts(b, ","); R(B); eng_strbuf_puts(b, ")");
		}
		return;
	case ENG_OP_MAX:
		if (is_vec(r, x)) { /* lane-wise a > b ? a : b */
			eng_strbuf_printf(b, "select((float%d)(", r->lanes); R(B); eng_strbuf_printf(b, "), (float%d)(", r->lanes);
			R(A); eng_strbuf_puts(b, "), "); R(A); eng_strbuf_puts(b, ">"); R(B); eng_strbuf_puts(b, ")");
			return;
		}
		eng_strbuf_puts(b, "("); R(A); eng_strbuf_puts(b, ">"); R(B); eng_strbuf_puts(b, "?"); R(A); eng_strbuf_puts(b, ":");
		R(B); eng_strbuf_puts(b, ")");
		return;
	case ENG_OP_CMPLT: eng_strbuf_puts(b, "("); R(A); eng_strbuf_puts(b, "<"); R(B); eng_strbuf_puts(b, ")"); return;
	case ENG_OP_CMPEQ: eng_strbuf_puts(b, "("); R(A); eng_strbuf_puts(b, "=="); R(B); eng_strbuf_puts(b, ")"); return;
	case ENG_OP_CMPNE: eng_strbuf_puts(b, "("); R(A); eng_strbuf_puts(b, "!="); R(B); eng_strbuf_puts(b, ")"); return;
	case ENG_OP_AND: eng_strbuf_puts(b, "("); R(A); eng_strbuf_puts(b, "&"); R(B); eng_strbuf_puts(b, ")"); return;
	case ENG_OP_OR: eng_strbuf_puts(b, "("); R(A); eng_strbuf_puts(b, "|"); R(B); eng_strbuf_puts(b, ")"); return;
	case ENG_OP_XOR: eng_strbuf_puts(b, "("); R(A); eng_strbuf_puts(b, "^"); R(B); eng_strbuf_puts(b, ")"); return;
	case ENG_OP_SHL:
	case ENG_OP_SHR: {
		int bits = eng_dtype_bits(dt);
		if (x->op == ENG_OP_SHL && !eng_dtype_is_unsigned(dt))
			eng_strbuf_printf(b, "(%s)((%s)", ctype(r, dt), utype(r, dt));
		else
			eng_strbuf_printf(b, "(%s)(", ctype(r, dt));
		R(A);
		eng_strbuf_printf(b, "%s(", x->op == ENG_OP_SHL ? "<<" : ">>");
		R(B);
		eng_strbuf_printf(b, "&%d))", bits - 1);
		return;
	}
	case ENG_OP_WHERE:
		if (is_vec(r, x) && is_vec(r, A)) { /* lane-wise by a mask */
			eng_strbuf_printf(b, "select((float%d)(", r->lanes); R(C); eng_strbuf_printf(b, "), (float%d)(", r->lanes);
			R(B); eng_strbuf_puts(b, "), "); R(A); eng_strbuf_puts(b, ")");
			return;
		}
		if (is_vec(r, x)) { /* all lanes by a scalar condition */
			eng_strbuf_puts(b, "("); R(A); eng_strbuf_printf(b, " ? (float%d)(", r->lanes); R(B);
			eng_strbuf_printf(b, ") : (float%d)(", r->lanes); R(C); eng_strbuf_puts(b, "))");
			return;
		}
		eng_strbuf_puts(b, "("); R(A); eng_strbuf_puts(b, "?"); R(B); eng_strbuf_puts(b, ":"); R(C); eng_strbuf_puts(b, ")");
		return;
	default:
		eng_strbuf_printf(b, "/* unknown op %d */0", x->op);
		return;
	}
	/* ADD, SUB, MUL */
	if (fl || no_overflow(x)) {
		eng_strbuf_puts(b, "("); R(A); eng_strbuf_puts(b, sym); R(B); eng_strbuf_puts(b, ")");
	} else if (dt == ENG_BOOL || dt == ENG_U8) {
		eng_strbuf_printf(b, "(%s)((int)", ctype(r, dt)); R(A); eng_strbuf_printf(b, "%s(int)", sym); R(B); eng_strbuf_puts(b, ")");
	} else {
		eng_strbuf_printf(b, "(%s)((%s)", ctype(r, dt), utype(r, dt)); R(A); eng_strbuf_printf(b, "%s(%s)", sym, utype(r, dt));
		R(B); eng_strbuf_puts(b, ")");
	}
#undef R
}

static void render_load(const rk *r, const eng_uop *x)
{
	eng_strbuf *b = r->b;
	eng_dtype dt = (eng_dtype)x->dtype;
	if (x->nsrc > 1 && x->src[1]) {
		ref(r, x->src[1]);
		eng_strbuf_puts(b, " ? ");
	}
	int64_t stride = 1;
	if (is_vec(r, x) && u_linear_in_var(x->src[0], r->ir->tilevar[0], &stride) && stride != 1) {
		/* gathered: lane k reads a constant stride further than lane k-1 */
		eng_strbuf_printf(b, "(float%d)(", r->lanes);
		for (int k = 0; k < r->lanes; k++) {
			eng_strbuf_printf(b, "%sb%d[", k ? ", " : "", x->arg.buf);
			ref(r, x->src[0]);
			if (k)
				eng_strbuf_printf(b, "+%lld", (long long)(stride * k));
			eng_strbuf_puts(b, "]");
		}
		eng_strbuf_puts(b, ")");
	} else if (is_vec(r, x)) { /* consecutive elements from lane 0's index */
		eng_strbuf_printf(b, "vload%d(0, b%d + ", r->lanes, x->arg.buf);
		ref(r, x->src[0]);
		eng_strbuf_puts(b, ")");
	}
	if (is_vec(r, x)) {
		if (x->nsrc > 1 && x->src[1])
			eng_strbuf_printf(b, " : (float%d)(0.0f)", r->lanes);
		return;
	}
	if (dt == ENG_F16 && r->d->f16_load) {
		eng_strbuf_printf(b, "%s(", r->d->f16_load);
		ref(r, x->src[0]);
		eng_strbuf_printf(b, ", b%d)", x->arg.buf);
	} else {
		if (dt == ENG_F16)
			eng_strbuf_puts(b, "(float)");
		if (x->arg.buf == ENG_PACK_BUF)
			eng_strbuf_puts(b, "pk[");
		else if (x->arg.buf == ENG_RPACK_BUF)
			eng_strbuf_puts(b, "pa[");
		else
			eng_strbuf_printf(b, "b%d[", x->arg.buf);
		ref(r, x->src[0]);
		eng_strbuf_puts(b, "]");
	}
	if (dt == ENG_BOOL)
		eng_strbuf_puts(b, "!=0");
	if (x->nsrc > 1 && x->src[1])
		eng_strbuf_puts(b, dt == ENG_BOOL ? " : 0" : eng_dtype_is_float(dt) ? " : 0.0f" : " : 0");
}

static void render_store(const rk *r, const eng_stmt *s)
{
	eng_strbuf *b = r->b;
	eng_dtype dt = r->ir->bufs[s->buf].dtype;
	int64_t stride = 1;
	if (r->lanes && u_linear_in_var(s->idx, r->ir->tilevar[0], &stride) && stride != 1) {
		/* scattered: lane k writes a constant stride further than lane k-1 */
		eng_strbuf_printf(b, "{ const float%d t_ = (float%d)(", r->lanes, r->lanes);
		if (!is_vec(r, s->u))
			eng_strbuf_puts(b, "(float)");
		ref(r, s->u);
		eng_strbuf_puts(b, ");");
		for (int k = 0; k < r->lanes; k++) {
			eng_strbuf_printf(b, " b%d[", s->buf);
			ref(r, s->idx);
			if (k)
				eng_strbuf_printf(b, "+%lld", (long long)(stride * k));
			eng_strbuf_printf(b, "] = t_.s%c;", "0123456789abcdef"[k]);
		}
		eng_strbuf_puts(b, " }\n");
		return;
	}
	if (r->lanes) { /* inside the wide tile: consecutive elements from lane 0's index */
		eng_strbuf_printf(b, "vstore%d((float%d)(", r->lanes, r->lanes);
		if (!is_vec(r, s->u))
			eng_strbuf_puts(b, "(float)");
		ref(r, s->u);
		eng_strbuf_printf(b, "), 0, b%d + ", s->buf);
		ref(r, s->idx);
		eng_strbuf_puts(b, ");\n");
		return;
	}
	if (dt == ENG_F16 && r->d->f16_store) {
		eng_strbuf_printf(b, "%s(", r->d->f16_store);
		ref(r, s->u);
		eng_strbuf_puts(b, ", ");
		ref(r, s->idx);
		eng_strbuf_printf(b, ", b%d);\n", s->buf);
		return;
	}
	eng_strbuf_printf(b, "b%d[", s->buf);
	ref(r, s->idx);
	eng_strbuf_printf(b, "] = (%s)", stype(r, dt));
	ref(r, s->u);
	eng_strbuf_puts(b, ";\n");
}

static void indent(eng_strbuf *b, int depth)
{
	for (int i = 0; i < depth; i++)
		eng_strbuf_puts(b, "  ");
}

/* Phase p's vector loop: its innermost reduce loop, or the outer part of a split axis (an
 * unrolled inner part inside it: plan.c's plan_split); -1 for a phase without loops. */
static int vector_loop(const eng_kernel_ir *ir, int p)
{
	const eng_phase *ph = &ir->phases[p];
	if (ph->nred < 1)
		return -1;
	if (ph->nred > 1 && ir->loops[ph->red[ph->nred - 1]].unroll)
		return ph->red[ph->nred - 2];
	return ph->red[ph->nred - 1];
}

/* The iterations per block of phase p's innermost reduce loop if p is a float32 sum long
 * enough to be blocked (more than a block per thread), else 0 (see BLOCK_SIMD). */
static int64_t block_iters(const rk *r, int p)
{
	const eng_kernel_ir *ir = r->ir;
	const eng_phase *ph = &ir->phases[p];
	if (ph->op != ENG_OP_RSUM || ph->dtype != ENG_F32 || ph->nred < 1 || ir->tiledim[0] >= 0 || ir->kbvar >= 0)
		return 0;
	int64_t n = 1;
	for (int k = 0; k < ph->nred; k++)
		n *= ir->loops[ph->red[k]].n;
	if (r->grouped)
		n /= ir->group;
	if (ir->split > 1)
		n /= ir->split;
	int64_t blk = *r->d->simd_pragma ? BLOCK_SIMD : BLOCK_SEQ;
	return n > blk ? blk : 0;
}

/* acc<p> += value with compensation: cmp<p> carries what the last adds lost (reset when not
 * finite, so an infinite or NaN sum stays what the plain sum would be). */
static void render_kahan(const rk *r, int p, const char *value, int depth)
{
	indent(r->b, depth);
	eng_strbuf_printf(r->b,
			  "{ const float y_ = %s - cmp%d, t_ = acc%d + y_; cmp%d = (t_ - acc%d) - y_; "
			  "cmp%d = cmp%d - cmp%d == 0.0f ? cmp%d : 0.0f; acc%d = t_; }\n",
			  value, p, p, p, p, p, p, p, p, p);
}

static void render_acc_init(const rk *r, int p, int depth)
{
	eng_strbuf *b = r->b;
	const eng_kernel_ir *ir = r->ir;
	const eng_phase *ph = &ir->phases[p];
	eng_dtype dt = ph->dtype;
	eng_const_value init = {.i = 0};
	if (ph->op == ENG_OP_RPROD) {
		if (eng_dtype_is_float(dt))
			init.f = 1.0;
		else
			init.i = 1;
	} else if (ph->op == ENG_OP_RMAX) {
		if (eng_dtype_is_float(dt))
			init.f = -INFINITY;
		else
			init.i = dt == ENG_I32 ? INT32_MIN : dt == ENG_I64 ? INT64_MIN : 0;
	}
	indent(b, depth);
	if (ir->tiledim[0] < 0) {
		eng_strbuf_printf(b, "%s acc%d = ", ctype(r, dt), p);
		render_const(r, dt, init);
		eng_strbuf_puts(b, ";\n");
		if (block_iters(r, p)) {
			indent(b, depth);
			eng_strbuf_printf(b, "float cmp%d = 0.0f;\n", p);
		}
		return;
	}
	int64_t t0 = ir->tile[1], t1 = ir->tile[0]; /* [narrow][wide] */
	if (r->lanes) {
		eng_strbuf_printf(b, "%s%d acc%d[%lld];\n", ctype(r, dt), r->lanes, p, (long long)t0);
		indent(b, depth);
		eng_strbuf_printf(b, "for (int i_ = 0; i_ < %lld; i_++) acc%d[i_] = (%s%d)(", (long long)t0, p, ctype(r, dt),
			      r->lanes);
		render_const(r, dt, init);
		eng_strbuf_puts(b, ");\n");
		return;
	}
	eng_strbuf_printf(b, "%s acc%d[%lld][%lld];\n", ctype(r, dt), p, (long long)t0, (long long)t1);
	indent(b, depth);
	eng_strbuf_printf(b, "for (int i_ = 0; i_ < %lld; i_++) (&acc%d[0][0])[i_] = ", (long long)(t0 * t1), p);
	render_const(r, dt, init);
	eng_strbuf_puts(b, ";\n");
}

static void render_acc_upd(const rk *r, const eng_stmt *s)
{
	eng_strbuf *b = r->b;
	const eng_kernel_ir *ir = r->ir;
	const eng_phase *ph = &ir->phases[s->acc];
	eng_strbuf a;
	eng_strbuf_init(&a);
	eng_strbuf_printf(&a, "%sacc%d", block_iters(r, s->acc) ? "b" : "", s->acc);
	if (ir->tiledim[0] >= 0) {
		if (ir->tiledim[1] >= 0)
			eng_strbuf_printf(&a, "[v%d]", ir->tilevar[1]);
		else
			eng_strbuf_puts(&a, "[0]");
		if (!r->lanes)
			eng_strbuf_printf(&a, "[v%d]", ir->tilevar[0]);
	}
	const char *acc = a.s ? a.s : "acc?";
	eng_strbuf_printf(b, "%s = ", acc);
	if (ph->op == ENG_OP_RMAX && r->lanes) { /* lane-wise u > acc ? u : acc */
		eng_strbuf_printf(b, "select(%s, (%s%d)(", acc, ctype(r, ph->dtype), r->lanes);
		ref(r, s->u);
		eng_strbuf_puts(b, "), ");
		ref(r, s->u);
		eng_strbuf_printf(b, " > %s);\n", acc);
	} else if (ph->op == ENG_OP_RMAX) {
		eng_strbuf_puts(b, "(");
		ref(r, s->u);
		eng_strbuf_printf(b, " > %s ? ", acc);
		ref(r, s->u);
		eng_strbuf_printf(b, " : %s);\n", acc);
	} else {
		bool wrap = !eng_dtype_is_float(ph->dtype);
		if (wrap && ph->dtype != ENG_BOOL) {
			const char *ut = ph->dtype == ENG_U8 ? r->t->u32 : utype(r, ph->dtype);
			eng_strbuf_printf(b, "(%s)((%s)%s %s (%s)", ctype(r, ph->dtype), ut, acc,
				      ph->op == ENG_OP_RSUM ? "+" : "*", ut);
		} else {
			eng_strbuf_printf(b, "(%s %s ", acc, ph->op == ENG_OP_RSUM ? "+" : "*");
		}
		ref(r, s->u);
		eng_strbuf_puts(b, ");\n");
	}
	eng_strbuf_free(&a);
}

/* The signature and the buffer pointers. */
static void render_head(const rk *r, const char *name)
{
	eng_strbuf *b = r->b;
	const eng_kernel_ir *ir = r->ir;
	const char *rq = ir->aliased ? "" : r->d->restrict_kw;
	/* the launch reads the group's size from the kernel */
	bool attr_line = r->one_group && !r->d->group_attr_inline, attr_inline = r->one_group && r->d->group_attr_inline;
	if (attr_line)
		eng_strbuf_printf(b, "%s%d%s\n", r->d->group_attr, ir->group, r->d->group_attr_end);
	if (r->d->buf_qual) {
		const char *q = r->d->buf_qual;
		eng_strbuf_printf(b, "%s ", r->d->kernel_prefix);
		if (attr_inline)
			eng_strbuf_printf(b, "%s%d%s ", r->d->group_attr, ir->group, r->d->group_attr_end);
		eng_strbuf_printf(b, "%s(", name);
		for (int i = 0; i < ir->nbufs; i++) {
			const eng_kernel_buf *kb = &ir->bufs[i];
			eng_strbuf_printf(b, "%s%s%s%s *%s%sb%d, ", q, *q ? " " : "", kb->output ? "" : "const ",
				      stype(r, kb->dtype), rq, *rq ? " " : "", i);
		}
		if (r->split_mode) /* a split reduction's partials */
			eng_strbuf_printf(b, "%s%schar *sc_, ", q, *q ? " " : "");
		eng_strbuf_printf(b, "%s start, %s end)\n{\n", ctype(r, ENG_I64), ctype(r, ENG_I64));
	} else {
		eng_strbuf_printf(b, "%s %s(void *const *bufs, int64_t start, int64_t end)\n{\n", r->d->kernel_prefix, name);
		for (int i = 0; i < ir->nbufs; i++) {
			const eng_kernel_buf *kb = &ir->bufs[i];
			eng_strbuf_printf(b, "  %s%s *%s b%d = (%s%s *)bufs[%d];\n", kb->output ? "" : "const ",
				      stype(r, kb->dtype), rq, i, kb->output ? "" : "const ", stype(r, kb->dtype), i);
		}
	}
	eng_strbuf_puts(b, "  (void)start; (void)end;\n");
}

/* The loop hints before loop statement s. */
static void render_hints(const rk *r, const eng_stmt *s, int depth)
{
	eng_strbuf *b = r->b;
	const char *simd = r->d->simd_pragma;
	const char *unroll = r->d->unroll_pragma;
	if (s->unroll && s->var == r->ir->tilevar[0] && *simd) {
		/* the wide tile: one vector of lanes, left to the loop vectorizer */
		indent(b, depth);
		eng_strbuf_printf(b, "%s\n", simd);
	} else if (s->unroll && *unroll) {
		indent(b, depth);
		eng_strbuf_printf(b, "%s %lld\n", unroll, (long long)r->ir->loops[s->var].n);
	}
	if (s->simd && *simd) {
		indent(b, depth);
		eng_strbuf_printf(b, "%s\n", simd);
	}
	if (s->simd_accs && *simd) {
		indent(b, depth);
		eng_strbuf_puts(b, simd);
		for (int p = 0; p < r->ir->nphases; p++)
			if ((s->simd_accs >> p) & 1) {
				const eng_phase *ph = &r->ir->phases[p];
				eng_strbuf_printf(b, " reduction(%s:%sacc%d)",
					      ph->op == ENG_OP_RSUM ? "+" : ph->op == ENG_OP_RMAX ? "max" : "*",
					      block_iters(r, p) ? "b" : "", p);
			}
		eng_strbuf_puts(b, "\n");
	}
}

/* grouped: the phase whose outermost reduce loop is var, or -1 (a nested phase runs whole in
 * each thread, inside the loop of the one around it) */
static int group_phase(const rk *r, int var)
{
	for (int p = 0; r->grouped && p < r->ir->nphases; p++)
		if (r->ir->phases[p].nred > 0 && r->ir->phases[p].red[0] == var && r->ir->phases[p].parent < 0)
			return p;
	return -1;
}

/* The combination of two partial results a and b of phase p (as its accumulator update). */
static void render_combine(const rk *r, int p, const char *a, const char *b2)
{
	eng_strbuf *b = r->b;
	const eng_phase *ph = &r->ir->phases[p];
	eng_dtype dt = ph->dtype;
	if (dt == ENG_BOOL)
		eng_strbuf_printf(b, "(%s %s %s)", a, ph->op == ENG_OP_RPROD ? "&&" : "||", b2);
	else if (ph->op == ENG_OP_RMAX)
		eng_strbuf_printf(b, "(%s > %s ? %s : %s)", a, b2, a, b2);
	else if (!eng_dtype_is_float(dt)) {
		const char *ut = dt == ENG_U8 ? r->t->u32 : utype(r, dt);
		eng_strbuf_printf(b, "(%s)((%s)%s %s (%s)%s)", ctype(r, dt), ut, a, ph->op == ENG_OP_RSUM ? "+" : "*", ut, b2);
	} else
		eng_strbuf_printf(b, "(%s %s %s)", a, ph->op == ENG_OP_RSUM ? "+" : "*", b2);
}

/* grouped: every thread's partial result of phase p meets in local memory, tree-wise; all
 * threads leave with the total in acc<p>. */
static void render_group_tree(const rk *r, int p, int depth)
{
	eng_strbuf *b = r->b;
	char a[32], c[40];
	snprintf(a, sizeof(a), "sh%d[lid_]", p);
	snprintf(c, sizeof(c), "sh%d[lid_ + s_]", p);
	indent(b, depth); /* every thread has read sh<p>[0] of the last row before it is rewritten */
	eng_strbuf_printf(b, "%s;\n", r->d->barrier);
	indent(b, depth);
	eng_strbuf_printf(b, "sh%d[lid_] = acc%d;\n", p, p);
	indent(b, depth);
	eng_strbuf_printf(b, "%s;\n", r->d->barrier);
	indent(b, depth);
	eng_strbuf_printf(b, "for (int s_ = %d; s_ > 0; s_ >>= 1) {\n", r->ir->group / 2);
	indent(b, depth + 1);
	eng_strbuf_printf(b, "if (lid_ < s_) %s = ", a);
	render_combine(r, p, a, c);
	eng_strbuf_puts(b, ";\n");
	indent(b, depth + 1);
	eng_strbuf_printf(b, "%s;\n", r->d->barrier);
	indent(b, depth);
	eng_strbuf_puts(b, "}\n");
	indent(b, depth);
	eng_strbuf_printf(b, "acc%d = sh%d[0];\n", p, p);
}

/* The reduce loop of phase p whose chunks a split kernel's chunks take: its longest. */
static int split_var(const eng_kernel_ir *ir, int p)
{
	const eng_phase *ph = &ir->phases[p];
	int best = ph->red[0];
	for (int k = 1; k < ph->nred; k++)
		if (ir->loops[ph->red[k]].n > ir->loops[best].n)
			best = ph->red[k];
	return best;
}

/* A phase's reduce loop with a form of its own: strided over a group's threads, a split
 * kernel's chunk of it, or a long float sum's innermost loop in blocks (block_iters). Returns
 * false for a plain loop. */
/* A clamped loop's bound (eng_stmt.lo/hi, an int64 value defined before the loop) as C, or
 * dflt when the loop has none. */
static void loop_bound(const eng_uop *x, char *out, size_t n, const char *dflt)
{
	if (!x)
		snprintf(out, n, "%s", dflt);
	else if (x->kind == U_CONST)
		snprintf(out, n, "INT64_C(%lld)", (long long)x->arg.c.i);
	else if (x->kind == U_VAR)
		snprintf(out, n, "v%d", x->arg.var);
	else
		snprintf(out, n, "x%u", x->id);
}

static bool render_reduce_loop(rk *r, const eng_stmt *s, int depth)
{
	eng_strbuf *b = r->b;
	const eng_kernel_ir *ir = r->ir;
	const char *it = ctype(r, ENG_I64);
	int v = s->var, gp = group_phase(r, v), cp = r->cur_phase;
	const eng_phase *ph = cp >= 0 ? &ir->phases[cp] : NULL;
	bool chunk = ph && r->split_mode == SPLIT_PART && split_var(ir, cp) == v;
	/* the phases of this nest whose vector loop (the innermost, or the outer part of a split axis)
	 * this is and whose sums are blocked: each sums a block into bacc<p> */
	uint32_t bm = 0;
	int bp = -1;
	for (int p = 0; p < ir->nphases && ph; p++)
		if (((r->cur_group >> p) & 1) && vector_loop(ir, p) == v && block_iters(r, p)) {
			bm |= 1u << p;
			bp = bp < 0 ? p : bp;
		}
	if (gp < 0 && !chunk && bp < 0)
		return false;
	long long n = ir->loops[v].n, step = gp >= 0 ? ir->group : 1, trips = (n + step - 1) / step;
	char lo[96], hi[96], nstr[32];
	snprintf(nstr, sizeof(nstr), "%lld", n);
	loop_bound(s->lo, lo, sizeof(lo), gp >= 0 ? "lid_" : "0");
	loop_bound(s->hi, hi, sizeof(hi), nstr);
	if (chunk) { /* chunk c_ of split: [c_ n / split, (c_ + 1) n / split), strided over a group */
		long long sp = ir->split;
		snprintf(lo, sizeof(lo), "c_ * INT64_C(%lld) / %lld%s", n, sp, gp >= 0 ? " + lid_" : "");
		snprintf(hi, sizeof(hi), "(c_ + 1) * INT64_C(%lld) / %lld", n, sp);
		trips = ((n + sp - 1) / sp + step - 1) / step;
	}
	if (gp >= 0)
		r->closes[depth] = gp;
	if (bp >= 0) {
		long long blk = block_iters(r, bp);
		r->blk_close[depth] = bm;
		r->blk_outer[depth] = trips > blk;
		if (trips > blk) { /* the loop over blocks, then one block */
			/* every block whole (each thread's, each chunk's range a multiple of blocks): a
			 * constant trip count, which gcc vectorizes without a remainder */
			long long parts = (chunk ? ir->split : 1) * step * blk;
			bool whole = n % parts == 0 && !s->lo && !s->hi;
			indent(b, depth);
			eng_strbuf_printf(b, "for (%s vb%d = %s; vb%d < %s; vb%d += %lld) {\n", it, v, lo, v, hi, v, step * blk);
			indent(b, depth);
			if (whole)
				eng_strbuf_printf(b, "const %s ve%d = vb%d + %lld;\n", it, v, v, step * blk);
			else
				eng_strbuf_printf(b, "const %s ve%d = vb%d + %lld < %s ? vb%d + %lld : %s;\n", it, v, v, step * blk,
					      hi, v, step * blk, hi);
			snprintf(lo, sizeof(lo), "vb%d", v);
			snprintf(hi, sizeof(hi), "ve%d", v);
		}
		for (int p = 0; p < ir->nphases; p++)
			if ((bm >> p) & 1) {
				indent(b, depth);
				eng_strbuf_printf(b, "float bacc%d = 0.0f;\n", p);
			}
	}
	if (gp < 0)
		render_hints(r, s, depth);
	indent(b, depth);
	if (step == 1)
		eng_strbuf_printf(b, "for (%s v%d = %s; v%d < %s; v%d++) {\n", it, v, lo, v, hi, v);
	else
		eng_strbuf_printf(b, "for (%s v%d = %s; v%d < %s; v%d += %lld) {\n", it, v, lo, v, hi, v, step);
	return true;
}

static void render_loop(rk *r, const eng_stmt *s, int depth)
{
	eng_strbuf *b = r->b;
	const char *it = ctype(r, ENG_I64);
	int v = s->var;
	if (s->merged) { /* part of the parallel index p_ (a split kernel's row q_) */
		indent(b, depth);
		eng_strbuf_printf(b, "const %s v%d = (%s / %lld) %% %lld;\n", it, v, r->split_mode ? "q_" : "p_",
			      (long long)s->div, (long long)r->ir->loops[v].n);
		return;
	}
	if (s->parallel && r->split_mode) { /* the row q_ of a split kernel (see render_split) */
		r->nobrace[depth] = true;
		indent(b, depth);
		eng_strbuf_printf(b, "const %s v%d = q_ / %lld;\n", it, v, (long long)s->div);
		return;
	}
	if (s->parallel && s->div > 1) { /* loops merged into this one: p_ covers them all */
		indent(b, depth);
		if (r->d->thread_idx)
			eng_strbuf_printf(b, "const %s p_ = start + %s;\n", it, r->rows ? r->d->group_idx : r->d->thread_idx);
		else
			eng_strbuf_printf(b, "for (%s p_ = start; p_ < end; p_++) {\n", it);
		if (r->d->thread_idx) {
			indent(b, depth);
			eng_strbuf_puts(b, "if (p_ < end) {\n");
		}
		indent(b, depth + 1);
		eng_strbuf_printf(b, "const %s v%d = p_ / %lld;\n", it, v, (long long)s->div);
		return;
	}
	if (r->lanes && v == r->ir->tilevar[0]) { /* the lanes of the vectors: lane 0's index */
		r->nobrace[depth] = true;
		indent(b, depth);
		eng_strbuf_printf(b, "const %s v%d = 0; /* %d lanes */\n", it, v, r->lanes);
		return;
	}
	if (render_reduce_loop(r, s, depth))
		return;
	const eng_loop *lp = &r->ir->loops[v];
	if (r->rows && r->strided_at < 0 && !s->parallel && lp->kind == L_OUTER && !((r->phase_dims >> lp->dim) & 1)) {
		/* the outermost store loop of a grouped row: its elements are shared out */
		r->strided_at = depth;
		indent(b, depth);
		eng_strbuf_printf(b, "for (%s v%d = lid_; v%d < %lld; v%d += %d) {\n", it, v, v, (long long)lp->n, v,
			      r->ir->group);
		return;
	}
	if (s->parallel && r->d->thread_idx) {
		/* one thread per iteration; the launch rounds the thread count up */
		indent(b, depth);
		eng_strbuf_printf(b, "const %s v%d = start + %s;\n", it, v, r->rows ? r->d->group_idx : r->d->thread_idx);
		indent(b, depth);
		eng_strbuf_printf(b, "if (v%d < end) {\n", v);
		return;
	}
	render_hints(r, s, depth);
	indent(b, depth);
	if (s->parallel)
		eng_strbuf_printf(b, "for (%s v%d = start; v%d < end; v%d++) {\n", it, v, v, v);
	else if (s->lo || s->hi) { /* clamped (clamp.c) */
		char lo[32], hi[32], nstr[32];
		snprintf(nstr, sizeof(nstr), "%lld", (long long)r->ir->loops[v].n);
		loop_bound(s->lo, lo, sizeof(lo), "0");
		loop_bound(s->hi, hi, sizeof(hi), nstr);
		eng_strbuf_printf(b, "for (%s v%d = %s; v%d < %s; v%d++) {\n", it, v, lo, v, hi, v);
	} else
		eng_strbuf_printf(b, "for (%s v%d = 0; v%d < %lld; v%d++) {\n", it, v, v, (long long)r->ir->loops[v].n, v);
}

/* A sum of products' operand panel copied into the local pk, contiguous (eng_pack): row i_
 * takes apart into the reduction loops' steps, outermost first. */
static void render_pack(const rk *r, const eng_stmt *s, int depth)
{
	const eng_pack *p = &r->ir->pack;
	long long rows = p->rows, cols = p->cols;
	indent(r->b, depth);
	/* read through a restrict pointer: gcc then keeps the accumulators in registers */
	eng_strbuf_printf(r->b, "_Alignas(64) %s pk_[%lld];\n", ctype(r, p->dtype), rows * cols);
	indent(r->b, depth);
	eng_strbuf_printf(r->b, "%s *restrict pk = pk_;\n", ctype(r, p->dtype));
	indent(r->b, depth);
	eng_strbuf_printf(r->b, "for (int64_t i_ = 0; i_ < %lld; i_++) {\n", rows);
	indent(r->b, depth + 1);
	eng_strbuf_puts(r->b, "const int64_t o_ = ");
	ref(r, s->u);
	int64_t div = rows;
	for (int i = 0; i < p->nr; i++) {
		div /= p->rn[i];
		eng_strbuf_printf(r->b, "+(i_/INT64_C(%lld)", (long long)div);
		if (i > 0)
			eng_strbuf_printf(r->b, "%%INT64_C(%lld)", (long long)p->rn[i]);
		eng_strbuf_printf(r->b, ")*INT64_C(%lld)", (long long)p->rstride[i]);
	}
	eng_strbuf_puts(r->b, ";\n");
	indent(r->b, depth + 1);
	eng_strbuf_printf(r->b, "for (int64_t j_ = 0; j_ < %lld; j_++) pk[i_*%lld+j_] = b%d[o_+j_*INT64_C(%lld)];\n", cols,
			  cols, p->buf, (long long)p->cstride);
	indent(r->b, depth);
	eng_strbuf_puts(r->b, "}\n");
}

/* The narrow operand's block (eng_rpack) copied into the call's scratch (the pointer after the
 * buffers), as pa: tile by tile, a tile's rows adjacent at each reduction step, rows past the
 * block zero. */
static void render_rpack(const rk *r, const eng_stmt *s, int depth)
{
	const eng_rpack *p = &r->ir->rpack;
	const char *ct = ctype(r, p->dtype);
	long long rt = p->rows_t, kc = p->kc;
	indent(r->b, depth);
	eng_strbuf_printf(r->b, "%s *restrict pa = (%s *)bufs[%d];\n", ct, ct, r->ir->nbufs);
	indent(r->b, depth);
	eng_strbuf_printf(r->b, "for (int64_t i_ = 0; i_ < %lld; i_++) {\n", (long long)(p->tiles * p->rows_t));
	indent(r->b, depth + 1);
	eng_strbuf_printf(r->b, "%s *restrict q_ = pa + (i_/%lld)*%lld + i_%%%lld;\n", ct, rt, kc * rt, rt);
	indent(r->b, depth + 1);
	eng_strbuf_printf(r->b, "if (i_ >= %lld) { for (int64_t k_ = 0; k_ < %lld; k_++) q_[k_*%lld] = 0; continue; }\n",
			  (long long)p->rows, kc, rt);
	indent(r->b, depth + 1);
	eng_strbuf_puts(r->b, "const int64_t o_ = ");
	ref(r, s->u);
	eng_strbuf_printf(r->b, "+i_*INT64_C(%lld);\n", (long long)p->rstride);
	indent(r->b, depth + 1);
	eng_strbuf_printf(r->b, "for (int64_t k_ = 0; k_ < %lld; k_++) q_[k_*%lld] = b%d[o_+k_*INT64_C(%lld)];\n", kc, rt,
			  p->buf, (long long)p->kstride);
	indent(r->b, depth);
	eng_strbuf_puts(r->b, "}\n");
}

/* A blocked reduction's output tile (rows of the narrow tile, cache lines of the wide one) asked
 * into the cache before the block's sum, which adds it after. */
static void render_prefetch(const rk *r, const eng_stmt *s, int depth)
{
	const eng_kernel_ir *ir = r->ir;
	int64_t st[ENG_MAX_DIMS];
	eng_contiguous_strides(ir->ndim, ir->shape, st);
	long long line = 64 / eng_dtype_size(ir->bufs[s->buf].dtype);
	indent(r->b, depth);
	eng_strbuf_puts(r->b, "if (");
	ref(r, s->cond);
	eng_strbuf_printf(r->b, ") for (int64_t r_ = 0; r_ < %lld; r_++) for (int64_t j_ = 0; j_ < %lld; j_ += %lld) "
			  "__builtin_prefetch(&b%d[", (long long)ir->tile[1], (long long)ir->tile[0], line, s->buf);
	ref(r, s->idx);
	eng_strbuf_printf(r->b, "+r_*INT64_C(%lld)+j_], 1);\n", (long long)st[ir->tiledim[1]]);
}

static void render_def(const rk *r, const eng_uop *x)
{
	eng_strbuf_puts(r->b, "const ");
	put_type(r, x);
	eng_strbuf_printf(r->b, " x%u = ", x->id);
	if (x->kind == U_LOAD) {
		render_load(r, x);
	} else if (x->dtype == ENG_F16 && x->op != ENG_OP_CAST) {
		/* float16 computes in float but rounds after every op, as a float16 unit would */
		f16_round_open(r);
		render_alu(r, x);
		f16_round_close(r);
	} else {
		render_alu(r, x);
	}
	eng_strbuf_puts(r->b, ";\n");
}

/* The end of the loop opened at depth: its brace, then what follows a blocked sum's block (its
 * compensated add, the block loop's brace) and a grouped phase's tree. */
static void render_end(rk *r, int depth)
{
	eng_strbuf *b = r->b;
	if (depth >= 0 && depth < ENG_MAX_LOOPS + 2 && r->nobrace[depth]) {
		r->nobrace[depth] = false;
		return;
	}
	indent(b, depth);
	eng_strbuf_puts(b, "}\n");
	if (depth == r->strided_at)
		r->strided_at = -1;
	if (depth < 0 || depth >= ENG_MAX_LOOPS + 2)
		return;
	uint32_t bm = r->blk_close[depth];
	if (bm) {
		for (int p = 0; p < r->ir->nphases; p++)
			if ((bm >> p) & 1) {
				char v[32];
				snprintf(v, sizeof(v), "bacc%d", p);
				render_kahan(r, p, v, depth);
			}
		if (r->blk_outer[depth]) {
			indent(b, depth);
			eng_strbuf_puts(b, "}\n");
		}
		r->blk_close[depth] = 0;
	}
	if (r->closes[depth] >= 0) {
		render_group_tree(r, r->closes[depth], depth);
		r->closes[depth] = -1;
	}
}

/* SPLIT_FIN: phase p's accumulator from its chunks' partial results pt<p>[q_ * split + c], in
 * chunk order (a float sum with compensation); in a work-group (grouped) each thread takes
 * chunks lid_, lid_ + group, ... and the threads' results meet in the group's tree. */
static void render_fin_acc(const rk *r, int p, int depth)
{
	eng_strbuf *b = r->b;
	const eng_phase *ph = &r->ir->phases[p];
	long long sp = r->ir->split;
	bool comp = ph->op == ENG_OP_RSUM && ph->dtype == ENG_F32;
	if (r->grouped) { /* from the phase's initial value */
		render_acc_init(r, p, depth);
		if (comp && !block_iters(r, p)) {
			indent(b, depth);
			eng_strbuf_printf(b, "float cmp%d = 0.0f;\n", p);
		}
	} else {
		indent(b, depth);
		eng_strbuf_printf(b, "%s acc%d = pt%d[q_ * %lld];\n", ctype(r, ph->dtype), p, p, sp);
	}
	if (comp && !r->grouped) {
		indent(b, depth);
		eng_strbuf_printf(b, "float cmp%d = 0.0f;\n", p);
	}
	indent(b, depth);
	if (r->grouped)
		eng_strbuf_printf(b, "for (%s c_ = lid_; c_ < %lld; c_ += %d)%s\n", ctype(r, ENG_I64), sp, r->ir->group,
				  comp ? "" : " {");
	else
		eng_strbuf_printf(b, "for (%s c_ = 1; c_ < %lld; c_++)%s\n", ctype(r, ENG_I64), sp, comp ? "" : " {");
	char v[48];
	snprintf(v, sizeof(v), "pt%d[q_ * %lld + c_]", p, sp);
	if (comp) {
		render_kahan(r, p, v, depth + 1);
	} else {
		char a[16];
		snprintf(a, sizeof(a), "acc%d", p);
		indent(b, depth + 1);
		eng_strbuf_printf(b, "acc%d = ", p);
		render_combine(r, p, a, v);
		eng_strbuf_puts(b, ";\n");
		indent(b, depth);
		eng_strbuf_puts(b, "}\n");
	}
	if (r->grouped)
		render_group_tree(r, p, depth);
}

static int render_versioned(rk *r, int i, int depth);

/* Statement i at *depth (which a loop's opening or end moves). */
static void render_stmt(rk *r, int i, int *depth)
{
	const eng_stmt *s = &r->ir->stmts[i];
	bool fin = r->split_mode == SPLIT_FIN;
	switch (s->kind) {
	case S_LOOP:
		if (fin && r->cur_phase >= 0 && *depth == r->phase_depth) {
			r->skip_depth = (*depth)++;
			break;
		}
		render_loop(r, s, *depth);
		(*depth)++;
		break;
	case S_END:
		(*depth)--;
		if (*depth == r->phase_depth)
			r->cur_phase = -1;
		if (!s->merged) /* a merged loop has none of its own */
			render_end(r, *depth);
		break;
	case S_DEF:
		indent(r->b, *depth);
		render_def(r, s->u);
		break;
	case S_ACC_INIT:
		if (fin)
			render_fin_acc(r, s->acc, *depth);
		else
			render_acc_init(r, s->acc, *depth);
		/* phases initialised one after another run in one loop nest (linearize.c) */
		r->cur_group = (i > 0 && r->ir->stmts[i - 1].kind == S_ACC_INIT ? r->cur_group : 0) | 1u << s->acc;
		r->cur_phase = s->acc;
		r->phase_depth = *depth;
		break;
	case S_ACC_UPD:
		indent(r->b, *depth);
		render_acc_upd(r, s);
		break;
	case S_PACK:
		render_pack(r, s, *depth);
		break;
	case S_RPACK:
		render_rpack(r, s, *depth);
		break;
	case S_PREFETCH:
		render_prefetch(r, s, *depth);
		break;
	case S_STORE:
		if (r->split_mode == SPLIT_PART)
			break;
		indent(r->b, *depth);
		if (r->one_group && r->strided_at < 0)
			eng_strbuf_puts(r->b, "if (lid_ == 0) "); /* one thread stores; all computed alike */
		if (s->cond) {
			eng_strbuf_puts(r->b, "if (");
			ref(r, s->cond);
			eng_strbuf_puts(r->b, ") ");
		}
		render_store(r, s);
		break;
	}
}

/* The statements from depth on. A split kernel's chunks (SPLIT_PART) store nothing; what
 * follows them (SPLIT_FIN) leaves out the phases' loops and starts each accumulator from the
 * chunks' partials. */
static void render_stmts(rk *r, int depth)
{
	const eng_kernel_ir *ir = r->ir;
	r->cur_phase = r->skip_depth = -1;
	for (int i = 0; i < ir->nstmts; i++) {
		const eng_stmt *s = &ir->stmts[i];
		if (r->skip_depth >= 0) { /* inside a phase's loops left out */
			depth += s->kind == S_LOOP ? 1 : s->kind == S_END ? -1 : 0;
			if (depth == r->skip_depth)
				r->skip_depth = r->cur_phase = -1;
			continue;
		}
		int last = s->kind == S_LOOP ? render_versioned(r, i, depth) : -1;
		if (last >= 0)
			i = last;
		else
			render_stmt(r, i, &depth);
	}
}

/* Whether uop x is defined by a statement before statement i. */
static bool defined_before(const eng_kernel_ir *ir, const eng_uop *x, int i)
{
	for (int j = 0; j < i; j++)
		if (ir->stmts[j].kind == S_DEF && ir->stmts[j].u == x)
			return true;
	return false;
}

/* The innermost loop opened by statement i, when its body is elementwise (definitions and
 * stores) and some of its loads are guarded by conditions that do not change in it (a
 * concatenation's halves, the padded rows of a pad): rendered once per value of those
 * conditions (at most two of them: four copies), each copy under an if that tells the
 * compiler their values, so that the guarded loads are plain loads or zeros and the loop
 * vectorizes (gcc 12 vectorizes no masked load whose mask is the same in every iteration: a
 * concatenated LSTM state ran scalar). C loops (the CPU's dialect) only. Returns the index
 * of the loop's end, or -1 when the loop is left to render_stmt. */
static int render_versioned(rk *r, int i, int depth)
{
	const eng_kernel_ir *ir = r->ir;
	const eng_stmt *s = &ir->stmts[i];
	if (!*r->d->simd_pragma || r->d->thread_idx || r->lanes || r->one_group || r->split_mode || s->parallel ||
	    s->merged || s->unroll || s->simd || s->simd_accs || ir->loops[s->var].kind != L_OUTER)
		return -1;
	const eng_uop *g[2];
	int ng = 0, j;
	for (j = i + 1; j < ir->nstmts && ir->stmts[j].kind != S_END; j++) {
		const eng_stmt *t = &ir->stmts[j];
		if (t->kind == S_STORE)
			continue;
		if (t->kind != S_DEF)
			return -1;
		const eng_uop *x = t->u, *c = x->nsrc > 1 ? x->src[1] : NULL;
		if (x->kind != U_LOAD || !c || c->kind == U_CONST || ((c->deps >> s->var) & 1))
			continue;
		if (!defined_before(ir, c, i))
			return -1;
		int k = 0;
		while (k < ng && g[k] != c)
			k++;
		if (k == ng && ng == 2)
			return -1;
		if (k == ng)
			g[ng++] = c;
	}
	if (j >= ir->nstmts || ir->stmts[j].merged || !ng)
		return -1;
	for (int m = (1 << ng) - 1; m >= 0; m--) {
		indent(r->b, depth);
		if (m == 0) {
			eng_strbuf_puts(r->b, "} else {\n");
		} else {
			eng_strbuf_puts(r->b, m == (1 << ng) - 1 ? "if (" : "} else if (");
			for (int k = 0; k < ng; k++) {
				eng_strbuf_puts(r->b, k ? " && " : "");
				eng_strbuf_puts(r->b, (m >> k) & 1 ? "" : "!");
				ref(r, g[k]);
			}
			eng_strbuf_puts(r->b, ") {\n");
		}
		int d = depth + 1;
		for (int k = i; k <= j; k++)
			render_stmt(r, k, &d);
	}
	indent(r->b, depth);
	eng_strbuf_puts(r->b, "}\n");
	return j;
}

/* Each phase's partial results: pt<p>, rows x split of them, in the launch's scratch (the
 * pointer after the buffers). */
static void render_partials_decl(const rk *r)
{
	const eng_kernel_ir *ir = r->ir;
	long long slots = ir->nparallel; /* rows x split */
	const char *q = r->d->buf_qual;
	for (int p = 0; p < ir->nphases; p++) {
		const char *ct = ctype(r, ir->phases[p].dtype);
		long long off = (long long)p * slots * ENG_SPLIT_SLOT;
		if (q) /* the kernel parameter sc_ */
			eng_strbuf_printf(r->b, "  %s%s%s *pt%d = (%s%s%s *)(sc_ + %lld);\n", q, *q ? " " : "", ct, p, q,
					  *q ? " " : "", ct, off);
		else
			eng_strbuf_printf(r->b, "  %s *pt%d = (%s *)((char *)bufs[%d] + %lld);\n", ct, p, ct, ir->nbufs, off);
	}
}

/* The work-group's index and local memory of a grouped kernel, at its top. */
static void render_group_decls(const rk *r)
{
	if (r->one_group)
		eng_strbuf_printf(r->b, "  const int lid_ = (int)%s;\n", r->d->local_id);
	if (!r->grouped)
		return;
	for (int p = 0; p < r->ir->nphases; p++) {
		eng_dtype dt = r->ir->phases[p].dtype;
		if (r->ir->phases[p].parent >= 0)
			continue; /* a nested phase runs whole in each thread */
		eng_strbuf_printf(r->b, "  %s %s sh%d[%d];\n", r->d->local_qual, dt == ENG_BOOL ? stype(r, dt) : ctype(r, dt),
				  p, r->ir->group);
	}
}

/* A split reduction (eng_kernel_ir.split): the kernel `name` runs chunks [start, end) of rows x
 * split (in the C form a loop over them, else one thread, or one work-group, per chunk), each
 * writing its phases' partial results; `name`_fin, run once after every chunk (by one thread,
 * or one work-group as the chunks were), combines them row by row and stores. The partials are kept in scratch: in the C form the
 * pointer after the buffers, whose bytes `name`_scratch states; else the parameter sc_ after
 * the buffers (see bk_target.split_scratch). */
static eng_status render_split(rk *r, const char *name)
{
	const eng_kernel_ir *ir = r->ir;
	eng_strbuf *b = r->b;
	const char *it = ctype(r, ENG_I64);
	long long sp = ir->split, rows = ir->nparallel / ir->split;
	bool c_form = !r->d->buf_qual;
	if (c_form ? (r->d->thread_idx || r->one_group) : !r->d->thread_idx)
		return ENG_EINVAL;
	if (ir->nparallel % ir->split)
		return ENG_EINVAL;
	r->split_mode = SPLIT_PART;
	render_head(r, name);
	render_group_decls(r);
	render_partials_decl(r);
	if (c_form)
		eng_strbuf_printf(b, "  for (%s p_ = start; p_ < end; p_++) {\n", it);
	else
		eng_strbuf_printf(b, "  const %s p_ = start + %s;\n  if (p_ < end) {\n", it,
				  r->one_group ? r->d->group_idx : r->d->thread_idx);
	eng_strbuf_printf(b, "    const %s c_ = p_ %% %lld, q_ = p_ / %lld;\n", it, sp, sp);
	eng_strbuf_puts(b, "    (void)c_; (void)q_;\n");
	render_stmts(r, 2);
	for (int p = 0; p < ir->nphases; p++)
		eng_strbuf_printf(b, "    %spt%d[p_] = acc%d;\n", r->one_group ? "if (lid_ == 0) " : "", p, p);
	eng_strbuf_puts(b, "  }\n}\n");
	char fin[128];
	snprintf(fin, sizeof(fin), "%s_fin", name);
	rk f = *r; /* one work-group of the kernel's (as a grouped kernel without a parallel loop), or
		    * one thread */
	f.split_mode = SPLIT_FIN;
	f.rows = false;
	render_head(&f, fin);
	render_group_decls(&f);
	render_partials_decl(&f);
	if (!c_form && !f.one_group)
		eng_strbuf_printf(b, "  if (%s == 0)\n", r->d->thread_idx);
	eng_strbuf_printf(b, "  for (%s q_ = 0; q_ < %lld; q_++) {\n", it, rows);
	render_stmts(&f, 2);
	eng_strbuf_puts(b, "  }\n}\n");
	if (c_form)
		eng_strbuf_printf(b, "const int64_t %s_scratch = %lld;\n", name,
				  (long long)ir->nparallel * ir->nphases * ENG_SPLIT_SLOT);
	return b->failed ? ENG_ENOMEM : ENG_OK;
}

eng_status eng_render_cstyle(const bk_target *t, const eng_kernel_ir *ir, const char *name, eng_strbuf *b)
{
	const bk_dialect *d = t->dialect;
	rk r = {.b = b, .ir = ir, .d = d, .t = d->types};
	/* every kernel without a parallel loop runs as one group, whose thread 0 alone stores (so
	 * an in-place update is applied once); its reductions are split when they are scalar */
	r.one_group = ir->group > 1;
	r.grouped = r.one_group && ir->tiledim[0] < 0;
	r.rows = r.one_group && ir->nparallel > 1;
	r.strided_at = -1;
	for (int p = 0; p < ir->nphases; p++)
		r.phase_dims |= ir->phases[p].dims;
	if (r.one_group && (!d->local_id || !d->group_idx || !d->group_attr || !d->group_attr_end ||
			    (ir->group & (ir->group - 1))))
		return ENG_EINVAL; /* no work-groups in this dialect, or not a power of two */
	for (int i = 0; i < ENG_MAX_LOOPS + 2; i++)
		r.closes[i] = -1;
	r.lanes = eng_render_vector_lanes(ir, t->vector_width);
	if (ir->split > 1)
		return render_split(&r, name);
	/* a packed block of rows lives in the launch's scratch: the C form's, after the buffers */
	if (ir->scratch > 0 && (d->buf_qual || r.lanes || r.one_group))
		return ENG_EINVAL;
	render_head(&r, name);
	render_group_decls(&r);
	render_stmts(&r, 1);
	eng_strbuf_puts(b, "}\n");
	if (ir->scratch > 0)
		eng_strbuf_printf(b, "const int64_t %s_scratch = %lld;\n", name, (long long)ir->scratch);
	return b->failed ? ENG_ENOMEM : ENG_OK;
}
