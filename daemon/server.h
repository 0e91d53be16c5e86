/* server.h: the daemon's internals, shared by its files (docs/ARCHITECTURE.md, "The daemon").
 *
 * Threads and ownership:
 * - nng's threads run the socket callbacks (slot.c): a received request, a finished send, a
 *   closed connection. They only push events onto the inbox and wake the loop (uv_async_send,
 *   which coalesces: the loop drains the whole inbox each time).
 * - The loop thread (libuv) owns every other field of dmn_srv: clients, models and their
 *   queues, counters. It decodes and validates requests, batches them, and hands jobs to the
 *   executor one at a time (so priorities decide what runs next), and sends replies.
 * - The executor thread (exec.c) owns the engine context and everything made on it (a model
 *   version's weights and JITs). It runs a job and pushes it back onto the inbox.
 * A request (dmn_req) belongs to the loop except while its job is on the executor; then only
 * its atomic `gone` flag is written by the loop. */
#ifndef DMN_SERVER_H
#define DMN_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <nng/nng.h>
#include <uv.h>

#include <tensord/engine.h>
#include <tensord/io.h>
#include <tensord/jit.h>
#include <tensord/nn.h>
#include <tensord/optim.h>

#include "config.h"
#include "graph_build.h"
#include "log.h"
#include "metrics.h"
#include "message.h"

#define DMN_NAME_MAX 64 /* model names: [A-Za-z0-9_.-]{1,64} */
#define DMN_MAX_BUCKETS 32

enum { DMN_PRIO_REALTIME, DMN_PRIO_NORMAL, DMN_PRIO_BULK, DMN_NPRIO };

typedef enum dmn_verb {
#define DMN_VERB(e, name, fn) DMN_V_##e,
#include "verbs.def"
#undef DMN_VERB
	DMN_V_COUNT
} dmn_verb;

typedef struct dmn_srv dmn_srv;
typedef struct dmn_model dmn_model;
typedef struct dmn_mver dmn_mver;
typedef struct dmn_job dmn_job;

/* One nng REP context: receives a request, later sends its reply, then receives again. */
typedef struct dmn_slot {
	dmn_srv *srv;
	nng_ctx ctx;
	nng_aio *aio;
	bool sending;        /* the aio is a send (else a receive) */
	nng_msg *msg;        /* the request just received (inbox to loop) */
	struct dmn_slot *next; /* inbox link */
} dmn_slot;

/* A connection, by nng pipe id: its credentials and what it has in flight. */
typedef struct dmn_client {
	uint32_t pipe;
	bool authorised;
	bool gone;      /* the connection closed */
	int inflight;   /* its requests received and not yet answered */
	uint64_t uid, gid; /* UINT64_MAX when the transport has none (tcp) */
	struct dmn_client *next; /* hash chain */
} dmn_client;

/* A received request. */
typedef struct dmn_req {
	dmn_slot *slot;
	nng_msg *msg;  /* owned until the reply is sent */
	proto_msg pm;  /* decoded header; views into msg */
	bool decoded;
	dmn_verb verb;
	dmn_client *client;
	uint64_t t_arrive, t_dispatch, deadline; /* eng_now_ns(); deadline 0: none */
	int prio;
	bool latest_only;
	int64_t rows;      /* infer: rows along the batch dimension (1 if unbatched) */
	int ver;           /* infer: the model version its inputs were checked against */
	dmn_model *model;  /* infer, train.step, model.save: the model it is queued for */
	atomic_bool gone;  /* its client closed: nobody wants the answer (read by the executor) */
	struct dmn_req *prev, *next; /* in a model queue */
	/* set when its job ran: the reply to send (NULL: build an error from st and err) */
	nng_msg *reply;
	bool sent;     /* the executor sent the reply itself (off the loop: one thread hop less) */
	tsd_status st;
	char err[256];
} dmn_req;

typedef enum dmn_loss { DMN_LOSS_MSE, DMN_LOSS_CE, DMN_LOSS_SPARSE_CE } dmn_loss;

/* A tensor a model takes or gives: node in the graph, batch axis (-1: none). */
typedef struct dmn_port {
	const char *name; /* the node id (into the version's graph) */
	int node;
	int axis;
} dmn_port;

