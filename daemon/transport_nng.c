/* transport_nng.c: the nng transport: the REP socket, its listeners (ipc with mode 0660, tcp if
 * configured), the receive limit, and a pool of REP contexts ("slots"), each a channel
 * receiving one request at a time. Callbacks run on nng's threads and only post to the inbox. */
#include "transport.h"
#include "sockfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <nng/protocol/reqrep0/rep.h>
#include <nng/supplemental/util/platform.h>

/* One nng REP context: receives a request, later sends its reply, then receives again. */
typedef struct slot {
	dmn_chan chan;   /* first: the loop's view */
	struct dmn_nng *t;
	nng_ctx ctx;
	nng_aio *aio;
	bool sending;    /* the aio is a send (else a receive) */
} slot;

struct dmn_nng {
	const dmn_config *cfg;
	dmn_logger *log;
	dmn_inbox *ib;
	nng_socket sock;
	bool open;
	int nslots;
	slot *slots;
	atomic_int sending; /* replies handed to nng, not yet sent */
};

static void slot_send(dmn_chan *c, nng_msg *msg);
static void slot_recv(dmn_chan *c);
static bool slot_peer(nng_msg *msg, uint64_t *uid, uint64_t *gid);

static const dmn_chan_ops nng_ops = {
	.name = "nng",
	.send = slot_send,
	.recv = slot_recv,
	.peer = slot_peer,
};

static void slot_cb(void *arg)
{
	slot *sl = arg;
	dmn_nng *t = sl->t;
	int rv = nng_aio_result(sl->aio);
	if (sl->sending) {
		sl->sending = false;
		if (rv != 0)
			nng_msg_free(nng_aio_get_msg(sl->aio));
		atomic_fetch_sub(&t->sending, 1);
		if (rv == NNG_ECLOSED)
			return;
		nng_ctx_recv(sl->ctx, sl->aio);
		return;
	}
	if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
		return;
	if (rv != 0) { /* e.g. a message over the limit was dropped by nng: receive again */
		nng_ctx_recv(sl->ctx, sl->aio);
		return;
	}
	sl->chan.msg = nng_aio_get_msg(sl->aio);
	sl->chan.conn = nng_pipe_id(nng_msg_get_pipe(sl->chan.msg));
	dmn_inbox_post(t->ib, DMN_LANE_ARRIVED, &sl->chan.in);
}

static void slot_send(dmn_chan *c, nng_msg *msg)
{
	slot *sl = (slot *)c;
	atomic_fetch_add(&sl->t->sending, 1);
	sl->sending = true;
	nng_aio_set_msg(sl->aio, msg);
	nng_ctx_send(sl->ctx, sl->aio);
}

static void slot_recv(dmn_chan *c)
{
	slot *sl = (slot *)c;
	nng_ctx_recv(sl->ctx, sl->aio);
}

/* ipc peers carry credentials; other transports (tcp) none */
static bool slot_peer(nng_msg *msg, uint64_t *uid, uint64_t *gid)
{
	nng_pipe p = nng_msg_get_pipe(msg);
	if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, uid))
		return false;
	if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_GID, gid))
		*gid = UINT64_MAX;
	return true;
}

static void pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	dmn_nng *t = arg;
	if (ev != NNG_PIPE_EV_REM_POST)
		return;
	dmn_closed *e = calloc(1, sizeof(*e));
	if (!e)
		return; /* its requests are then answered into the void: harmless */
	e->ops = &nng_ops;
	e->conn = nng_pipe_id(p);
	dmn_inbox_post(t->ib, DMN_LANE_CLOSED, &e->in);
}

/* mkdir -p of the socket's directory (mode 0750 for what we create). */
static int make_dirs(const char *path)
{
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", path);
	char *slash = strrchr(buf, '/');
	if (!slash || slash == buf)
		return 0;
	*slash = 0;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0750) && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(buf, 0750) && errno != EEXIST ? -1 : 0;
}

