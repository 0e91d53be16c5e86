/* choice.c: a kernel's optimisation choices as one record (choice.h): read off a lowered
 * kernel, checked against a kernel and applied to it in place of the planners (plan.c). */
#include "choice.h"

#include <stdio.h>
#include <string.h>

#include "plan.h"

eng_kernel_choice eng_choice_none(void)
{
	return (eng_kernel_choice){
		.tiledim = {-1, -1}, .tile = {1, 1}, .mblock = 1, .pack = -1, .group = -1, .rpack = -1};
}

eng_kernel_choice eng_choice_of(const eng_kernel_ir *ir)
{
	eng_kernel_choice c = eng_choice_none();
	for (int k = 0; k < 2; k++)
		if (ir->tiledim[k] >= 0 && ir->tile[k] > 1) {
			c.tiledim[k] = ir->tiledim[k];
			c.tile[k] = ir->tile[k];
		}
	c.kblock = ir->kblock;
	c.mblock = ir->mblock > 1 ? ir->mblock : 1;
	c.mrows = ir->mrows;
	for (int i = 0; i < ir->nbufs; i++)
		if (!ir->bufs[i].output) {
			c.pack = ir->pack.node && ir->bufs[i].node == ir->pack.node ? i : c.pack;
			c.rpack = ir->rpack.node && ir->bufs[i].node == ir->rpack.node ? i : c.rpack;
		}
	return c;
}

bool eng_choice_equal(const eng_kernel_choice *a, const eng_kernel_choice *b)
{
	return a->tiledim[0] == b->tiledim[0] && a->tiledim[1] == b->tiledim[1] &&
	       a->tile[0] == b->tile[0] && a->tile[1] == b->tile[1] && a->kblock == b->kblock &&
	       a->mblock == b->mblock && a->pack == b->pack && a->group == b->group && a->mrows == b->mrows &&
	       a->rpack == b->rpack;
}

static eng_status bad(char *err, size_t errlen, const char *what)
{
	snprintf(err, errlen, "forced kernel options do not fit: %s", what);
	return ENG_EINVAL;
}

