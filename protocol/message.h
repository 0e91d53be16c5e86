/* message.h: one request or reply on the wire: "TSD1", u32 JSON length, the JSON header, padding
 * to 64 bytes, then the binary tensor payloads, each 64-byte aligned (docs/PROTOCOL.md). */
#ifndef PROTO_MESSAGE_H
#define PROTO_MESSAGE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "proto.h"

#define PROTO_MAGIC "TSD1"
#define PROTO_PREFIX 8 /* magic + u32 JSON length */

/* A tensor in a decoded message (include/tensord/protocol.h): a view, nothing copied. name and
 * data point into the proto_msg's JSON and into the caller's message bytes: valid while both
 * live. data is 64-byte aligned when the message bytes are. */
typedef tsd_tensor proto_tensor;

/* A decoded message. Caller-allocated (it is ~7 KiB: heap or a long-lived struct); free with
 * proto_msg_free, which frees json only. */
typedef struct proto_msg {
	cJSON *json;         /* the whole header, owned: verbs read their own fields from it */
	bool id_is_str;
	char id[PROTO_MAX_ID + 1]; /* the id as text either way ("17" for an integer id) */
	int64_t id_int;      /* the integer id when !id_is_str */
	const char *verb;    /* requests: the verb (into json); NULL in a reply */
	tsd_status status;   /* replies: the status sent; TSD_OK in a request */
	const char *error;   /* replies: the "error" message, or NULL */
	int ntensors;
	proto_tensor tensors[PROTO_MAX_TENSORS];
} proto_msg;

typedef enum proto_kind { PROTO_REQUEST, PROTO_REPLY } proto_kind;

/* Decode and validate buf (len bytes; not modified, not kept except through the views).
 * Everything is checked before anything is returned (see docs/PROTOCOL.md, "Validation"):
 * len > max_len is TSD_TOO_LARGE, every other fault TSD_BAD_REQUEST, with err naming the field.
 * A request needs "verb", a reply "status". On failure m holds nothing to free.
 * Threads: cJSON's parser writes a process-wide error position on every call, so decodes on
 * several threads must be serialised by the caller (the daemon decodes on its loop thread). */
tsd_status proto_decode(const void *buf, size_t len, size_t max_len, proto_kind kind,
			proto_msg *m, proto_err *err);
/* A JSON header (the prefix's length) over max_header bytes is TSD_TOO_LARGE, checked before
 * the header is copied or parsed ("header: N bytes of JSON, at most M (max_header_bytes)").
 * proto_decode uses PROTO_HEADER_MAX_DEFAULT (or max_len if smaller) for a request and max_len
 * for a reply (the daemon's replies carry tensor descriptors and its figures, and the client
 * trusts its daemon as far as max_len); proto_decode_hdr takes it explicitly (the daemon passes
 * its config's max_header_bytes). */
#define PROTO_HEADER_MAX_DEFAULT ((size_t)1 << 20)
tsd_status proto_decode_hdr(const void *buf, size_t len, size_t max_len, size_t max_header, proto_kind kind,
			    proto_msg *m, proto_err *err);
void proto_msg_free(proto_msg *m); /* m itself is the caller's; NULL json is fine */
/* The tensor called name, or NULL. */
const proto_tensor *proto_msg_tensor(const proto_msg *m, const char *name);

/* A tensor to encode: data holds numel * dtype size bytes, row-major; only read. */
typedef struct proto_out {
	const char *name;
	tsd_dtype dtype;
	int ndim;
	const int64_t *shape;
	const void *data;
} proto_out;

/* Where an encoded message goes: alloc(arg, size) returns size writable bytes (e.g. the body
 * of an nng_msg made with that size) or NULL. NULL alloc: malloc, freed by the caller. */
typedef void *(*proto_alloc_fn)(void *arg, size_t size);

/* Encode header (an object: id, verb or status and error, whatever else; not modified, its
 * "tensors" field if any is replaced in the copy sent) and n tensors into one buffer from
 * alloc. *out and *out_len receive it; the caller owns it. Fails with TSD_BAD_REQUEST on a bad
 * tensor (name, dtype, shape) and TSD_TOO_LARGE beyond max_len (0: no cap). */
/* ---- json_write.c: compact JSON text as cJSON_PrintUnformatted writes it, into a buffer that
 * starts on the caller's stack (p, cap; heap false) and grows onto the heap ---- */
typedef struct proto_jw {
	char *p;
	size_t len, cap;
	bool heap;   /* p is malloc'd (proto_jw_free frees it) */
	bool failed; /* out of memory, or an invalid item: the text is incomplete */
} proto_jw;
bool proto_jw_reserve(proto_jw *w, size_t more);
void proto_jw_put(proto_jw *w, const char *s, size_t n);
void proto_jw_int(proto_jw *w, int64_t v);
void proto_jw_str(proto_jw *w, const char *s); /* quoted and escaped */
void proto_jw_value(proto_jw *w, const cJSON *v);
/* obj's fields except skip (NULL: none) as "k":v,... without braces; how many were written. */
int proto_jw_fields(proto_jw *w, const cJSON *obj, const char *skip);
void proto_jw_free(proto_jw *w);

tsd_status proto_encode(const cJSON *header, const proto_out *ts, int n, size_t max_len,
			proto_alloc_fn alloc, void *arg, void **out, size_t *out_len, proto_err *err);

/* A reply header: {"id": id of req (string or integer), "status": name, "error": msg if not
 * OK}. Caller owns the result (cJSON_Delete); NULL when out of memory. req may be NULL (an
 * undecodable request: the id is null). */
cJSON *proto_reply_header(const proto_msg *req, tsd_status s, const char *msg);

/* Shared with the graph parser: a JSON number that is an integer in [lo, hi]. */
bool proto_json_int(const cJSON *j, int64_t lo, int64_t hi, int64_t *out);

#endif
