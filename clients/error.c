/* error.c: the message of a call that got no reply, kept per thread (like errno) so that
 * threads sharing a client each read their own (tsd_client_error). */
#include <stdarg.h>
#include <stdio.h>

#include "client_impl.h"

/* The calling thread's last failure: which client it was on, and the message. Thread-local:
 * no thread ever sees another's. */
static _Thread_local struct {
	const tsd_client *c;
	char msg[512];
} last;

tsd_status tsd_client_fail(const tsd_client *c, tsd_status s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last.msg, sizeof(last.msg), fmt, ap);
	va_end(ap);
	last.c = c;
	return s;
}

void tsd_client_clear_error(const tsd_client *c)
{
	(void)c;
	last.c = NULL;
	last.msg[0] = '\0';
}

const char *tsd_client_error(const tsd_client *c)
{
	return c && last.c == c ? last.msg : "";
}

const char *tsd_client_message(const tsd_client *c, const tsd_reply *r)
{
	return r ? tsd_reply_error(r) : tsd_client_error(c);
}
