/* jit.h: TinyJit-style capture and replay of a step function (a forward pass or a whole
 * training step).
 *
 * The first call with given input shapes runs the function normally; the second runs it
 * while recording every kernel launch with its buffers and launch size; later calls replay
 * that list: the new inputs' buffers are bound in place of the captured ones and the kernels
 * are launched, with no graph building, scheduling, hashing or code generation.
 *
 * Inputs are strict: a call whose inputs differ in dtype or device from the first call is an
 * error, and so is one with other shapes unless max_captures allows another capture for them
 * (one capture per shape signature, e.g. one per batch size). Never a stale result.
 *
 * Outputs: each call, replayed or not, returns outputs in buffers of their own, so a result
 * the caller holds is never changed by a later call. Buffers the function writes in place on
 * purpose (an assign, e.g. an optimizer updating parameters) are written by every call.
 *
 * Intermediate buffers of a capture are planned once: buffers whose lifetimes do not overlap
 * share memory (plan_memory). The function must take everything that changes between calls
 * through its inputs: data it uploads itself (eng_from_data), values it reads back to the
 * host, and random numbers drawn while building the graph are captured as they were on the
 * second call. */
#ifndef ENG_JIT_H
#define ENG_JIT_H

#include "engine.h"

typedef struct eng_jit eng_jit;

/* The step: build out[0..nout) from in[0..nin) (lazily or not; the JIT realizes them).
 * Returns ENG_OK or an error status (the context error describes it). */
typedef eng_status (*eng_jit_fn)(eng_ctx *ctx, eng_tensor *const *in, int nin, eng_tensor **out, int nout,
				 void *user);

typedef struct eng_jit_opts {
	int max_captures; /* shape signatures captured (default 1: other shapes are an error) */
	bool plan_memory; /* share intermediate memory between non-overlapping buffers (default true) */
} eng_jit_opts;

void eng_jit_opts_default(eng_jit_opts *o);

/* A JIT for fn with nin inputs and nout outputs (each 1..64). opts NULL: defaults. NULL on
 * bad arguments or ENOMEM (the context error says which). */
eng_jit *eng_jit_create(eng_ctx *ctx, eng_jit_fn fn, void *user, int nin, int nout, const eng_jit_opts *opts);
/* Free the JIT and its captures (buffers it planned or kept). Call it before destroying the
 * context. */
void eng_jit_destroy(eng_jit *j);

/* Call the step. out[] receives nout new tensors in the current scope (realized). */
eng_status eng_jit_call(eng_jit *j, eng_tensor *const *in, eng_tensor **out);

typedef struct eng_jit_info {
	int captures;          /* shape signatures captured so far */
	int kernels;           /* launches in the last call's capture (0 if not captured) */
	uint64_t replays;      /* calls answered by replay */
	size_t temp_bytes;     /* intermediate buffers of the last call's capture, summed */
	size_t planned_bytes;  /* memory they occupy after planning */
} eng_jit_info;
void eng_jit_get_info(const eng_jit *j, eng_jit_info *out);

/* ---- serving: warm-up, and the captures one by one ----
 * Signatures are numbered 0..eng_jit_signatures()-1 in the order their shapes first came. */

/* Make sure the step is captured for the shapes of in (example inputs, e.g. zeros of a batch
 * bucket's shape) in one call: it calls the step as eng_jit_call does until it is captured
 * (twice for new shapes, once after one plain call, not at all when captured), discarding the
 * outputs. The calls are real: a step that updates state (an optimizer) applies its updates, so
 * warm inference steps, or a training step on a copy. Errors as eng_jit_call. */
eng_status eng_jit_warmup(eng_jit *j, eng_tensor *const *in);

typedef struct eng_jit_sig_info {
	bool captured;        /* replays from now on */
	int calls;            /* calls with these shapes so far (replays included) */
	int kernels;          /* launches in the capture */
	uint64_t replays;     /* calls answered by replaying this capture */
	size_t temp_bytes;    /* intermediate buffers of the capture, summed */
	size_t planned_bytes; /* the memory they occupy after planning */
	size_t kept_bytes;    /* other buffers the capture keeps alive (constants, parameters) */
} eng_jit_sig_info;

/* How many shape signatures j has seen (captured or not). */
int eng_jit_signatures(const eng_jit *j);
/* Signature i's info; ENG_EINVAL for an i out of range. */
eng_status eng_jit_signature_info(const eng_jit *j, int i, eng_jit_sig_info *out);
/* The shape of input k in signature i (static while the signature lives), its rank in *ndim;
 * NULL when i or k is out of range. */
const int64_t *eng_jit_signature_shape(const eng_jit *j, int i, int k, int *ndim);
/* Forget signature i: its capture's launches and the buffers only it kept are freed, and the
 * later signatures move down by one. Outputs already returned stay valid. A call with those
 * shapes starts over (run, capture, replay). ENG_EINVAL for an i out of range. */
eng_status eng_jit_drop(eng_jit *j, int i);

#endif
