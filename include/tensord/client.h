/* client.h: the C client of the tensord daemon (libtensord): over unix:// one stream socket per
 * client, many calls in flight on it matched by id; over nng's ipc:// and tcp:// one REQ socket
 * with a context per call. Any number of threads and asynchronous calls share a client; replies
 * decoded into views over the received message (docs/PROTOCOL.md). Typed verbs: verbs.h. */
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

/* A connection to the daemon. Threads: every function on a client may be called from any
 * number of threads at once (each call has its own nng context), except tsd_client_close, which
 * must come after every other call on it returned and every tsd_call of it was freed.
 * Reconnects: after the daemon stops, later calls go to the new daemon (nng: the dialer redials
 * by itself, every 50 ms at first, backing off to 1 s; unix://: the next call connects again,
 * every 50 ms while none is there). A call whose connection is lost before its reply fails
 * with TSD_SHUTTING_DOWN and a message saying so; it is never re-sent (the daemon may or may
 * not have run it). A call made while no daemon is there waits for one until its timeout
 * (TSD_TIMEOUT, "no connection"). */
typedef struct tsd_client tsd_client;
/* Latency on unix:// (read at tsd_client_open): $TENSORD_CLIENT_SPIN_US (0..10000, default 0)
 * makes a waiting call poll its socket that long before it sleeps. A reply that comes within it
 * needs no wake-up of the caller's thread, which on a virtual machine can cost tens of
 * microseconds a round trip; the price is that much CPU per call. For a lone robot's control
 * loop, not for a fleet sharing a few cores with the daemon. */
/* One request in flight (asynchronous form, tsd_client_submit). */
typedef struct tsd_call tsd_call;
/* A reply from the daemon: the decoded header and tensor views over the received message. */
typedef struct tsd_reply tsd_reply;

/* Connect to url: "unix:///run/tensord/tensord.sock" (an absolute path of at most 107 bytes:
 * the local transport, length-prefixed frames on an AF_UNIX stream socket), or an nng address
 * ("ipc:///run/tensord/tensord-nng.sock", "tcp://127.0.0.1:7070").
 * timeout_ms > 0 bounds each call, from its submission (waiting for a connection included) to
 * its reply; <= 0 waits forever. The dial is blocking:
 * a daemon that is not there fails here at once. Returns a client the caller frees with
 * tsd_client_close, or NULL with the reason in err[errlen] (either may be 0). */
tsd_client *tsd_client_open(const char *url, int timeout_ms, char *err, size_t errlen);
/* Failover (docs/PROTOCOL.md, "Replicas and failover"): url may be a comma-separated list of
 * such addresses (replicas of one model set; at most 32), or a tcp:// name that resolves to
 * several addresses (one endpoint each). Calls then go round robin to the endpoints connected;
 * an idempotent call (infer without a sequence, realize, health, hello, stats, model.list,
 * repo.index, sysshm.status) whose attempt was lost with its connection, refused by a draining
 * daemon (shutting_down) or a starting one (unavailable), or timed out before it was sent is sent again to another endpoint,
 * after a jittered backoff, within its timeout: at most $TENSORD_CLIENT_RETRIES times (0..10,
 * default 3; set on a single address, e.g. a balancer's, it turns retries on there too), the
 * backoff $TENSORD_CLIENT_BACKOFF_MS doubling from 25 ms, and a retry budget per client (a
 * retry spends a token of 10, a success earns a tenth back). Other verbs (model.load,
 * model.save, model.unload, train.step, shm.*, repo.load, sysshm.register) are sent once. A
 * sequence's steps go where its start went; when that replica's connection was lost since,
 * a step fails with TSD_SEQUENCE_ENDED naming it. After the last attempt the error names every
 * endpoint tried and what each did. Shared memory (tsd_region_*) needs one unix:// address.
 * connect_ms 0 (tsd_client_open) waits up to 1 s for any endpoint and fails when none answers. */

/* tsd_client_open with a connect timeout: connect_ms > 0 waits up to that long for the daemon
 * (it may be starting); 0 is tsd_client_open (fail at once); < 0 does not wait at all (the
 * first calls wait for the connection within their own timeout). */
tsd_client *tsd_client_open_wait(const char *url, int timeout_ms, int connect_ms, char *err,
				 size_t errlen);
/* Close the socket and free c (NULL is fine). Replies already received stay valid. Calls still
 * in flight complete before this returns, within a bound: unix:// cancels them at once
 * (TSD_CANCELLED, "the client was closed ..."); nng lets them be answered for up to 0.5 s,
 * cancels the rest and waits for their callbacks (at most 1 s), then runs nng_close, waited
 * for at most 2 s (nng 1.5.2's nng_close can hang, nanomsg/nng#1543, most readily after REQ
 * contexts were cancelled with requests in flight; when it does, the socket and c are left
 * allocated rather than freed under nng's threads).
 * Their tsd_call objects stay the caller's, freed with tsd_call_free after the close. */
void tsd_client_close(tsd_client *c);
/* Whether c has a connection now, and how many it has made so far (a restart of the daemon
 * makes one more); either pointer may be NULL. On unix:// a connection the daemon closed
 * counts as up until a read or write of the client notices. */
bool tsd_client_connected(tsd_client *c, uint64_t *connects);
/* The retries c's failover made so far (0 without failover). */
uint64_t tsd_client_retries(const tsd_client *c);

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
/* Why the calling thread's last call got no reply, when that call was on c; else "" (it got
 * one, or it was on another client). Thread-local, like errno: each thread sees its own calls',
 * and the string stays valid until the thread's next call. */
const char *tsd_client_error(const tsd_client *c);
/* A call's failure message: the reply's (tsd_reply_error) when r is non-NULL, else c's. */
const char *tsd_client_message(const tsd_client *c, const tsd_reply *r);

