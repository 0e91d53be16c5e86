/* vector.c: decides whether a kernel's wide tile can be rendered as vector values (OpenCL
 * floatN): every value along the tile is a float32 load (of consecutive elements, or gathered
 * a constant stride apart), arithmetic that OpenCL C applies lane by lane, a comparison (a lane
 * mask, intN), a select, a mask turned into 0/1, an accumulator, or a store (of consecutive elements, or
 * scattered a constant stride apart); index maths along it is computed for lane 0 only. */
#include "cstyle.h"

/* Depends on the wide tile variable. */
static bool wide(const eng_uop *x, int wv) { return x && ((x->deps >> wv) & 1); }

/* An index of lane 0 that the lanes continue a constant number of elements apart. */
static bool const_stride(const eng_uop *idx, int wv)
{
	int64_t coef;
	return idx->dtype == ENG_I64 && u_linear_in_var(idx, wv, &coef) && coef != 0 && coef < (1 << 30) &&
	       coef > -(1 << 30);
}

/* A float operand of a vector op: a scalar (broadcast) or a float32 vector. */
static bool vec_operand(const eng_uop *x, int wv) { return !wide(x, wv) || x->dtype == ENG_F32; }

/* A condition of a vector select: a scalar bool or a lane mask. */
static bool vec_cond(const eng_uop *x, int wv) { return x->dtype == ENG_BOOL; }

/* Whether the definition of wide value x has a vector form. */
static bool vec_def(const eng_kernel_ir *ir, const eng_uop *x, int wv)
{
	if (x->dtype == ENG_I64 || x->dtype == ENG_I32) { /* index maths for lane 0 */
		if (x->kind != U_ALU)
			return false;
		for (int i = 0; i < x->nsrc; i++) /* of integers: a vector has no lane-0 scalar */
			if (x->src[i] && wide(x->src[i], wv) && x->src[i]->dtype != ENG_I64 && x->src[i]->dtype != ENG_I32)
				return false;
		return true; /* its float users are checked: they take no wide integers */
	}
	if (x->dtype == ENG_BOOL) { /* a lane mask (intN, -1 or 0) */
		if (x->kind != U_ALU)
			return false;
		switch ((eng_op)x->op) {
		case ENG_OP_CMPLT: case ENG_OP_CMPEQ: case ENG_OP_CMPNE: /* of floats */
			return x->src[0]->dtype == ENG_F32 && vec_operand(x->src[0], wv) && vec_operand(x->src[1], wv);
		case ENG_OP_AND: case ENG_OP_OR: case ENG_OP_XOR: /* of masks */
			return wide(x->src[0], wv) && wide(x->src[1], wv);
		default:
			return false;
		}
	}
	if (x->dtype != ENG_F32)
		return false;
	if (x->kind == U_LOAD)
		return ir->bufs[x->arg.buf].dtype == ENG_F32 && const_stride(x->src[0], wv) &&
		       !(x->nsrc > 1 && wide(x->src[1], wv));
	if (x->kind != U_ALU)
		return false;
	switch ((eng_op)x->op) {
	case ENG_OP_ADD: case ENG_OP_SUB: case ENG_OP_MUL: case ENG_OP_MAX: case ENG_OP_NEG:
	case ENG_OP_RECIP: case ENG_OP_EXP2: case ENG_OP_LOG2: case ENG_OP_SQRT: case ENG_OP_SIN:
	case ENG_OP_TRUNC:
		break;
	case ENG_OP_WHERE:
		return vec_cond(x->src[0], wv) && vec_operand(x->src[1], wv) && vec_operand(x->src[2], wv);
	case ENG_OP_CAST: /* a lane mask to 0.0f / 1.0f */
		return x->src[0]->dtype == ENG_BOOL;
	default:
		return false; /* casts and the rest: scalar */
	}
	for (int i = 0; i < x->nsrc; i++)
		if (x->src[i] && !vec_operand(x->src[i], wv))
			return false;
	return true;
}

int eng_render_vector_lanes(const eng_kernel_ir *ir, int max_width)
{
	int64_t w = ir->tile[0];
	if (ir->tiledim[0] < 0 || !eng_vector_lanes_ok(w, max_width))
		return 0;
	for (int p = 0; p < ir->nphases; p++)
		if (ir->phases[p].dtype != ENG_F32)
			return 0; /* every accumulator is a row of vectors */
	int wv = ir->tilevar[0];
	int depth = 0, wide_at = -1; /* depth of the open wide loop, -1 when outside it */
	for (int i = 0; i < ir->nstmts; i++) {
		const eng_stmt *s = &ir->stmts[i];
		switch (s->kind) {
		case S_LOOP:
			if (s->var == wv)
				wide_at = depth;
			depth++;
			break;
		case S_END:
			depth--;
			if (depth == wide_at)
				wide_at = -1;
			break;
		case S_DEF:
			if (wide(s->u, wv) && !vec_def(ir, s->u, wv))
				return 0;
			break;
		case S_ACC_UPD:
			if (!vec_operand(s->u, wv))
				return 0;
			break;
		case S_STORE:
			if (wide_at < 0 || ir->bufs[s->buf].dtype != ENG_F32 || !const_stride(s->idx, wv) ||
			    !vec_operand(s->u, wv))
				return 0;
			break;
		default:
			break;
		}
	}
	return (int)w;
}