static int listen_on(dmn_nng *t, const char *url, bool ipc, char *err, size_t errlen)
{
	nng_listener l;
	int rv;
	if (ipc) {
		const char *path = url + strlen("ipc://");
		if (make_dirs(path)) {
			snprintf(err, errlen, "listen %s: cannot create its directory: %s", url, strerror(errno));
			return -1;
		}
		if (dmn_sock_claim(path, t->log, err, errlen)) /* its directory, one daemon, stale files */
			return -1;
	}
	if ((rv = nng_listener_create(&l, t->sock, url))) {
		snprintf(err, errlen, "listen %s: %s", url, nng_strerror(rv));
		return -1;
	}
	if (ipc && (rv = nng_listener_set_int(l, NNG_OPT_IPC_PERMISSIONS, 0660))) {
		snprintf(err, errlen, "listen %s: setting mode 0660: %s", url, nng_strerror(rv));
		return -1;
	}
	/* the transport's message holds REQ/REP's routing header (4 bytes a hop) before ours: leave
	 * room for it, and for a slightly larger message to reach the decoder's too_large reply */
	if ((rv = nng_listener_set_size(l, NNG_OPT_RECVMAXSZ, (size_t)t->cfg->max_message_bytes + 4096)) ||
	    (rv = nng_listener_start(l, 0))) {
		snprintf(err, errlen, "listen %s: %s", url, nng_strerror(rv));
		return -1;
	}
	dmn_log(t->log, DMN_LOG_INFO, "listening on %s", url);
	return 0;
}

static int start(dmn_nng *t, char *err, size_t errlen)
{
	int rv;
	if ((rv = nng_rep0_open(&t->sock))) {
		snprintf(err, errlen, "nng: %s", nng_strerror(rv));
		return -1;
	}
	t->open = true;
	nng_pipe_notify(t->sock, NNG_PIPE_EV_REM_POST, pipe_cb, t);
	t->nslots = (int)t->cfg->max_pending;
	t->slots = calloc((size_t)t->nslots, sizeof(slot));
	if (!t->slots) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < t->nslots; i++) {
		slot *sl = &t->slots[i];
		sl->t = t;
		sl->chan.ops = &nng_ops;
		if ((rv = nng_ctx_open(&sl->ctx, t->sock)) || (rv = nng_aio_alloc(&sl->aio, slot_cb, sl))) {
			snprintf(err, errlen, "nng context %d: %s", i, nng_strerror(rv));
			t->nslots = i + (sl->aio != NULL);
			return -1;
		}
	}
	for (int i = 0; i < t->cfg->listen.n; i++)
		if (listen_on(t, t->cfg->listen.v[i], true, err, errlen))
			return -1;
	for (int i = 0; i < t->cfg->tcp_listen.n; i++)
		if (listen_on(t, t->cfg->tcp_listen.v[i], false, err, errlen))
			return -1;
	for (int i = 0; i < t->nslots; i++)
		nng_ctx_recv(t->slots[i].ctx, t->slots[i].aio);
	return 0;
}

dmn_nng *dmn_nng_start(const dmn_config *cfg, dmn_logger *log, dmn_inbox *ib, char *err, size_t errlen)
{
	dmn_nng *t = calloc(1, sizeof(*t));
	if (!t) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	t->cfg = cfg;
	t->log = log;
	t->ib = ib;
	atomic_init(&t->sending, 0);
	if (start(t, err, errlen)) {
		dmn_nng_stop(t, ib);
		return NULL;
	}
	return t;
}

int dmn_nng_sending(const dmn_nng *t)
{
	return t ? atomic_load(&t->sending) : 0;
}

void dmn_nng_stop(dmn_nng *t, dmn_inbox *ib)
{
	if (!t)
		return;
	if (t->slots) {
		/* a REP send completes when nng has queued the reply on its pipe, not when the
		 * transport wrote it: closing at once can reset connections with the last replies unsent */
		nng_msleep(100);
	}
	if (t->open)
		nng_close(t->sock);
	for (int i = 0; t->slots && i < t->nslots; i++)
		if (t->slots[i].aio) {
			nng_aio_stop(t->slots[i].aio);
			nng_aio_free(t->slots[i].aio);
		}
	/* received, never handled */
	for (dmn_inbox_node *n = dmn_inbox_take(ib, DMN_LANE_ARRIVED), *next; n; n = next) {
		next = n->next;
		nng_msg_free(((dmn_chan *)n)->msg);
	}
	free(t->slots);
	if (t->slots)
		for (int i = 0; i < t->cfg->listen.n; i++)
			dmn_sock_release(t->cfg->listen.v[i] + strlen("ipc://"));
	free(t);
}
