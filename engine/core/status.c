/* status.c: status names and the context's first-error record, which every layer of the engine
 * reports through (eng_set_error) and the API reads back (eng_error, eng_errmsg). */
#include <stdarg.h>
#include <stdio.h>

#include "context.h"

static const char *const err_names[ENG_STATUS_COUNT] = {
#define ENG_ERR(name, msg) [ENG_##name] = msg,
#include <tensord/errors.def>
#undef ENG_ERR
};

const char *eng_strerror(eng_status s)
{
	return (unsigned)s < ENG_STATUS_COUNT ? err_names[s] : "unknown error";
}

eng_status eng_set_error(eng_ctx *ctx, eng_status code, const char *fmt, ...)
{
	if (ctx->err != ENG_OK)
		return code; /* keep the first error: it names the root cause */
	ctx->err = code;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ctx->errmsg, sizeof(ctx->errmsg), fmt, ap);
	va_end(ap);
	eng_logmsg(ctx, 1, "tensord: error: %s: %s", eng_strerror(code), ctx->errmsg);
	return code;
}

eng_status eng_error(const eng_ctx *ctx) { return ctx->err; }
const char *eng_errmsg(const eng_ctx *ctx) { return ctx->err ? ctx->errmsg : ""; }
void eng_clear_error(eng_ctx *ctx)
{
	ctx->err = ENG_OK;
	ctx->errmsg[0] = 0;
}

