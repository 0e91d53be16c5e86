/* inbox.h: the one hand-over between the daemon's threads and its loop (docs/ARCHITECTURE.md,
 * "The daemon"). Any thread posts a node onto a lane and wakes the loop; the loop drains every
 * lane in order and hands each node to the handler registered for its lane from above. */
#ifndef DMN_INBOX_H
#define DMN_INBOX_H

#include <stddef.h>

#include <uv.h>

/* Lanes, drained in this order at each wake-up: finished jobs first (their replies free
 * transport channels and make room), then arrived requests, then closed connections (a closed
 * connection's last requests came before its closing), then calls. */
typedef enum dmn_lane {
	DMN_LANE_DONE,    /* a job came back from the executor (or ran on the loop) */
	DMN_LANE_ARRIVED, /* a transport received a request (a dmn_chan, transport.h) */
	DMN_LANE_CLOSED,  /* a transport's connection closed (a dmn_closed, transport.h) */
	DMN_LANE_CALL,    /* a dmn_call: its own function, run on the loop */
	DMN_LANE_COUNT
} dmn_lane;

/* Embedded in what is posted; the poster owns the memory until the lane's handler takes it. */
typedef struct dmn_inbox_node {
	struct dmn_inbox_node *next;
} dmn_inbox_node;

/* A node that carries its handler (lane DMN_LANE_CALL): fn runs on the loop and owns c. */
typedef struct dmn_call {
	dmn_inbox_node in; /* first: a leftover call is freed as the node */
	void (*fn)(struct dmn_call *c);
} dmn_call;

/* A lane's handler, on the loop thread: arg as registered, n taken. */
typedef void (*dmn_inbox_fn)(void *arg, dmn_inbox_node *n);

typedef struct dmn_inbox dmn_inbox;

/* An inbox on loop (its uv_async handle is initialised here); NULL and err on failure. */
dmn_inbox *dmn_inbox_create(uv_loop_t *loop, char *err, size_t errlen);
/* Before anything is posted: fn handles lane's nodes (DMN_LANE_CALL has its own); after runs
 * once after each drain. These are how the layers above get called: never directly. */
void dmn_inbox_on(dmn_inbox *ib, dmn_lane lane, dmn_inbox_fn fn, void *arg);
void dmn_inbox_after(dmn_inbox *ib, void (*after)(void *arg), void *arg);
/* Any thread: n onto lane, and wake the loop (wake-ups coalesce; one drain takes everything). */
void dmn_inbox_post(dmn_inbox *ib, dmn_lane lane, dmn_inbox_node *n);
/* Loop: hand n to lane's handler now, as if it had been posted and drained (the batcher's
 * jobs run on the loop come back this way). */
void dmn_inbox_deliver(dmn_inbox *ib, dmn_lane lane, dmn_inbox_node *n);
/* After the loop stopped: what is left on lane, oldest first (the caller owns the nodes). */
dmn_inbox_node *dmn_inbox_take(dmn_inbox *ib, dmn_lane lane);
/* Loop: close the wake-up handle (uv_close); dmn_inbox_destroy once the loop has run it. */
void dmn_inbox_close(dmn_inbox *ib);
/* Frees ib, not the nodes still on it (dmn_inbox_take them first). NULL is allowed. */
void dmn_inbox_destroy(dmn_inbox *ib);

#endif
