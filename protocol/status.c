/* status.c: the wire names of tsd_status (from tsd_errors.def); plus proto_fail, the one way
 * protocol code reports an error with a message. (Engine statuses map in graph_build.c.) */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "proto.h"

static const char *const names[TSD_STATUS_COUNT] = {
#define TSD_ERR(e, name, msg) [TSD_##e] = #name,
#include <tensord/tsd_errors.def>
#undef TSD_ERR
};

static const char *const messages[TSD_STATUS_COUNT] = {
#define TSD_ERR(e, name, msg) [TSD_##e] = msg,
#include <tensord/tsd_errors.def>
#undef TSD_ERR
};

const char *tsd_status_name(tsd_status s)
{
	return (unsigned)s < TSD_STATUS_COUNT ? names[s] : names[TSD_INTERNAL];
}

const char *tsd_status_message(tsd_status s)
{
	return (unsigned)s < TSD_STATUS_COUNT ? messages[s] : messages[TSD_INTERNAL];
}

bool tsd_status_from_name(const char *name, tsd_status *out)
{
	if (!name)
		return false;
	for (int i = 0; i < TSD_STATUS_COUNT; i++)
		if (!strcmp(names[i], name)) {
			*out = (tsd_status)i;
			return true;
		}
	return false;
}

tsd_status proto_fail(proto_err *err, tsd_status s, const char *fmt, ...)
{
	if (err) {
		err->status = s;
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return s;
}
