/* tensorctl.h: what tensorctl's files share: exit codes, the command context, tensors from JSON,
 * raw bytes or .npy files, models as model.list describes them, the progress bar. */
#ifndef TCTL_H
#define TCTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tensord/client.h>

#define TCTL_MAX_TENSORS 64
#define TCTL_FILE_MAX	 ((size_t)1 << 30) /* bytes of an input file */
#define TCTL_NAME_MAX	 128		   /* a tensor name's bytes */

/* Exit statuses (tensorctl --help, clients/README.md): scripts rely on them. */
enum {
	TCTL_EXIT_OK = 0,
	TCTL_EXIT_DAEMON = 1,	   /* the daemon answered an error */
	TCTL_EXIT_USAGE = 2,	   /* bad arguments or unreadable / malformed input files */
	TCTL_EXIT_TRANSPORT = 3,   /* cannot connect, no reply, timeout */
	TCTL_EXIT_PARTIAL = 4,	   /* some requests failed (replay lines, bench requests) */
	TCTL_EXIT_INTERRUPTED = 5, /* SIGINT/SIGTERM or --stop-after: replay can resume */
	TCTL_EXIT_IO = 6,	   /* an output file could not be written */
};

/* What every command gets: the connected client (used by the main thread) and how to open
 * more (one per thread). */
typedef struct tctl_ctx {
	tsd_client *c;
	const char *url;
	int timeout_ms;
} tctl_ctx;

/* A command: argv holds the arguments after its name. Returns an exit status. */
typedef int (*tctl_cmd_fn)(tctl_ctx *ctx, int argc, char **argv);

/* Print "tensorctl CMD: <message>" and a hint to stderr; returns TCTL_EXIT_USAGE. */
int tctl_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The outcome of a call: 0 when ok, else the message printed and the exit status (1 when the
 * daemon answered, 3 when no reply came). */
int tctl_outcome(tsd_client *c, tsd_status s, const tsd_reply *r);
/* Exit status for a status of a call without reply (r == NULL) or with one. */
int tctl_exit_for(tsd_status s, bool replied);
/* Seconds on a monotonic clock. */
double tctl_now(void);
/* Parse a whole decimal number in [lo, hi] into *out; false if it is not one. */
bool tctl_parse_long(const char *s, long lo, long hi, long *out);
/* The whole file at path, NUL-terminated (*len bytes before the NUL); free() it. NULL with the
 * reason in err[errlen] when it cannot be read or is over TCTL_FILE_MAX bytes. */
char *tctl_read_file(const char *path, size_t *len, char *err, size_t errlen);

/* ---- tensors ---- */

/* Tensors to send, owning their names and data. Zero it before use; free with tctl_inputs_free. */
typedef struct tctl_inputs {
	int n;
	tsd_tensor t[TCTL_MAX_TENSORS];
} tctl_inputs;

void tctl_inputs_free(tctl_inputs *in);

/* The JSON object in the file at path (the caller deletes it), or NULL with the reason in err. */
cJSON *tctl_json_file(const char *path, char *err, size_t errlen);

/* Add every member of obj, {"NAME": {"dtype", "shape", "data"}, ...}, to in. data: numbers (true
 * and false for bool), nested arrays flattened in row-major order, exactly numel of them.
 * False with the reason (naming the tensor) in err. */
bool tctl_inputs_from_json(tctl_inputs *in, const cJSON *obj, char *err, size_t errlen);

/* Add a tensor named name of dtype and shape ("1,4"; "" is a scalar) over data[len] (raw
 * little-endian elements; len must be numel * dtype size). Takes data (freed with in, or here
 * on failure). False with the reason in err. */
bool tctl_inputs_raw(tctl_inputs *in, const char *name, const char *dtype, const char *shape,
		     void *data, size_t len, char *err, size_t errlen);

/* Add the tensor of a .npy file (tensorctl_npy.c) under name. False with the reason in err. */
bool tctl_inputs_npy(tctl_inputs *in, const char *name, const char *path, char *err, size_t errlen);

/* Inputs from command arguments: INPUT.json (every tensor in it) or NAME=FILE.npy, any mix.
 * False with the reason in err. */
bool tctl_inputs_arg(tctl_inputs *in, const char *arg, char *err, size_t errlen);

