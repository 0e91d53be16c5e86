/* robot.h: what the robot-brain programs share (examples/robot/): the two vocabularies and the
 * tokeniser, the model's sizes and its graph specs (serving decode and teacher-forced training),
 * and small helpers over the client library (infer of token ids, percentiles, clocks). */
#ifndef ROBOT_H
#define ROBOT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include <tensord/client.h>

#define RB_L 8     /* tokens per command (padding id 0) */
#define RB_T 5     /* decode steps: a plan of up to 4 words and its end */
#define RB_H 64    /* hidden width */
#define RB_END 0   /* plan word ids: the end token ... */
#define RB_START 1 /* ... and the start token (only ever the first step's input) */
#define RB_NPARAMS 6

/* The command vocabulary (id 0 is padding) and the plan vocabulary. */
extern const char *const rb_cmd_words[];
extern const int rb_ncmd;  /* V: command words, padding included */
extern const char *const rb_plan_words[];
extern const int rb_nplan; /* P */

/* Lowercase text split on non-letters; known words (stop words like "the" are dropped) become
 * ids, at most RB_L; the rest of ids[RB_L] is 0. Returns the count of known words. */
int rb_tokenize(const char *text, int32_t ids[RB_L]);
/* Plan words ("put red bin") into ids[RB_T] ending with RB_END; false on an unknown word or a
 * plan longer than RB_T - 1 words. */
bool rb_plan_parse(const char *text, int32_t ids[RB_T]);
/* Plan ids into "put red bin" (stops at RB_END). */
void rb_plan_format(const int32_t ids[RB_T], char *out, size_t cap);

/* Rows of the embedding table: the V - 1 words rounded up to 16 (vector-friendly kernels; the
 * rows past the words are never selected). */
int rb_emb_rows(void);
/* The params in the order of rb_param_names, with their shapes. */
extern const char *const rb_param_names[RB_NPARAMS];
void rb_param_shape(int k, int *ndim, int64_t shape[2]);

/* model.load requests (without "weights"; the caller owns the result, cJSON_Delete):
 * serve: input ids int32 [-1, RB_L] -> output plan int32 [-1, RB_T], the greedy decode;
 * batching {"max": batch_max, buckets doubling from 1 (and 512, 4096 when they fit)}.
 * train: inputs ids and prev int32 [-1, RB_T] (the teacher's previous words) -> flat float32
 * [-1, RB_T * P] (per-step log-probabilities), loss cross_entropy against target one-hot rows,
 * Adam at lr, batches of exactly `batch` rows. */
cJSON *rb_spec_serve(const char *name, int batch_max, int delay_us);
cJSON *rb_spec_train(const char *name, int batch, double lr);

/* A labelled example: command text and plan text, as the generator writes them
 * ("command\tplan" lines). */
typedef struct rb_example {
	char cmd[160];
	char plan[64];
} rb_example;
/* Read a "command\tplan" file; *out malloc'd (caller frees). Returns the count, -1 on error. */
int rb_read_examples(const char *path, rb_example **out);

/* infer of `rows` commands' ids (rows x RB_L) on model; the plans (rows x RB_T) into plans.
 * prio "realtime", "normal" or "bulk". Returns the status (messages on stderr when not ok). */
tsd_status rb_infer(tsd_client *c, const char *model, const char *prio, const int32_t *ids, int rows,
		    int32_t *plans);

/* The daemon's address: argument, else $TENSORD_URL, else the default runtime socket. */
void rb_url(const char *arg, char *out, size_t cap);

uint64_t rb_now_ns(void);
/* Sort t[n] and return the p-quantile (0..1, nearest rank). */
uint64_t rb_pct(uint64_t *t, size_t n, double p);

#endif
