/* cstyle.c: the C-family renderer: one statement per loop-IR entry, every defined
 * uop a const temporary, integer semantics (wrapping, safe division) spelled out. */
#include "cstyle.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

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
	eng_strbuf_printf(&a, "acc%d", s->acc);
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
	if (s->simd_acc >= 0 && *simd) {
		const eng_phase *ph = &r->ir->phases[s->simd_acc];
		indent(b, depth);
		eng_strbuf_printf(b, "%s reduction(%s:acc%d)\n", simd,
			      ph->op == ENG_OP_RSUM ? "+" : ph->op == ENG_OP_RMAX ? "max" : "*", s->simd_acc);
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

static void render_loop(rk *r, const eng_stmt *s, int depth)
{
	eng_strbuf *b = r->b;
	const char *it = ctype(r, ENG_I64);
	int v = s->var;
	if (s->merged) { /* part of the parallel index p_ */
		indent(b, depth);
		eng_strbuf_printf(b, "const %s v%d = (p_ / %lld) %% %lld;\n", it, v, (long long)s->div,
			      (long long)r->ir->loops[v].n);
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
	int gp = group_phase(r, v);
	if (gp >= 0) { /* strided over the group's threads */
		r->closes[depth] = gp;
		indent(b, depth);
		eng_strbuf_printf(b, "for (%s v%d = lid_; v%d < %lld; v%d += %d) {\n", it, v, v,
			      (long long)r->ir->loops[v].n, v, r->ir->group);
		return;
	}
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
	else
		eng_strbuf_printf(b, "for (%s v%d = 0; v%d < %lld; v%d++) {\n", it, v, v, (long long)r->ir->loops[v].n, v);
}

/* A blocked reduction's operand panel copied into the local pk, contiguous (eng_pack). */
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
	eng_strbuf_printf(r->b, "for (int64_t i_ = 0; i_ < %lld; i_++)\n", rows);
	indent(r->b, depth + 1);
	eng_strbuf_printf(r->b, "for (int64_t j_ = 0; j_ < %lld; j_++) pk[i_*%lld+j_] = b%d[", cols, cols, p->buf);
	ref(r, s->u);
	eng_strbuf_printf(r->b, "+i_*INT64_C(%lld)+j_*INT64_C(%lld)];\n", (long long)p->rstride, (long long)p->cstride);
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
	render_head(&r, name);
	if (r.one_group)
		eng_strbuf_printf(b, "  const int lid_ = (int)%s;\n", d->local_id);
	if (r.grouped) {
		for (int p = 0; p < ir->nphases; p++) {
			eng_dtype dt = ir->phases[p].dtype;
			if (ir->phases[p].parent >= 0)
				continue;
			eng_strbuf_printf(b, "  %s %s sh%d[%d];\n", d->local_qual, dt == ENG_BOOL ? stype(&r, dt) : ctype(&r, dt),
				      p, ir->group);
		}
	}
	int depth = 1;
	for (int i = 0; i < ir->nstmts; i++) {
		const eng_stmt *s = &ir->stmts[i];
		switch (s->kind) {
		case S_LOOP:
			render_loop(&r, s, depth);
			depth++;
			break;
		case S_END:
			depth--;
			if (s->merged)
				break; /* no loop of its own */
			if (depth >= 0 && depth < ENG_MAX_LOOPS + 2 && r.nobrace[depth]) {
				r.nobrace[depth] = false;
				break;
			}
			indent(b, depth);
			eng_strbuf_puts(b, "}\n");
			if (depth == r.strided_at)
				r.strided_at = -1;
			if (depth >= 0 && depth < ENG_MAX_LOOPS + 2 && r.closes[depth] >= 0) {
				render_group_tree(&r, r.closes[depth], depth);
				r.closes[depth] = -1;
			}
			break;
		case S_DEF:
			indent(b, depth);
			render_def(&r, s->u);
			break;
		case S_ACC_INIT:
			render_acc_init(&r, s->acc, depth);
			break;
		case S_ACC_UPD:
			indent(b, depth);
			render_acc_upd(&r, s);
			break;
		case S_PACK:
			render_pack(&r, s, depth);
			break;
		case S_STORE:
			indent(b, depth);
			if (r.one_group && r.strided_at < 0)
				eng_strbuf_puts(b, "if (lid_ == 0) "); /* one thread stores; all computed alike */
			render_store(&r, s);
			break;
		}
	}
	eng_strbuf_puts(b, "}\n");
	return b->failed ? ENG_ENOMEM : ENG_OK;
}