eng_status eng_choice_apply(eng_kernel_ir *ir, const eng_node *const *roots, int nroots,
			    const eng_kernel_choice *c, const bk_target *t, char *opts, size_t len,
			    char *err, size_t errlen)
{
	if (len)
		opts[0] = 0;
	ir->tiledim[0] = ir->tiledim[1] = -1;
	ir->tile[0] = ir->tile[1] = 1;
	ir->kblock = ir->kfull = ir->mblock = ir->mrows = 0;
	ir->pack.node = ir->rpack.node = NULL;
	uint32_t D = 0;
	for (int p = 0; p < ir->nphases; p++)
		D |= ir->phases[p].dims;
	for (int k = 0; k < 2; k++) {
		int d = c->tiledim[k];
		int64_t t = c->tile[k];
		if (d < 0) {
			if (t != 1)
				return bad(err, errlen, "a tile size without a dim");
			continue;
		}
		if (d >= ir->ndim || !((D >> d) & 1))
			return bad(err, errlen, "a tile on a dim no reduction depends on");
		if (t < 2 || t > (k ? 16 : 64) || (ir->shape[d] % t && !(k && c->mrows > 0)))
			return bad(err, errlen, "a tile size that does not divide its dim");
	}
	if (c->tiledim[1] >= 0 && (c->tiledim[0] < 0 || c->tiledim[1] == c->tiledim[0]))
		return bad(err, errlen, "a narrow tile without a wide one on another dim");
	if (c->tile[0] * c->tile[1] * (ir->nphases ? ir->nphases : 1) > 512)
		return bad(err, errlen, "too many accumulators");
	if (c->group < -1 || c->group > 1024 || (c->group > 0 && (c->group & (c->group - 1))))
		return bad(err, errlen, "a work-group size that is not a power of two");
	if (c->mblock < 1 || c->kblock < 0)
		return bad(err, errlen, "a negative block");
	if (c->mblock > 1 && !c->kblock)
		return bad(err, errlen, "row blocks without reduction blocks");
	if (c->kblock) {
		if (c->tiledim[0] < 0 || !eng_plan_blockable(ir, roots, nroots, t))
			return bad(err, errlen, "blocking of a kernel that cannot be blocked");
		int64_t k = ir->loops[ir->phases[0].red[0]].n;
		if (c->kblock < 2 || k % c->kblock || c->kblock >= k)
			return bad(err, errlen,
				   "a reduction block that does not divide the reduction");
		if (c->mblock > 1 && !c->mrows &&
		    (c->tiledim[1] < 0 || (ir->shape[c->tiledim[1]] / c->tile[1]) % c->mblock))
			return bad(err, errlen, "a row block that does not divide the rows");
		ir->kblock = c->kblock;
		ir->kfull = k;
		ir->mblock = c->mblock > 1 ? c->mblock : 0;
	}
	if (c->rpack < -1 || c->rpack >= ir->nbufs || c->mrows < 0 || (c->mrows && c->rpack < 0))
		return bad(err, errlen, "a packed row operand that is not one of the kernel's buffers");
	if (c->rpack >= 0) {
		/* rows of a block: mrows, covered by its tiles with less than one to spare */
		int64_t rows = c->mrows ? c->mrows : c->mblock * c->tile[1];
		if (!c->kblock || c->mblock < 2 || c->tiledim[1] < 0 || rows > c->mblock * c->tile[1] ||
		    rows <= (c->mblock - 1) * c->tile[1])
			return bad(err, errlen, "packed rows without blocks of rows");
		ir->tiledim[0] = c->tiledim[0], ir->tiledim[1] = c->tiledim[1];
		const eng_node *rp = eng_plan_row_pack_operand(ir, t, rows);
		ir->tiledim[0] = ir->tiledim[1] = -1;
		if (!rp || rp != ir->bufs[c->rpack].node)
			return bad(err, errlen, "packed rows of an operand or in blocks that cannot have them");
		ir->mrows = c->mrows;
		ir->rpack.node = rp;
	}
	if (c->pack < -1 || c->pack >= ir->nbufs)
		return bad(err, errlen, "a packed operand that is not one of the kernel's buffers");
	if (c->pack >= 0) {
		const eng_kernel_buf *b = &ir->bufs[c->pack];
		if (c->tiledim[0] < 0 || b->output || b->dtype != ENG_F32 ||
		    !eng_plan_packable(ir, roots, nroots, t))
			return bad(err, errlen,
				   "packing of a kernel or buffer that cannot be packed");
		const eng_phase *ph = &ir->phases[0];
		int64_t rows = c->kblock ? c->kblock : ir->loops[ph->red[0]].n;
		for (int k = 1; k < ph->nred; k++)
			rows *= ir->loops[ph->red[k]].n;
		if (rows * c->tile[0] * (int64_t)eng_dtype_size(b->dtype) > eng_plan_panel_max(t))
			return bad(err, errlen, "a packed panel over the stack's budget");
		ir->pack.node = b->node;
	}
	for (int k = 0; k < 2; k++) {
		ir->tiledim[k] = c->tiledim[k];
		ir->tile[k] = c->tile[k];
	}
	char text[160];
	eng_choice_format(c, text, sizeof(text));
	snprintf(opts, len, "SEARCHED %s", text);
	return ENG_OK;
}

void eng_choice_format(const eng_kernel_choice *c, char *out, size_t len)
{
	size_t l = 0;
	if (len)
		out[0] = 0;
#define ADD(...) (l += l < len ? (size_t)snprintf(out + l, len - l, __VA_ARGS__) : 0)
	if (c->tiledim[0] >= 0)
		ADD("wide d%dx%lld ", c->tiledim[0], (long long)c->tile[0]);
	if (c->tiledim[1] >= 0)
		ADD("narrow d%dx%lld ", c->tiledim[1], (long long)c->tile[1]);
	if (c->kblock)
		ADD("kblock %lld mblock %lld ", (long long)c->kblock, (long long)c->mblock);
	if (c->pack >= 0)
		ADD("pack buf %d ", c->pack);
	if (c->rpack >= 0)
		ADD("rpack buf %d mrows %lld ", c->rpack, (long long)c->mrows);
	if (c->group >= 0)
		ADD("group %d ", c->group);
	if (!l)
		ADD("none ");
#undef ADD
	if (l && l <= len)
		out[l - 1] = 0;
}
