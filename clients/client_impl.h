/* client_impl.h: what the client library's files share: the reply object and its decoding
 * (reply.c), used by the connection (client.c). Not installed. */
#ifndef TSD_CLIENT_IMPL_H
#define TSD_CLIENT_IMPL_H

#include <nng/nng.h>

#include <tensord/client.h>

#include "message.h"

struct tsd_reply {
	nng_msg *msg; /* owned: the received bytes the views point into */
	proto_msg m;  /* the decoded header, owned; its tensors are the reply's */
};

/* Decode msg as a reply (taking it in every case: kept by the reply, or freed). Returns the
 * reply in *out, or NULL with err filled (TSD_BAD_REQUEST, TSD_TOO_LARGE, TSD_OUT_OF_MEMORY). */
tsd_status tsd_client_decode_reply(nng_msg *msg, tsd_reply **out, proto_err *err);
/* cJSON_Parse under the lock that serialises the library's parsing (cJSON's error position is
 * process-wide); NULL when text is not JSON. */
cJSON *tsd_client_parse(const char *text);

#endif
