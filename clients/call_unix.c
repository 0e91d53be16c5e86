/* call_unix.c: the unix:// transport's calls: a frame (u32 length + one TSD1 message) each way
 * on one AF_UNIX stream socket, many calls in flight matched by id. A lone synchronous caller
 * writes its frame and reads the reply on its own thread (the fast path: no other thread
 * woken); with several, one holds the reader role at a time (leader/follower, unix_read.c); async
 * calls get a background reader, started by the first submit. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "unix_impl.h"

void ux_wake_locked(tsd_client *c)
{
	if (c->ux->waiters)
		pthread_cond_broadcast(&c->ux->cv);
}

bool ux_claim_locked(tsd_call *k, tsd_status s, const char *fmt, ...)
{
	tsd_unix *ux = k->c->ux;
	int state = k->ustate;
	if (!tsd_call_unlink_locked(k))
		return false;
	if (k->async)
		ux->nasync--;
	if (state == UX_QUEUED)
		ux->nqueued--;
	k->ustatus = s;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(k->err, sizeof(k->err), fmt, ap);
	va_end(ap);
	ux_wake_locked(k->c);
	return true;
}

void ux_finish_list(tsd_call *list)
{
	while (list) {
		tsd_call *next = list->next;
		tsd_call_finish(list, list->ustatus, NULL);
		list = next;
	}
}

int64_t ux_expire_locked(tsd_client *c, int64_t now, tsd_call **list)
{
	int64_t next = 0;
	for (tsd_call *k = c->live, *lnext; k; k = lnext) {
		lnext = k->lnext;
		int64_t due = k->deadline_ms;
		bool send_by = k->ustate == UX_QUEUED && k->send_by_ms && (!due || k->send_by_ms < due);
		if (send_by)
			due = k->send_by_ms;
		if (!due)
			continue;
		if (due > now) {
			if (!next || due < next)
				next = due;
			continue;
		}
		bool claimed;
		if (send_by)
			claimed = ux_claim_locked(k, TSD_TIMEOUT, "%s to %s in the time this attempt had",
						  c->ux->conn ? "not sent" : "no connection", c->url);
		else if (k->ustate == UX_SENT)
			claimed = ux_claim_locked(k, TSD_TIMEOUT, "waiting for %s: no answer within %d ms",
						  c->url, c->timeout_ms);
		else if (c->ux->conn)
			claimed = ux_claim_locked(k, TSD_TIMEOUT, "sending to %s: not sent within %d ms "
						  "(the connection is busy with earlier requests)",
						  c->url, c->timeout_ms);
		else
			claimed = ux_claim_locked(k, TSD_TIMEOUT, "no connection to %s within %d ms (is "
						  "tensord running?)", c->url, c->timeout_ms);
		if (claimed) {
			k->next = *list;
			*list = k;
		}
	}
	return next;
}

static int ux_call_init(tsd_call *k, bool sync)
{
	(void)sync;
	k->sfd = -1;
	return 0;
}

static void ux_call_destroy(tsd_call *k)
{
	nng_msg_free(k->req);
	if (k->sfd >= 0)
		close(k->sfd);
}

/* k in the live list, queued for the writer. */
static void enqueue(tsd_call *k, nng_msg *msg)
{
	tsd_client *c = k->c;
	tsd_unix *ux = c->ux;
	k->req = msg;
	k->ustate = UX_QUEUED;
	pthread_mutex_lock(&c->mu);
	k->serial = ++ux->serial;
	tsd_call_link_locked(k);
	ux->nqueued++;
	if (k->async)
		ux->nasync++;
	pthread_mutex_unlock(&c->mu);
}

static void ux_call_start(tsd_call *k, nng_msg *msg)
{
	tsd_client *c = k->c;
	tsd_unix *ux = c->ux;
	enqueue(k, msg);
	if (!k->async)
		return; /* ux_call_run does the rest on the caller's thread */
	pthread_mutex_lock(&c->mu);
	bool start = !ux->bg_started && !atomic_load(&c->closing);
	ux->bg_started = ux->bg_started || start;
	pthread_mutex_unlock(&c->mu);
	if (start && pthread_create(&ux->bg, NULL, ux_bg_main, c)) {
		pthread_mutex_lock(&c->mu);
		ux->bg_started = false;
		bool mine = ux_claim_locked(k, TSD_OUT_OF_MEMORY, "cannot start the client's reader "
					    "thread");
		pthread_mutex_unlock(&c->mu);
		if (mine) {
			k->next = NULL;
			ux_finish_list(k);
		}
		return;
	}
	ux_dial(c);
	ux_flush(c);
	pthread_mutex_lock(&c->mu);
	ux_wake_locked(c); /* the background reader: a call to read for */
	pthread_mutex_unlock(&c->mu);
}

/* The synchronous call on the caller's thread: connect if needed, write, then read the replies
 * until its own is in, or wait while another thread holds the reader role. */
