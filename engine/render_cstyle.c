/* render_cstyle.c: the C-family renderer: one statement per loop-IR entry, every defined
 * uop a const temporary, integer semantics (wrapping, safe division) spelled out. */
#include "render_cstyle.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char prelude[] =
	/* no system headers: parsing them costs more than compiling a small kernel */
	"typedef __INT32_TYPE__ int32_t;\ntypedef __UINT32_TYPE__ uint32_t;\n"
	"typedef __INT64_TYPE__ int64_t;\ntypedef __UINT64_TYPE__ uint64_t;\ntypedef __UINT8_TYPE__ uint8_t;\n"
	"#define INT64_C(c) c ## L\n#define INT32_MAX 2147483647\n#define INT32_MIN (-INT32_MAX - 1)\n"
	"#define INT64_MAX 9223372036854775807L\n#define INT64_MIN (-INT64_MAX - 1)\n"
	"#define exp2f __builtin_exp2f\n#define log2f __builtin_log2f\n#define sinf __builtin_sinf\n"
	"#define sqrtf __builtin_sqrtf\n#define truncf __builtin_truncf\n#define memcpy __builtin_memcpy\n"
	"#define TSD_DIV(T, UT) \\\n"
	"  static inline T tsd_idiv_##T(T a, T b) { return b == 0 ? 0 : b == -1 ? (T)((UT)0 - (UT)a) : a / b; } \\\n"
	"  static inline T tsd_mod_##T(T a, T b) { return (b == 0 || b == -1) ? 0 : a % b; }\n"
	"TSD_DIV(int32_t, uint32_t)\n"
	"TSD_DIV(int64_t, uint64_t)\n"
	"static inline uint8_t tsd_idiv_uint8_t(uint8_t a, uint8_t b) { return b ? a / b : 0; }\n"
	"static inline uint8_t tsd_mod_uint8_t(uint8_t a, uint8_t b) { return b ? a % b : 0; }\n"
	"static inline int32_t tsd_f2i_int32_t(float x) { return x != x ? 0 : x >= 2147483647.0f ? INT32_MAX : x <= -2147483648.0f ? INT32_MIN : (int32_t)x; }\n"
	"static inline int64_t tsd_f2i_int64_t(float x) { return x != x ? 0 : x >= 9223372036854775807.0f ? INT64_MAX : x <= -9223372036854775808.0f ? INT64_MIN : (int64_t)x; }\n"
	"static inline uint8_t tsd_f2i_uint8_t(float x) { return x != x ? 0 : x >= 255.0f ? 255 : x <= 0.0f ? 0 : (uint8_t)x; }\n"
	"static inline int32_t tsd_as_int32_t(float x) { int32_t r; memcpy(&r, &x, 4); return r; }\n"
	"static inline float tsd_as_float(int32_t x) { float r; memcpy(&r, &x, 4); return r; }\n";

const char *eng_cstyle_prelude(const eng_cstyle *d) { return prelude; }

/* compute type */
static const char *ctype(eng_dtype dt)
{
	switch (dt) {
	case ENG_BOOL: return "_Bool";
	case ENG_U8: return "uint8_t";
	case ENG_I32: return "int32_t";
	case ENG_I64: return "int64_t";
	default: return "float";
	}
}

/* storage type */
static const char *stype(eng_dtype dt)
{
	switch (dt) {
	case ENG_BOOL: return "uint8_t";
	case ENG_F16: return "_Float16";
	default: return ctype(dt);
	}
}

static const char *utype(eng_dtype dt)
{
	switch (dt) {
	case ENG_I32: return "uint32_t";
	case ENG_I64: return "uint64_t";
	default: return "uint32_t";
	}
}