/* t as {"dtype", "shape", "data": [flat numbers]} (int64 beyond 2^53 loses precision, NaN and
 * Inf print as null); the caller owns it. NULL when out of memory. */
cJSON *tctl_tensor_json(const tsd_tensor *t);

/* A number fit for dt (finite; for integer dtypes a whole number in range), stored at dst as dt,
 * and an element of dt read back. */
bool tctl_value_fits(tsd_dtype dt, double v);
void tctl_value_store(tsd_dtype dt, double v, void *dst);
double tctl_value_load(tsd_dtype dt, const void *src);

/* ---- .npy files (tensorctl_npy.c) ---- */

/* Read a .npy file (format 1.0/2.0/3.0, little-endian or single-byte dtypes b1 u1 i4 i8 f2 f4,
 * C order) into t: data malloc'd (the caller frees it), name left NULL. False with the reason. */
bool tctl_npy_read(const char *path, tsd_tensor *t, char *err, size_t errlen);
/* Write t to path as .npy (format 1.0, or 2.0 for a long header). False with the reason. */
bool tctl_npy_write(const char *path, const tsd_tensor *t, char *err, size_t errlen);
/* Every tensor of r written as DIR/NAME.npy (names with '/' refused); the paths printed. */
int tctl_write_outputs_npy(const tsd_reply *r, const char *dir);

/* ---- datasets and weights (tensorctl_data.c) ---- */

/* An IDX file (gzip'd or raw; u8, i32 or f32 elements) into t (data malloc'd, name NULL). */
bool tctl_idx_read(const char *path, tsd_tensor *t, char *err, size_t errlen);
/* Every tensor of a safetensors file added to in (names and data copied). */
bool tctl_safetensors_read(const char *path, tctl_inputs *in, char *err, size_t errlen);

/* ---- models as model.list describes them (tensorctl_model.c) ---- */

typedef struct tctl_port {
	char name[TCTL_NAME_MAX + 1];
	tsd_dtype dtype;
	int ndim;
	int64_t shape[TSD_MAX_DIMS]; /* -1 at the batch axis */
	int batch_axis;		     /* -1 when none */
	size_t row_numel;	     /* elements of one row (the whole tensor when unbatched) */
	size_t outer, inner;	     /* elements before and after the batch axis */
} tctl_port;

typedef struct tctl_model {
	char name[65];
	int nin, nout;
	tctl_port in[TCTL_MAX_TENSORS], out[TCTL_MAX_TENSORS];
	bool batched, trainable;
	int batch_max;
	char target[TCTL_NAME_MAX + 1]; /* a trainable model's target tensor ("" if not said) */
	uint64_t state_in, state_out;	/* its sequences' state pairs: bit k for in[k], out[k] */
} tctl_model;

/* Every model of model.list into *ms (malloc'd, *n of them; the caller frees *ms). Returns an
 * exit status (the message printed). */
int tctl_models_fetch(tsd_client *c, tctl_model **ms, int *n);
/* The model called name[len], or NULL. */
const tctl_model *tctl_model_find(const tctl_model *ms, int n, const char *name, size_t len);

/* ---- the progress bar on stderr (tensorctl_progress.c) ---- */

typedef struct tctl_progress {
	bool on;
	double t0, last;
	size_t total; /* 0 when unknown */
	size_t base;  /* done before this run (resumed): not counted in the rate */
} tctl_progress;

/* on: --progress given, or stderr a terminal and not --no-progress. */
void tctl_progress_start(tctl_progress *p, bool on, size_t total, size_t base);
/* Redraw at most 10 times a second (always when force): bar, done/total, rate, ETA, note. */
void tctl_progress_update(tctl_progress *p, size_t done, const char *note, bool force);
/* Finish the line. */
void tctl_progress_end(tctl_progress *p);

/* ---- commands (one file each) and their --help ---- */

int tctl_cmd_replay(tctl_ctx *ctx, int argc, char **argv);
int tctl_cmd_bench(tctl_ctx *ctx, int argc, char **argv);
int tctl_cmd_train(tctl_ctx *ctx, int argc, char **argv);
extern const char tctl_replay_help[], tctl_bench_help[], tctl_train_help[];

#endif
