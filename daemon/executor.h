/* executor.h: the executor layer: the executor thread and its queue (exec.c), the jobs it runs on
 * the engine (exec_model.c), ONNX models' engine side (exec_onnx.c). A finished job's replies
 * are sent from here through their channels, and the job goes back on the inbox's DONE lane. */
#ifndef DMN_EXECUTOR_H
#define DMN_EXECUTOR_H

#include "types.h"
#include "util.h"

#define DMN_ONNX_CONST_MAX (1 << 20) /* numbers in one "constants" entry of an ONNX model */

/* ---- exec.c ---- */
/* Start the models' executor and the realize worker (config realize_*). */
int dmn_exec_start(dmn_srv *s, char *err, size_t errlen);
/* Stop the threads, free what they own (every model version's engine side), the contexts. */
void dmn_exec_stop(dmn_srv *s);
/* Loop: queue j (taken until it comes back on the DONE lane) on its executor: a REALIZE job on
 * the realize worker, any other on the models' executor. */
void dmn_exec_push(dmn_srv *s, dmn_job *j);
/* Loop: run j on the calling thread, replies sent, when the executor is idle (nothing queued or
 * running); false (nothing done) when it is not. The caller then hands j to the DONE lane. */
bool dmn_exec_run_here(dmn_srv *s, dmn_job *j);
void dmn_job_free(dmn_job *j); /* the job and its request array, not the requests; NULL allowed */
/* The figures the executors published after their last jobs, added up. */
void dmn_exec_stats(dmn_srv *s, eng_stats *st, eng_device_stats *ds);
/* The realize worker's alone, and the compiles its jobs caused. */
void dmn_exec_realize_stats(dmn_srv *s, eng_stats *st, eng_device_stats *ds, uint64_t *compiles);
void dmn_exec_cancel(dmn_srv *s); /* any thread: stop the running jobs (eng_cancel) */

/* ---- exec_model.c: on the executor ---- */
void dmn_run_load(dmn_exec *e, dmn_job *j);
void dmn_run_free(dmn_exec *e, dmn_job *j);
void dmn_run_seqfree(dmn_exec *e, dmn_job *j); /* ended sequences' state slots */
void dmn_run_infer(dmn_exec *e, dmn_job *j);
void dmn_run_train(dmn_exec *e, dmn_job *j);
void dmn_run_save(dmn_exec *e, dmn_job *j);
void dmn_run_realize(dmn_exec *e, dmn_job *j);

/* ---- exec_onnx.c: ONNX models ---- */
typedef struct dmn_onnx dmn_onnx;
/* Import v's file (pm: the load request's message, for uploaded bytes), make its inputs v's
 * ports and its outputs v's outputs, with batch axes proven at every bucket. */
tsd_status dmn_onnx_open(eng_ctx *ctx, dmn_mver *v, const proto_msg *pm, dmn_onnx **out, char *err, size_t errlen);
/* The graph for the model's inputs (port order); out: every output of the file. An engine
 * failure is the context's error; one of the daemon's own sets *st and err. */
eng_status dmn_onnx_build(dmn_onnx *o, eng_tensor *const *in, eng_tensor **out, tsd_status *st, char *err,
			  size_t errlen);
void dmn_onnx_free(dmn_onnx *o);

/* ---- exec_state.c: sequences' implicit state ---- */
typedef struct dmn_states dmn_states;
/* v's state pairs resolved against its ports (in, out) and checked: names, dtype, shape, batch
 * axis, the initial values' count. Loop (a graph model's spec) or executor (an ONNX model's load). */
tsd_status dmn_state_resolve(dmn_mver *v, char *err, size_t errlen);
/* The state slots of a loaded version (max_sequences of them), NULL when out of memory. */
dmn_states *dmn_states_new(const dmn_mver *v);
void dmn_states_free(dmn_states *st); /* NULL allowed */
void dmn_states_clear(dmn_states *st, int slot); /* a slot's state freed */
uint64_t dmn_states_bytes(const dmn_states *st); /* held by all slots */
/* The state of sequence step r for pair k, laid out as the pair's input of r->rows rows: its
 * slot's, set to the initial value when r starts it (or its rows changed); room: the bytes the
 * memory limit leaves. NULL with err when out of memory or room. */
const void *dmn_states_input(dmn_states *st, const dmn_mver *v, const dmn_req *r, int k, uint64_t room,
			     char *err, size_t errlen);
/* After the launch of j: each step's slot takes its rows of pair k's output (out: bucket rows). */
void dmn_states_update(dmn_states *st, const dmn_mver *v, const dmn_job *j, int k, const void *out);
/* The slots of j's steps that end their sequence, freed. */
void dmn_states_ended(dmn_states *st, const dmn_job *j);

#endif
