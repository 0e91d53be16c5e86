/* daemon_harness.h: the daemon integration tests' harness (test_daemon.c, test_daemon_bad.c):
 * the real tensord binary (the build dir's bin/tensord, found from /proc/self/exe) started with
 * fork/exec on an ipc:// address (nng.sock) and a unix:// one (unix.sock) inside a mkdtemp directory with a generated config, waited for
 * until `health` says ready; clients, model loads from a JSON string and float weights, infer,
 * stats; raw nng REQ contexts for requests in flight together; stop with SIGTERM asserting exit
 * status 0 and no sanitizer report in the daemon's stderr (kept in the tmpdir, its tail printed
 * on failure).
 * Cleanup: every daemon lives under one directory made by the tcase's unchecked setup
 * (dh_tcase_setup, in the runner process). The daemon dies with the test process
 * (PR_SET_PDEATHSIG), the checked teardown (dh_teardown) kills and removes a daemon a failed
 * test left (CK_FORK=no), and the unchecked teardown prints the stderr tail of every daemon
 * left behind and removes the directory (CK_FORK=yes, where a failed test exits at once). */
#ifndef DAEMON_HARNESS_H
#define DAEMON_HARNESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <check.h>
#include <cjson/cJSON.h>
#include <nng/nng.h>

#include <tensord/client.h>
#include "protocol/message.h"

#define DH_TIMEOUT_MS 30000 /* a client's send and receive bound */

typedef struct dh_daemon {
	char dir[256];
	char url[336];      /* the address dh_client and the tests' own clients use: unix:// (unix_path),
			     * or nng_url when TSD_TEST_TRANSPORT=nng (make test-nng) */
	char nng_url[320];  /* the nng ipc:// address (raw REQ sockets, the sender process) */
	char unix_path[320]; /* the unix:// transport's socket path (listened on beside url) */
	char cfg_path[320], err_path[320], models_dir[320];
	pid_t pid;
	bool running;
	bool refused; /* allowed_uids excludes us: health answers unauthorised */
	bool keep_dir; /* dh_stop_keep: the directory (and address) stay for the next dh_start */
} dh_daemon;

/* Fixtures: add both to every tcase that starts daemons (dh_add_test does). */
void dh_tcase_setup(void);
void dh_tcase_teardown(void);
void dh_teardown(void);
/* A tcase of its own for test t (the fixtures above, timeout seconds). */
void dh_add_test(Suite *s, const char *name, const TTest *t, int timeout_s);

/* The daemon with the base config (listen, models_dir, log_level warn, cache_dir in the tmpdir)
 * plus the fields of extra_json (an object's text, NULL for none; they replace the base's).
 * models_dir exists before the start: write spec files there first with dh_prepare. */
void dh_prepare(dh_daemon *d);
void dh_start(dh_daemon *d, const char *extra_json);
/* The config dh_start writes (base plus extra_json), at d->cfg_path: for a start that must fail. */
void dh_write_config(const dh_daemon *d, const char *extra_json);
/* tensord --config cfg with stderr into err_path: its exit status, or -1 when it was still
 * running after timeout_s (then killed). */
int dh_run_tensord(const char *cfg, const char *err_path, int timeout_s);
/* A start of d's config (dh_write_config) that must fail: non-zero exit, needle in its stderr. */
void dh_expect_start_fails(const dh_daemon *d, const char *err_path, const char *needle, const char *what);
/* Whether the file's first 64 KiB hold needle. */
bool dh_file_has(const char *path, const char *needle);
/* SIGTERM, waitpid: asserts exit status 0 and a clean stderr (no sanitizer report). */
void dh_stop(dh_daemon *d);
/* dh_stop keeping the directory, so that dh_start starts a new daemon on the same address. */
void dh_stop_keep(dh_daemon *d);
/* SIGKILL and reap (no exit status checks); the directory stays for dh_start. */
void dh_kill(dh_daemon *d);
/* The same without the signal (it was sent already). */
void dh_wait_exit(dh_daemon *d);
/* Print the last lines of the daemon's stderr file. */
void dh_print_tail(const char *err_path);
/* A file under models_dir. */
void dh_write_file(const dh_daemon *d, const char *rel, const void *data, size_t len);
/* A safetensors file of float32 tensors under models_dir. */
void dh_write_safetensors(const dh_daemon *d, const char *rel, int n, const char *const *names,
			  const float *const *data, const int *ndim, const int64_t (*shape)[4]);

tsd_client *dh_client(const dh_daemon *d);
/* A client on the nng ipc:// address whatever TSD_TEST_TRANSPORT says (tests of nng's own
 * connections, and of the unix transport's counts without adding to them). */
