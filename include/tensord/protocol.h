/* protocol.h: what the daemon and its clients share: the protocol version and the status codes
 * sent on the wire by name (tsd_errors.def). The message and graph codecs are in protocol/. */
#ifndef TSD_PROTOCOL_H
#define TSD_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"

/* The version a client states in "hello"; a daemon refuses another with version_mismatch. */
#define TSD_PROTOCOL_VERSION 1

/* A tensor of a message. Decoded (protocol/message.h's proto_tensor, a client's reply): a view,
 * nothing copied: name and data point into the message, data is 64-byte aligned when the
 * message bytes are (else possibly not even for the dtype: read with memcpy). Sent through the
 * client library: name, dtype, ndim, shape and data (numel * dtype size bytes, row-major,
 * little-endian) are read, nbytes is ignored. */
typedef struct tsd_tensor {
	const char *name;
	tsd_dtype dtype;
	int ndim;
	int64_t shape[TSD_MAX_DIMS];
	const void *data;
	size_t nbytes;
} tsd_tensor;

typedef enum tsd_status {
#define TSD_ERR(e, name, msg) TSD_##e,
#include "tsd_errors.def"
#undef TSD_ERR
	TSD_STATUS_COUNT
} tsd_status;

/* Wire name of s ("bad_request"); "internal" for a value out of range. Static string. */
const char *tsd_status_name(tsd_status s);
/* Default human message of s ("bad request"). Static string. */
const char *tsd_status_message(tsd_status s);
/* Parse a wire name; false (and *out untouched) when unknown or NULL. */
bool tsd_status_from_name(const char *name, tsd_status *out);

#endif
