/* call.c: what a call is on every transport: its id, the request encoded straight into an nng
 * message, completion (status, reply, callback), wait, take, cancel, free; the transport's part
 * (call_nng.c, call_unix.c) sends and receives. A client closes here, its calls freed first. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_impl.h"


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

/* Complete k (claimed; any thread): status, reply or message, then wake the waiters and run
 * the callback. */
void tsd_call_finish(tsd_call *k, tsd_status s, tsd_reply *r)
{
	pthread_mutex_lock(&k->mu);
	k->status = s;
	k->reply = r;
	k->state = TSD_CALL_DONE;
	atomic_store(&k->done, true);
	tsd_call_cb cb = k->cb; /* read under the lock: without a callback, a waiter may free k
				 * as soon as it is unlocked */
	void *arg = k->arg;
	if (cb) {
		k->in_cb = true;
		k->cb_thread = pthread_self();
	}
	pthread_cond_broadcast(&k->cv);
	pthread_mutex_unlock(&k->mu);
	if (!cb)
		return;
	cb(k, arg);
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

void tsd_call_failf(tsd_call *k, tsd_status s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(k->err, sizeof(k->err), fmt, ap);
	va_end(ap);
	tsd_call_finish(k, s, NULL);
}

void tsd_call_link_locked(tsd_call *k)
{
	tsd_client *c = k->c;
	k->lnext = NULL;
	k->lprev = c->live_tail;
	if (c->live_tail)
		c->live_tail->lnext = k;
	else
		c->live = k;
	c->live_tail = k;
	k->linked = true;
}

bool tsd_call_unlink_locked(tsd_call *k)
{
	tsd_client *c = k->c;
	if (!k->linked)
		return false;
	if (k->lprev)
		k->lprev->lnext = k->lnext;
	else
		c->live = k->lnext;
	if (k->lnext)
		k->lnext->lprev = k->lprev;
	else
		c->live_tail = k->lprev;
	k->lprev = k->lnext = NULL;
	k->linked = false;
	if (!c->live)
		pthread_cond_broadcast(&c->cv); /* the close's wait for calls in flight */
	return true;
}

uint64_t tsd_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int64_t tsd_now_ms(void)
{
	return (int64_t)(tsd_now_ns() / 1000000u);
}

/* The parts of a call, before anything is sent. sync: run on the caller's thread. */
static tsd_call *call_new(tsd_client *c, tsd_call_cb cb, void *arg, bool sync)
{
	tsd_call *k = calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	k->c = c;
	k->ops = c->ops;
	k->cb = cb;
	k->arg = arg;
	k->async = !sync;
	k->attempts = 1;
	k->status = TSD_STATUS_COUNT;
	atomic_init(&k->done, false);
	if (c->ops->call_init(k, sync)) {
		free(k);
		return NULL;
	}
	pthread_mutex_init(&k->mu, NULL);
	pthread_cond_init(&k->cv, NULL);
	return k;
}

/* Release k's resources (it is not in flight, no callback runs). */
static void call_destroy(tsd_call *k)
{
	k->ops->call_destroy(k);
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
	/* the transport completes the calls still in flight (cancelled) within a bound */
	bool closed = c->ops->close(c);
	tsd_client_reap(c, true);
	if (closed)
		tsd_client_free(c);
	/* else a thread of nng's still holds c (call_nng.c: nng_close did not return in time):
	 * c stays allocated rather than freed under it */
}

/* sfd: a descriptor (taken) to send with the request (unix:// only), or -1. */
static tsd_status submit(tsd_client *c, const cJSON *header, const tsd_tensor *ts, int n,
			 tsd_call_cb cb, void *arg, bool sync, int sfd, tsd_call **out)
{
	*out = NULL;
	tsd_client_clear_error(c);
	pthread_mutex_lock(&c->mu);
	bool reap = c->dead != NULL;
	pthread_mutex_unlock(&c->mu);
	if (reap)
		tsd_client_reap(c, false);
	if (!cJSON_IsObject(header)) {
		if (sfd >= 0)
			close(sfd);
		return tsd_client_fail(c, TSD_BAD_REQUEST, "the request header is not a JSON object");
	}
	tsd_call *k = call_new(c, cb, arg, sync);
	if (!k) {
		if (sfd >= 0)
			close(sfd);
		return tsd_client_fail(c, TSD_OUT_OF_MEMORY, "out of memory for a call");
	}
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
		if (sfd >= 0)
			close(sfd);
		return s;
	}
	if (c->ops->prepare && (s = c->ops->prepare(k, header)) != TSD_OK) {
		nng_msg_free(msg);
		call_destroy(k);
		if (sfd >= 0)
			close(sfd);
		return s;
	}
	if (sfd >= 0)
		k->sfd = sfd;
	if (c->timeout_ms > 0)
		k->deadline_ms = tsd_now_ms() + c->timeout_ms;
	k->state = TSD_CALL_SEND;
	*out = k;
	c->ops->start(k, msg);
	return TSD_OK;
}

