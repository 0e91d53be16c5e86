/* oip.h: the Open Inference Protocol (KServe v2, with Triton's extensions) at tensord's edge, what
 * its frontends share. A frontend is a transport (transport.h): each OIP request becomes one TSD1
 * request (oip_req.c) posted at the seam like any other, so arrival, limits, the batcher, metrics
 * and the drain are the same for every frontend, and the TSD1 reply is turned back into the
 * protocol's answer (oip_resp.c). The HTTP/REST frontend is oip_http.c (docs/PROTOCOL.md, "Open
 * Inference Protocol"). */
#ifndef DMN_OIP_H
#define DMN_OIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "message.h"
#include "proto_graph.h"

/* What an OIP request asks; the reply's translation follows from it. */
typedef enum dmn_oip_kind {
	DMN_OIP_READY,        /* health/ready: verb health */
	DMN_OIP_LIVE,         /* health/live: verb health (answered by the loop: a wedged loop is not live) */
	DMN_OIP_SERVER_META,  /* GET /v2: verb hello */
	DMN_OIP_MODEL_META,   /* model metadata: verb model.list */
	DMN_OIP_MODEL_READY,  /* model ready: model.list */
	DMN_OIP_MODEL_CONFIG, /* Triton's model configuration: model.list */
	DMN_OIP_STATS,        /* Triton's statistics: stats */
	DMN_OIP_REPO_INDEX,   /* Triton's repository index: repo.index */
	DMN_OIP_LOAD,         /* repository load: repo.load */
	DMN_OIP_UNLOAD,       /* repository unload: model.unload */
	DMN_OIP_SHM_REGISTER, /* system shared memory: sysshm.register */
	DMN_OIP_SHM_STATUS,   /* sysshm.status */
	DMN_OIP_SHM_UNREGISTER, /* sysshm.unregister */
	DMN_OIP_INFER,        /* infer */
} dmn_oip_kind;

#define DMN_OIP_NAME_MAX 64 /* a model's name: 1..64 bytes of [A-Za-z0-9_.-], as TSD1's */

/* An output the request names ("outputs"). */
typedef struct dmn_oip_sel {
	char name[PROTO_MAX_NAME + 1];
	int binary;  /* -1: the request's binary_data_output; 0: JSON; 1: binary */
	int classes; /* > 0: Triton's classification, the top that many (as BYTES "value:index") */
} dmn_oip_sel;

/* One OIP request as its answer needs it (filled by the frontend and oip_req.c). */
typedef struct dmn_oip_ask {
	dmn_oip_kind kind;
	char model[DMN_OIP_NAME_MAX + 1]; /* "" for none (GET /v2/models/stats: every model) */
	int64_t version;                  /* from /versions/{v}; 0: whichever serves */
	char id[PROTO_MAX_ID + 1];        /* infer: the request's "id", echoed */
	bool has_id;
	bool binary_out;                  /* infer: binary_data_output (and a raw binary request) */
	int nsel;                         /* infer: outputs named; 0: all, each per binary_out */
	dmn_oip_sel sel[PROTO_GRAPH_MAX_OUTPUTS];
} dmn_oip_ask;

/* The limits a translation applies (the config's). */
typedef struct dmn_oip_limits {
	size_t max_message;   /* max_message_bytes: the TSD1 request made */
	size_t max_json;      /* oip_json_max_bytes: the JSON part of a request */
} dmn_oip_limits;

