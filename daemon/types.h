/* types.h: the daemon's shared types (docs/ARCHITECTURE.md, "The daemon"): the server, its
 * models and their versions, requests, clients, jobs and the executor; and the few functions
 * of those types themselves (types.c). Every layer above the transports includes it.
 *
 * Threads and ownership:
 * - Transport threads (nng's) only post to the inbox: a received request, a closed connection.
 * - The loop thread (libuv) owns every other field of dmn_srv: clients, models and their
 *   queues, counters. It decodes and validates requests, batches them, and hands jobs to the
 *   executor one at a time (so priorities decide what runs next), and answers.
 * - The executor thread (exec.c) owns the engine context and everything made on it (a model
 *   version's weights and JITs). It runs a job, sends the replies it made, and posts the job
 *   back onto the inbox. The realize worker (exec.c, `rexec`) is a second executor with a
 *   context of its own for ad-hoc realize graphs; the loop sends its replies.
 * A request (dmn_req) belongs to the loop except while its job is on the executor; then only
 * its atomic `gone` flag is written by the loop. */
#ifndef DMN_TYPES_H
#define DMN_TYPES_H

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
#include "inbox.h"
#include "log.h"
#include "message.h"
#include "metrics.h"
#include "shm.h"
#include "token.h"
#include "transport.h"

#define DMN_NAME_MAX 64 /* model names: [A-Za-z0-9_.-]{1,64} */
#define DMN_MAX_BUCKETS 32
#define DMN_STATE_MAX 8 /* state pairs of one model */
#define DMN_SEQ_ID_MAX 128 /* bytes of a string sequence id */

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
typedef struct dmn_seq dmn_seq;   /* a live sequence (sequence.c) */
typedef struct dmn_seqs dmn_seqs; /* a model's sequences (sequence.c) */

/* A connection (a transport's, by its id): its credentials and what it has in flight. */
typedef struct dmn_client {
	const dmn_chan_ops *ops;
	uint32_t conn;    /* the transport's connection id */
	bool authorised;
	bool gone;      /* the connection closed */
	int inflight;   /* its requests received and not yet answered */
	bool hung_up;   /* its connection is being closed (refused, or flooding): nothing more is
			 * queued for it, its later requests are dropped unanswered */
	uint64_t uid, gid; /* UINT64_MAX when the transport has none (tcp) */
	bool creds;        /* the transport gave credentials (ipc): no token is asked for */
	int token_refused; /* requests answered unauthorised for their token (auth.c) */
	/* its realize compile budget (batcher.c): tokens left as of rz_at (0: never charged, full) */
	double rz_tokens;
	uint64_t rz_at;
	dmn_shm_set *shm; /* its shared-memory regions (unix:// only), NULL until the first */
	struct dmn_client *next; /* hash chain */
} dmn_client;

/* An infer output the client asked for in one of its shared-memory regions: the executor writes
 * nbytes at dst (checked against the region on the loop) instead of into the reply. */
typedef struct dmn_shm_out {
	const char *name;  /* the output's name (into the request's header) */
	dmn_shm_region *g; /* referenced by the request's dmn_shm_use */
	uint64_t offset;
	uint64_t cap;      /* "byte_size" given with it (system shared memory): the bytes it may take; 0: the region's */
	void *dst;
	size_t nbytes;
} dmn_shm_out;

/* The regions a request names (each held once per reference) and its outputs into them. */
typedef struct dmn_shm_use {
	int nheld;
	dmn_shm_region *held[PROTO_MAX_TENSORS + PROTO_GRAPH_MAX_OUTPUTS];
	int nout;
	dmn_shm_out out[PROTO_GRAPH_MAX_OUTPUTS];
	int ncopies; /* inputs in unsealed regions, copied out under the SIGBUS guard (owned) */
	void *copies[PROTO_MAX_TENSORS];
} dmn_shm_use;

