/* unix_conn.c: the unix:// transport's connection: connect (again after a loss, on the next
 * call), the references that keep a socket open while a reader or writer uses it, writing
 * frames whole (u32 length + message, partial writes continued, bounded by the call's
 * deadline), and the drop that fails every call sent on a lost connection once. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "unix_impl.h"

tsd_uconn *ux_conn_ref_locked(tsd_client *c)
{
	tsd_uconn *conn = c->ux->conn;
	if (conn)
		conn->refs++;
	return conn;
}

void ux_conn_unref_locked(tsd_uconn *conn)
{
	if (--conn->refs)
		return;
	close(conn->fd);
	nng_msg_free(conn->msg);
	free(conn);
}

void ux_conn_unref(tsd_client *c, tsd_uconn *conn)
{
	pthread_mutex_lock(&c->mu);
	ux_conn_unref_locked(conn);
	pthread_mutex_unlock(&c->mu);
}

/* A new socket connected to path, or -1 with errno. Non-blocking: every wait is a poll. */
static int connect_to(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int e = errno; /* EAGAIN: the daemon's backlog is full; try again later */
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

void ux_dial(tsd_client *c)
{
	tsd_unix *ux = c->ux;
	pthread_mutex_lock(&c->mu);
	int64_t now = tsd_now_ms();
	bool due = !ux->conn && !ux->dialing && now >= ux->next_dial_ms &&
		   !atomic_load(&c->closing);
	if (due) {
		ux->dialing = true;
		ux->next_dial_ms = now + UX_REDIAL_MS;
	}
	pthread_mutex_unlock(&c->mu);
	if (!due)
		return;
	int fd = connect_to(ux->path);
	tsd_uconn *conn = fd >= 0 ? calloc(1, sizeof(*conn)) : NULL;
	if (fd >= 0 && !conn)
		close(fd);
	pthread_mutex_lock(&c->mu);
	ux->dialing = false;
	if (conn) {
		conn->fd = fd;
		conn->refs = 1; /* ux->conn's */
		conn->gen = ++ux->gen;
		ux->conn = conn;
	}
	ux_wake_locked(c);
	pthread_mutex_unlock(&c->mu);
}

void ux_drop(tsd_client *c, tsd_uconn *conn, tsd_status s, const char *fmt, ...)
{
	char why[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	tsd_unix *ux = c->ux;
	tsd_call *list = NULL;
	pthread_mutex_lock(&c->mu);
	if (!conn->dead) {
		conn->dead = true;
		shutdown(conn->fd, SHUT_RDWR); /* wakes a reader or writer in poll; fd closes with the last reference */
		if (ux->conn == conn) {
			ux->conn = NULL;
			ux->next_dial_ms = 0; /* the next call reconnects at once */
			ux_conn_unref_locked(conn);
		}
		for (tsd_call *k = c->live, *next; k; k = next) {
			next = k->lnext;
			if (k->ustate == UX_SENT && k->ugen == conn->gen &&
			    ux_claim_locked(k, s, "%s", why)) {
				k->next = list;
				list = k;
			}
		}
		ux_wake_locked(c);
	}
	pthread_mutex_unlock(&c->mu);
	ux_finish_list(list);
}

/* Write msg as one frame on conn before deadline (0: none). 0 when written; 1 when the
 * deadline passed before any byte went (conn still usable); 2 when the connection had gone
 * before any byte went (the request was never sent: it may go on the next one); -1 when the
 * connection must be dropped (an error, or the deadline passed mid-frame), with why filled. */
static int write_frame(tsd_uconn *conn, nng_msg *msg, int fd, int64_t deadline, char *why, size_t cap)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cm;
	size_t len = nng_msg_len(msg), sent = 0, total = len + 4;
	unsigned char pre[4] = {(unsigned char)len, (unsigned char)(len >> 8),
				(unsigned char)(len >> 16), (unsigned char)(len >> 24)};
	while (sent < total) {
		struct iovec iov[2];
		int n = 0;
		if (sent < 4)
			iov[n++] = (struct iovec){pre + sent, 4 - sent};
		size_t off = sent < 4 ? 0 : sent - 4;
		iov[n++] = (struct iovec){(char *)nng_msg_body(msg) + off, len - off};
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
		if (fd >= 0 && sent == 0) { /* the descriptor rides with the frame's first bytes */
			memset(&cm, 0, sizeof(cm));
			mh.msg_control = cm.buf;
			mh.msg_controllen = sizeof(cm.buf);
			struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
			h->cmsg_level = SOL_SOCKET;
			h->cmsg_type = SCM_RIGHTS;
			h->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(h), &fd, sizeof(int));
		}
		ssize_t w = sendmsg(conn->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			sent += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
			snprintf(why, cap, "writing: %s", strerror(errno));
			return !sent && (errno == EPIPE || errno == ECONNRESET) ? 2 : -1;
		}
		int left = -1;
		if (deadline) {
			int64_t l = deadline - tsd_now_ms();
			left = l > 0 ? (int)l : 0;
		}
		struct pollfd p = {.fd = conn->fd, .events = POLLOUT};
		int rc = left ? poll(&p, 1, left) : 0;
		if (rc < 0 && errno != EINTR) {
			snprintf(why, cap, "poll: %s", strerror(errno));
			return -1;
		}
		if (rc == 0) {
			if (!sent)
				return 1;
			snprintf(why, cap, "a request timed out half written (%zu of %zu bytes)", sent,
				 total);
			return -1;
		}
	}
	return 0;
}

