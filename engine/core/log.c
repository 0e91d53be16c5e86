/* log.c: the engine's output (warnings, DEBUG lines) through the context's log callback;
 * by default to stderr, one message per line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"

void eng_set_log(eng_ctx *ctx, eng_log_fn fn, void *arg)
{
	ctx->log_fn = fn;
	ctx->log_arg = arg;
}

void eng_logmsg(eng_ctx *ctx, int level, const char *fmt, ...)
{
	if (level > 0 && ctx->debug < level)
		return;
	char local[512], *msg = local;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(local, sizeof(local), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(local)) { /* kernel sources at DEBUG=4 are long */
		msg = malloc((size_t)n + 1);
		if (!msg)
			return;
		va_start(ap, fmt);
		vsnprintf(msg, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	if (n > 0 && msg[n - 1] == '\n')
		msg[n - 1] = 0;
	if (ctx->log_fn)
		ctx->log_fn(ctx->log_arg, level, msg);
	else
		fprintf(stderr, "%s\n", msg);
	if (msg != local)
		free(msg);
}