/* A received request. */
typedef struct dmn_req {
	dmn_chan *chan; /* the transport's channel it came on; the reply goes back through it */
	nng_msg *msg;  /* owned until the reply is sent */
	proto_msg pm;  /* decoded header; views into msg */
	bool decoded;
	dmn_verb verb;
	dmn_client *client;
	int fd;            /* a file descriptor that came with it (unix://, shm.register), or -1 */
	dmn_shm_use *shm;  /* infer: its shared-memory references, or NULL */
	uint64_t t_arrive, t_dispatch, deadline; /* eng_now_ns(); deadline 0: none */
	int prio;
	bool latest_only;
	int64_t rows;      /* infer: rows along the batch dimension (1 if unbatched) */
	int ver;           /* infer: the model version its inputs were checked against */
	/* infer of a sequence (sequence.c): the loop's; the executor reads seq_slot and the flags */
	dmn_seq *seq;      /* NULL: a plain request */
	struct dmn_req *seq_next; /* the sequence's next queued step */
	int seq_slot;      /* its state's slot on the executor (set at dispatch) */
	bool seq_start, seq_end, seq_state; /* flags; seq_state: the reply carries the state */
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
	int fixed_version;        /* model.load's "version" (a repository's directory number), or 0: the next */
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
	/* an ONNX model (spec_onnx.c, exec_onnx.c): the graph above then holds only the ports' nodes */
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
	/* sequences with implicit state (spec_seq.c): an output fed back as an input at the next
	 * step of the same sequence; nstate 0: the model serves no sequences */
	int nstate;
	struct dmn_state_pair {
		char input[PROTO_MAX_NAME + 1], output[PROTO_MAX_NAME + 1];
		int in, out;      /* indices into in[] and out[] (resolved with the ports) */
		double init;      /* the initial value of every element, unless init_data */
		float *init_data; /* one row's initial values (owned), or NULL */
		int64_t init_n;   /* numbers in it */
	} state[DMN_STATE_MAX];
	int max_sequences;
	int64_t seq_idle_us;
	bool seq_outlive;         /* sequences outlive the connection that started them */
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
	dmn_seqs *seqs;    /* its sequences (sequence.c), NULL until the first */
};

/* DMN_J_TRIM, DMN_J_RTRIM: the idle trim (server.c): the engine's cached buffers and malloc's free
 * memory back to the system, on the executor that owns the context (the models', the realize
 * worker's); no request, never in dispatch's order. */
/* DMN_J_SEQFREE: ended sequences' state slots of a version freed on the models' executor (like FREE,
 * outside dispatch's order; the executor's queue keeps it before any later step). */
typedef enum dmn_job_kind { DMN_J_LOAD, DMN_J_FREE, DMN_J_INFER, DMN_J_REALIZE, DMN_J_TRAIN, DMN_J_SAVE, DMN_J_TRIM,
			    DMN_J_RTRIM, DMN_J_SEQFREE } dmn_job_kind;

struct dmn_job {
	dmn_inbox_node in;  /* first: on the inbox's DONE lane when it comes back */
	dmn_job_kind kind;
	dmn_srv *srv;
	dmn_model *model;   /* LOAD, INFER, TRAIN, SAVE */
	dmn_mver *ver;      /* LOAD (the new one), FREE, INFER, TRAIN, SAVE */
	int nreq;
	dmn_req **reqs;     /* INFER: the batch; other kinds: one (NULL for a preload or FREE) */
	int bucket;         /* INFER: rows launched */
	int prio;           /* for dispatch */
	int preload;        /* LOAD: 1 a preload at start, 2 at a reload, 3 a repository model at start
			     * (counted for readiness; a failure is logged, not fatal), 0 a request */
	uint64_t t_arrive;  /* of its oldest request */
	proto_graph graph;  /* REALIZE: validated on the loop */
	char save_path[4096]; /* SAVE: absolute, or "" to send the weights back */
	int nslots, *slots;   /* SEQFREE: the slots (owned) */
	/* results (executor) */
	tsd_status st;
	char err[256];
	uint64_t t_start, t_end;
	uint64_t compiles;  /* REALIZE: compiler runs it caused (the engine's counter) */
	atomic_bool replied; /* the executor has sent its replies (it comes back on the DONE lane next) */
	struct dmn_job *next; /* executor queue, control queue */
};

/* An executor: a thread owning an engine context. The daemon has two: the models' (loads,
 * infer, train, save) and the realize worker's (ad-hoc graphs, at a low CPU priority), so a
 * compile never runs on the thread that serves inference. */
typedef struct dmn_exec {
	dmn_srv *srv;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	dmn_job *head, *tail;
	bool stop;
	bool busy;   /* a job is running: on the executor thread, or on the loop's (dmn_exec_run_here) */
	eng_ctx *ctx;
	int nice;    /* the thread's CPU priority (0: unchanged) */
	char name[64];
	/* the engine's figures after the last job, for stats (under mu) */
	eng_stats stats;
	eng_device_stats dstats;
	uint64_t realize_compiles; /* kernels compiled by realize jobs (under mu) */
	/* the running job, for the abort hook */
	dmn_job *running;
} dmn_exec;

