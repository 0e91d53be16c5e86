/* verbs.h: one typed function per verb of the protocol (docs/PROTOCOL.md, "Verbs"), each a thin
 * wrapper that builds the header and calls tsd_client_call. Replies, statuses, messages and
 * threads as for tsd_client_call (client.h): *out receives the reply whenever the daemon
 * answered (the caller frees it with tsd_reply_free); without one, tsd_client_error says why.
 * Tensors (tsd_tensor: dtype, shape, pointer) are only read, encoded straight into the request
 * message: no other copy is made. */
#ifndef TSD_VERBS_H
#define TSD_VERBS_H

#include "client.h"
#include "graph.h"

/* Reply fields: protocol, daemon, devices, limits. */
tsd_status tsd_hello(tsd_client *c, tsd_reply **out);
/* Reply fields: ready, draining, models {ready, loading}, uptime_s. */
tsd_status tsd_health(tsd_client *c, tsd_reply **out);
/* Reply fields: uptime_s, requests, rejected, histograms, engine, models, realize. */
tsd_status tsd_stats(tsd_client *c, tsd_reply **out);
/* Reply field: models (an array of model.list entries). */
tsd_status tsd_model_list(tsd_client *c, tsd_reply **out);
/* Unload model name; its queued requests are answered cancelled. */
tsd_status tsd_model_unload(tsd_client *c, const char *name, tsd_reply **out);
/* Save model name's weights to path (relative to the daemon's models_dir, ending .safetensors),
 * or with path NULL return them as the reply's tensors, named by param id. */
tsd_status tsd_model_save(tsd_client *c, const char *name, const char *path, tsd_reply **out);

/* A model's batching policy. Start from TSD_BATCHING_DEFAULT: a field left at its default is
 * not sent (the daemon's config supplies it). */
typedef struct tsd_batching {
	int max;             /* rows in a launch; 0: default */
	int delay_us;        /* the longest wait for more rows; < 0: default (0 is a value) */
	const int *buckets;  /* launch sizes, increasing, the last = max; nbuckets 0: default */
	int nbuckets;
	int queue_max;       /* requests waiting; 0: default */
} tsd_batching;
#define TSD_BATCHING_DEFAULT ((tsd_batching){.delay_us = -1})

/* model.load: everything but name and graph is optional (NULL / 0). */
typedef struct tsd_model_spec {
	const char *name;                /* 1..64 bytes of [A-Za-z0-9_.-] */
	const cJSON *graph;              /* the graph (tsd_graph_json's, or written by hand) */
	const char *weights;             /* a safetensors file relative to the daemon's models_dir */
	const tsd_tensor *params;        /* weights sent in the message, named by param id */
	int nparams;
	const char *const *inputs;       /* the input tensors' order; NULL: every input node */
	int ninputs;
	const char *const *outputs;      /* the outputs; NULL: the graph's */
	int noutputs;
	const char *device;              /* one of hello's devices; NULL: the daemon's */
	const tsd_batching *batching;    /* NULL: the config's defaults */
	const cJSON *train;              /* the "train" object (loss, output, target, optimizer) */
	const cJSON *sequence;           /* the "sequence" object (state pairs, limits: docs/PROTOCOL.md) */
} tsd_model_spec;
/* Load (or replace) a model; the reply's "model" is its model.list entry. spec is only read. */
tsd_status tsd_model_load(tsd_client *c, const tsd_model_spec *spec, tsd_reply **out);

/* model.load of an ONNX file ("format": "onnx"): name and one of file or data are required. */
typedef struct tsd_onnx_spec {
	const char *name;
	const char *file;            /* the .onnx file relative to the daemon's models_dir, or NULL */
	const void *data;            /* else the file's bytes, sent in the message (no external data) */
	size_t size;
	const cJSON *shapes;         /* {"INPUT": [dims, -1 for the batch axis], ...} or NULL */
	const cJSON *constants;      /* {"INPUT": number or [numbers], ...} fixed at load, or NULL */
	bool f64_as_f32;             /* run float64 parts in float32 instead of refusing them */
	const char *device;          /* NULL: the daemon's */
	const tsd_batching *batching; /* NULL: the config's defaults */
	const cJSON *sequence;       /* the "sequence" object (state pairs, limits: docs/PROTOCOL.md) */
} tsd_onnx_spec;
tsd_status tsd_model_load_onnx(tsd_client *c, const tsd_onnx_spec *spec, tsd_reply **out);

typedef enum tsd_priority {
	TSD_PRIORITY_NORMAL,
	TSD_PRIORITY_REALTIME,
	TSD_PRIORITY_BULK,
} tsd_priority;

/* infer's options; NULL or a zeroed struct: normal priority, no deadline, the client's id. */
typedef struct tsd_infer_opts {
	tsd_priority priority;
	int timeout_ms;    /* the daemon answers timeout if it could not start it by then; 0: none */
	bool latest_only;  /* a newer latest_only request of this client for the model replaces it */
	const char *id;    /* the request id (<= 64 bytes); NULL: the client numbers it */
	/* A step of a sequence (docs/PROTOCOL.md, "Sequences"): the daemon keeps the model's state
	 * between the steps of one sequence id and feeds it; the state inputs are not sent. */
	uint64_t sequence_id;      /* 1..2^53; 0: none (unless sequence_name) */
	const char *sequence_name; /* a string id instead (1..128 bytes), or NULL */
	bool sequence_start;       /* starts it (or starts it again: the state is reset) */
	bool sequence_end;         /* its last step: the state is freed after it */
	bool sequence_state;       /* the reply carries the state outputs too */
} tsd_infer_opts;

/* Run model on in[0..n) (named by the model's inputs); the reply's tensors are its outputs. */
tsd_status tsd_infer(tsd_client *c, const char *model, const tsd_tensor *in, int n,
		     const tsd_infer_opts *o, tsd_reply **out);
/* The same as an asynchronous call (tsd_client_submit). */
tsd_status tsd_infer_submit(tsd_client *c, const char *model, const tsd_tensor *in, int n,
			    const tsd_infer_opts *o, tsd_call_cb cb, void *arg, tsd_call **out);
/* Compute graph once on in[0..n) (named by its input and param ids); timeout_ms 0: none. */
tsd_status tsd_realize(tsd_client *c, const cJSON *graph, const tsd_tensor *in, int n,
		       int timeout_ms, tsd_reply **out);
/* One training step of model on in[0..n) (its inputs and its train target); lr > 0 sets the
 * rate from this step on (0: keep). Reply fields: loss, step. */
tsd_status tsd_train_step(tsd_client *c, const char *model, const tsd_tensor *in, int n,
			  double lr, int timeout_ms, tsd_reply **out);

#endif
