/* oip_grpc.h: the Open Inference Protocol's gRPC frontend (oip_grpc.c): KServe v2's
 * GRPCInferenceService with Triton's extensions on gRPC's C core, a transport at the seam
 * (transport.h) that turns each request message into one TSD1 request (oip_grpc_msg.h). Config
 * oip_grpc_listen (default grpc://127.0.0.1:8001; empty: off). */
#ifndef DMN_OIP_GRPC_H
#define DMN_OIP_GRPC_H

#include <stdint.h>

#include "transport.h"

typedef struct dmn_oip_grpc dmn_oip_grpc;

/* Listen on cfg->oip_grpc_listen (empty: NULL, no error), from the loop thread; gRPC's
 * completion queue runs on a thread of its own, answers are made on loop. NULL with err on
 * failure. cfg, log, ib and loop must outlive it. */
dmn_oip_grpc *dmn_oip_grpc_start(const dmn_config *cfg, dmn_logger *log, dmn_inbox *ib, uv_loop_t *loop, char *err,
				 size_t errlen);
/* The port it listens on (the one chosen when the config said 0); 0 for NULL. */
int dmn_oip_grpc_port(const dmn_oip_grpc *t);
/* Loop: stop listening and cancel every call (their closings are not posted: the inbox closes
 * with it); answers that come later are dropped. Idempotent; NULL allowed. */
void dmn_oip_grpc_close(dmn_oip_grpc *t);
/* After the loop ran the closes and no thread sends any more: wait for gRPC's shutdown, free t
 * and what it still holds. NULL allowed. */
void dmn_oip_grpc_stop(dmn_oip_grpc *t);
/* Answers handed over and not yet written (any thread); 0 for NULL. */
int dmn_oip_grpc_sending(const dmn_oip_grpc *t);

typedef struct dmn_oip_grpc_stats {
	int64_t open;     /* client addresses (HTTP/2 connections) with calls now */
	int64_t calls;    /* calls started (a stream is one) */
	int64_t requests; /* request messages received (every RPC; each of a stream's) */
	int64_t errors;   /* answered with an error by the frontend itself, before the daemon saw them */
} dmn_oip_grpc_stats;
void dmn_oip_grpc_get_stats(dmn_oip_grpc *t, dmn_oip_grpc_stats *st); /* zeros for NULL */

#endif