static void ux_call_run(tsd_call *k)
{
	tsd_client *c = k->c;
	tsd_unix *ux = c->ux;
	pthread_mutex_lock(&c->mu);
	while (k->linked) {
		tsd_call *expired = NULL;
		int64_t now = tsd_now_ms();
		int64_t due = k->deadline_ms; /* an unsent call's send_by_ms comes first */
		if (k->ustate == UX_QUEUED && k->send_by_ms && (!due || k->send_by_ms < due))
			due = k->send_by_ms;
		if (due && now >= due) {
			ux_expire_locked(c, now, &expired);
			pthread_mutex_unlock(&c->mu);
			ux_finish_list(expired);
			pthread_mutex_lock(&c->mu);
			continue;
		}
		int64_t wake = due;
		if (k->ustate == UX_QUEUED && ux->conn) {
			pthread_mutex_unlock(&c->mu);
			ux_flush(c);
			pthread_mutex_lock(&c->mu);
			continue;
		}
		if (k->ustate == UX_QUEUED && !ux->dialing && now >= ux->next_dial_ms) {
			pthread_mutex_unlock(&c->mu);
			ux_dial(c);
			pthread_mutex_lock(&c->mu);
			continue;
		}
		if (k->ustate == UX_QUEUED && !ux->conn && (!wake || ux->next_dial_ms < wake))
			wake = ux->next_dial_ms;
		if (k->ustate == UX_SENT && ux->conn && !ux->reading) {
			ux->reading = true;
			pthread_mutex_unlock(&c->mu);
			ux_read_until(c, k);
			pthread_mutex_lock(&c->mu);
			ux->reading = false; /* handed on: whoever waits takes it */
			ux_wake_locked(c);
			continue;
		}
		ux->waiters++;
		if (wake) {
			struct timespec until;
			tsd_deadline((int)(wake > now ? wake - now : 1), &until);
			pthread_cond_timedwait(&ux->cv, &c->mu, &until);
		} else {
			pthread_cond_wait(&ux->cv, &c->mu);
		}
		ux->waiters--;
	}
	pthread_mutex_unlock(&c->mu);
}

static void ux_call_cancel(tsd_call *k)
{
	tsd_client *c = k->c;
	pthread_mutex_lock(&c->mu);
	bool mine = ux_claim_locked(k, TSD_CANCELLED, "cancelled by the caller");
	pthread_mutex_unlock(&c->mu);
	if (mine) {
		k->next = NULL;
		ux_finish_list(k); /* its reply, if one comes, matches nothing and is dropped */
	}
}

static int ux_open(tsd_client *c, int connect_ms, char *err, size_t errlen)
{
	const char *path = c->url + strlen("unix://");
	if (path[0] != '/' || strlen(path) >= sizeof(((tsd_unix *)0)->path)) {
		snprintf(err, errlen, "%s: a unix:// address needs an absolute path of at most %zu "
			 "bytes", c->url, sizeof(((tsd_unix *)0)->path) - 1);
		return -1;
	}
	tsd_unix *ux = calloc(1, sizeof(*ux));
	if (!ux) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	strcpy(ux->path, path);
	pthread_mutex_init(&ux->send_mu, NULL);
	pthread_cond_init(&ux->cv, NULL);
	c->ux = ux;
	if (connect_ms < 0)
		return 0; /* the first calls connect */
	int64_t until = tsd_now_ms() + connect_ms;
	for (;;) {
		ux_dial(c);
		pthread_mutex_lock(&c->mu);
		bool up = ux->conn != NULL;
		int64_t next = ux->next_dial_ms;
		pthread_mutex_unlock(&c->mu);
		if (up)
			return 0;
		int64_t now = tsd_now_ms();
		if (!connect_ms || now >= until) {
			int e = errno;
			if (connect_ms)
				snprintf(err, errlen, "cannot connect to %s within %d ms (is tensord "
					 "running?)", c->url, connect_ms);
			else
				snprintf(err, errlen, "cannot connect to %s: %s%s", c->url, strerror(e),
					 e == ENOENT || e == ECONNREFUSED ? " (is tensord running?)" : "");
			return -1;
		}
		struct timespec ts = {0, (long)((next > now ? next - now : 1) * 1000000)};
		nanosleep(&ts, NULL);
	}
}

/* Shut the connection down, fail every call left (cancelled), join the background reader. */
static bool ux_close(tsd_client *c)
{
	tsd_unix *ux = c->ux;
	if (!ux)
		return true;
	atomic_store(&c->closing, true);
	pthread_mutex_lock(&c->mu);
	tsd_uconn *conn = ux_conn_ref_locked(c);
	pthread_mutex_unlock(&c->mu);
	if (conn) {
		ux_drop(c, conn, TSD_CANCELLED, "the client was closed with the call in flight");
		ux_conn_unref(c, conn);
	}
	tsd_call *list = NULL;
	pthread_mutex_lock(&c->mu);
	for (tsd_call *k = c->live, *next; k; k = next) {
		next = k->lnext;
		if (ux_claim_locked(k, TSD_CANCELLED, "the client was closed with the call in flight")) {
			k->next = list;
			list = k;
		}
	}
	bool join = ux->bg_started;
	ux->bg_started = false;
	pthread_cond_broadcast(&ux->cv);
	pthread_mutex_unlock(&c->mu);
	ux_finish_list(list);
	if (join)
		pthread_join(ux->bg, NULL);
	pthread_mutex_lock(&c->mu);
	if (ux->conn) /* a dial that raced the close */
		ux_conn_unref_locked(ux->conn);
	ux->conn = NULL;
	pthread_mutex_unlock(&c->mu);
	pthread_cond_destroy(&ux->cv);
	pthread_mutex_destroy(&ux->send_mu);
	free(ux);
	c->ux = NULL;
	return true;
}

static bool ux_connected(tsd_client *c, uint64_t *connects)
{
	pthread_mutex_lock(&c->mu);
	bool up = c->ux->conn != NULL;
	if (connects)
		*connects = c->ux->gen;
	pthread_mutex_unlock(&c->mu);
	return up;
}

const tsd_transport_ops tsd_unix_ops = {
	.name = "unix",
	.open = ux_open,
	.close = ux_close,
	.connected = ux_connected,
	.call_init = ux_call_init,
	.call_destroy = ux_call_destroy,
	.start = ux_call_start,
	.run = ux_call_run,
	.cancel = ux_call_cancel,
};

void tsd_unix_poke(tsd_client *c)
{
	if (c->ops == &tsd_unix_ops)
		ux_dial(c); /* does nothing while connected, dialing, or before its next dial is due */
}