/* One loaded version of a model. The loop owns the description (immutable once loaded); the
 * executor owns `eng` (weights, JITs). Freed by a FREE job, then by the loop when it returns. */
struct dmn_mver {
	int version;
	int device;               /* index into the server's devices */
	proto_graph g;
	int nin, nout;
	dmn_port in[PROTO_GRAPH_MAX_OUTPUTS], out[PROTO_GRAPH_MAX_OUTPUTS];
	int in_order[PROTO_GRAPH_MAX_OUTPUTS]; /* graph input k (node order) = model input in_order[k] */
	bool batched;
	int batch_max, nbuckets, buckets[DMN_MAX_BUCKETS];
	uint64_t bucket_ns[DMN_MAX_BUCKETS]; /* loop: the last infer job's compute time per bucket (0: none) */
	int64_t delay_us;
	int queue_max;
	char weights_path[4096];  /* "" unless loaded from a file */
	/* an ONNX model (model_onnx.c): the graph above then holds only the ports' nodes */
	bool onnx;
	char onnx_path[4096];     /* "": the bytes came as the load request's tensor "onnx" */
	unsigned onnx_flags;      /* eng_onnx_load's */
	cJSON *onnx_opts;         /* the spec's "shapes" and "constants" (owned), read at load */
	/* training */
	bool trainable;
	dmn_loss loss;
	int train_out;            /* index into out[] */
	char target[PROTO_MAX_NAME + 1];
	eng_dtype target_dtype;
	int target_ndim;
	int64_t target_shape[ENG_MAX_DIMS]; /* batch dimension as PROTO_BATCH */
	eng_optim_opts optim;
	uint64_t steps;
	void *eng;                /* executor-owned (exec.c) */
};

typedef struct dmn_mcounters {
#define DMN_MC(f) uint64_t f;
#include "model_counters.def"
#undef DMN_MC
} dmn_mcounters;

/* A model name in the registry (loop-owned). */
typedef struct dmn_hists {
	dmn_hist queue_us, compute_us, total_us, batch_size;
} dmn_hists;

struct dmn_model {
	char name[DMN_NAME_MAX + 1];
	dmn_mver *cur;     /* the version serving, or NULL while the first load runs */
	int loading;       /* loads of this name under way */
	int next_version;
	bool removed;      /* unloaded: freed when refs drops to 0 */
	int refs;          /* jobs on the executor that point here */
	dmn_req *head[DMN_NPRIO], *tail[DMN_NPRIO];
	int queued;
	int64_t queued_rows;
	dmn_mcounters c;
	dmn_hists hist;    /* this model's queue, compute and total times, batch sizes */
	char spec_path[4096]; /* a preloaded model: its spec file, and what it held */
	uint64_t spec_hash;
};

typedef enum dmn_job_kind { DMN_J_LOAD, DMN_J_FREE, DMN_J_INFER, DMN_J_REALIZE, DMN_J_TRAIN, DMN_J_SAVE } dmn_job_kind;

struct dmn_job {
	dmn_job_kind kind;
	dmn_srv *srv;
	dmn_model *model;   /* LOAD, INFER, TRAIN, SAVE */
	dmn_mver *ver;      /* LOAD (the new one), FREE, INFER, TRAIN, SAVE */
	int nreq;
	dmn_req **reqs;     /* INFER: the batch; other kinds: one (NULL for a preload or FREE) */
	int bucket;         /* INFER: rows launched */
	int prio;           /* for dispatch */
	int preload;        /* LOAD: 1 a preload at start, 2 at a reload, 0 a request */
	uint64_t t_arrive;  /* of its oldest request */
	proto_graph graph;  /* REALIZE: validated on the loop */
	char save_path[4096]; /* SAVE: absolute, or "" to send the weights back */
	/* results (executor) */
	tsd_status st;
	char err[256];
	uint64_t t_start, t_end;
	struct dmn_job *next; /* executor queue, inbox, control queue */
};

