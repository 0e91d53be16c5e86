/* reply.c: a reply as an nng message: the header (id, status, error, the verb's fields) and its
 * tensors encoded straight into the message body. Used by the loop and the executor. */
#include "util.h"

#include <stdio.h>

static void *msg_alloc(void *arg, size_t size)
{
	nng_msg **m = arg;
	if (nng_msg_alloc(m, size))
		return NULL;
	return nng_msg_body(*m);
}

nng_msg *dmn_reply_msg(const proto_msg *req, tsd_status st, const char *err, cJSON *extra,
		       const proto_out *ts, int n, size_t max_len)
{
	cJSON *h = proto_reply_header(req, st, err);
	if (h && extra)
		while (extra->child) {
			cJSON *it = cJSON_DetachItemViaPointer(extra, extra->child);
			cJSON_DeleteItemFromObjectCaseSensitive(h, it->string);
			cJSON_AddItemToObject(h, it->string, it);
		}
	cJSON_Delete(extra);
	if (!h)
		return NULL;
	nng_msg *m = NULL;
	void *body;
	size_t len;
	proto_err pe;
	tsd_status s = proto_encode(h, ts, n, max_len, msg_alloc, &m, &body, &len, &pe);
	cJSON_Delete(h);
	if (s == TSD_OK)
		return m;
	if (m)
		nng_msg_free(m);
	/* the reply itself failed (too large, a bad output): say so instead */
	h = proto_reply_header(req, s, pe.msg);
	m = NULL;
	if (h && proto_encode(h, NULL, 0, 0, msg_alloc, &m, &body, &len, &pe) != TSD_OK && m) {
		nng_msg_free(m);
		m = NULL;
	}
	cJSON_Delete(h);
	return m;
}
