/* kernel_dump.c: prints a kernel's loop IR and uops (DEBUG=5). */
#include <stdio.h>

#include "kernel.h"

static void uop_line(FILE *f, const eng_uop *x)
{
	static const char *const kinds[] = {"CONST", "VAR", "ALU", "LOAD", "ACC"};
	fprintf(f, "x%u %s %s", x->id, kinds[x->kind], eng_dtype_name((eng_dtype)x->dtype));
	if (x->kind == U_ALU)
		fprintf(f, " %s", eng_op_name((eng_op)x->op));
	if (x->kind == U_LOAD)
		fprintf(f, " buf%d", x->arg.buf);
	if (x->kind == U_ACC)
		fprintf(f, " acc%d", x->arg.acc);
	for (int i = 0; i < x->nsrc; i++) {
		const eng_uop *s = x->src[i];
		if (!s)
			continue;
		if (s->kind == U_CONST)
			fprintf(f, " %lld", (long long)s->arg.c.i);
		else if (s->kind == U_VAR)
			fprintf(f, " v%d", s->arg.var);
		else
			fprintf(f, " x%u", s->id);
	}
	if (x->dtype == ENG_I64)
		fprintf(f, "  [%lld, %lld]", (long long)x->vmin, (long long)x->vmax);
	fprintf(f, "\n");
}

void eng_kernel_ir_dump(const eng_kernel_ir *ir, void *fp)
{
	FILE *f = fp;
	int depth = 1;
	fprintf(f, "kernel %s: %d bufs, %d loops, %d phases\n", ir->name, ir->nbufs, ir->nloops, ir->nphases);
	for (int i = 0; i < ir->nstmts; i++) {
		const eng_stmt *s = &ir->stmts[i];
		if (s->kind == S_END)
			depth--;
		fprintf(f, "%*s", depth * 2, "");
		switch (s->kind) {
		case S_LOOP:
			fprintf(f, "LOOP v%d < %lld%s%s", s->var, (long long)ir->loops[s->var].n,
				s->parallel ? " parallel" : "", s->unroll ? " unroll" : "");
			if (s->lo)
				fprintf(f, " from x%u", s->lo->id);
			if (s->hi)
				fprintf(f, " to x%u", s->hi->id);
			fprintf(f, "\n");
			depth++;
			break;
		case S_END:
			fprintf(f, "END\n");
			break;
		case S_DEF:
			uop_line(f, s->u);
			break;
		case S_ACC_INIT:
			fprintf(f, "ACC_INIT acc%d %s\n", s->acc, eng_op_name(ir->phases[s->acc].op));
			break;
		case S_ACC_UPD:
			fprintf(f, "ACC_UPD acc%d <- x%u\n", s->acc, s->u->id);
			break;
		case S_STORE:
			fprintf(f, "STORE buf%d[x%u] <- x%u", s->buf, s->idx->id, s->u->id);
			if (s->cond)
				fprintf(f, " if x%u", s->cond->id);
			fprintf(f, "\n");
			break;
		case S_RPACK:
			fprintf(f, "RPACK slot x%u: buf%d[x%u + %lld row + %lld k] row < %lld (tiles %lld x %lld), k < %lld\n",
				s->idx->id, ir->rpack.buf, s->u->id, (long long)ir->rpack.rstride,
				(long long)ir->rpack.kstride, (long long)ir->rpack.rows, (long long)ir->rpack.tiles,
				(long long)ir->rpack.rows_t, (long long)ir->rpack.kc);
			break;
		case S_PREFETCH:
			fprintf(f, "PREFETCH buf%d[x%u] tile if x%u\n", s->buf, s->idx->id, s->cond->id);
			break;
		case S_PACK:
			fprintf(f, "PACK buf%d[x%u", ir->pack.buf, s->u->id);
			for (int i = 0; i < ir->pack.nr; i++)
				fprintf(f, " + %lld i%d", (long long)ir->pack.rstride[i], i);
			fprintf(f, " + %lld j] j < %lld, i < ", (long long)ir->pack.cstride, (long long)ir->pack.cols);
			for (int i = 0; i < ir->pack.nr; i++)
				fprintf(f, "%s%lld", i ? " x " : "", (long long)ir->pack.rn[i]);
			fprintf(f, "\n");
			break;
		}
	}
}
