/* slot.c: the nng side of the daemon: the REP socket, its listeners (ipc with mode 0660, tcp if
 * configured), the receive limit, and a pool of REP contexts ("slots") each receiving one
 * request at a time. Callbacks run on nng's threads and only hand events to the loop. */
#include "server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <nng/protocol/reqrep0/rep.h>
#include <nng/supplemental/util/platform.h>

static void slot_cb(void *arg)
{
	dmn_slot *sl = arg;
	dmn_srv *s = sl->srv;
	int rv = nng_aio_result(sl->aio);
	if (sl->sending) {
		sl->sending = false;
		if (rv != 0)
			nng_msg_free(nng_aio_get_msg(sl->aio));
		atomic_fetch_sub(&s->sending, 1);
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
	sl->msg = nng_aio_get_msg(sl->aio);
	pthread_mutex_lock(&s->mu);
	sl->next = NULL;
	if (s->in_slots_tail)
		s->in_slots_tail->next = sl;
	else
		s->in_slots = sl;
	s->in_slots_tail = sl;
	pthread_mutex_unlock(&s->mu);
	dmn_wake(s);
}

void dmn_slot_send(dmn_slot *sl, nng_msg *msg)
{
	atomic_fetch_add(&sl->srv->sending, 1);
	sl->sending = true;
	nng_aio_set_msg(sl->aio, msg);
	nng_ctx_send(sl->ctx, sl->aio);
}

void dmn_slot_recv(dmn_slot *sl)
{
	nng_ctx_recv(sl->ctx, sl->aio);
}

static void pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	dmn_srv *s = arg;
	if (ev != NNG_PIPE_EV_REM_POST)
		return;
	dmn_event *e = calloc(1, sizeof(*e));
	if (!e)
		return; /* its requests are then answered into the void: harmless */
	e->kind = DMN_EV_PIPE_GONE;
	e->pipe = nng_pipe_id(p);
	dmn_post_event(s, e);
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

static int listen_on(dmn_srv *s, const char *url, bool ipc, char *err, size_t errlen)
{
	nng_listener l;
	int rv;
	if (ipc) {
		const char *path = url + strlen("ipc://");
		if (make_dirs(path)) {
			snprintf(err, errlen, "listen %s: cannot create its directory: %s", url, strerror(errno));
			return -1;
		}
		struct stat st;
		/* a socket file left by a daemon that died: nng would fail with "address in use" */
		if (!lstat(path, &st) && S_ISSOCK(st.st_mode))
			unlink(path);
	}
	if ((rv = nng_listener_create(&l, s->sock, url))) {
		snprintf(err, errlen, "listen %s: %s", url, nng_strerror(rv));
		return -1;
	}
	if (ipc && (rv = nng_listener_set_int(l, NNG_OPT_IPC_PERMISSIONS, 0660))) {
		snprintf(err, errlen, "listen %s: setting mode 0660: %s", url, nng_strerror(rv));
		return -1;
	}
	/* the transport's message holds REQ/REP's routing header (4 bytes a hop) before ours: leave
	 * room for it, and for a slightly larger message to reach the decoder's too_large reply */
	if ((rv = nng_listener_set_size(l, NNG_OPT_RECVMAXSZ, (size_t)s->cfg.max_message_bytes + 4096)) ||
	    (rv = nng_listener_start(l, 0))) {
		snprintf(err, errlen, "listen %s: %s", url, nng_strerror(rv));
		return -1;
	}
	dmn_log(&s->log, DMN_LOG_INFO, "listening on %s", url);
	return 0;
}

int dmn_slots_start(dmn_srv *s, char *err, size_t errlen)
{
	int rv;
	if ((rv = nng_rep0_open(&s->sock))) {
		snprintf(err, errlen, "nng: %s", nng_strerror(rv));
		return -1;
	}
	nng_pipe_notify(s->sock, NNG_PIPE_EV_REM_POST, pipe_cb, s);
	s->nslots = (int)s->cfg.max_pending;
	s->slots = calloc((size_t)s->nslots, sizeof(dmn_slot));
	if (!s->slots) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < s->nslots; i++) {
		dmn_slot *sl = &s->slots[i];
		sl->srv = s;
		if ((rv = nng_ctx_open(&sl->ctx, s->sock)) || (rv = nng_aio_alloc(&sl->aio, slot_cb, sl))) {
			snprintf(err, errlen, "nng context %d: %s", i, nng_strerror(rv));
			s->nslots = i + (sl->aio != NULL);
			return -1;
		}
	}
	for (int i = 0; i < s->cfg.listen.n; i++)
		if (listen_on(s, s->cfg.listen.v[i], true, err, errlen))
			return -1;
	for (int i = 0; i < s->cfg.tcp_listen.n; i++)
		if (listen_on(s, s->cfg.tcp_listen.v[i], false, err, errlen))
			return -1;
	for (int i = 0; i < s->nslots; i++)
		nng_ctx_recv(s->slots[i].ctx, s->slots[i].aio);
	return 0;
}

void dmn_slots_stop(dmn_srv *s)
{
	if (!s->slots)
		return;
	/* a REP send completes when nng has queued the reply on its pipe, not when the transport
	 * wrote it: closing at once can reset connections with the last replies unsent */
	nng_msleep(100);
	nng_close(s->sock);
	for (int i = 0; i < s->nslots; i++)
		if (s->slots[i].aio) {
			nng_aio_stop(s->slots[i].aio);
			nng_aio_free(s->slots[i].aio);
		}
	for (dmn_slot *sl = s->in_slots; sl; sl = sl->next) /* received, never handled */
		nng_msg_free(sl->msg);
	s->in_slots = s->in_slots_tail = NULL;
	free(s->slots);
	s->slots = NULL;
	for (int i = 0; i < s->cfg.listen.n; i++)
		unlink(s->cfg.listen.v[i] + strlen("ipc://"));
}
