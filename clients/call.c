/* call.c: one request in flight on its own nng REQ context: encode straight into an nng
 * message, send, receive, decode, check the id echo (an aio state machine); the synchronous
 * calls are a submit and a wait; a client closes here, its calls freed first. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_impl.h"

#include <nng/protocol/reqrep0/req.h> /* needs nng.h first */
#include <nng/supplemental/util/platform.h>

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

/* The id the reply must echo: header's own (checked as the decoder would), else a new one
 * added to a copy (*copy, the caller's to delete). */
static tsd_status request_id(tsd_client *c, const cJSON *header, cJSON **copy, tsd_call *k)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(header, "id");
	int64_t v;
	*copy = NULL;
	k->id_str = cJSON_IsString(j);
	if (k->id_str) {
		if (strlen(j->valuestring) > PROTO_MAX_ID)
			return tsd_client_fail(c, TSD_BAD_REQUEST, "id: more than %d bytes",
					       PROTO_MAX_ID);
		strcpy(k->id, j->valuestring);
		return TSD_OK;
	}
	if (j) {
		if (!proto_json_int(j, -((int64_t)1 << 53), (int64_t)1 << 53, &v))
			return tsd_client_fail(c, TSD_BAD_REQUEST,
					       "id: not a string or an integer up to 2^53");
	} else {
		v = atomic_fetch_add(&c->next_id, 1);
		if (!(*copy = cJSON_Duplicate(header, true)) ||
		    !cJSON_AddNumberToObject(*copy, "id", (double)v))
			return tsd_client_fail(c, TSD_OUT_OF_MEMORY, "out of memory");
	}
	snprintf(k->id, sizeof(k->id), "%lld", (long long)v);
	return TSD_OK;
}

/* Encode the request into a new nng message (*msg, the caller's). */
static tsd_status encode(tsd_client *c, const cJSON *h, const tsd_tensor *ts, int n, nng_msg **msg)
{
	proto_out outs[PROTO_MAX_TENSORS];
	if (n < 0 || n > PROTO_MAX_TENSORS || (n && !ts))
		return tsd_client_fail(c, TSD_BAD_REQUEST, "%d tensors: at most %d", n,
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
		return tsd_client_fail(c, s, "%s", perr.msg);
	}
	return TSD_OK;
}

/* Complete k (an nng thread or the submitting one): status, reply or message, then wake the
 * waiters and run the callback. */
static void finish(tsd_call *k, tsd_status s, tsd_reply *r)
{
	pthread_mutex_lock(&k->mu);
	k->status = s;
	k->reply = r;
	k->state = TSD_CALL_DONE;
	atomic_store(&k->done, true);
	if (k->cb) {
		k->in_cb = true;
		k->cb_thread = pthread_self();
	}
	pthread_cond_broadcast(&k->cv);
	pthread_mutex_unlock(&k->mu);
	if (!k->cb)
		return;
	k->cb(k, k->arg);
	pthread_mutex_lock(&k->mu);
	k->in_cb = false;
	bool dead = k->free_after_cb;
	pthread_cond_broadcast(&k->cv);
	pthread_mutex_unlock(&k->mu);
	if (dead) { /* freed inside its callback: the next submit or the close frees it */
		tsd_client *c = k->c;
		pthread_mutex_lock(&c->mu);
		k->next = c->dead;
		c->dead = k;
		c->dying--;
		pthread_cond_broadcast(&c->cv);
		pthread_mutex_unlock(&c->mu);
	}
}

/* Complete k with a failure that got no reply, the message in k->err. */
static void fail(tsd_call *k, tsd_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(tsd_call *k, tsd_status s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(k->err, sizeof(k->err), fmt, ap);
	va_end(ap);
	finish(k, s, NULL);
}

/* The nng error rv of the send (sent false) or the receive as k's failure. */
static void transport_fail(tsd_call *k, bool sent, int rv)
{
	const char *url = k->c->url;
	if (rv == NNG_ECANCELED)
		fail(k, TSD_CANCELLED, "cancelled by the caller");
	else if (rv == NNG_ETIMEDOUT && !sent && !tsd_client_connected(k->c, NULL))
		fail(k, TSD_TIMEOUT, "no connection to %s within %d ms (is tensord running?)", url,
		     k->c->timeout_ms);
	else if (rv == NNG_ETIMEDOUT && !sent)
		fail(k, TSD_TIMEOUT, "sending to %s: not sent within %d ms (the connection is busy "
		     "with earlier requests)", url, k->c->timeout_ms);
	else if (rv == NNG_ETIMEDOUT)
		fail(k, TSD_TIMEOUT, "waiting for %s: no answer within %d ms", url, k->c->timeout_ms);
	else if (rv == NNG_ECONNRESET)
		fail(k, TSD_SHUTTING_DOWN, "connection to %s lost before the reply (the daemon stopped, "
		     "restarted, or dropped a request over its max_message_bytes); the request was not "
		     "re-sent and may or may not have run", url);
	else if (rv == NNG_ENOMEM)
		fail(k, TSD_OUT_OF_MEMORY, "%s %s: out of memory", sent ? "waiting for" : "sending to",
		     url);
	else
		fail(k, TSD_INTERNAL, "%s %s: %s", sent ? "waiting for" : "sending to", url,
		     nng_strerror(rv));
}

/* The received message as k's reply: decoded, its id checked. */
static void received(tsd_call *k, nng_msg *msg)
{
	tsd_reply *r;
	proto_err perr;
	tsd_status s = tsd_client_decode_reply(msg, &r, &perr);
	if (s != TSD_OK) {
		fail(k, s, "undecodable reply from %s: %s", k->c->url, perr.msg);
		return;
	}
	/* a request too broken to have an id is answered with a null one */
	bool null_id = cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r->m.json, "id"));
	if (null_id ? r->m.status == TSD_OK : r->m.id_is_str != k->id_str || strcmp(r->m.id, k->id)) {
		fail(k, TSD_INTERNAL, "reply from %s has id %s%s%s, the request %s%s%s", k->c->url,
		     r->m.id_is_str ? "\"" : "", null_id ? "null" : r->m.id, r->m.id_is_str ? "\"" : "",
		     k->id_str ? "\"" : "", k->id, k->id_str ? "\"" : "");
		tsd_reply_free(r);
		return;
	}
	finish(k, r->m.status, r);
}

