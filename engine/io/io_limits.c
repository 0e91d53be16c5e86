/* io_limits.c: the loaders' allocation cap for a context (see io_limits.h); the hook where the
 * context's memory limit connects. */
#include "io_limits.h"

uint64_t eng_io_max_bytes(const eng_ctx *ctx)
{
	(void)ctx; /* later: min(ENG_IO_MAX_BYTES, what ctx's memory limit has left) */
	return ENG_IO_MAX_BYTES;
}