tsd_call *tsd_call_prepare_msg(tsd_client *c, const char *id, bool id_str, int64_t deadline_ms, int64_t send_by_ms,
			       bool sync, tsd_call_cb cb, void *arg)
{
	tsd_call *k = call_new(c, sync ? NULL : cb, sync ? NULL : arg, sync);
	if (!k)
		return NULL;
	snprintf(k->id, sizeof(k->id), "%s", id);
	k->id_str = id_str;
	k->deadline_ms = deadline_ms;
	k->send_by_ms = send_by_ms;
	k->state = TSD_CALL_SEND;
	return k;
}

void tsd_call_launch(tsd_call *k, nng_msg *msg)
{
	k->c->ops->start(k, msg);
	if (!k->async) {
		k->c->ops->run(k);
		tsd_call_wait(k, -1);
	}
}

tsd_status tsd_client_submit(tsd_client *c, const cJSON *header, const tsd_tensor *ts, int n,
			     tsd_call_cb cb, void *arg, tsd_call **out)
{
	return submit(c, header, ts, n, cb, arg, false, -1, out);
}

tsd_status tsd_call_run(tsd_client *c, const cJSON *header, const tsd_tensor *ts, int n,
			tsd_call **out)
{
	tsd_status s = submit(c, header, ts, n, NULL, NULL, true, -1, out);
	if (s == TSD_OK) {
		c->ops->run(*out);
		tsd_call_wait(*out, -1); /* a completion another thread claimed may be finishing */
	}
	return s;
}

tsd_status tsd_call_run_fd(tsd_client *c, const cJSON *header, int fd, tsd_reply **out)
{
	*out = NULL;
	tsd_client_clear_error(c);
	if (c->ops != &tsd_unix_ops)
		return tsd_client_fail(c, TSD_BAD_REQUEST, "shared memory needs a unix:// connection (this client is on %s)",
				       c->url);
	int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (dup < 0)
		return tsd_client_fail(c, TSD_BAD_REQUEST, "descriptor %d: %s", fd, strerror(errno));
	tsd_call *k;
	tsd_status s = submit(c, header, NULL, 0, NULL, NULL, true, dup, &k);
	if (s != TSD_OK)
		return s;
	c->ops->run(k);
	tsd_call_wait(k, -1);
	s = tsd_call_take(k, out);
	if (!*out)
		tsd_client_fail(c, s, "%s", k->err);
	tsd_call_free(k);
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
		k->c->ops->cancel(k);
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
	/* a callback still running on another thread: nng_aio_free waits for it (nng); the
	 * reader calls the callback before anything else of k (unix), so wait for it here */
	pthread_mutex_lock(&k->mu);
	while (k->in_cb)
		pthread_cond_wait(&k->cv, &k->mu);
	pthread_mutex_unlock(&k->mu);
	call_destroy(k);
}
