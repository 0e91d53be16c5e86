/* io_limits.c: the loaders' allocation cap for a context (see io_limits.h): the fixed ceiling,
 * or less when the context's memory limit has less left (cached free blocks can be given back,
 * so only live bytes count against it). */
#include "io_limits.h"

#include "core/context.h"

uint64_t eng_io_max_bytes(const eng_ctx *ctx)
{
	uint64_t cap = ENG_IO_MAX_BYTES;
	if (ctx->mem_limit) {
		uint64_t left = ctx->mem_limit > ctx->mem_live ? ctx->mem_limit - ctx->mem_live : 0;
		if (left < cap)
			cap = left;
	}
	return cap;
}
