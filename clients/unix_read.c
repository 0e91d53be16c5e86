/* unix_read.c: the unix:// transport's reading side: the reader role (one thread at a time
 * reads frames and completes the calls they answer: a synchronous caller until its own call is
 * done, or the background reader while async calls are in flight), frame checks, matching
 * replies to calls by id, and the background reader thread. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "unix_impl.h"

#define BIG_HEAD 65536 /* bytes of an oversized reply read to find its id */
#define BG_POLL_MS 50  /* the background reader looks up this often while it holds the role */

typedef enum { RF_NONE, RF_FRAME, RF_BIG, RF_ERR } rf_result;

/* Read on conn until a frame is in (RF_FRAME: *out, the caller's; RF_BIG: the head of one over
 * max in *out, its length in *len), wait_ms passed (RF_NONE; < 0: no bound) or the connection
 * failed (RF_ERR, why filled). Partial frames stay in conn for the next reader. */
static rf_result read_frame(tsd_uconn *conn, size_t max, int wait_ms, int spin_us, nng_msg **out,
			    uint32_t *len, char *why, size_t cap)
{
	unsigned char scratch[4096];
	int64_t deadline = wait_ms >= 0 ? tsd_now_ms() + wait_ms : 0;
	/* spin_us > 0: poll without sleeping that long before blocking (the reply then needs no
	 * wake-up of this thread: on virtual machines that is tens of microseconds) */
	uint64_t spin_until = spin_us > 0 ? tsd_now_ns() + (uint64_t)spin_us * 1000u : 0;
	for (;;) {
		void *dst;
		size_t want;
		if (conn->skip) {
			dst = scratch;
			want = conn->skip < sizeof(scratch) ? conn->skip : sizeof(scratch);
		} else if (conn->npre < 4) {
			dst = conn->pre + conn->npre;
			want = 4 - conn->npre;
		} else {
			dst = (char *)nng_msg_body(conn->msg) + conn->have;
			want = nng_msg_len(conn->msg) - conn->have;
		}
		ssize_t r = recv(conn->fd, dst, want, MSG_DONTWAIT);
		if (r == 0) {
			snprintf(why, cap, "the daemon closed the connection");
			return RF_ERR;
		}
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK) {
				snprintf(why, cap, "reading: %s", strerror(errno));
				return RF_ERR;
			}
			if (spin_until && tsd_now_ns() < spin_until) {
#if defined(__x86_64__) || defined(__i386__)
				__builtin_ia32_pause();
#endif
				continue;
			}
			int left = -1;
			if (deadline) {
				int64_t l = deadline - tsd_now_ms();
				left = l > 0 ? (int)l : 0;
			}
			struct pollfd p = {.fd = conn->fd, .events = POLLIN};
			int rc = left ? poll(&p, 1, left) : 0;
			if (rc < 0 && errno != EINTR) {
				snprintf(why, cap, "poll: %s", strerror(errno));
				return RF_ERR;
			}
			if (rc == 0)
				return RF_NONE;
			continue;
		}
		if (conn->skip) {
			conn->skip -= (size_t)r;
			continue;
		}
		if (conn->npre < 4) {
			conn->npre += (size_t)r;
			if (conn->npre < 4)
				continue;
			const unsigned char *b = conn->pre;
			conn->len = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
				    (uint32_t)b[3] << 24;
			if (conn->len < 8) {
				snprintf(why, cap, "a reply frame of %u bytes (a message has at least 8)",
					 conn->len);
				return RF_ERR;
			}
			conn->big = conn->len > max;
			size_t n = conn->big ? (conn->len < BIG_HEAD ? conn->len : BIG_HEAD) : conn->len;
			if (nng_msg_alloc(&conn->msg, n)) {
				conn->msg = NULL;
				snprintf(why, cap, "no memory for a reply of %u bytes", conn->len);
				return RF_ERR;
			}
			conn->have = 0;
			continue;
		}
		conn->have += (size_t)r;
		if (conn->have < nng_msg_len(conn->msg))
			continue;
		*out = conn->msg;
		*len = conn->len;
		conn->msg = NULL;
		conn->npre = 0;
		if (!conn->big)
			return RF_FRAME;
		conn->skip = conn->len - nng_msg_len(*out);
		return RF_BIG;
	}
}

/* The call on conn that id names (c->mu held), or NULL (a late reply: dropped). */
static tsd_call *find_locked(tsd_client *c, uint64_t gen, const char *id, bool is_str)
{
	for (tsd_call *k = c->live; k; k = k->lnext)
		if (k->ustate == UX_SENT && k->ugen == gen && k->id_str == is_str && !strcmp(k->id, id))
			return k;
	return NULL;
}

/* The only call sent on conn (c->mu held), or NULL when there are none or several. */
static tsd_call *only_locked(tsd_client *c, uint64_t gen)
{
	tsd_call *one = NULL;
	for (tsd_call *k = c->live; k; k = k->lnext)
		if (k->ustate == UX_SENT && k->ugen == gen) {
			if (one)
				return NULL;
			one = k;
		}
	return one;
}

/* A frame that cannot be a reply (undecodable, or over the max: s and why): its call's failure
 * when its id is readable, else the connection is dropped. */
static void bad_frame(tsd_client *c, tsd_uconn *conn, nng_msg *msg, tsd_status s, const char *why)
{
	char id[PROTO_MAX_ID + 1];
	bool is_str;
	tsd_call *k = NULL;
	if (tsd_client_peek_id(nng_msg_body(msg), nng_msg_len(msg), id, &is_str)) {
		pthread_mutex_lock(&c->mu);
		k = find_locked(c, conn->gen, id, is_str);
		if (k && !ux_claim_locked(k, s, "%s from %s: %s", s == TSD_TOO_LARGE ? "reply"
					  : "undecodable reply", c->url, why))
			k = NULL;
		pthread_mutex_unlock(&c->mu);
	}
	nng_msg_free(msg);
	if (k) {
		k->next = NULL;
		ux_finish_list(k);
		return;
	}
	ux_drop(c, conn, s, "undecodable reply from %s (%s): the connection was dropped; the "
		"request was not re-sent and may or may not have run", c->url, why);
}

