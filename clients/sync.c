/* sync.c: the synchronous calls: a call run to completion on the calling thread, the failure's
 * message kept in the thread's error (tsd_client_error). */
#include <stdlib.h>

#include "client_impl.h"

tsd_status tsd_client_call(tsd_client *c, const cJSON *header, const tsd_tensor *ts, int n,
			   tsd_reply **out)
{
	*out = NULL;
	tsd_call *k;
	tsd_status s = tsd_call_run(c, header, ts, n, &k);
	if (s != TSD_OK)
		return s; /* the message is set */
	s = tsd_call_take(k, out);
	if (!*out)
		tsd_client_fail(c, s, "%s", k->err);
	tsd_call_free(k);
	return s;
}

/* tsd_client_call with h, a header the caller built (built false: out of memory), deleted after. */
static tsd_status call_built(tsd_client *c, cJSON *h, bool built, tsd_reply **out)
{
	*out = NULL;
	tsd_status s = h && built ? tsd_client_call(c, h, NULL, 0, out)
				  : tsd_client_fail(c, TSD_OUT_OF_MEMORY, "out of memory");
	cJSON_Delete(h);
	return s;
}

tsd_status tsd_client_call_text(tsd_client *c, const char *header_json, const tsd_tensor *ts,
				int n, tsd_reply **out)
{
	*out = NULL;
	cJSON *h = header_json ? tsd_client_parse(header_json) : NULL;
	if (!cJSON_IsObject(h)) {
		cJSON_Delete(h);
		return tsd_client_fail(c, TSD_BAD_REQUEST, "the request header is not a JSON object");
	}
	tsd_status s = tsd_client_call(c, h, ts, n, out);
	cJSON_Delete(h);
	return s;
}

tsd_status tsd_client_call_verb(tsd_client *c, const char *verb, tsd_reply **out)
{
	cJSON *h = cJSON_CreateObject();
	return call_built(c, h, h && cJSON_AddStringToObject(h, "verb", verb ? verb : ""), out);
}

tsd_status tsd_client_hello(tsd_client *c, tsd_reply **out)
{
	cJSON *h = cJSON_CreateObject();
	bool built = h && cJSON_AddStringToObject(h, "verb", "hello") &&
		     cJSON_AddNumberToObject(h, "version", TSD_PROTOCOL_VERSION) &&
		     cJSON_AddStringToObject(h, "client", "tensord-c");
	return call_built(c, h, built, out);
}
