/* client.c: the client's connection: an nng REQ socket dialled to the daemon, and one call:
 * encode the request straight into an nng message, send, receive, decode, check the id. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_impl.h"

#include <nng/protocol/reqrep0/req.h> /* needs nng.h first */

struct tsd_client {
	nng_socket sock;
	int timeout_ms;
	int64_t next_id; /* the id of the next request that has none */
	char *url;
	char err[512];
};

/* The message into buf[cap] (either may be 0); returns s. */
static tsd_status say(char *buf, size_t cap, tsd_status s, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static tsd_status say(char *buf, size_t cap, tsd_status s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (buf && cap)
		vsnprintf(buf, cap, fmt, ap);
	va_end(ap);
	return s;
}

/* A failed call: the message into c->err (tsd_client_error); evaluates to the status s. */
#define CALL_FAIL(c, s, ...) say((c)->err, sizeof((c)->err), s, __VA_ARGS__)

tsd_client *tsd_client_open(const char *url, int timeout_ms, char *err, size_t errlen)
{
	if (!url || !url[0]) {
		say(err, errlen, TSD_INTERNAL, "no daemon address");
		return NULL;
	}
	tsd_client *c = calloc(1, sizeof(*c));
	if (!c || !(c->url = strdup(url))) {
		free(c);
		say(err, errlen, TSD_INTERNAL, "out of memory");
		return NULL;
	}
	c->timeout_ms = timeout_ms;
	c->next_id = 1;
	int rv = nng_req0_open(&c->sock);
	if (rv) {
		say(err, errlen, TSD_INTERNAL, "cannot open a request socket: %s",
		    nng_strerror(rv));
		free(c->url);
		free(c);
		return NULL;
	}
	nng_duration to = timeout_ms > 0 ? timeout_ms : NNG_DURATION_INFINITE;
	const char *what = NULL;
	if ((rv = nng_socket_set_ms(c->sock, NNG_OPT_SENDTIMEO, to)) ||
	    (rv = nng_socket_set_ms(c->sock, NNG_OPT_RECVTIMEO, to)))
		what = "timeouts";
	/* no resending: a request such as model.load must not run twice because it ran long */
	else if ((rv = nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE)))
		what = "resend time";
	else if ((rv = nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, TSD_CLIENT_MAX_REPLY)))
		what = "reply size limit";
	if (what)
		say(err, errlen, TSD_INTERNAL, "cannot set the %s: %s", what, nng_strerror(rv));
	else if ((rv = nng_dial(c->sock, url, NULL, 0)))
		say(err, errlen, TSD_INTERNAL, "cannot connect to %s: %s%s", url, nng_strerror(rv),
		    rv == NNG_ECONNREFUSED || rv == NNG_ENOENT ? " (is tensord running?)" : "");
	if (rv) {
		tsd_client_close(c);
		return NULL;
	}
	return c;
}

void tsd_client_close(tsd_client *c)
{
	if (!c)
		return;
	nng_close(c->sock);
	free(c->url);
	free(c);
}

const char *tsd_client_error(const tsd_client *c)
{
	return c->err;
}

const char *tsd_client_message(const tsd_client *c, const tsd_reply *r)
{
	return r ? tsd_reply_error(r) : tsd_client_error(c);
}

/* proto_alloc_fn: the encoded message goes straight into an nng_msg body; arg is nng_msg **. */
static void *msg_alloc(void *arg, size_t size)
{
	nng_msg **m = arg;
	if (nng_msg_alloc(m, size)) {
		*m = NULL;
		return NULL;
	}
	return nng_msg_body(*m);
}

/* The nng error of a send or receive as a status and message. */
static tsd_status transport_fail(tsd_client *c, const char *what, int rv)
{
	if (rv == NNG_ETIMEDOUT)
		return CALL_FAIL(c, TSD_TIMEOUT, "%s %s: no answer within %d ms", what, c->url,
				 c->timeout_ms);
	if (rv == NNG_ENOMEM)
		return CALL_FAIL(c, TSD_OUT_OF_MEMORY, "%s %s: out of memory", what, c->url);
	if (rv == NNG_EMSGSIZE)
		return CALL_FAIL(c, TSD_TOO_LARGE, "%s %s: message too large", what, c->url);
	return CALL_FAIL(c, TSD_INTERNAL, "%s %s: %s", what, c->url, nng_strerror(rv));
}

/* The id the reply must echo: header's own (checked as the decoder would), else a new one
 * added to a copy (*copy, the caller's to delete). */
static tsd_status request_id(tsd_client *c, const cJSON *header, cJSON **copy, bool *is_str,
			     char id[PROTO_MAX_ID + 1])
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(header, "id");
	int64_t v;
	*copy = NULL;
	*is_str = cJSON_IsString(j);
	if (*is_str) {
		if (strlen(j->valuestring) > PROTO_MAX_ID)
			return CALL_FAIL(c, TSD_BAD_REQUEST, "id: more than %d bytes",
					 PROTO_MAX_ID);
		strcpy(id, j->valuestring);
		return TSD_OK;
	}
	if (j) {
		if (!proto_json_int(j, -((int64_t)1 << 53), (int64_t)1 << 53, &v))
			return CALL_FAIL(c, TSD_BAD_REQUEST,
					 "id: not a string or an integer up to 2^53");
	} else {
		v = c->next_id++;
		if (!(*copy = cJSON_Duplicate(header, true)) ||
		    !cJSON_AddNumberToObject(*copy, "id", (double)v))
			return CALL_FAIL(c, TSD_OUT_OF_MEMORY, "out of memory");
	}
	snprintf(id, PROTO_MAX_ID + 1, "%lld", (long long)v);
	return TSD_OK;
}

