/* call_nng.c: the nng transport (ipc://, tcp://): one REQ socket with one dialer that redials
 * by itself; each call on its own REQ context, an aio state machine (send, receive, decode, id
 * check); the close cancels the calls in flight and bounds nng_close (nanomsg/nng#1543). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_impl.h"

#include <nng/protocol/reqrep0/req.h> /* needs nng.h first */

#define CLOSE_DRAIN_MS 500  /* the close's wait for the calls in flight to be answered */
#define CLOSE_CALLS_MS 1000 /* then for the cancelled ones' callbacks */
#define CLOSE_SOCKET_MS 2000 /* the close's wait for nng_close */

#define RECONNECT_MIN_MS 50   /* the first redial after a connection is lost */
#define RECONNECT_MAX_MS 1000 /* the back-off's cap while the daemon stays away */

/* nng's pipe callback (an nng thread): count the connections. */
static void pipe_event(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	tsd_client *c = arg;
	pthread_mutex_lock(&c->mu);
	if (ev == NNG_PIPE_EV_ADD_POST) {
		c->npipes++;
		c->connects++;
		c->pipe = p;
		pthread_cond_broadcast(&c->cv);
	} else if (ev == NNG_PIPE_EV_REM_POST && c->npipes > 0) {
		c->npipes--;
		pthread_cond_broadcast(&c->cv);
	}
	pthread_mutex_unlock(&c->mu);
}

/* Socket options: no resend (a request such as model.load must not run twice: with resending
 * off, nng fails a request whose connection closed with NNG_ECONNRESET instead of sending it
 * again on the next one), the reply cap, pipe events. Returns what failed, or NULL. */
static const char *setup_socket(tsd_client *c, int *rv)
{
	if ((*rv = nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE)))
		return "resend time";
	if ((*rv = nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, TSD_CLIENT_MAX_REPLY)))
		return "reply size limit";
	if ((*rv = nng_pipe_notify(c->sock, NNG_PIPE_EV_ADD_POST, pipe_event, c)) ||
	    (*rv = nng_pipe_notify(c->sock, NNG_PIPE_EV_REM_POST, pipe_event, c)))
		return "pipe notification";
	if ((*rv = nng_dialer_create(&c->dialer, c->sock, c->url)))
		return "dialer";
	if ((*rv = nng_dialer_set_ms(c->dialer, NNG_OPT_RECONNMINT, RECONNECT_MIN_MS)) ||
	    (*rv = nng_dialer_set_ms(c->dialer, NNG_OPT_RECONNMAXT, RECONNECT_MAX_MS)))
		return "reconnect times";
	return NULL;
}

/* The nng error rv of the send (sent false) or the receive as k's failure. */
static void transport_fail(tsd_call *k, bool sent, int rv)
{
	const char *url = k->c->url;
	if (rv == NNG_ECANCELED && k->c->closing)
		tsd_call_failf(k, TSD_CANCELLED, "the client was closed with the call in flight");
	else if (rv == NNG_ECANCELED)
		tsd_call_failf(k, TSD_CANCELLED, "cancelled by the caller");
	else if (rv == NNG_ETIMEDOUT && !sent && !tsd_client_connected(k->c, NULL))
		tsd_call_failf(k, TSD_TIMEOUT, "no connection to %s within %d ms (is tensord running?)", url,
		     k->c->timeout_ms);
	else if (rv == NNG_ETIMEDOUT && !sent)
		tsd_call_failf(k, TSD_TIMEOUT, "sending to %s: not sent within %d ms (the connection is busy "
		     "with earlier requests)", url, k->c->timeout_ms);
	else if (rv == NNG_ETIMEDOUT)
		tsd_call_failf(k, TSD_TIMEOUT, "waiting for %s: no answer within %d ms", url, k->c->timeout_ms);
	else if (rv == NNG_ECONNRESET)
		tsd_call_failf(k, TSD_SHUTTING_DOWN, "connection to %s lost before the reply (the daemon stopped, "
		     "restarted, or dropped a request over its max_message_bytes); the request was not "
		     "re-sent and may or may not have run", url);
	else if (rv == NNG_ENOMEM)
		tsd_call_failf(k, TSD_OUT_OF_MEMORY, "%s %s: out of memory", sent ? "waiting for" : "sending to",
		     url);
	else
		tsd_call_failf(k, TSD_INTERNAL, "%s %s: %s", sent ? "waiting for" : "sending to", url,
		     nng_strerror(rv));
}