static void render_const(eng_strbuf *b, eng_dtype dt, eng_cval c)
{
	if (eng_dtype_is_float(dt)) {
		double v = c.f;
		if (isnan(v))
			eng_sb_puts(b, "__builtin_nanf(\"\")");
		else if (isinf(v))
			eng_sb_puts(b, v > 0 ? "__builtin_inff()" : "(-__builtin_inff())");
		else {
			char tmp[64];
			snprintf(tmp, sizeof(tmp), "%.9g", v);
			if (!strpbrk(tmp, ".eEn"))
				strcat(tmp, ".0");
			eng_sb_printf(b, v < 0 ? "(%sf)" : "%sf", tmp);
		}
		return;
	}
	switch (dt) {
	case ENG_BOOL:
		eng_sb_printf(b, "%d", c.i ? 1 : 0);
		break;
	case ENG_I64:
		if (c.i == INT64_MIN)
			eng_sb_puts(b, "(INT64_MIN)");
		else
			eng_sb_printf(b, c.i < 0 ? "(INT64_C(%lld))" : "INT64_C(%lld)", (long long)c.i);
		break;
	case ENG_I32:
		if (c.i == INT32_MIN)
			eng_sb_puts(b, "(INT32_MIN)");
		else
			eng_sb_printf(b, c.i < 0 ? "(%lld)" : "%lld", (long long)c.i);
		break;
	default:
		eng_sb_printf(b, c.i < 0 ? "(%lld)" : "%lld", (long long)c.i);
		break;
	}
}

static void ref(eng_strbuf *b, const eng_kernel_ir *ir, const eng_uop *x);

static void render_acc(eng_strbuf *b, const eng_kernel_ir *ir, const eng_uop *x)
{
	eng_sb_printf(b, "acc%d", x->arg.acc);
	if (ir->tiledim[0] >= 0) {
		eng_sb_puts(b, "[");
		ref(b, ir, x->src[0]);
		eng_sb_puts(b, "][");
		ref(b, ir, x->src[1]);
		eng_sb_puts(b, "]");
	}
}

