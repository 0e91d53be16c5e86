/* reply.c: a reply of the daemon: decoded from the received nng message, whose bytes the tensor
 * views point into, and its accessors. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_impl.h"

/* cJSON's parser writes a process-wide error position on every parse, so decodes on several
 * threads must not overlap (message.h). This mutex is the library's one synchronisation object
 * and its only static state: it serialises proto_decode across every client of the process. */
static pthread_mutex_t decode_lock = PTHREAD_MUTEX_INITIALIZER;

tsd_status tsd_client_decode_reply(nng_msg *msg, size_t max, tsd_reply **out, proto_err *err)
{
	*out = NULL;
	tsd_reply *r = calloc(1, sizeof(*r));
	if (!r)
		return proto_fail(err, TSD_OUT_OF_MEMORY, "no memory for the reply");
	pthread_mutex_lock(&decode_lock);
	tsd_status s = proto_decode(nng_msg_body(msg), nng_msg_len(msg), max, PROTO_REPLY, &r->m,
				    err);
	pthread_mutex_unlock(&decode_lock);
	if (s != TSD_OK) {
		free(r);
		return s;
	}
	r->msg = msg;
	*out = r;
	return TSD_OK;
}

cJSON *tsd_client_parse(const char *text)
{
	pthread_mutex_lock(&decode_lock);
	cJSON *j = cJSON_Parse(text);
	pthread_mutex_unlock(&decode_lock);
	return j;
}

bool tsd_client_peek_id(const void *buf, size_t len, char *id, bool *is_str)
{
	const unsigned char *b = buf;
	if (len < 8 || memcmp(b, "TSD1", 4))
		return false;
	size_t jl = (size_t)b[4] | (size_t)b[5] << 8 | (size_t)b[6] << 16 | (size_t)b[7] << 24;
	if (jl > len - 8 || jl > PROTO_HEADER_MAX_DEFAULT)
		return false;
	char *text = malloc(jl + 1);
	if (!text)
		return false;
	memcpy(text, b + 8, jl);
	text[jl] = '\0';
	cJSON *j = tsd_client_parse(text);
	free(text);
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "id");
	int64_t n;
	bool ok = true;
	*is_str = cJSON_IsString(v);
	if (*is_str && strlen(v->valuestring) <= PROTO_MAX_ID)
		strcpy(id, v->valuestring);
	else if (!*is_str && v && proto_json_int(v, -((int64_t)1 << 53), (int64_t)1 << 53, &n))
		snprintf(id, PROTO_MAX_ID + 1, "%lld", (long long)n);
	else
		ok = false;
	cJSON_Delete(j);
	return ok;
}

char *tsd_reply_text(const tsd_reply *r)
{
	return cJSON_PrintUnformatted(r->m.json);
}

void tsd_free(void *p)
{
	free(p);
}

void tsd_reply_free(tsd_reply *r)
{
	if (!r)
		return;
	proto_msg_free(&r->m);
	nng_msg_free(r->msg);
	free(r);
}

tsd_status tsd_reply_status(const tsd_reply *r)
{
	return r->m.status;
}

const char *tsd_reply_error(const tsd_reply *r)
{
	if (r->m.status == TSD_OK)
		return NULL;
	return r->m.error ? r->m.error : tsd_status_message(r->m.status);
}

const cJSON *tsd_reply_json(const tsd_reply *r)
{
	return r->m.json;
}

int tsd_reply_ntensors(const tsd_reply *r)
{
	return r->m.ntensors;
}

const tsd_tensor *tsd_reply_tensor(const tsd_reply *r, int i)
{
	return i >= 0 && i < r->m.ntensors ? &r->m.tensors[i] : NULL;
}

const tsd_tensor *tsd_reply_find(const tsd_reply *r, const char *name)
{
	return name ? proto_msg_tensor(&r->m, name) : NULL;
}