/* A whole frame: the reply of the call its id names. */
static void dispatch(tsd_client *c, tsd_uconn *conn, nng_msg *msg)
{
	tsd_reply *r;
	proto_err perr;
	tsd_status s = tsd_client_decode_reply(msg, c->max_reply, &r, &perr);
	if (s != TSD_OK) {
		bad_frame(c, conn, msg, s, perr.msg);
		return;
	}
	bool null_id = cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r->m.json, "id"));
	tsd_call *k;
	pthread_mutex_lock(&c->mu);
	/* a request too broken to have an id is answered with a null one, then the daemon closes:
	 * the lone call in flight gets it, several all fail with its message */
	k = null_id ? only_locked(c, conn->gen) : find_locked(c, conn->gen, r->m.id, r->m.id_is_str);
	if (k && !tsd_call_unlink_locked(k))
		k = NULL;
	if (k && k->async)
		c->ux->nasync--;
	if (k)
		ux_wake_locked(c);
	pthread_mutex_unlock(&c->mu);
	if (k) {
		tsd_call_finish(k, r->m.status, r);
		if (null_id) /* the daemon closes after such a reply: the next call reconnects */
			ux_drop(c, conn, TSD_SHUTTING_DOWN, "connection to %s closed by the daemon after "
				"a reply with no id; the request was not re-sent and may or may not have "
				"run", c->url);
	} else if (null_id) {
		ux_drop(c, conn, r->m.status == TSD_OK ? TSD_INTERNAL : r->m.status,
			"the daemon answered with no id: %s: %s", tsd_status_name(r->m.status),
			tsd_reply_error(r) ? tsd_reply_error(r) : "");
		tsd_reply_free(r);
	} else {
		tsd_reply_free(r); /* its call timed out or was cancelled */
	}
}

/* Whether the reader should stop (c->mu held). */
static bool reader_done_locked(tsd_client *c, tsd_call *k)
{
	return atomic_load(&c->closing) || !c->ux->conn || (k ? !k->linked : c->ux->nasync == 0);
}

void ux_read_until(tsd_client *c, tsd_call *k)
{
	for (;;) {
		tsd_call *expired = NULL;
		pthread_mutex_lock(&c->mu);
		int64_t now = tsd_now_ms();
		int64_t next = ux_expire_locked(c, now, &expired);
		bool done = reader_done_locked(c, k);
		tsd_uconn *conn = done ? NULL : ux_conn_ref_locked(c);
		pthread_mutex_unlock(&c->mu);
		ux_finish_list(expired);
		if (!conn)
			return;
		int wait = next ? (int)(next - now) : -1;
		if (!k && (wait < 0 || wait > BG_POLL_MS))
			wait = BG_POLL_MS;
		nng_msg *msg = NULL;
		uint32_t len = 0;
		char why[256];
		switch (read_frame(conn, c->max_reply, wait, k ? c->spin_us : 0, &msg, &len, why, sizeof(why))) {
		case RF_FRAME:
			dispatch(c, conn, msg);
			break;
		case RF_BIG:
			snprintf(why, sizeof(why), "%u bytes, over the client's limit of %zu", len,
				 c->max_reply);
			bad_frame(c, conn, msg, TSD_TOO_LARGE, why);
			break;
		case RF_ERR:
			ux_drop(c, conn, TSD_SHUTTING_DOWN,
				"connection to %s lost before the reply (%s: the daemon stopped, "
				"restarted, or refused the request); the request was not re-sent and "
				"may or may not have run", c->url, why);
			break;
		case RF_NONE:
			break;
		}
		ux_conn_unref(c, conn);
	}
}

void *ux_bg_main(void *arg)
{
	tsd_client *c = arg;
	tsd_unix *ux = c->ux;
	pthread_mutex_lock(&c->mu);
	while (!atomic_load(&c->closing)) {
		tsd_call *expired = NULL;
		int64_t now = tsd_now_ms();
		int64_t next = ux_expire_locked(c, now, &expired);
		if (expired) {
			pthread_mutex_unlock(&c->mu);
			ux_finish_list(expired);
			pthread_mutex_lock(&c->mu);
			continue;
		}
		if (ux->nqueued && !ux->conn && !ux->dialing && now >= ux->next_dial_ms) {
			pthread_mutex_unlock(&c->mu);
			ux_dial(c);
			pthread_mutex_lock(&c->mu);
			continue;
		}
		if (ux->nqueued && ux->conn) {
			pthread_mutex_unlock(&c->mu);
			ux_flush(c);
			pthread_mutex_lock(&c->mu);
			continue;
		}
		if (ux->nasync && ux->conn && !ux->reading) {
			ux->reading = true;
			pthread_mutex_unlock(&c->mu);
			ux_read_until(c, NULL);
			pthread_mutex_lock(&c->mu);
			ux->reading = false;
			ux_wake_locked(c);
			continue;
		}
		if (ux->nqueued && !ux->conn && (!next || ux->next_dial_ms < next))
			next = ux->next_dial_ms;
		ux->waiters++;
		if (next) {
			struct timespec until;
			tsd_deadline((int)(next > now ? next - now : 1), &until);
			pthread_cond_timedwait(&ux->cv, &c->mu, &until);
		} else {
			pthread_cond_wait(&ux->cv, &c->mu);
		}
		ux->waiters--;
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}
