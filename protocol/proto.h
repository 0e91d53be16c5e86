/* proto.h: what every part of the protocol library shares: the error record its functions fill
 * (a status plus a message naming the offending field), and the limits of a request. */
#ifndef PROTO_PROTO_H
#define PROTO_PROTO_H

#include <tensord/protocol.h>

#define PROTO_ALIGN 64        /* payloads start at multiples of this (from the message start) */
#define PROTO_MAX_TENSORS 64  /* tensors in one message */
#define PROTO_MAX_ID 64       /* bytes of a string request id */
#define PROTO_MAX_NAME 128    /* bytes of a tensor name */
#define PROTO_MAX_DIM ((int64_t)1 << 40) /* one dimension (the engine's element limit) */

/* Caller-owned; filled on failure only. */
typedef struct proto_err {
	tsd_status status;
	char msg[256];
} proto_err;

/* Set err (may be NULL) to s and the formatted message; returns s. */
tsd_status proto_fail(proto_err *err, tsd_status s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