/* Encode the request into a new nng message (*msg, the caller's). */
static tsd_status encode(tsd_client *c, const cJSON *h, const tsd_tensor *ts, int n, nng_msg **msg)
{
	proto_out outs[PROTO_MAX_TENSORS];
	if (n < 0 || n > PROTO_MAX_TENSORS || (n && !ts))
		return CALL_FAIL(c, TSD_BAD_REQUEST, "%d tensors: at most %d", n,
				 PROTO_MAX_TENSORS);
	for (int i = 0; i < n; i++)
		outs[i] = (proto_out){.name = ts[i].name,
				      .dtype = ts[i].dtype,
				      .ndim = ts[i].ndim,
				      .shape = ts[i].shape,
				      .data = ts[i].data};
	void *buf;
	size_t len;
	proto_err perr;
	*msg = NULL;
	tsd_status s = proto_encode(h, outs, n, 0, msg_alloc, msg, &buf, &len, &perr);
	if (s != TSD_OK) {
		nng_msg_free(*msg); /* never allocated when encoding fails, but free it if so */
		*msg = NULL;
		return CALL_FAIL(c, s, "%s", perr.msg);
	}
	return TSD_OK;
}

tsd_status tsd_client_call(tsd_client *c, const cJSON *header, const tsd_tensor *ts, int n,
			   tsd_reply **out)
{
	*out = NULL;
	c->err[0] = '\0';
	if (!cJSON_IsObject(header))
		return CALL_FAIL(c, TSD_BAD_REQUEST, "the request header is not a JSON object");
	cJSON *copy;
	bool id_str;
	char id[PROTO_MAX_ID + 1];
	tsd_status s = request_id(c, header, &copy, &id_str, id);
	nng_msg *msg = NULL;
	if (s == TSD_OK)
		s = encode(c, copy ? copy : header, ts, n, &msg);
	cJSON_Delete(copy);
	if (s != TSD_OK)
		return s;
	int rv = nng_sendmsg(c->sock, msg, 0);
	if (rv) {
		nng_msg_free(msg);
		return transport_fail(c, "sending to", rv);
	}
	if ((rv = nng_recvmsg(c->sock, &msg, 0)))
		return transport_fail(c, "waiting for", rv);
	tsd_reply *r;
	proto_err perr;
	if ((s = tsd_client_decode_reply(msg, &r, &perr)) != TSD_OK)
		return CALL_FAIL(c, s, "undecodable reply from %s: %s", c->url, perr.msg);
	/* a request too broken to have an id is answered with a null one */
	bool null_id = cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r->m.json, "id"));
	if (null_id ? r->m.status == TSD_OK : r->m.id_is_str != id_str || strcmp(r->m.id, id)) {
		CALL_FAIL(c, TSD_INTERNAL, "reply from %s has id %s%s%s, the request %s%s%s",
			  c->url, r->m.id_is_str ? "\"" : "", null_id ? "null" : r->m.id,
			  r->m.id_is_str ? "\"" : "", id_str ? "\"" : "", id, id_str ? "\"" : "");
		tsd_reply_free(r);
		return TSD_INTERNAL;
	}
	*out = r;
	return r->m.status;
}

/* tsd_client_call with h, a header the caller built (built false: out of memory), deleted after. */
static tsd_status call_built(tsd_client *c, cJSON *h, bool built, tsd_reply **out)
{
	*out = NULL;
	tsd_status s = h && built ? tsd_client_call(c, h, NULL, 0, out)
				  : CALL_FAIL(c, TSD_OUT_OF_MEMORY, "out of memory");
	cJSON_Delete(h);
	return s;
}

tsd_status tsd_client_call_text(tsd_client *c, const char *header_json, const tsd_tensor *ts,
				int n, tsd_reply **out)
{
	*out = NULL;
	c->err[0] = '\0';
	cJSON *h = header_json ? tsd_client_parse(header_json) : NULL;
	if (!cJSON_IsObject(h)) {
		cJSON_Delete(h);
		return CALL_FAIL(c, TSD_BAD_REQUEST, "the request header is not a JSON object");
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

bool tsd_client_default_url(const char *tensord_url, const char *xdg_runtime_dir, char *out,
			    size_t cap)
{
	int n;
	if (tensord_url && tensord_url[0])
		n = snprintf(out, cap, "%s", tensord_url);
	else if (xdg_runtime_dir && xdg_runtime_dir[0] == '/')
		n = snprintf(out, cap, "ipc://%s/tensord/" TSD_CLIENT_SOCKET, xdg_runtime_dir);
	else
		n = snprintf(out, cap, "ipc:///run/tensord/" TSD_CLIENT_SOCKET);
	return n >= 0 && (size_t)n < cap;
}