/* Milliseconds left before k's deadline (at least 1), or NNG_DURATION_INFINITE. */
static nng_duration time_left(const tsd_call *k)
{
	if (!k->deadline_ms)
		return NNG_DURATION_INFINITE;
	int64_t left = k->deadline_ms - (int64_t)nng_clock();
	return left > 0 ? (nng_duration)left : 1;
}

/* The aio's callback (an nng thread): the send finished, then the receive. */
static void call_step(void *arg)
{
	tsd_call *k = arg;
	int rv = nng_aio_result(k->aio);
	pthread_mutex_lock(&k->mu);
	tsd_call_state st = k->state;
	bool cancelled = k->status == TSD_CANCELLED;
	if (st == TSD_CALL_SEND && !rv && !cancelled)
		k->state = TSD_CALL_RECV;
	pthread_mutex_unlock(&k->mu);
	if (st == TSD_CALL_SEND) {
		if (rv) {
			nng_msg_free(nng_aio_get_msg(k->aio)); /* a failed send leaves it ours */
			nng_aio_set_msg(k->aio, NULL);
			transport_fail(k, false, rv);
		} else if (cancelled) {
			transport_fail(k, true, NNG_ECANCELED);
		} else {
			nng_aio_set_timeout(k->aio, time_left(k));
			nng_ctx_recv(k->ctx, k->aio);
			/* a cancel that came between the unlock and the receive's start */
			pthread_mutex_lock(&k->mu);
			cancelled = k->status == TSD_CANCELLED;
			pthread_mutex_unlock(&k->mu);
			if (cancelled)
				nng_aio_cancel(k->aio);
		}
		return;
	}
	if (rv)
		transport_fail(k, true, rv);
	else
		received(k, nng_aio_get_msg(k->aio));
}