/* A growable byte buffer; oom set (and nothing more appended) when memory ran out. */
typedef struct dmn_buf {
	char *p;
	size_t len, cap;
	bool oom;
} dmn_buf;
void dmn_buf_put(dmn_buf *b, const void *p, size_t n);
void dmn_buf_str(dmn_buf *b, const char *s); /* unescaped */
void dmn_buf_printf(dmn_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dmn_buf_json(dmn_buf *b, const char *s, size_t n); /* a JSON string literal of s[0..n) */
void dmn_buf_free(dmn_buf *b);

/* Datatype names (OIP's "FP32", Triton's config "TYPE_FP32"). */
const char *dmn_oip_dtype(tsd_dtype dt);
/* dt for an OIP name; false with why ("not served": a datatype of the protocol tensord has no
 * tensors of, or "unknown"). */
bool dmn_oip_dtype_parse(const char *name, tsd_dtype *dt, const char **why);
/* The HTTP status of a TSD1 status (Triton's mapping: 400 bad input, 404 unknown model, 503
 * busy, timed out or shutting down, 500 internal). */
int dmn_oip_http_code(tsd_status st);
/* The gRPC status code of a TSD1 status (grpc_status_code's numbers: 3 bad input, 5 unknown
 * model, 14 busy, timed out, shutting down, out of memory or cancelled, 16 unauthorised, 13
 * otherwise; 0 for ok). */
int dmn_oip_grpc_code(tsd_status st);
/* Triton's priority parameter as tensord's level: 1 "realtime", 0 (the default) or 2 "normal",
 * 3 and more "bulk". */
const char *dmn_oip_priority(uint64_t p);

/* proto_encode's allocator into an nng_msg (arg: nng_msg **). */
void *dmn_oip_msg_alloc(void *arg, size_t size);
/* The TSD1 request for one that carries no tensors: {"id": id, "verb": verb, [key: val,]
 * ["token": token]}. NULL when out of memory. */
nng_msg *dmn_oip_verb_msg(const char *verb, uint64_t id, const char *key, const char *val, const char *token);

/* The header of a TSD1 infer request for ask: {"id": id, "verb": "infer", "model", ["version",]
 * ["token": token]}; the caller adds to it and owns it (cJSON_Delete). NULL when out of memory. */
cJSON *dmn_oip_infer_header(uint64_t id, const dmn_oip_ask *ask, const char *token);

/* The TSD1 infer request for an OIP infer body (oip_req.c): body[0..len), json_len the JSON
 * part's length (Inference-Header-Content-Length; len when the header is absent; 0: a raw
 * binary request, which oip_http.c turns into a JSON one first). ask->model and version are
 * set; its other fields are filled from the body. Returns 0 with *out, else an HTTP status
 * (400, 413 past a limit, 503 out of memory) with err naming what was wrong. */
int dmn_oip_infer_msg(const dmn_oip_limits *lim, const void *body, size_t len, size_t json_len, uint64_t id,
		      const char *token, dmn_oip_ask *ask, nng_msg **out, char *err, size_t errlen);

/* The TSD1 sysshm.register for a system shared-memory register body ({"key", "offset"?,
 * "byte_size"}) of region name: 0 with *out, else an HTTP status with err. */
int dmn_oip_shm_register_msg(const void *body, size_t len, const char *name, uint64_t id, const char *token,
			     nng_msg **out, char *err, size_t errlen);

/* The answer to ask from its TSD1 reply (oip_resp.c). Parts: the JSON text, then binary parts
 * that point into the reply's bytes or into extra (which must outlive the send). */
#define DMN_OIP_PARTS (PROTO_GRAPH_MAX_OUTPUTS + 1)
typedef struct dmn_oip_answer {
	int code;            /* HTTP status */
	dmn_buf json;        /* the JSON part (an object); {"error": "..."} when code != 200 */
	dmn_buf extra;       /* bytes the binary parts may point into (classification strings) */
	int nparts;          /* binary parts after the JSON */
	const void *part[DMN_OIP_PARTS];
	size_t part_len[DMN_OIP_PARTS];
	bool empty;          /* no body at all (health/ready, model ready) */
	tsd_status status;   /* the TSD1 reply's status (TSD_OK also when the answer is an error of its own) */
} dmn_oip_answer;
/* reply: the TSD1 reply message (decoded here, on the loop; only read). */
void dmn_oip_answer_make(const dmn_oip_ask *ask, const void *reply, size_t len, dmn_oip_answer *a);
/* An error answer: code and the message. */
void dmn_oip_answer_error(dmn_oip_answer *a, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void dmn_oip_answer_free(dmn_oip_answer *a);

#endif