tsd_client *dh_client_nng(const dh_daemon *d);
/* A port on 127.0.0.1 free a moment ago (bound to 0 and released). */
int dh_free_port(void);
/* Read exactly len bytes from fd within timeout_ms; false on EOF, reset or timeout. */
bool dh_recv_all(int fd, void *buf, size_t len, int timeout_ms);

/* A float32 tensor view (nothing copied). */
tsd_tensor dh_f32(const char *name, const float *data, const int64_t *shape, int ndim);
#define DH_SHAPE(...) ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
#define DH_F32(name, data, ...) dh_f32((name), (data), DH_SHAPE(__VA_ARGS__))

/* model.load of spec_json (the object without "verb") with weights ws[0..n); asserts ok. */
void dh_load(tsd_client *c, const char *spec_json, const tsd_tensor *ws, int n);
/* infer of model on x [rows, cols] (tensor "x") plus extra_json's fields (NULL: none). On ok
 * the first output is copied to out (nout floats expected). Never asserts (threads use it):
 * returns the status, or TSD_INTERNAL with why filled when the output is not nout floats. */
tsd_status dh_infer(tsd_client *c, const char *model, const char *extra_json, const float *x, int64_t rows,
		    int64_t cols, float *out, int64_t nout, char *why, size_t whylen);
/* A verb without fields; asserts ok; returns the reply's header, the caller's to delete. */
cJSON *dh_call_json(tsd_client *c, const char *verb);
/* A number at a dotted path ("models.lin.batches"); NAN when absent. */
double dh_num(const cJSON *j, const char *path);
/* stats' number at path. */
double dh_stat(tsd_client *c, const char *path);

/* ---- raw REQ contexts: several requests in flight on one connection ---- */
typedef struct dh_async {
	nng_ctx ctx;
	nng_aio *aio;
	int rv;          /* the receive's result */
	atomic_int order; /* completion order (global counter from 1), 0 while in flight */
	nng_msg *reply;
	bool sending;
	atomic_bool stopping; /* dh_async_free: the callback starts nothing more */
} dh_async;

/* A raw REQ socket dialled to d: nng_dial's result (NNG_ECONNREFUSED when nothing listens). */
int dh_raw_try_open(const dh_daemon *d, int timeout_ms, nng_socket *s);
nng_socket dh_raw_open(const dh_daemon *d, int timeout_ms);
/* nng_close on a helper thread, waited for at most 5 s: nng 1.5's nng_close of a REQ socket
 * now and then never returns (a pipe stuck closing, nanomsg/nng#1543-like); the socket is then
 * left behind (a note on stderr) rather than hanging the test. */
void dh_raw_close(nng_socket s);
/* tsd_client_close the same way: after one socket's close got stuck, nng can hold another's. */
void dh_client_close(tsd_client *c);
/* The same with its dialer: close the dialer before the socket when the daemon may drop the
 * connection (nng 1.5's nng_close can hang on a REQ socket redialling to resend). */
nng_socket dh_raw_open_dialer(const dh_daemon *d, int timeout_ms, nng_dialer *dl);
/* A client in a process of its own (this test binary run again, main.c -> dh_sender_main): it
 * sends req (a copy; the caller keeps req) n times on contexts of one REQ socket to d, then
 * waits for its end. dh_kill_sender kills it with SIGKILL: the kernel closes its connection with
 * the requests in flight, as when a client crashes, and nng's close in this process is not
 * involved. Dies with the test process. */
pid_t dh_spawn_sender(const dh_daemon *d, nng_msg *req, int n);
void dh_kill_sender(pid_t pid);
/* The sender's body, when DH_SENDER_URL is set (main.c); returns an exit status on error. */
int dh_sender_main(void);
/* Encode header + ts into a message (asserts). */
nng_msg *dh_encode(const cJSON *header, const tsd_tensor *ts, int n);
/* Send msg (taken) on a new context of sock; the reply arrives in the background. */
void dh_async_send(nng_socket sock, dh_async *a, nng_msg *msg);
/* Wait for the reply; decode it into *pm (caller frees with proto_msg_free); returns its
 * status, or TSD_STATUS_COUNT when no reply came (rv says why). Main thread only. */
tsd_status dh_async_wait(dh_async *a, proto_msg *pm);
void dh_async_free(dh_async *a);
/* One raw message (bytes) sent on sock and its reply decoded (main thread). TSD_STATUS_COUNT
 * when none came. */
tsd_status dh_raw_call(nng_socket sock, const void *buf, size_t len, proto_msg *pm, nng_msg **keep);

/* The next completion order number (dh_async's callback). */
extern atomic_int dh_order;

#endif