/* The executor: one thread per device, owning its engine context. */
typedef struct dmn_exec {
	dmn_srv *srv;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	dmn_job *head, *tail;
	bool stop;
	bool busy;   /* a job is running: on the executor thread, or on the loop's (dmn_exec_run_here) */
	eng_ctx *ctx;
	char name[64];
	/* the engine's figures after the last job, for stats (under mu) */
	eng_stats stats;
	eng_device_stats dstats;
	uint64_t realize_compiles; /* kernels compiled by realize jobs (under mu) */
	/* the running job, for the abort hook */
	dmn_job *running;
} dmn_exec;

/* An inbox event other than a slot or a job. */
typedef struct dmn_event {
	enum { DMN_EV_PIPE_GONE, DMN_EV_HTTP } kind;
	uint32_t pipe;
	nng_aio *aio; /* HTTP */
	int what;     /* HTTP: DMN_HTTP_* */
	struct dmn_event *next;
} dmn_event;

#define DMN_CLIENT_BUCKETS 256
#define DMN_SPARE_REQS 256 /* freed requests kept for reuse */


struct dmn_srv {
	dmn_config cfg;
	int argc;
	char *const *argv;   /* for a reload */
	dmn_logger log;
	uv_loop_t loop;
	uv_async_t wake;
	int tfd;             /* timerfd: the batcher's next deadline (batcher.c) */
	uv_poll_t timer;     /* polls tfd */
	uint64_t timer_at;   /* when it is armed for (ns), 0: not armed */
	uv_timer_t drain_timer;
	uv_timer_t trim_timer; /* gives freed heap memory back to the system every second */
	uv_signal_t sig_term, sig_int, sig_hup;
	nng_socket sock;
	int nslots;
	dmn_slot *slots;
	/* inbox (mu): filled by nng threads and the executor */
	pthread_mutex_t mu;
	dmn_slot *in_slots, *in_slots_tail;
	dmn_job *in_jobs, *in_jobs_tail;
	dmn_event *in_events, *in_events_tail;
	atomic_int sending;  /* replies handed to nng, not yet sent */
	/* loop-owned */
	dmn_client *clients[DMN_CLIENT_BUCKETS];
	dmn_req *spare;      /* freed requests for reuse (request.c) */
	int nspare;
	int nmodels, models_cap;
	dmn_model **models;
	dmn_job *ctl_head, *ctl_tail; /* jobs waiting for the executor (loads, realize, train, save) */
	int ctl_len;
	dmn_exec exec;
	bool exec_busy;      /* a job other than FREE is on the executor */
	dmn_job *cur_job;    /* that job */
	int preload_pending; /* preload jobs not finished: not ready while > 0 */
	bool draining;
	uint64_t drain_deadline;
	int exit_code;       /* -1 while running */
	int exit_status;     /* what the drain exits with (1 after a failed preload) */
	uint64_t t_start;
	void *http;          /* http.c: the metrics listener, or NULL */
	/* counters */
	uint64_t requests[DMN_V_COUNT + 1][TSD_STATUS_COUNT]; /* last row: undecodable */
	uint64_t rejected[TSD_STATUS_COUNT];
	uint64_t realize_graphs;
	dmn_hists hist;
};

/* ---- server.c ---- */
/* Run the daemon with cfg (taken); returns the process exit code. */
int dmn_serve(dmn_config *cfg, int argc, char *const *argv);
/* Re-execute the daemon with glibc's per-thread malloc cache off (malloc_tune.c), unless
 * GLIBC_TUNABLES already sets it; returns only when it need not or could not. */
void dmn_malloc_tune(char **argv);
void dmn_wake(dmn_srv *s); /* any thread: run the loop's inbox drain */
void dmn_post_event(dmn_srv *s, dmn_event *e); /* any thread: e (taken) onto the inbox, and wake */
/* Called by the loop after anything that may let work run or stop. */
void dmn_check_drained(dmn_srv *s);
/* Whether preloads are done and the daemon is not draining. */
bool dmn_ready(const dmn_srv *s);

/* ---- slot.c: the nng side ---- */
int dmn_slots_start(dmn_srv *s, char *err, size_t errlen);
void dmn_slots_stop(dmn_srv *s);
/* Loop: send msg (taken) as the reply on slot; counts it in `sending`. */
void dmn_slot_send(dmn_slot *sl, nng_msg *msg);
/* Loop: give up a request without a reply (its client is gone) and receive again. */
void dmn_slot_recv(dmn_slot *sl);

