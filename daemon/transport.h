/* transport.h: the seam where requests enter the daemon and replies leave it, and the
 * transport behind it (stream sockets on the loop: unix://, and nng's SP wire protocol on
 * ipc:// and tcp://, transport_stream.c). A transport owns channels, each carrying one request at a time: it posts a received request onto the inbox's ARRIVED
 * lane as its channel, and a closed connection onto the CLOSED lane; the loop decodes, checks
 * and answers, and every reply goes back through the channel's ops (docs/ARCHITECTURE.md,
 * "What a new frontend or transport implements"). */
#ifndef DMN_TRANSPORT_H
#define DMN_TRANSPORT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <nng/nng.h>

#include <uv.h>

#include "config.h"
#include "inbox.h"
#include "log.h"

typedef struct dmn_chan dmn_chan;

/* What a transport implements: one const table per transport, every member set. */
typedef struct dmn_chan_ops {
	const char *name;
	/* Any thread (the loop, or the executor for the replies it made): send reply (taken; the
	 * tensord wire format in an nng_msg buffer) as the answer to c's request; c then receives
	 * the next. Until written it counts in the transport's own "sending" figure. */
	void (*send)(dmn_chan *c, nng_msg *reply);
	/* Loop: give c's request up without an answer (its client left); c receives the next. */
	void (*recv)(dmn_chan *c);
	/* Loop, once per new connection, c->msg still set: the credentials of the peer that sent
	 * c's request; false when the transport carries none (then being configured at all
	 * authorises it). */
	bool (*peer)(const dmn_chan *c, uint64_t *uid, uint64_t *gid);
	/* Loop: close c's connection now (its request is then given up with recv, or answered
	 * into the void); the transport posts its closing on the CLOSED lane as for any other. */
	void (*hangup)(dmn_chan *c);
	/* Loop, before c is answered: the connection closes once that answer is written and reads
	 * nothing more meanwhile (a refused peer's first request, an undecodable one: a byte stream
	 * cannot be trusted to resync). A transport whose messages are delimited may ignore it. */
	void (*close_after)(dmn_chan *c);
} dmn_chan_ops;

/* A channel: the part of a transport's context the loop sees. */
struct dmn_chan {
	dmn_inbox_node in;        /* first: on DMN_LANE_ARRIVED */
	const dmn_chan_ops *ops;
	nng_msg *msg;             /* the request received (the loop takes it) */
	uint32_t conn;            /* the connection it came on (an id unique within ops) */
	int fd;                   /* a descriptor that came with msg (unix://: SCM_RIGHTS), or -1; every
				   * transport sets it before posting; the loop takes it */
	/* Set by the transport at arrival: the channels this connection holds (requests not yet
	 * answered plus replies not yet taken by the client), this one included; 0: not counted. */
	int held;
	/* A peer's uid the transport found without vouching for it as credentials (a loopback tcp
	 * peer in the kernel's socket table): system shared memory maps only that uid's objects. */
	bool has_local_uid;
	uint32_t local_uid;
};

/* A closed connection (DMN_LANE_CLOSED; malloc'd by the transport, freed by the loop). */
typedef struct dmn_closed {
	dmn_inbox_node in;        /* first: a leftover one is freed as the node */
	const dmn_chan_ops *ops;
	uint32_t conn;
} dmn_closed;

/* ---- transport_stream.c: the daemon's stream sockets, all on the loop ----
 * unix:// (AF_UNIX, docs/PROTOCOL.md "unix:// framing": u32 little-endian length, then one TSD1
 * message), and nng's wire protocol for nng's REQ clients: ipc:// (AF_UNIX) and tcp://, SP
 * framing (an 8-byte handshake, then per message a length and the request's backtrace; the
 * body is one TSD1 message). The loop accepts, reads (recvmsg) and checks frames and posts each
 * as a channel of its own; replies are written by the thread that made them when nothing is
 * queued on that connection, else queued and written by the loop (UV_WRITABLE). ---- */
typedef struct dmn_stream dmn_stream;
/* The kinds of address it serves (the stats are kept per kind). */
typedef enum dmn_stream_kind { DMN_ST_UNIX, DMN_ST_IPC, DMN_ST_TCP, DMN_ST_KINDS } dmn_stream_kind;
const char *dmn_stream_kind_name(dmn_stream_kind k); /* "unix", "ipc", "tcp" */
/* Listen on cfg's unix:// and ipc:// addresses (listen) and tcp:// ones (tcp_listen), on loop
 * (the loop thread); none: NULL, no error. partial_max: the bytes of frames being received, all
 * connections together (partial_bytes_max resolved). NULL with err set on failure (what was
 * started is closed: run the loop, then dmn_stream_stop). cfg, log, ib and loop must outlive it. */
dmn_stream *dmn_stream_start(const dmn_config *cfg, dmn_logger *log, dmn_inbox *ib, uv_loop_t *loop,
			     uint64_t partial_max, char *err, size_t errlen);
/* Loop: stop listening, then close every connection (their closing posted on CLOSED; replies
 * still queued are dropped) and the transport's handles. Idempotent; NULL allowed. */
void dmn_stream_close(dmn_stream *t);
/* After the loop ran the closes and no thread sends any more (the executor stopped): free t,
 * every connection and the channels still held (requests never answered, whose message was
 * taken or freed already, and those left on the ARRIVED lane with theirs); the socket files.
 * NULL allowed. */
void dmn_stream_stop(dmn_stream *t);
/* Replies queued and not yet written (any thread); 0 for NULL. */
int dmn_stream_sending(const dmn_stream *t);
typedef struct dmn_stream_stats {
	int64_t open;           /* connections open now */
	int64_t refused_cap;    /* closed at once: their peer (uid, or tcp address) had peer_connections_max */
	int64_t reply_timeouts; /* closed: a reply not written within reply_timeout_ms */
	int64_t frame_timeouts; /* closed: a frame (or SP handshake) begun and not complete within frame_timeout_ms */
	int64_t frames_refused; /* bad length, too large, bad prefix or handshake (then closed), fds attached */
	int64_t budget_waits;   /* frames that waited for partial_bytes_max to have room */
	int64_t pending_waits;  /* times a connection was not read: max_pending channels were held */
	int64_t partial_bytes;  /* bytes of frames being received now */
} dmn_stream_stats;
/* Kind k's figures (any thread); zeros for NULL. */
void dmn_stream_get_stats(dmn_stream *t, dmn_stream_kind k, dmn_stream_stats *st);

#endif