static void ref(eng_strbuf *b, const eng_kernel_ir *ir, const eng_uop *x)
{
	switch (x->kind) {
	case U_CONST:
		render_const(b, (eng_dtype)x->dtype, x->arg.c);
		return;
	case U_VAR:
		eng_sb_printf(b, "v%d", x->arg.var);
		return;
	case U_ACC:
		render_acc(b, ir, x);
		return;
	default:
		eng_sb_printf(b, "x%u", x->id);
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

static void render_alu(eng_strbuf *b, const eng_kernel_ir *ir, const eng_uop *x)
{
	eng_dtype dt = (eng_dtype)x->dtype;
	eng_dtype sdt = (eng_dtype)x->src[0]->dtype;
	const eng_uop *A = x->src[0], *B = x->src[1], *C = x->src[2];
	bool fl = eng_dtype_is_float(dt);
	const char *sym = NULL;
#define R(u) ref(b, ir, u)
	switch ((eng_op)x->op) {
	case ENG_OP_EXP2: eng_sb_puts(b, "exp2f("); R(A); eng_sb_puts(b, ")"); return;
	case ENG_OP_LOG2: eng_sb_puts(b, "log2f("); R(A); eng_sb_puts(b, ")"); return;
	case ENG_OP_SIN: eng_sb_puts(b, "sinf("); R(A); eng_sb_puts(b, ")"); return;
	case ENG_OP_SQRT: eng_sb_puts(b, "sqrtf("); R(A); eng_sb_puts(b, ")"); return;
	case ENG_OP_RECIP: eng_sb_puts(b, "(1.0f/"); R(A); eng_sb_puts(b, ")"); return;
	case ENG_OP_TRUNC: eng_sb_puts(b, fl ? "truncf(" : "("); R(A); eng_sb_puts(b, ")"); return;
	case ENG_OP_NEG:
		if (fl || no_overflow(x)) {
			eng_sb_puts(b, "(-"); R(A); eng_sb_puts(b, ")");
		} else if (dt == ENG_U8) {
			eng_sb_puts(b, "(uint8_t)(0u-"); R(A); eng_sb_puts(b, ")");
		} else {
			eng_sb_printf(b, "(%s)((%s)0-(%s)", ctype(dt), utype(dt), utype(dt)); R(A); eng_sb_puts(b, ")");
		}
		return;
	case ENG_OP_CAST:
		if (dt == ENG_BOOL) {
			eng_sb_puts(b, "("); R(A); eng_sb_puts(b, "!=0)");
		} else if (eng_dtype_is_float(sdt) && !fl) {
			eng_sb_printf(b, "tsd_f2i_%s(", ctype(dt)); R(A); eng_sb_puts(b, ")");
		} else if (dt == ENG_F16) {
			eng_sb_puts(b, "(float)(_Float16)("); R(A); eng_sb_puts(b, ")");
		} else {
			eng_sb_printf(b, "(%s)(", ctype(dt)); R(A); eng_sb_puts(b, ")");
		}
		return;
	case ENG_OP_BITCAST:
		eng_sb_printf(b, "tsd_as_%s(", fl ? "float" : "int32_t"); R(A); eng_sb_puts(b, ")");
		return;
	case ENG_OP_ADD: sym = "+"; break;
	case ENG_OP_SUB: sym = "-"; break;
	case ENG_OP_MUL: sym = "*"; break;
	case ENG_OP_IDIV:
	case ENG_OP_MOD:
		if (dt == ENG_I64 && u_is_const(B) && B->arg.c.i > 0 && A->vmin >= 0) {
			eng_sb_puts(b, "("); R(A); eng_sb_puts(b, x->op == ENG_OP_IDIV ? "/" : "%"); R(B); eng_sb_puts(b, ")");
		} else {
			eng_sb_printf(b, "tsd_%s_%s(", x->op == ENG_OP_IDIV ? "idiv" : "mod", ctype(dt)); R(A);
			eng_sb_puts(b, ","); R(B); eng_sb_puts(b, ")");
		}
		return;
	case ENG_OP_MAX:
		eng_sb_puts(b, "("); R(A); eng_sb_puts(b, ">"); R(B); eng_sb_puts(b, "?"); R(A); eng_sb_puts(b, ":");
		R(B); eng_sb_puts(b, ")");
		return;
	case ENG_OP_CMPLT: eng_sb_puts(b, "("); R(A); eng_sb_puts(b, "<"); R(B); eng_sb_puts(b, ")"); return;
	case ENG_OP_CMPEQ: eng_sb_puts(b, "("); R(A); eng_sb_puts(b, "=="); R(B); eng_sb_puts(b, ")"); return;
	case ENG_OP_CMPNE: eng_sb_puts(b, "("); R(A); eng_sb_puts(b, "!="); R(B); eng_sb_puts(b, ")"); return;
	case ENG_OP_AND: eng_sb_puts(b, "("); R(A); eng_sb_puts(b, "&"); R(B); eng_sb_puts(b, ")"); return;
	case ENG_OP_OR: eng_sb_puts(b, "("); R(A); eng_sb_puts(b, "|"); R(B); eng_sb_puts(b, ")"); return;
	case ENG_OP_XOR: eng_sb_puts(b, "("); R(A); eng_sb_puts(b, "^"); R(B); eng_sb_puts(b, ")"); return;
	case ENG_OP_SHL:
	case ENG_OP_SHR: {
		int bits = eng_dtype_bits(dt);
		if (x->op == ENG_OP_SHL && !eng_dtype_is_unsigned(dt))
			eng_sb_printf(b, "(%s)((%s)", ctype(dt), utype(dt));
		else
			eng_sb_printf(b, "(%s)(", ctype(dt));
		R(A);
		eng_sb_printf(b, "%s(", x->op == ENG_OP_SHL ? "<<" : ">>");
		R(B);
		eng_sb_printf(b, "&%d))", bits - 1);
		return;
	}
	case ENG_OP_WHERE:
		eng_sb_puts(b, "("); R(A); eng_sb_puts(b, "?"); R(B); eng_sb_puts(b, ":"); R(C); eng_sb_puts(b, ")");
		return;
	default:
		eng_sb_printf(b, "/* unknown op %d */0", x->op);
		return;
	}
	/* ADD, SUB, MUL */
	if (fl || no_overflow(x)) {
		eng_sb_puts(b, "("); R(A); eng_sb_puts(b, sym); R(B); eng_sb_puts(b, ")");
	} else if (dt == ENG_BOOL || dt == ENG_U8) {
		eng_sb_printf(b, "(%s)((int)", ctype(dt)); R(A); eng_sb_printf(b, "%s(int)", sym); R(B); eng_sb_puts(b, ")");
	} else {
		eng_sb_printf(b, "(%s)((%s)", ctype(dt), utype(dt)); R(A); eng_sb_printf(b, "%s(%s)", sym, utype(dt));
		R(B); eng_sb_puts(b, ")");
	}
#undef R
}

static void render_load(eng_strbuf *b, const eng_kernel_ir *ir, const eng_uop *x)
{
	eng_dtype dt = (eng_dtype)x->dtype;
	if (x->nsrc > 1 && x->src[1]) {
		ref(b, ir, x->src[1]);
		eng_sb_puts(b, " ? ");
	}
	if (dt == ENG_F16)
		eng_sb_puts(b, "(float)");
	eng_sb_printf(b, "b%d[", x->arg.buf);
	ref(b, ir, x->src[0]);
	eng_sb_puts(b, "]");
	if (dt == ENG_BOOL)
		eng_sb_puts(b, "!=0");
	if (x->nsrc > 1 && x->src[1])
		eng_sb_puts(b, dt == ENG_BOOL ? " : 0" : eng_dtype_is_float(dt) ? " : 0.0f" : " : 0");
}

static void indent(eng_strbuf *b, int depth)
{
	for (int i = 0; i < depth; i++)
		eng_sb_puts(b, "  ");
}

static void render_acc_init(eng_strbuf *b, const eng_kernel_ir *ir, int p, int depth)
{
	const eng_phase *ph = &ir->phases[p];
	eng_dtype dt = ph->dtype;
	eng_cval init = {.i = 0};
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
		eng_sb_printf(b, "%s acc%d = ", ctype(dt), p);
		render_const(b, dt, init);
		eng_sb_puts(b, ";\n");
		return;
	}
	int64_t t0 = ir->tile[1], t1 = ir->tile[0]; /* [narrow][wide] */
	eng_sb_printf(b, "%s acc%d[%lld][%lld];\n", ctype(dt), p, (long long)t0, (long long)t1);
	indent(b, depth);
	eng_sb_printf(b, "for (int i_ = 0; i_ < %lld; i_++) (&acc%d[0][0])[i_] = ", (long long)(t0 * t1), p);
	render_const(b, dt, init);
	eng_sb_puts(b, ";\n");
}

static void render_acc_upd(eng_strbuf *b, const eng_kernel_ir *ir, const eng_stmt *s)
{
	const eng_phase *ph = &ir->phases[s->acc];
	eng_strbuf a;
	eng_sb_init(&a);
	eng_sb_printf(&a, "acc%d", s->acc);
	if (ir->tiledim[0] >= 0) {
		if (ir->tiledim[1] >= 0)
			eng_sb_printf(&a, "[v%d]", ir->tilevar[1]);
		else
			eng_sb_puts(&a, "[0]");
		eng_sb_printf(&a, "[v%d]", ir->tilevar[0]);
	}
	const char *acc = a.s ? a.s : "acc?";
	eng_sb_printf(b, "%s = ", acc);
	if (ph->op == ENG_OP_RMAX) {
		eng_sb_puts(b, "(");
		ref(b, ir, s->u);
		eng_sb_printf(b, " > %s ? ", acc);
		ref(b, ir, s->u);
		eng_sb_printf(b, " : %s);\n", acc);
	} else {
		bool wrap = !eng_dtype_is_float(ph->dtype);
		if (wrap && ph->dtype != ENG_BOOL)
			eng_sb_printf(b, "(%s)((%s)%s %s (%s)", ctype(ph->dtype),
				      ph->dtype == ENG_U8 ? "uint32_t" : utype(ph->dtype), acc,
				      ph->op == ENG_OP_RSUM ? "+" : "*", ph->dtype == ENG_U8 ? "uint32_t" : utype(ph->dtype));
		else
			eng_sb_printf(b, "(%s %s ", acc, ph->op == ENG_OP_RSUM ? "+" : "*");
		ref(b, ir, s->u);
		eng_sb_puts(b, ");\n");
	}
	eng_sb_free(&a);
}

eng_status eng_render_cstyle(const eng_cstyle *d, const eng_kernel_ir *ir, const char *name, eng_strbuf *b)
{
	const char *rq = ir->aliased ? "" : d->restrict_kw;
	eng_sb_printf(b, "%s %s(void *const *bufs, int64_t start, int64_t end)\n{\n", d->kernel_prefix, name);
	for (int i = 0; i < ir->nbufs; i++) {
		const eng_kbuf *kb = &ir->bufs[i];
		eng_sb_printf(b, "  %s%s *%s b%d = (%s%s *)bufs[%d];\n", kb->output ? "" : "const ", stype(kb->dtype),
			      rq, i, kb->output ? "" : "const ", stype(kb->dtype), i);
	}
	eng_sb_puts(b, "  (void)start; (void)end;\n");
	int depth = 1;
	for (int i = 0; i < ir->nstmts; i++) {
		const eng_stmt *s = &ir->stmts[i];
		const eng_uop *x = s->u;
		switch (s->kind) {
		case S_LOOP:
			if (s->unroll && s->var == ir->tilevar[0]) {
				/* the wide tile: one vector of lanes, left to the loop vectorizer */
				indent(b, depth);
				eng_sb_puts(b, "#pragma omp simd\n");
			} else if (s->unroll) {
				indent(b, depth);
				eng_sb_printf(b, "#pragma GCC unroll %lld\n", (long long)ir->loops[s->var].n);
			}
			if (s->simd_acc >= 0) {
				const eng_phase *ph = &ir->phases[s->simd_acc];
				indent(b, depth);
				eng_sb_printf(b, "#pragma omp simd reduction(%s:acc%d)\n",
					      ph->op == ENG_OP_RSUM ? "+" : ph->op == ENG_OP_RMAX ? "max" : "*", s->simd_acc);
			}
			indent(b, depth);
			if (s->parallel)
				eng_sb_printf(b, "for (int64_t v%d = start; v%d < end; v%d++) {\n", s->var, s->var, s->var);
			else
				eng_sb_printf(b, "for (int64_t v%d = 0; v%d < %lld; v%d++) {\n", s->var, s->var,
					      (long long)ir->loops[s->var].n, s->var);
			depth++;
			break;
		case S_END:
			depth--;
			indent(b, depth);
			eng_sb_puts(b, "}\n");
			break;
		case S_DEF:
			indent(b, depth);
			eng_sb_printf(b, "const %s x%u = ", ctype((eng_dtype)x->dtype), x->id);
			if (x->kind == U_LOAD) {
				render_load(b, ir, x);
			} else if (x->dtype == ENG_F16 && x->op != ENG_OP_CAST) {
				/* float16 computes in float but rounds after every op, as a float16 unit would */
				eng_sb_puts(b, "(float)(_Float16)");
				render_alu(b, ir, x);
			} else {
				render_alu(b, ir, x);
			}
			eng_sb_puts(b, ";\n");
			break;
		case S_ACC_INIT:
			render_acc_init(b, ir, s->acc, depth);
			break;
		case S_ACC_UPD:
			indent(b, depth);
			render_acc_upd(b, ir, s);
			break;
		case S_STORE: {
			eng_dtype dt = ir->bufs[s->buf].dtype;
			indent(b, depth);
			eng_sb_printf(b, "b%d[", s->buf);
			ref(b, ir, s->idx);
			eng_sb_printf(b, "] = (%s)", stype(dt));
			ref(b, ir, x);
			eng_sb_puts(b, ";\n");
			break;
		}
		}
	}
	eng_sb_puts(b, "}\n");
	return b->failed ? ENG_ENOMEM : ENG_OK;
}