/* The received message as k's reply: decoded, its id checked. */
static void received(tsd_call *k, nng_msg *msg)
{
	tsd_reply *r;
	proto_err perr;
	tsd_status s = tsd_client_decode_reply(msg, k->c->max_reply, &r, &perr);
	if (s != TSD_OK) {
		nng_msg_free(msg);
		tsd_call_failf(k, s, "undecodable reply from %s: %s", k->c->url, perr.msg);
		return;
	}
	/* a request too broken to have an id is answered with a null one */
	bool null_id = cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r->m.json, "id"));
	if (null_id ? r->m.status == TSD_OK : r->m.id_is_str != k->id_str || strcmp(r->m.id, k->id)) {
		tsd_call_failf(k, TSD_INTERNAL, "reply from %s has id %s%s%s, the request %s%s%s", k->c->url,
		     r->m.id_is_str ? "\"" : "", null_id ? "null" : r->m.id, r->m.id_is_str ? "\"" : "",
		     k->id_str ? "\"" : "", k->id, k->id_str ? "\"" : "");
		tsd_reply_free(r);
		return;
	}
	tsd_call_finish(k, r->m.status, r);
}

/* Milliseconds left before k's deadline (at least 1), or NNG_DURATION_INFINITE. */
static nng_duration time_left(const tsd_call *k)
{
	if (!k->deadline_ms)
		return NNG_DURATION_INFINITE;
	int64_t left = k->deadline_ms - tsd_now_ms();
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
	if (st == TSD_CALL_SEND && !rv && !cancelled) {
		k->state = TSD_CALL_RECV;
		k->sent = true;
	}
	pthread_mutex_unlock(&k->mu);
	if (st == TSD_CALL_SEND && !rv && !cancelled) {
		nng_aio_set_timeout(k->aio, time_left(k));
		nng_ctx_recv(k->ctx, k->aio);
		/* a cancel that came between the unlock and the receive's start */
		pthread_mutex_lock(&k->mu);
		cancelled = k->status == TSD_CANCELLED;
		pthread_mutex_unlock(&k->mu);
		if (cancelled)
			nng_aio_cancel(k->aio);
		return;
	}
	/* completing: out of the live list, counted until done (the close waits for both) */
	tsd_client *c = k->c;
	pthread_mutex_lock(&c->mu);
	tsd_call_unlink_locked(k);
	c->finishing++;
	pthread_mutex_unlock(&c->mu);
	if (st == TSD_CALL_SEND && rv) {
		nng_msg_free(nng_aio_get_msg(k->aio)); /* a failed send leaves it ours */
		nng_aio_set_msg(k->aio, NULL);
		transport_fail(k, false, rv);
	} else if (st == TSD_CALL_SEND) {
		transport_fail(k, true, NNG_ECANCELED);
	} else if (rv) {
		transport_fail(k, true, rv);
	} else {
		received(k, nng_aio_get_msg(k->aio));
	}
	/* k may be gone now; c is not (the close waits for finishing) */
	pthread_mutex_lock(&c->mu);
	if (!--c->finishing)
		pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

/* The parts of a call of nng's: its context and aio. */
static int nng_call_init(tsd_call *k, bool sync)
{
	if (nng_aio_alloc(&k->aio, sync ? NULL : call_step, sync ? NULL : k))
		return -1;
	if (nng_ctx_open(&k->ctx, k->c->sock)) {
		nng_aio_free(k->aio);
		return -1;
	}
	/* contexts copy the socket's (infinite) resend time; set it again to be sure: a request
	 * whose connection closed must fail, never be re-sent */
	nng_ctx_set_ms(k->ctx, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	tsd_client *c = k->c;
	pthread_mutex_lock(&c->mu);
	k->anext = c->all;
	if (c->all)
		c->all->aprev = k;
	c->all = k;
	k->in_all = true;
	pthread_mutex_unlock(&c->mu);
	return 0;
}

/* Take k out of c->all (c->mu held). */
static void all_unlink_locked(tsd_call *k)
{
	if (k->aprev)
		k->aprev->anext = k->anext;
	else
		k->c->all = k->anext;
	if (k->anext)
		k->anext->aprev = k->aprev;
	k->aprev = k->anext = NULL;
	k->in_all = false;
}

/* After the close (in_all false) c may be gone and k's context is closed already. */
static void nng_call_destroy(tsd_call *k)
{
	nng_aio_free(k->aio);
	if (!k->in_all)
		return;
	pthread_mutex_lock(&k->c->mu);
	all_unlink_locked(k);
	pthread_mutex_unlock(&k->c->mu);
	nng_ctx_close(k->ctx);
}

static void nng_call_start(tsd_call *k, nng_msg *msg)
{
	pthread_mutex_lock(&k->c->mu);
	tsd_call_link_locked(k);
	pthread_mutex_unlock(&k->c->mu);
	nng_aio_set_msg(k->aio, msg);
	nng_duration t = time_left(k);
	if (k->send_by_ms) { /* the send alone has until send_by_ms */
		int64_t left = k->send_by_ms - tsd_now_ms();
		left = left > 0 ? left : 1;
		if (t == NNG_DURATION_INFINITE || left < t)
			t = (nng_duration)left;
	}
	nng_aio_set_timeout(k->aio, t);
	nng_ctx_send(k->ctx, k->aio);
}

/* Each step on this thread, as nng's own blocking send and receive do: no hand-over to an nng
 * thread and back. */
static void nng_call_run(tsd_call *k)
{
	while (!atomic_load(&k->done)) {
		nng_aio_wait(k->aio);
		call_step(k);
	}
}

static void nng_call_cancel(tsd_call *k)
{
	nng_aio_cancel(k->aio);
}

/* Wait up to ms for a connection; true when there is one. */
static bool wait_connected(tsd_client *c, int ms)
{
	struct timespec until;
	tsd_deadline(ms, &until);
	pthread_mutex_lock(&c->mu);
	int rc = 0;
	while (!c->npipes && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&c->cv, &c->mu, &until);
	bool ok = c->npipes > 0;
	pthread_mutex_unlock(&c->mu);
	return ok;
}

static int nng_open(tsd_client *c, int connect_ms, char *err, size_t errlen)
{
	int rv = nng_req0_open(&c->sock);
	if (rv) {
		snprintf(err, errlen, "cannot open a request socket: %s", nng_strerror(rv));
		return -1;
	}
	c->sock_open = true;
	const char *what = setup_socket(c, &rv);
	if (what) {
		snprintf(err, errlen, "cannot set the %s: %s", what, nng_strerror(rv));
	} else if (connect_ms == 0) {
		/* blocking: a daemon that is not there fails here at once; after this first
		 * connection the dialer redials by itself whenever it is lost */
		if ((rv = nng_dialer_start(c->dialer, 0)))
			snprintf(err, errlen, "cannot connect to %s: %s%s", c->url, nng_strerror(rv),
				 rv == NNG_ECONNREFUSED || rv == NNG_ENOENT ? " (is tensord running?)" : "");
	} else if ((rv = nng_dialer_start(c->dialer, NNG_FLAG_NONBLOCK))) {
		snprintf(err, errlen, "cannot connect to %s: %s", c->url, nng_strerror(rv));
	} else if (connect_ms > 0 && !wait_connected(c, connect_ms)) {
		snprintf(err, errlen, "cannot connect to %s within %d ms (is tensord running?)", c->url,
			 connect_ms);
		rv = NNG_ETIMEDOUT;
	}
	return rv ? -1 : 0;
}

/* nng_close on a thread of its own, so that the close can give up on it. */
typedef struct closer {
	tsd_client *c;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	bool abandoned; /* the close gave up: the closer frees this itself */
} closer;

static void *closer_main(void *arg)
{
	closer *cl = arg;
	nng_close(cl->c->sock);
	pthread_mutex_lock(&cl->mu);
	cl->done = true;
	bool abandoned = cl->abandoned;
	pthread_cond_signal(&cl->cv);
	pthread_mutex_unlock(&cl->mu);
	if (abandoned) {
		pthread_cond_destroy(&cl->cv);
		pthread_mutex_destroy(&cl->mu);
		free(cl);
	}
	return NULL;
}

/* nng_close of c's socket within CLOSE_SOCKET_MS; false when it did not return by then (the
 * closer thread is left to finish, and c with it). */
static bool close_socket(tsd_client *c)
{
	closer *cl = calloc(1, sizeof(*cl));
	pthread_t t;
	if (!cl) { /* no memory for the bound: close here */
		nng_close(c->sock);
		return true;
	}
	cl->c = c;
	pthread_mutex_init(&cl->mu, NULL);
	pthread_cond_init(&cl->cv, NULL);
	if (pthread_create(&t, NULL, closer_main, cl)) {
		pthread_cond_destroy(&cl->cv);
		pthread_mutex_destroy(&cl->mu);
		free(cl);
		nng_close(c->sock);
		return true;
	}
	struct timespec until;
	tsd_deadline(CLOSE_SOCKET_MS, &until);
	pthread_mutex_lock(&cl->mu);
	int rc = 0;
	while (!cl->done && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&cl->cv, &cl->mu, &until);
	bool done = cl->done;
	cl->abandoned = !done;
	pthread_mutex_unlock(&cl->mu);
	if (!done) {
		pthread_detach(t);
		return false;
	}
	pthread_join(t, NULL);
	pthread_cond_destroy(&cl->cv);
	pthread_mutex_destroy(&cl->mu);
	free(cl);
	return true;
}

/* Wait for the calls in flight to be answered (at most CLOSE_DRAIN_MS), cancel the rest and
 * wait (at most CLOSE_CALLS_MS) for their callbacks, so that nng_close never runs with
 * requests in flight; close the dialer and every call's context; then the socket, bounded. */
static bool nng_close_client(tsd_client *c)
{
	if (!c->sock_open)
		return true;
	/* first let the daemon answer them: cancelling REQ contexts with requests in flight is what
	 * wedges nng 1.5.2's nng_close (clientunix's close loop: within 1 to 20 closes when
	 * cancelling at once, 600 of 600 clean when waiting first) */
	struct timespec until;
	tsd_deadline(CLOSE_DRAIN_MS, &until);
	pthread_mutex_lock(&c->mu);
	c->closing = true;
	int rc = 0;
	while ((c->live || c->finishing) && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&c->cv, &c->mu, &until);
	int n = 0;
	for (tsd_call *k = c->live; k; k = k->lnext)
		n++;
	tsd_call **ks = n ? calloc((size_t)n, sizeof(*ks)) : NULL;
	n = 0;
	for (tsd_call *k = ks ? c->live : NULL; k; k = k->lnext)
		ks[n++] = k;
	pthread_mutex_unlock(&c->mu);
	/* the rest cancelled; the calls stay allocated until freed by their owner, which the
	 * contract puts after the close (a callback's free only queues them for the reap) */
	for (int i = 0; i < n; i++)
		tsd_call_cancel(ks[i]);
	free(ks);
	rc = 0;
	tsd_deadline(CLOSE_CALLS_MS, &until);
	pthread_mutex_lock(&c->mu);
	while ((c->live || c->finishing) && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&c->cv, &c->mu, &until);
	bool drained = !c->live && !c->finishing;
	pthread_mutex_unlock(&c->mu);
	/* the dialer first (nng 1.5's nng_close of a REQ socket can hang on a dialer redialling),
	 * then every call's context (nng 1.5's nng_close can hang on contexts left open) */
	nng_dialer_close(c->dialer);
	for (;;) {
		pthread_mutex_lock(&c->mu);
		tsd_call *k = c->all;
		if (k)
			all_unlink_locked(k);
		pthread_mutex_unlock(&c->mu);
		if (!k)
			break;
		nng_aio_stop(k->aio); /* its callback done, nothing more started on it */
		nng_ctx_close(k->ctx);
	}
	if (!close_socket(c))
		return false;
	return drained; /* calls not drained still hold c from their aio callbacks */
}

static bool nng_connected(tsd_client *c, uint64_t *connects)
{
	pthread_mutex_lock(&c->mu);
	bool up = c->npipes > 0;
	if (connects)
		*connects = c->connects;
	pthread_mutex_unlock(&c->mu);
	return up;
}

const tsd_transport_ops tsd_nng_ops = {
	.name = "nng",
	.open = nng_open,
	.close = nng_close_client,
	.connected = nng_connected,
	.call_init = nng_call_init,
	.call_destroy = nng_call_destroy,
	.start = nng_call_start,
	.run = nng_call_run,
	.cancel = nng_call_cancel,
};
