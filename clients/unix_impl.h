/* unix_impl.h: what the unix:// transport's files share (call_unix.c: connect, write, the
 * calls; unix_read.c: the reader role, frames, the background reader). Not installed.
 * Locks: c->mu guards everything here but the reader's frame state (the reader role's holder
 * only) and the writes (send_mu); send_mu is taken before c->mu, never after. */
#ifndef TSD_UNIX_IMPL_H
#define TSD_UNIX_IMPL_H

#include "client_impl.h"

enum { UX_QUEUED = 1, UX_SENT };

#define UX_REDIAL_MS 50 /* between connect attempts while the daemon is away */

/* One connection: its socket and the frame being read. */
typedef struct tsd_uconn {
	int fd;
	int refs;          /* c->mu: ux->conn's own, and each reader or writer using fd */
	bool dead;         /* shut down: its sent calls failed */
	uint64_t gen;      /* calls sent on it carry this (tsd_call.ugen) */
	/* the frame being read (the reader role's holder only) */
	unsigned char pre[4];
	size_t npre;       /* prefix bytes in */
	uint32_t len;      /* the frame's length once the prefix is in */
	nng_msg *msg;      /* its body (or, over the client's max, its first bytes) */
	size_t have;       /* bytes of msg in */
	bool big;          /* over the max: msg is the head, the rest is skipped */
	size_t skip;       /* bytes of an oversized frame still to discard */
} tsd_uconn;

struct tsd_unix {
	char path[108];
	pthread_mutex_t send_mu;  /* one writer at a time: frames go out whole */
	pthread_cond_t cv;        /* c->mu: the role was released, a call completed, a connection
				   * came, closing; signalled only when waiters > 0 */
	int waiters;
	tsd_uconn *conn;          /* the connection, or NULL */
	bool reading;             /* the reader role is held */
	int nasync;               /* async calls linked */
	int nqueued;              /* calls linked in UX_QUEUED */
	uint64_t gen;             /* connections made (the last one's gen) */
	int64_t next_dial_ms;     /* no connect attempt before (tsd_now_ms) */
	bool dialing;
	uint64_t serial;
	bool bg_started;
	pthread_t bg;
};

/* Wake the threads waiting on ux->cv (c->mu held). */
TSD_HIDDEN void ux_wake_locked(tsd_client *c);
/* Take k's completion (c->mu held): false when another thread has it. On true k is out of the
 * live list; the caller completes it (ux_finish_list) with ustatus and err. */
TSD_HIDDEN bool ux_claim_locked(tsd_call *k, tsd_status s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Complete the calls claimed into the list (next-linked), c->mu not held. */
TSD_HIDDEN void ux_finish_list(tsd_call *list);
/* Shut conn down and fail every call sent on it with s and the message (c->mu not held). */
TSD_HIDDEN void ux_drop(tsd_client *c, tsd_uconn *conn, tsd_status s, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* A reference to the connection (NULL: none): c->mu held; released without it. */
TSD_HIDDEN tsd_uconn *ux_conn_ref_locked(tsd_client *c);
TSD_HIDDEN void ux_conn_unref(tsd_client *c, tsd_uconn *conn);
TSD_HIDDEN void ux_conn_unref_locked(tsd_uconn *conn);
/* Claim the calls whose deadline passed into *list (c->mu held); returns the next deadline of
 * the calls left (0: none). */
TSD_HIDDEN int64_t ux_expire_locked(tsd_client *c, int64_t now, tsd_call **list);
/* Hold the reader role (taken by the caller) until k completes (k NULL: until no async call is
 * in flight), reading frames and completing the calls they answer. c->mu not held. */
TSD_HIDDEN void ux_read_until(tsd_client *c, tsd_call *k);
/* The background reader's body (started by the first async submit). */
TSD_HIDDEN void *ux_bg_main(void *arg);
/* Connect if there is no connection and a dial is due (c->mu not held). */
TSD_HIDDEN void ux_dial(tsd_client *c);
/* Write the queued calls on the connection (c->mu not held). */
TSD_HIDDEN void ux_flush(tsd_client *c);

#endif