/* ---- shared memory (unix:// only; docs/PROTOCOL.md, "Shared memory") ----
 * A region is a memfd of the client's, sealed so that it cannot shrink or grow, mapped here
 * read-write and registered with the daemon on c's connection under a name. Infer requests then
 * name inputs in it (tsd_shm_input) and outputs to be written into it (tsd_shm_output) instead
 * of carrying their bytes. Who writes when: the client writes an input before it sends the
 * request and leaves it alone until the reply came; the daemon writes an output region only
 * between receiving a request that names it and its reply, and nothing else. A region belongs
 * to its connection: after a reconnect (tsd_client_connected's count moved) register it again
 * with tsd_region_register. Threads: as for the client. */
typedef struct tsd_region tsd_region;
/* Make, map and register a region of size bytes called name (1..64 of [A-Za-z0-9_.-], unique
 * on the connection); writable lets the daemon write outputs into it (an input region is sent
 * as a read-only descriptor). NULL with tsd_client_error(c) saying why. */
tsd_region *tsd_region_create(tsd_client *c, const char *name, size_t size, bool writable);
/* Register g again on its client's current connection. */
tsd_status tsd_region_register(tsd_region *g);
/* Unregister (best effort), unmap and free g; NULL allowed. No request naming it may be in flight. */
void tsd_region_destroy(tsd_region *g);
void *tsd_region_data(const tsd_region *g);
size_t tsd_region_size(const tsd_region *g);
const char *tsd_region_name(const tsd_region *g);
/* Add to header's "shm" field: an input tensor name of dtype and shape at offset of g (a
 * multiple of the dtype's size; the daemon checks it lies inside g); an output name to be
 * written at offset of g (writable). false when out of memory. */
bool tsd_shm_input(cJSON *header, const char *name, tsd_dtype dtype, int ndim, const int64_t *shape,
		   const tsd_region *g, size_t offset);
bool tsd_shm_output(cJSON *header, const char *name, const tsd_region *g, size_t offset);
/* The output name that reply r says was written into g: a view into g's mapping in *out (valid
 * until g is written or destroyed); false when r has no such output or it does not fit g. */
bool tsd_reply_shm_output(const tsd_reply *r, const tsd_region *g, const char *name, tsd_tensor *out);

/* ---- asynchronous calls ----
 * tsd_client_submit sends a request and returns at once; the reply is collected by polling
 * (tsd_call_done), waiting (tsd_call_wait) or a callback. Any number may be in flight on one
 * client, from any threads. The call's deadline is the client's timeout from the submit.
 * Threads: a call may be polled and waited for from any thread; take its reply and free it from
 * one (or from its callback). */

/* Called once when call completes: on an nng thread (nng), or on the thread holding the reader
 * role (unix://: the background reader, or a synchronous caller of the same client reading its
 * own reply, or the thread that cancelled or timed it out); keep it short, it delays other
 * replies.
 * It may read the call (tsd_call_status, tsd_call_take, tsd_call_error), submit new calls and
 * free call (the library then frees it after the callback returns); it must not wait for
 * other calls of the same client, nor make a synchronous call on it (on unix:// the reader
 * would wait for itself until the call's timeout). */
typedef void (*tsd_call_cb)(tsd_call *call, void *arg);

/* Encode the request (as tsd_client_call: ts only read, copied into the message before this
 * returns) and send it. cb (may be NULL) is called with arg when the call completes.
 * Returns TSD_OK and the call in *out (the caller frees it with tsd_call_free), or a failure
 * before anything was sent (a bad header or tensor, out of memory): then *out is NULL, cb is
 * never called, and tsd_client_error(c) says why. */
tsd_status tsd_client_submit(tsd_client *c, const cJSON *header, const tsd_tensor *ts, int n,
			     tsd_call_cb cb, void *arg, tsd_call **out);
/* Whether call completed (never blocks). */
bool tsd_call_done(const tsd_call *call);
/* Wait until call completes, at most timeout_ms (< 0: until it does; the call's own deadline
 * bounds that). True when it completed. */
bool tsd_call_wait(tsd_call *call, int timeout_ms);
/* A completed call's status: the reply's, or the failure's when no reply came (TSD_TIMEOUT,
 * TSD_SHUTTING_DOWN for a lost connection, TSD_CANCELLED after tsd_call_cancel, ...).
 * TSD_STATUS_COUNT while in flight. */
tsd_status tsd_call_status(const tsd_call *call);
/* A completed call's message: the reply's error, the failure's, or NULL when ok. Owned by call. */
const char *tsd_call_error(const tsd_call *call);
/* Move the completed call's reply to *out (NULL when none came, or it was taken): the caller
 * frees it with tsd_reply_free. Returns tsd_call_status. */
tsd_status tsd_call_take(tsd_call *call, tsd_reply **out);
/* Stop waiting for the reply: the call completes with TSD_CANCELLED (if it had not completed).
 * The daemon may still run a request it received. */
void tsd_call_cancel(tsd_call *call);
/* How many times call was sent: 1, or more when failover retried it. */
int tsd_call_attempts(const tsd_call *call);
/* Cancel call if in flight, wait for its callback, and free it with any reply not taken
 * (NULL is fine). */
void tsd_call_free(tsd_call *call);

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
 * TENSORD_URL environment variable), else "unix://" + the daemon's runtime directory (
 * xdg_runtime_dir + "/tensord" when it is absolute, else "/run/tensord") + "/tensord.sock".
 * The environment is passed in (getenv's values, may be NULL). False if it does not fit. */
bool tsd_client_default_url(const char *tensord_url, const char *xdg_runtime_dir, char *out,
			    size_t cap);

#endif
