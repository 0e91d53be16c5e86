/* client.h: a small synchronous client of the tensord daemon: one nng REQ socket, one request
 * at a time, replies decoded into views over the received message (docs/PROTOCOL.md). */
#ifndef TSD_CLIENT_H
#define TSD_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "protocol.h"

/* The largest reply a client accepts (bytes); a larger one is TSD_TOO_LARGE. */
#define TSD_CLIENT_MAX_REPLY ((size_t)1 << 31)
/* The daemon's socket inside its runtime directory (daemon config "listen"'s default). */
#define TSD_CLIENT_SOCKET "tensord.sock"

/* A connection to the daemon. Threads: a client is used by one thread at a time; clients on
 * different threads are independent (the library serialises its JSON parsing internally). */
typedef struct tsd_client tsd_client;
/* A reply from the daemon: the decoded header and tensor views over the received message. */
typedef struct tsd_reply tsd_reply;

/* Connect to url (nng address: "ipc:///run/tensord/tensord.sock", "tcp://127.0.0.1:7070").
 * timeout_ms > 0 bounds each send and each receive; <= 0 waits forever. The dial is blocking:
 * a daemon that is not there fails here at once. Returns a client the caller frees with
 * tsd_client_close, or NULL with the reason in err[errlen] (either may be 0). */
tsd_client *tsd_client_open(const char *url, int timeout_ms, char *err, size_t errlen);
/* Close the socket and free c (NULL is fine). Replies already received stay valid. */
void tsd_client_close(tsd_client *c);

/* Send one request and wait for its reply. header: an object with "verb" and the verb's fields
 * (only read; its "tensors" field, if any, is replaced by ts[0..n), tsd_tensor of protocol.h:
 * only read, copied into the message). Without "id" the
 * client adds an increasing integer one; the reply must echo the id either way.
 * Returns the reply's status. *out receives the reply (the caller frees it with tsd_reply_free)
 * whenever the daemon answered, whatever the status; it is NULL when no valid reply came (a bad
 * header or tensor, a transport error or timeout, an undecodable reply, a wrong id): then the
 * status says what kind of failure (TSD_TIMEOUT, TSD_BAD_REQUEST, TSD_INTERNAL, ...) and
 * tsd_client_error(c) why. */
tsd_status tsd_client_call(tsd_client *c, const cJSON *header, const tsd_tensor *ts, int n,
			   tsd_reply **out);
/* tsd_client_call with the header given as JSON text (for bindings without cJSON, such as the
 * Python client): header_json must parse to an object; else TSD_BAD_REQUEST. */
tsd_status tsd_client_call_text(tsd_client *c, const char *header_json, const tsd_tensor *ts,
				int n, tsd_reply **out);
/* tsd_client_call with the header {"verb": verb} and no tensors (health, stats, model.list). */
tsd_status tsd_client_call_verb(tsd_client *c, const char *verb, tsd_reply **out);
/* {"verb": "hello", "version": TSD_PROTOCOL_VERSION, "client": "tensord-c"}: the daemon
 * answers version_mismatch when it speaks another version. *out as for tsd_client_call. */
tsd_status tsd_client_hello(tsd_client *c, tsd_reply **out);
/* The message of the last call that got no reply ("" before any). Owned by c, valid until its
 * next call. */
const char *tsd_client_error(const tsd_client *c);
/* A call's failure message: the reply's (tsd_reply_error) when r is non-NULL, else c's. */
const char *tsd_client_message(const tsd_client *c, const tsd_reply *r);

/* Free r and the message its views point into (NULL is fine). */
void tsd_reply_free(tsd_reply *r);
tsd_status tsd_reply_status(const tsd_reply *r);
/* The daemon's "error" message, else the status's default message; NULL when the status is ok. */
const char *tsd_reply_error(const tsd_reply *r);
/* The whole reply header (id, status, the verb's fields), owned by r. Its "tensors" array
 * describes the tensors below. */
const cJSON *tsd_reply_json(const tsd_reply *r);
/* The reply header as compact JSON text, malloc'd (the caller frees it with tsd_free), or NULL
 * when out of memory. */
char *tsd_reply_text(const tsd_reply *r);
/* free() for the strings the library returns (tsd_reply_text), for callers with another heap. */
void tsd_free(void *p);
int tsd_reply_ntensors(const tsd_reply *r);
/* Tensor i (0 <= i < ntensors) or NULL; views owned by r. */
const tsd_tensor *tsd_reply_tensor(const tsd_reply *r, int i);
/* The tensor called name, or NULL. */
const tsd_tensor *tsd_reply_find(const tsd_reply *r, const char *name);

/* The address tensorctl and other clients use by default: tensord_url when non-empty (the
 * TENSORD_URL environment variable), else "ipc://" + the daemon's runtime directory (
 * xdg_runtime_dir + "/tensord" when it is absolute, else "/run/tensord") + "/tensord.sock".
 * The environment is passed in (getenv's values, may be NULL). False if it does not fit. */
bool tsd_client_default_url(const char *tensord_url, const char *xdg_runtime_dir, char *out,
			    size_t cap);

#endif