#define DMN_CLIENT_BUCKETS 256
#define DMN_SPARE_REQS 256 /* freed requests kept for reuse */


struct dmn_srv {
	dmn_config cfg;
	int argc;
	char *const *argv;   /* for a reload */
	dmn_logger log;
	uv_loop_t loop;
	dmn_inbox *inbox;    /* the hand-over from other threads (inbox.c) */
	int tfd;             /* timerfd: the batcher's next deadline (batcher.c) */
	uv_poll_t timer;     /* polls tfd */
	uint64_t timer_at;   /* when it is armed for (ns), 0: not armed */
	uv_timer_t drain_timer;
	uv_timer_t trim_timer; /* gives freed heap memory back to the system every second */
	uv_signal_t sig_term, sig_int, sig_hup;
	dmn_stream *stream;  /* the transport (transport_stream.c): unix://, ipc://, tcp://; NULL without addresses */
	struct dmn_oip_http *oip; /* the Open Inference Protocol over HTTP (oip_http.c); NULL when off */
	dmn_shm_set *sysshm; /* Triton's system shared memory (verbs_sysshm.c); NULL unless oip_shm */
	struct dmn_oip_grpc *oip_grpc; /* the Open Inference Protocol over gRPC (oip_grpc.c); NULL when off */
	/* loop-owned */
	dmn_client *clients[DMN_CLIENT_BUCKETS];
	dmn_req *spare;      /* freed requests for reuse (request.c) */
	dmn_req *deferred, *deferred_tail; /* stats and model.list that wait for the job whose replies went out (verbs.c) */
	int nspare;
	int nmodels, models_cap;
	dmn_model **models;
	dmn_job *ctl_head, *ctl_tail; /* jobs waiting for the executor (loads, realize, train, save) */
	int ctl_len;
	dmn_exec exec;
	bool exec_busy;      /* a job other than FREE is on the executor */
	dmn_job *cur_job;    /* that job */
	dmn_exec rexec;      /* the realize worker: ad-hoc graphs, one at a time */
	dmn_job *rz_job;     /* the realize job on it, or NULL */
	int preload_pending; /* preload jobs not finished: not ready while > 0 */
	int reload_pending;  /* loads of a reload (SIGHUP) not finished: not ready while > 0 */
	uint64_t job_t0;     /* eng_now_ns() when cur_job was handed to the executor (health.c's stall) */
	bool stopping;       /* SIGTERM came: not ready; the drain begins at drain_at (drain_grace_s) */
	uint64_t drain_at;
	uv_timer_t grace_timer;
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
	uint64_t realize_over_budget; /* realize requests answered busy: their client's compile budget was spent */
	uint64_t hangup_refused, hangup_flood; /* connections closed: refused peer; far past its cap */
	/* the tcp bearer token (auth.c): len 0 when tcp_token_file is empty */
	proto_token token;
	uint64_t auth_refused, hangup_token; /* requests refused for their token; connections closed */
	dmn_hists hist;
	/* memory (memlimit.c; the idle trim in server.c) */
	uint64_t mem_limit;      /* the engine's effective limit in bytes; 0: none */
	uint64_t activity;       /* jobs back from the executor, counted */
	uint64_t last_activity;  /* eng_now_ns() of the last of them */
	uint64_t activity_trimmed; /* activity when the last idle trim was pushed */
	int trim_inflight;       /* DMN_J_TRIM and DMN_J_RTRIM jobs on the executors */
	uint64_t trims;          /* idle trims done */
};


/* ---- types.c ---- */
dmn_verb dmn_verb_find(const char *name); /* DMN_V_COUNT if unknown */
const char *dmn_verb_name(dmn_verb v);
void dmn_hists_init(dmn_hists *h); /* the bounds of the daemon's histograms */
cJSON *dmn_hists_json(const dmn_hists *h);
cJSON *dmn_counters_json(const dmn_mcounters *c); /* a model's counters as an object */
/* The histograms of h by index (DMN_NHISTS of them) and their names. */
#define DMN_NHISTS 4
const dmn_hist *dmn_hists_at(const dmn_hists *h, int k);
const char *dmn_hists_name(int k);
void dmn_mver_free(dmn_mver *v); /* NULL is allowed */
/* One request a launch: a version without a batch axis. */
void dmn_mver_unbatched(dmn_mver *v);

#endif