/* A call being written: what the writer took from it under c->mu. */
typedef struct pending {
	uint64_t serial;
	nng_msg *msg;
	int64_t deadline;
	int fd; /* sent with it, or -1; the writer's until written or given back */
} pending;

static void pending_free(pending *p)
{
	nng_msg_free(p->msg);
	if (p->fd >= 0)
		close(p->fd);
}

#define FLUSH_BATCH 16

/* Put the unsent calls p[0..n) back in the queue (those still in flight). */
static void requeue(tsd_client *c, pending *p, int n)
{
	pthread_mutex_lock(&c->mu);
	for (int i = 0; i < n; i++) {
		tsd_call *k = c->live;
		while (k && k->serial != p[i].serial)
			k = k->lnext;
		if (k) {
			k->ustate = UX_QUEUED;
			k->sent = false; /* nothing of it went: the next connection takes it */
			k->req = p[i].msg;
			k->sfd = p[i].fd;
			c->ux->nqueued++;
		} else {
			pending_free(&p[i]);
		}
	}
	pthread_mutex_unlock(&c->mu);
}

/* Fail the call with serial (if it is still in flight: a writer holds no reference to it). */
static void timed_out_unsent(tsd_client *c, uint64_t serial)
{
	tsd_call *k = NULL;
	pthread_mutex_lock(&c->mu);
	for (tsd_call *q = c->live; q; q = q->lnext)
		if (q->serial == serial) {
			if (ux_claim_locked(q, TSD_TIMEOUT,
					    "sending to %s: not sent within %d ms (the connection is "
					    "busy with earlier requests)", c->url, c->timeout_ms))
				k = q;
			break;
		}
	pthread_mutex_unlock(&c->mu);
	if (k) {
		k->next = NULL;
		ux_finish_list(k);
	}
}

void ux_flush(tsd_client *c)
{
	tsd_unix *ux = c->ux;
	pthread_mutex_lock(&ux->send_mu);
	for (;;) {
		pending p[FLUSH_BATCH];
		int n = 0;
		pthread_mutex_lock(&c->mu);
		tsd_uconn *conn = ux->nqueued ? ux_conn_ref_locked(c) : NULL;
		for (tsd_call *k = conn ? c->live : NULL; k && n < FLUSH_BATCH; k = k->lnext) {
			if (k->ustate != UX_QUEUED)
				continue;
			/* marked sent before the write: a loss from here on fails it, never re-sends */
			k->ustate = UX_SENT;
			k->sent = true;
			k->ugen = conn->gen;
			ux->nqueued--;
			p[n++] = (pending){k->serial, k->req, k->deadline_ms, k->sfd};
			k->req = NULL;
			k->sfd = -1;
		}
		pthread_mutex_unlock(&c->mu);
		if (!conn)
			break;
		char why[256] = "";
		int i = 0, rc = 0;
		for (; i < n && rc >= 0 && rc != 2; i++) {
			rc = write_frame(conn, p[i].msg, p[i].fd, p[i].deadline, why, sizeof(why));
			if (rc == 2)
				break;
			if (rc == 1)
				timed_out_unsent(c, p[i].serial);
			pending_free(&p[i]);
		}
		if (rc == 2) { /* the daemon had closed it: nothing of these went; the next connection */
			requeue(c, p + i, n - i);
			ux_drop(c, conn, TSD_SHUTTING_DOWN,
				"connection to %s lost before the reply (%s); the request was not "
				"re-sent and may or may not have run", c->url, why);
			ux_conn_unref(c, conn);
			break;
		}
		for (; i < n; i++)
			pending_free(&p[i]); /* failed by the drop below */
		if (rc < 0)
			ux_drop(c, conn, TSD_SHUTTING_DOWN,
				"connection to %s lost before the reply (%s); the request was not "
				"re-sent and may or may not have run", c->url, why);
		ux_conn_unref(c, conn);
		if (!n)
			break;
	}
	pthread_mutex_unlock(&ux->send_mu);
}