/* The parts of a call, before anything is sent. sync: no aio callback, the caller steps it. */
static tsd_call *call_new(tsd_client *c, tsd_call_cb cb, void *arg, bool sync)
{
	tsd_call *k = calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	k->c = c;
	k->cb = cb;
	k->arg = arg;
	k->status = TSD_STATUS_COUNT;
	atomic_init(&k->done, false);
	if (nng_aio_alloc(&k->aio, sync ? NULL : call_step, sync ? NULL : k)) {
		free(k);
		return NULL;
	}
	if (nng_ctx_open(&k->ctx, c->sock)) {
		nng_aio_free(k->aio);
		free(k);
		return NULL;
	}
	/* contexts copy the socket's (infinite) resend time; set it again to be sure: a request
	 * whose connection closed must fail, never be re-sent */
	nng_ctx_set_ms(k->ctx, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	pthread_mutex_init(&k->mu, NULL);
	pthread_cond_init(&k->cv, NULL);
	return k;
}

/* Release k's resources (it is not in flight, no callback runs). */
static void call_destroy(tsd_call *k)
{
	nng_aio_free(k->aio);
	nng_ctx_close(k->ctx);
	tsd_reply_free(k->reply);
	pthread_cond_destroy(&k->cv);
	pthread_mutex_destroy(&k->mu);
	free(k);
}

void tsd_client_reap(tsd_client *c, bool all)
{
	pthread_mutex_lock(&c->mu);
	while (all && c->dying)
		pthread_cond_wait(&c->cv, &c->mu);
	tsd_call *k = c->dead;
	c->dead = NULL;
	pthread_mutex_unlock(&c->mu);
	while (k) {
		tsd_call *next = k->next;
		call_destroy(k);
		k = next;
	}
}

void tsd_client_close(tsd_client *c)
{
	if (!c)
		return;
	tsd_client_reap(c, true);
	tsd_client_free(c);
}

static tsd_status submit(tsd_client *c, const cJSON *header, const tsd_tensor *ts, int n,
			 tsd_call_cb cb, void *arg, bool sync, tsd_call **out)
{
	*out = NULL;
	tsd_client_clear_error(c);
	pthread_mutex_lock(&c->mu);
	bool reap = c->dead != NULL;
	pthread_mutex_unlock(&c->mu);
	if (reap)
		tsd_client_reap(c, false);
	if (!cJSON_IsObject(header))
		return tsd_client_fail(c, TSD_BAD_REQUEST, "the request header is not a JSON object");
	tsd_call *k = call_new(c, cb, arg, sync);
	if (!k)
		return tsd_client_fail(c, TSD_OUT_OF_MEMORY, "out of memory for a call");
	cJSON *copy;
	nng_msg *msg = NULL;
	tsd_status s = request_id(c, header, &copy, k);
	if (s == TSD_OK) /* tcp: the bearer token */
		s = tsd_client_token_add(c, copy ? copy : header, &copy);
	if (s == TSD_OK)
		s = encode(c, copy ? copy : header, ts, n, &msg);
	cJSON_Delete(copy);
	if (s != TSD_OK) {
		call_destroy(k);
		return s;
	}
	if (c->timeout_ms > 0)
		k->deadline_ms = (int64_t)nng_clock() + c->timeout_ms;
	k->state = TSD_CALL_SEND;
	nng_aio_set_msg(k->aio, msg);
	nng_aio_set_timeout(k->aio, time_left(k));
	nng_ctx_send(k->ctx, k->aio);
	*out = k;
	return TSD_OK;
}

tsd_status tsd_client_submit(tsd_client *c, const cJSON *header, const tsd_tensor *ts, int n,
			     tsd_call_cb cb, void *arg, tsd_call **out)
{
	return submit(c, header, ts, n, cb, arg, false, out);
}

tsd_status tsd_call_run(tsd_client *c, const cJSON *header, const tsd_tensor *ts, int n,
			tsd_call **out)
{
	tsd_status s = submit(c, header, ts, n, NULL, NULL, true, out);
	/* each step on this thread, as nng's own blocking send and receive do: no hand-over to an
	 * nng thread and back */
	while (s == TSD_OK && !atomic_load(&(*out)->done)) {
		nng_aio_wait((*out)->aio);
		call_step(*out);
	}
	return s;
}

bool tsd_call_done(const tsd_call *k)
{
	return atomic_load(&k->done);
}

bool tsd_call_wait(tsd_call *k, int timeout_ms)
{
	struct timespec until;
	if (timeout_ms >= 0)
		tsd_deadline(timeout_ms, &until);
	pthread_mutex_lock(&k->mu);
	int rc = 0;
	while (k->state != TSD_CALL_DONE && !rc)
		rc = timeout_ms >= 0 ? pthread_cond_timedwait(&k->cv, &k->mu, &until)
				     : pthread_cond_wait(&k->cv, &k->mu);
	bool done = k->state == TSD_CALL_DONE;
	pthread_mutex_unlock(&k->mu);
	return done;
}

tsd_status tsd_call_status(const tsd_call *k)
{
	return atomic_load(&k->done) ? k->status : TSD_STATUS_COUNT;
}

const char *tsd_call_error(const tsd_call *k)
{
	if (!atomic_load(&k->done) || k->status == TSD_OK)
		return NULL;
	return k->reply ? tsd_reply_error(k->reply) : k->err[0] ? k->err : tsd_status_message(k->status);
}

tsd_status tsd_call_take(tsd_call *k, tsd_reply **out)
{
	*out = NULL;
	if (!atomic_load(&k->done))
		return TSD_STATUS_COUNT;
	pthread_mutex_lock(&k->mu);
	*out = k->reply;
	k->reply = NULL;
	if (*out && !k->err[0]) /* the message stays readable after the take */
		snprintf(k->err, sizeof(k->err), "%s", k->status == TSD_OK ? "" : tsd_reply_error(*out));
	pthread_mutex_unlock(&k->mu);
	return k->status;
}

void tsd_call_cancel(tsd_call *k)
{
	pthread_mutex_lock(&k->mu);
	bool live = k->state != TSD_CALL_DONE;
	if (live)
		k->status = TSD_CANCELLED;
	pthread_mutex_unlock(&k->mu);
	if (live)
		nng_aio_cancel(k->aio);
}

void tsd_call_free(tsd_call *k)
{
	if (!k)
		return;
	pthread_mutex_lock(&k->mu);
	if (k->in_cb && pthread_equal(k->cb_thread, pthread_self())) {
		k->free_after_cb = true; /* finish() hands it to the client's dead list */
		pthread_mutex_unlock(&k->mu);
		pthread_mutex_lock(&k->c->mu);
		k->c->dying++; /* tsd_client_close waits for it to land there */
		pthread_mutex_unlock(&k->c->mu);
		return;
	}
	bool live = k->state != TSD_CALL_DONE;
	pthread_mutex_unlock(&k->mu);
	if (live)
		tsd_call_cancel(k);
	tsd_call_wait(k, -1);
	/* nng_aio_free waits for a callback still running on another thread */
	call_destroy(k);
}