/* ---- reply.c: replies (any thread) ---- */
/* The reply to req: header {id, status, error} plus extra's fields (extra is taken; may be
 * NULL) and n tensors. A reply over max_len bytes or that cannot be encoded becomes an error
 * reply. NULL only when out of memory. */
nng_msg *dmn_reply_msg(const proto_msg *req, tsd_status st, const char *err, cJSON *extra,
		       const proto_out *ts, int n, size_t max_len);

/* ---- request.c: the loop's request life ---- */
void dmn_on_request(dmn_srv *s, dmn_slot *sl);
/* Answer r: its prepared reply, or an error from st/err; then free r. */
void dmn_finish(dmn_srv *s, dmn_req *r);
/* Answer r with st and a formatted message (st OK: extra fields from extra). Frees r. */
void dmn_fail(dmn_srv *s, dmn_req *r, tsd_status st, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void dmn_reply_ok(dmn_srv *s, dmn_req *r, cJSON *extra, const proto_out *ts, int n);
/* Drop r without an answer (its client is gone). */
void dmn_drop(dmn_srv *s, dmn_req *r);
void dmn_on_pipe_gone(dmn_srv *s, uint32_t pipe);
dmn_client *dmn_client_get(dmn_srv *s, nng_pipe p);
/* A string field of j, or NULL. */
const char *dmn_json_str(const cJSON *j, const char *key);

/* ---- verbs.c ---- */
dmn_verb dmn_verb_find(const char *name); /* DMN_V_COUNT if unknown */
const char *dmn_verb_name(dmn_verb v);
void dmn_verb_run(dmn_srv *s, dmn_req *r);

/* ---- model.c: descriptions (loop) ---- */
/* Format a message into err[errlen] and return st (the model parsers' error path). */
tsd_status dmn_bad(char *err, size_t errlen, tsd_status st, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
bool dmn_name_ok(const char *name);
dmn_model *dmn_model_find(dmn_srv *s, const char *name);
dmn_model *dmn_model_add(dmn_srv *s, const char *name);
/* Parse a model.load object (pm: its message, or NULL for a preload) into a new version
 * (caller frees with dmn_mver_free): graph, ports, batching (defaults from the config),
 * training, weights path; or an ONNX model's fields (its ports come when the executor loads it).
 * Failure: the status and err naming the field. */
tsd_status dmn_mver_parse(dmn_srv *s, const cJSON *spec, const proto_msg *pm, dmn_mver **out, char *err, size_t errlen);
void dmn_mver_free(dmn_mver *v);
/* One request a launch: a version without a batch axis. */
void dmn_mver_unbatched(dmn_mver *v);
/* Check r's tensors against v's inputs (and the target when train): rows into r->rows. */
tsd_status dmn_check_inputs(const dmn_mver *v, const proto_msg *m, bool train, int64_t *rows, char *err, size_t errlen);
/* A model.list entry. */
cJSON *dmn_model_json(const dmn_srv *s, const dmn_model *m);
cJSON *dmn_counters_json(const dmn_mcounters *c);
/* A path under models_dir (relative, no ".."), made absolute into out. */
tsd_status dmn_models_path(const dmn_srv *s, const char *rel, char *out, size_t cap, char *err, size_t errlen);
/* Queue a load of spec (the model.load object) for its name; r: the request, or NULL for a
 * preload (preload 1 at start, 2 at a reload; 0 for a request). */
tsd_status dmn_load(dmn_srv *s, const cJSON *spec, dmn_req *r, int preload, char *err, size_t errlen,
		    dmn_model **mout);
/* Loop: a job came back. */
void dmn_model_job_done(dmn_srv *s, dmn_job *j);
void dmn_model_unload(dmn_srv *s, dmn_model *m);
void dmn_model_release(dmn_srv *s, dmn_model *m); /* refs--, free a removed one at 0 */
/* Load every preload spec; at start (the executor running) and on reload. */
int dmn_preload(dmn_srv *s, bool reload);

/* ---- batcher.c ---- */
void dmn_batch_done(dmn_srv *s, dmn_job *j); /* an INFER, TRAIN, SAVE or REALIZE job came back */
/* Queue an infer request (checked) for m; may answer it (busy, superseded others). */
void dmn_enqueue(dmn_srv *s, dmn_model *m, dmn_req *r);
/* Remove r from its model queue. */
void dmn_dequeue(dmn_srv *s, dmn_req *r);
void dmn_ctl_push(dmn_srv *s, dmn_job *j); /* queue a control job (load, realize, train, save) */
/* Run what can run: expire timeouts, pick the next job for the executor, arm the timer. */
void dmn_dispatch(dmn_srv *s);
/* Mark c's requests in the running job and in control jobs as gone. */
void dmn_mark_gone(dmn_srv *s, dmn_client *c);
/* Answer every queued request with st (draining, unload). m NULL: every model. */
void dmn_flush_queues(dmn_srv *s, dmn_model *m, tsd_status st, const char *msg);

/* ---- exec.c ---- */
int dmn_exec_start(dmn_srv *s, char *err, size_t errlen);
void dmn_exec_stop(dmn_srv *s);
void dmn_exec_push(dmn_srv *s, dmn_job *j);
/* Loop: run j on the calling thread, replies sent, when the executor is idle (nothing queued or
 * running); false (nothing done) when it is not. */
bool dmn_exec_run_here(dmn_srv *s, dmn_job *j);

void dmn_job_free(dmn_job *j);
/* The figures the executor published after its last job. */
void dmn_exec_stats(dmn_srv *s, eng_stats *st, eng_device_stats *ds);
void dmn_exec_cancel(dmn_srv *s); /* any thread: stop the running job (eng_cancel) */

/* ---- exec_model.c: on the executor ---- */
void dmn_run_load(dmn_exec *e, dmn_job *j);
void dmn_run_free(dmn_exec *e, dmn_job *j);
void dmn_run_infer(dmn_exec *e, dmn_job *j);
void dmn_run_train(dmn_exec *e, dmn_job *j);
void dmn_run_save(dmn_exec *e, dmn_job *j);
void dmn_run_realize(dmn_exec *e, dmn_job *j);

/* ---- model_onnx.c: ONNX models ---- */
/* Loop: the ONNX fields of a model.load (file or the tensor "onnx" of pm, shapes, constants,
 * f64_as_f32) into v; fields of graph models are refused. */
tsd_status dmn_onnx_spec(dmn_srv *s, const cJSON *spec, const proto_msg *pm, dmn_mver *v, char *err, size_t errlen);
typedef struct dmn_onnx dmn_onnx;
/* Executor: import v's file (pm: the load request's message, for uploaded bytes), make its
 * inputs v's ports and its outputs v's outputs, with batch axes proven at every bucket. */
tsd_status dmn_onnx_open(eng_ctx *ctx, dmn_mver *v, const proto_msg *pm, dmn_onnx **out, char *err, size_t errlen);
/* The graph for the model's inputs (port order); out: every output of the file. An engine
 * failure is the context's error; one of the daemon's own sets *st and err. */
eng_status dmn_onnx_build(dmn_onnx *o, eng_tensor *const *in, eng_tensor **out, tsd_status *st, char *err,
			  size_t errlen);
void dmn_onnx_free(dmn_onnx *o);

/* ---- stats.c ---- */
void dmn_stats_init(dmn_srv *s);
void dmn_hists_init(dmn_hists *h); /* the bounds of the daemon's histograms */
cJSON *dmn_hists_json(const dmn_hists *h);
void dmn_server_free_state(dmn_srv *s); /* models, clients, queued jobs (after the loop ends) */
cJSON *dmn_stats_json(dmn_srv *s);
char *dmn_metrics_text(dmn_srv *s); /* Prometheus text; caller frees */
void dmn_stats_count(dmn_srv *s, dmn_req *r, tsd_status st);

/* ---- http.c ---- */
int dmn_http_start(dmn_srv *s, char *err, size_t errlen);
void dmn_http_stop(dmn_srv *s);
enum { DMN_HTTP_METRICS, DMN_HTTP_HEALTHZ, DMN_HTTP_READYZ };
void dmn_http_answer(dmn_srv *s, nng_aio *aio, int what); /* loop: answer a queued HTTP request */

#endif
